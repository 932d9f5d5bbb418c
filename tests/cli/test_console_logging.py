"""app.cli.console.Terminal under --anonymize: a logging handler writing to the terminal (the one
logging.basicConfig made in main before the run's inputs were known, holding the stderr of that moment, as
`-v` shows every DEBUG line, a library's message with a patient's name or a path among them) goes through the
run's redactor too, and writes to the terminal it had again after the command."""

from __future__ import annotations

import io
import logging
import sys

from app.cli.console import Terminal
from app.runs.privacy.names import LineRedactor


def test_a_log_line_to_the_terminal_is_redacted_like_a_printed_one(monkeypatch):
    terminal_err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", terminal_err)
    handler = logging.StreamHandler(sys.stderr)  # what basicConfig makes, before Terminal()
    logger = logging.getLogger("test-console-redaction")
    logger.propagate, logger.level = False, logging.DEBUG
    logger.addHandler(handler)
    try:
        with Terminal() as terminal:
            terminal.anonymize(LineRedactor((), frozenset({"smithson"})))
            print("printed SMITHSON", file=sys.stderr)
            logger.debug("pydicom: invalid value 'SMITHSON^ANNA'")
        logger.debug("after SMITHSON")
    finally:
        logger.removeHandler(handler)
    assert terminal_err.getvalue().splitlines() == ["printed [withheld]", "pydicom: invalid value '[withheld]^ANNA'",
                                                    "after SMITHSON"]
