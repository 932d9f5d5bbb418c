"""read_image(path, root=…): every open of the file goes through the untrusted gate under the watched folder, for
each kind the station decodes (PNG, TIFF, DICOM, NIfTI) — a part that is a link (out of the folder) is refused by the
open that reads it, not by a check made before it (issue 36, audit finding 5)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import tifffile
from PIL import Image

from app.errors import ImageError
from app.io.images import read_image
from tests.dicom_factory import write_nifti, write_series


def _write(kind: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "png":
        Image.fromarray(np.full((16, 16), 200, np.uint8)).save(folder / "a.png")
        return folder / "a.png"
    if kind == "tif":
        tifffile.imwrite(folder / "a.tif", np.full((16, 16), 200, np.uint16))
        return folder / "a.tif"
    if kind == "nii":
        write_nifti(folder / "a.nii")
        return folder / "a.nii"
    write_series(folder / "series", slices=1)
    (only,) = sorted((folder / "series").iterdir())
    return Path(shutil.copyfile(only, folder / "a.dcm"))


@pytest.mark.parametrize("kind", ["png", "tif", "dcm", "nii"])
def test_a_file_inside_is_read_and_a_link_out_is_refused(tmp_path: Path, kind: str) -> None:
    watched = tmp_path / "watched"
    inside = _write(kind, watched)
    assert read_image(inside, root=watched).pixels.size > 0
    outside = _write(kind, tmp_path / "private")
    link = watched / f"link{inside.suffix}"
    link.symlink_to(outside)
    assert read_image(link).pixels.size > 0  # a link the user named is followed
    with pytest.raises(ImageError) as caught:
        read_image(link, root=watched)
    message = str(caught.value)
    assert message.startswith(f"{link}: ") and "\n" not in message
    assert "symbolic link" in message, message
