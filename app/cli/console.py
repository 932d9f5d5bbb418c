"""The one way seglens-cli's lines reach the terminal during a run under --anonymize: stdout and stderr wrapped,
every write passed through the run's LineRedactor (app.runs.private_names), so an error, a note, a warning, the
progress line or a summary built anywhere — by SegLens or a library writing to sys.stderr — names each input by
its pseudonymous name and carries no word of its path or its patient."""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from app.runs.private_names import LineRedactor


class Terminal:
    """`with Terminal() as terminal:` around a command; `terminal.anonymize(redactor)` once its inputs are known.
    On leaving, the streams the command found are back (a test's capture, the real terminal)."""

    def __init__(self) -> None:
        self._saved = (sys.stdout, sys.stderr)

    def __enter__(self) -> Terminal:
        self._saved = (sys.stdout, sys.stderr)
        return self

    def anonymize(self, redactor: LineRedactor) -> None:
        """Every later write to stdout and stderr goes through `redactor.line`."""
        sys.stdout, sys.stderr = (_Redacting(stream, redactor) for stream in self._saved)

    def __exit__(self, *exc: object) -> None:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _Redacting):
                stream.flush()
        sys.stdout, sys.stderr = self._saved


class _Redacting(io.TextIOBase):
    """A text stream writing `redactor.line(text)` of each write to `stream` (print writes a line in one call)."""

    def __init__(self, stream: TextIO, redactor: LineRedactor) -> None:
        super().__init__()
        self._stream, self._redactor = stream, redactor

    def write(self, text: str) -> int:
        self._stream.write(self._redactor.line(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # read-only: the wrapped stream's
        return getattr(self._stream, "encoding", "utf-8")
