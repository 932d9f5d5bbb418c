"""`--export source` (with --anonymize): the volume's source series written de-identified beside its SEG and
Secondary Capture, so the pair can be shared. Its UIDs are remapped by the same keyed mapping as theirs
(app.runs.privacy.deidentify), so the SEG's references point at this copy's instances. The files are `source_0001.dcm` …
in the volume's order (never the source's own names, which may name the patient); the folder appears whole or
not at all."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import ImageError, OutputError
from app.io.files import whole_folder
from app.io.volumes import Volume
from app.runs.exports.sources import save_dataset
from app.runs.privacy.deidentify import VolumePrivacy

if TYPE_CHECKING:
    from pydicom import Dataset


def write_copy(volume: Volume, out_dir: Path, *, privacy: VolumePrivacy) -> list[Path]:
    """Every source file of `volume` (a multi-frame file once), de-identified, into `out_dir`."""
    files = list(dict.fromkeys(ref.path for ref in volume.slices))
    names = []
    try:
        with whole_folder(out_dir) as partial:
            for number, path in enumerate(files, start=1):
                dataset = _read_source(path)
                privacy.finish_source(dataset)
                names.append(save_dataset(dataset, partial / f"source_{number:04d}.dcm").name)
    except OSError as exc:
        raise OutputError(f"{out_dir}: cannot write the de-identified source series ({exc.strerror or exc})") from exc
    return [out_dir / name for name in names]


def _read_source(path: Path) -> Dataset:
    """A source file read again, through app.guard.untrusted: one swapped since the volume was read for a named
    pipe, a device or a sparse giant is refused in one line at once (pydicom would wait on a pipe for ever)."""
    import pydicom

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    try:
        with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
            return pydicom.dcmread(handle)
    except OSError as exc:
        raise ImageError(f"{path}: cannot read the source DICOM ({exc.strerror or exc})") from exc
    except Exception as exc:  # pydicom raises many types for a damaged file
        raise ImageError(f"{path}: cannot read the source DICOM ({type(exc).__name__})") from exc
