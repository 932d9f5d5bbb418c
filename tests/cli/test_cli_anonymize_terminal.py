"""seglens-cli run --anonymize on the terminal and in the log (issue 24): every line names an input by its
pseudonymous name (errors, notes, the misfit note, the last check's error), no library chatter reaches the
terminal (highdicom's person-name and empty-frame warnings, Pillow's corrupt-EXIF warning: one line per problem,
ours), and the libraries' INFO lines (highdicom names each source instance's UID) stay out of the log file."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli import main
from tests.dicom_factory import write_nifti, write_series

pytest.importorskip("highdicom")
pytest.importorskip("dicognito")

KEY = "0123456789abcdef0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]
# what no line may hold: the patients' names and IDs, and every input folder or file name
NEEDLES = ("smithson", "pid-77", "doe", "jane", "pid-0042", "broken", "photo", "nii.gz", "x.tif")


def corrupt_tiff(path: Path) -> None:
    """Ten bytes: a TIFF header whose first directory claims 65535 entries and holds none (Pillow warns
    'Corrupt EXIF data' before it fails to read it)."""
    path.write_bytes(b"II*\0\x08\0\0\0\xff\xff")


def patient_inputs(root: Path) -> dict[str, list[Path]]:
    """A one-part-name series with nothing a CT lung model finds (an empty mask: highdicom's empty-frame
    warning) and, under a patient-named folder, a file that is no image, a corrupt TIFF, a photo that does not
    fit the CT model and a NIfTI volume (no DICOM export: a note)."""
    import pydicom

    series = write_series(root / "SMITHSON_PID-77" / "ct", slices=3, patient=("SMITHSON", "PID-77"))
    for path in series:
        ds = pydicom.dcmread(path)
        ds.PixelData = np.full((ds.Rows, ds.Columns), 1064, np.int16).tobytes()  # soft tissue: no lung, no bone
        ds.save_as(path)
    folder = root / "DOE^JANE_PID-0042"
    folder.mkdir(parents=True)
    (folder / "DOE_broken.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    corrupt_tiff(folder / "DOE_x.tif")
    Image.fromarray(np.full((40, 40, 3), 120, np.uint8)).save(folder / "DOE_JANE_photo.png")
    write_nifti(folder / "DOE_JANE_ct.nii.gz")
    return {"series": series}


def _leaks(text: str) -> list[str]:
    """The needles in `text`, each as a word of its own ("doe" in DOE_JANE, not in "does")."""
    return [needle for needle in NEEDLES if re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])",
                                                       text.lower())]


def test_no_patient_value_input_name_or_library_chatter_reaches_the_terminal(tmp_path):
    """A real process (pytest would catch the warnings an in-process run prints): stderr and stdout together."""
    patient_inputs(tmp_path / "in")
    env = {**os.environ, "SEGLENS_PSEUDONYM_KEY": KEY, "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    done = subprocess.run([sys.executable, "-m", "app.cli", "run", "ct_demo", str(tmp_path / "in"), "--out",
                           str(tmp_path / "o"), "--export", "dicom-seg,sc", "--anonymize", "--no-progress"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert not _leaks(said), said
    for chatter in ("UserWarning", "warnings.warn", "omit_empty_frames", "EXIF", "check_person_name", ".py:"):
        assert chatter not in said, said
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, said  # one line per problem: the broken PNG and the corrupt TIFF
    assert all(line.startswith("error: images/img-") and line.endswith(": not an image, or a format that cannot "
                                                                        "be read") for line in errors), errors
    assert "5 inputs: 3 ok, 2 failed" in done.stdout
    lines = done.stderr.splitlines()
    assert any(line.startswith("note: nifti/vol-") and ": no dicom-seg export" in line for line in lines), said
    assert any("does not fit the model (e.g. images/img-" in line for line in lines), said


def test_a_verbose_run_and_the_log_file_carry_no_library_info_line(tmp_path, monkeypatch, capsys):
    """highdicom logs `copy Patient-related attributes from dataset "<source SOP UID>"` at INFO, into the
    viewer's log file and onto a -v terminal: the libraries are kept at WARNING, and what they warn goes to our
    log at DEBUG."""
    import pydicom

    from app.logs import setup_file_logging

    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    monkeypatch.setenv("SEGLENS_LOG_DIR", str(tmp_path / "logs"))
    series = patient_inputs(tmp_path / "in")["series"]
    uids = [str(pydicom.dcmread(p).SOPInstanceUID) for p in series]
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        log = setup_file_logging(logging.INFO)
        code = main(["run", "ct_demo", str(tmp_path / "in" / "SMITHSON_PID-77"), "--out", str(tmp_path / "o"),
                     "--export", "dicom-seg,sc", "--anonymize", "--no-progress"])
        for handler in root.handlers:
            handler.flush()
        text = log.read_text()
    finally:
        for handler in [h for h in root.handlers if h not in before]:
            root.removeHandler(handler)
            handler.close()
    assert code == 0
    assert not [uid for uid in uids if uid in text], text
    assert "highdicom" not in text and "smithson" not in text.lower(), text
    assert not _leaks(capsys.readouterr().err)


def test_compare_under_anonymize_names_inputs_by_their_pseudonyms_on_the_terminal(tmp_path, monkeypatch, capsys):
    """compare's error lines, misfit note and summary: the same redaction as run's (app.cli.console)."""
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", KEY)
    folder = tmp_path / "in" / "DOE^JANE_PID-0042"
    folder.mkdir(parents=True)
    (folder / "DOE_broken.png").write_bytes(b"\x89PNG\r\n\x1a\nbroken")
    Image.fromarray(np.full((40, 40, 3), 120, np.uint8)).save(folder / "DOE_JANE_photo.png")
    code = main(["compare", "ct_demo", "ct_demo", str(tmp_path / "in"), "--out", str(tmp_path / "o"),
                 "--anonymize", "--no-progress"])
    said = capsys.readouterr()
    assert code == 1
    assert not _leaks(said.out + said.err), said
    assert "error: images/img-" in said.err and "(e.g. images/img-" in said.err, said.err
