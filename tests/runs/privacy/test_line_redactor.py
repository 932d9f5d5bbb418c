"""app.runs.privacy.names.LineRedactor, the one redaction every line of a run under --anonymize goes through
(app.cli.console.Terminal): paths become pseudonymous names, a word of an input's name or patient is withheld as a
whole word, SegLens's own names are never touched (their hex may spell a word)."""

from __future__ import annotations

from pathlib import Path

from app.io.discover import InputFile
from app.runs.privacy.names import line_redactor, pseudonymous_name

KEY = b"k" * 32


def _inputs(root: Path) -> list[InputFile]:
    folder = root / "DOE^JANE_PID-0042"
    return [InputFile(folder / "DOE_broken.png", Path("DOE^JANE_PID-0042/DOE_broken.png")),
            InputFile(folder / "cafe_photo.png", Path("DOE^JANE_PID-0042/cafe_photo.png"))]


def test_paths_become_names_and_words_are_withheld_whole(tmp_path):
    inputs = _inputs(tmp_path / "in")
    redactor = line_redactor(inputs, KEY)
    first, second = (pseudonymous_name(item, KEY) for item in inputs)
    assert redactor.line(f"error: {inputs[0].path}: not an image") == f"error: {first}: not an image"
    assert redactor.line(f"in {inputs[0].path.parent}: 2 files") == "in [an input folder]: 2 files"
    assert redactor.line(f"outputs in {tmp_path / 'in' / 'o'}") == f"outputs in {tmp_path / 'in' / 'o'}"
    assert redactor.line("e.g. DOE_JANE_photo.png; does not fit") == \
        "e.g. [withheld]_[withheld]_[withheld].png; does not fit"
    assert redactor.line(f"{second} and anon-0123456789ab/2.25.1/2.25.9_2") == \
        f"{second} and anon-0123456789ab/2.25.1/2.25.9_2"  # "cafe" may be in a name's hex: not withheld there
    assert redactor.line("a cafe, PID-0042") == "a [withheld], [withheld]-0042"  # short numbers are no one's
