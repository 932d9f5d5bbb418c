"""How SegLens spells text it did not choose (file names, labels) for a terminal, a report cell or a log line:
valid, printable UTF-8, one-to-one. Below app.errors and app.logs, so both spell a path the same way (the log's
redaction finds a path however the terminal or a report wrote it).

And how it spells a count: `counted(1, "file")` is `1 file`, never `1 files`."""

from __future__ import annotations

import os
import re


def shown(text: object) -> str:
    """`text` safe to print to a terminal: control characters but tab and newline (an ESC sequence in a file name
    would retitle or clear the user's terminal) and file-name bytes that are not UTF-8 become visible escapes
    (`spelt`)."""
    return spelt(str(text), controls=_TERMINAL_CONTROLS)


# What `spelt` escapes: a file name's bytes that are not UTF-8 (surrogate escapes), other lone surrogates, and the
# control characters asked for. A backslash is doubled only where it would otherwise read as one of those escapes
# (before another backslash, a character escaped here, `x` + 2 or `u` + 4 lowercase hex digits), so `a\b.png`
# stays as it is. Not on Windows, where the backslash is the separator and a name holds no undecodable byte.
_ALL_CONTROLS = "[\x00-\x1f\x7f-\x9f]"
_TERMINAL_CONTROLS = "[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # all but tab and newline, C1 included
_LOOKS_ESCAPED = re.compile(r"x[0-9a-f]{2}|u[0-9a-f]{4}")
_DOUBLED = os.sep == "/"


def spelt(text: str, *, controls: str | bool = True) -> str:
    """`text` as valid, printable UTF-8, one-to-one: a byte of a file name that is not UTF-8 (Python's surrogate
    escape) → `\\xNN`, another lone surrogate and a C1 control → `\\uNNNN`, a C0 control (`controls`: True for
    all, False for none, or a character class) → `\\xNN`, and a backslash that would read as such an escape → `\\\\`.

    One-to-one, so `caf<0xE9>.png` and a file literally named `caf\\xe9.png` never share a report row, a review
    or a printed name (they did: both were `caf\\xe9.png`)."""
    escaped = _escaped_class(controls)
    if not escaped.search(text) and (not _DOUBLED or "\\" not in text):
        return text  # the common case: nothing to spell
    out = []
    for i, char in enumerate(text):
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF or (0x80 <= code <= 0x9F and escaped.match(char)):
            out.append(f"\\u{code:04x}")  # not \\xNN: that is a byte of a name
        elif escaped.match(char):
            out.append(f"\\x{code:02x}")
        elif char == "\\" and _DOUBLED and _would_read_as_escape(text, i + 1, escaped):
            out.append("\\\\")
        else:
            out.append(char)
    return "".join(out)


def _would_read_as_escape(text: str, at: int, escaped: re.Pattern[str]) -> bool:
    return at < len(text) and (text[at] == "\\" or bool(escaped.match(text[at]))
                               or bool(_LOOKS_ESCAPED.match(text, at)))


_CLASSES: dict[str, re.Pattern[str]] = {}


def _escaped_class(controls: str | bool) -> re.Pattern[str]:
    """What `spelt` escapes besides backslashes: surrogates and the control characters `controls` names."""
    chosen = _ALL_CONTROLS if controls is True else "" if controls is False else controls
    if chosen not in _CLASSES:
        _CLASSES[chosen] = re.compile("[\ud800-\udfff]" + (f"|{chosen}" if chosen else ""))
    return _CLASSES[chosen]


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files`: a count and its noun agreeing in number; `plural` where an added s is wrong
    (`counted(n, "series", "series")`, `counted(n, "box", "boxes")`)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
