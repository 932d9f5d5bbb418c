"""seglens-cli prompt on a volume (issue 28): `--slice K` prompted and `--propagate` carried through the CT sample
series (a real DICOM series) and the 3D phantom's NIfTI, written as a NIfTI label volume with the input's geometry;
the summary line per direction with its end reason; bad inputs one line each, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import nibabel as nib
import numpy as np
import pytest

from app.cli import main

REPO = Path(__file__).resolve().parents[2]
SERIES = REPO / "resources" / "samples" / "ct"  # 32 slices of 256×256, the phantom models.training.ct_sample
NIFTI = REPO / "resources" / "samples" / "ct3d" / "ct3d_sample.nii.gz"  # 60 slices of 172×172
DEMO = REPO / "models" / "prompt_demo.yaml"
LUNG_BOX = "61,65,128,166"  # the sample's first lung on slice 17, its bounding box
LUNG = (4, 29)  # the slices (1-based) the lung is on, in the phantom's labels


def _labels(path: Path) -> np.ndarray:
    """A label volume written by SegLens as [slice, row, column] (app.io.volumes conventions)."""
    return np.asarray(nib.load(str(path)).dataobj).transpose(2, 1, 0)


def _series_volume():
    from app.io.discover import discover

    (item,) = discover([SERIES])
    return item.volume


def test_grabcut_carries_a_lung_through_the_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "masks" / "lung.nii.gz"
    assert main(["prompt", "grabcut", str(SERIES), "--slice", "17", "--box", LUNG_BOX, "--propagate", "both",
                 "--out", str(out)]) == 0
    labels = _labels(out)
    on = [k + 1 for k in range(len(labels)) if labels[k].any()]
    assert on == list(range(LUNG[0], LUNG[1] + 1))  # every slice of the lung, none beyond it
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "down: slices 18 to 29 (12 slices), the object ended at slice 30 (area 0 px < 20)"
    assert lines[1] == "up: slices 16 to 4 (13 slices), the object ended at slice 3 (area 0 px < 20)"
    assert lines[2] == (f"{out}: {int(labels.sum())} voxels on 26 of 32 slices (slices 4 to 29), no predicted IoU "
                        "(grabcut) on slice 17")
    from models.training import ct_sample

    _, truth = ct_sample.sample_volume()
    for k in range(LUNG[0] - 1, LUNG[1]):
        count, parts = cv2.connectedComponents((truth[k] == 1).astype(np.uint8))
        votes = np.bincount(parts[labels[k] > 0], minlength=count)
        lung = parts == int(np.argmax(votes[1:]) + 1)
        iou = (lung & (labels[k] > 0)).sum() / (lung | (labels[k] > 0)).sum()
        assert iou >= 0.85, (k + 1, iou)


def test_the_label_volume_has_the_series_geometry(tmp_path: Path) -> None:
    out = tmp_path / "lung.nii"
    assert main(["prompt", "grabcut", str(SERIES), "--slice", "17", "--box", LUNG_BOX, "--propagate", "down",
                 "--out", str(out), "--json"]) == 0
    image = nib.load(str(out))
    volume = _series_volume()
    assert image.shape == (volume.columns, volume.rows, volume.depth)
    np.testing.assert_allclose(image.affine, volume.affine, atol=1e-4)
    assert image.get_data_dtype() == np.uint8


def test_json_summary_per_direction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lung.nii.gz"
    assert main(["prompt", "grabcut", str(SERIES), "--slice", "17", "--box", LUNG_BOX, "--propagate", "up",
                 "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["slice"] == 17 and summary["depth"] == 32 and summary["iou_predicted"] is None
    assert summary["slices"] == list(range(4, 18))
    assert summary["directions"] == {"up": {"slices": list(range(16, 3, -1)), "last": 4,
                                            "reason": "the object ended at slice 3 (area 0 px < 20)"}}


def test_without_propagate_only_the_slice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "one.nii.gz"
    assert main(["prompt", "grabcut", str(SERIES), "--slice", "17", "--box", LUNG_BOX, "--out", str(out)]) == 0
    labels = _labels(out)
    assert [k for k in range(len(labels)) if labels[k].any()] == [16]
    assert capsys.readouterr().out.splitlines() == [
        f"{out}: {int(labels.sum())} voxels on 1 of 32 slices (slice 17), no predicted IoU (grabcut) on slice 17"]


@pytest.mark.skipif(not DEMO.exists(), reason="the demo prompt pair is not there")
def test_the_demo_pair_on_the_nifti_keeps_its_header_geometry(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lesion.nii.gz"
    assert main(["prompt", "prompt_demo", str(NIFTI), "--slice", "34", "--box", "40,62,72,94", "--propagate",
                 "both", "--out", str(out), "--device", "cpu"]) == 0
    written, source = nib.load(str(out)), nib.load(str(NIFTI))
    assert written.shape == source.shape
    assert np.array_equal(written.affine, source.affine)  # the source's header, bit for bit
    labels = _labels(out)
    assert labels[33].any() and set(np.unique(labels)) == {0, 1}
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["down", "up"] and len(lines) == 3


def test_a_4d_nifti_propagates_inside_the_slices_time_point(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    zz, yy, xx = np.mgrid[:10, :48, :48]
    ball = (zz - 5) ** 2 + (yy - 24) ** 2 + (xx - 24) ** 2 <= 7.5**2  # on every slice of each time point
    noise = np.random.default_rng(0).normal(0, 8, (2, *ball.shape))
    values = np.clip(np.where(ball, 200, 40) + noise, 0, 255).astype(np.int16)  # [t, z, y, x]
    source = tmp_path / "two.nii.gz"
    nib.save(nib.Nifti1Image(values.transpose(3, 2, 1, 0), np.eye(4)), str(source))
    out = tmp_path / "mask.nii.gz"
    assert main(["prompt", "grabcut", str(source), "--slice", "16", "--box", "14,14,35,35", "--propagate", "both",
                 "--out", str(out)]) == 0
    data = np.asarray(nib.load(str(out)).dataobj)
    assert data.shape == (48, 48, 10, 2)
    assert not data[..., 0].any()  # the other time point untouched
    assert all(data[:, :, k, 1].any() for k in range(10))
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["down: slices 17 to 20 (4 slices), reached the last slice",
                         "up: slices 15 to 11 (5 slices), reached the first slice"]  # the time point's slices


@pytest.mark.parametrize(("args", "message"), [
    (["--slice", "40", "--box", LUNG_BOX], f"{SERIES}: --slice 40 is outside the volume (slices 1 to 32)"),
    (["--slice", "0", "--box", LUNG_BOX], f"{SERIES}: --slice 0 is outside the volume (slices 1 to 32)"),
    (["--slice", "17", "--point", "300,10", "--box", LUNG_BOX],
     f"{SERIES}: slice 17: point (300, 10) is outside the image (256×256 pixels: x from 0 to 255, y from 0 to 255)"),
    (["--box", LUNG_BOX], f"{SERIES}: a volume of 32 slices: give --slice K (1 to 32)"),
])
def test_bad_volume_prompts_are_one_line(args: list[str], message: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.nii.gz"
    assert main(["prompt", "grabcut", str(SERIES), *args, "--propagate", "both", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {message}\n"
    assert not out.exists()


def test_a_png_out_for_a_volume_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.png"
    assert main(["prompt", "grabcut", str(SERIES), "--slice", "17", "--box", LUNG_BOX, "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"error: --out {out}: a volume's mask is a label volume with the volume's "
                                       "geometry: name it .nii.gz or .nii\n")
    assert not out.exists()


@pytest.mark.parametrize("option", [["--propagate", "down"], ["--slice", "3"]])
def test_volume_options_on_a_2d_image_are_one_line(option: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    image = tmp_path / "photo.png"
    cv2.imwrite(str(image), np.full((40, 60, 3), 90, np.uint8))
    out = tmp_path / "mask.png"
    assert main(["prompt", "grabcut", str(image), "--box", "5,5,30,30", *option, "--out", str(out)]) == 2
    pages = " or a picture's pages" if option[0] == "--slice" else ""
    assert capsys.readouterr().err == (f"error: {image}: {option[0]} is for a volume (a DICOM series folder, a "
                                       f"multi-frame DICOM or a NIfTI file){pages}; IMAGE is one picture\n")
    assert not out.exists()


def test_a_multi_page_tiff_is_prompted_on_the_page_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A multi-page TIFF (a z-stack, a scanner's pages) was prompted on its first page silently: its pages are
    asked for with --slice as a volume's slices are, and each page is what is prompted."""
    from PIL import Image

    pages = []
    for k in range(3):
        page = np.full((60, 80), 30, np.uint8)
        page[10 + 10 * k: 30 + 10 * k, 10:40] = 220  # a bright square lower on each page
        pages.append(Image.fromarray(page))
    stack = tmp_path / "stack.tif"
    pages[0].save(stack, save_all=True, append_images=pages[1:])
    out = tmp_path / "mask.png"
    assert main(["prompt", "grabcut", str(stack), "--box", "5,5,45,58", "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"error: {stack}: a picture of 3 pages: give --slice K (1 to 3)\n"
    assert main(["prompt", "grabcut", str(stack), "--box", "5,5,45,58", "--slice", "4", "--out", str(out)]) == 2
    assert "a picture of 3 pages: give --slice K (1 to 3)" in capsys.readouterr().err and not out.exists()
    for k in (1, 3):
        assert main(["prompt", "grabcut", str(stack), "--box", "5,5,45,58", "--slice", str(k), "--out",
                     str(out)]) == 0
        mask = cv2.imread(str(out), cv2.IMREAD_UNCHANGED).astype(bool)
        truth = np.zeros_like(mask)
        truth[10 * k: 20 + 10 * k, 10:40] = True
        assert (mask & truth).sum() / (mask | truth).sum() > 0.9


def test_a_folder_of_images_is_no_volume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cv2.imwrite(str(tmp_path / "a.png"), np.full((40, 60, 3), 90, np.uint8))
    assert main(["prompt", "grabcut", str(tmp_path), "--box", "5,5,30,30", "--out", str(tmp_path / "m.png")]) == 2
    assert capsys.readouterr().err == (f"error: {tmp_path}: no DICOM series or NIfTI volume in this folder (IMAGE is "
                                       "an image or a volume; a folder of images takes --boxes)\n")


def test_boxes_with_volume_options_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompt", "grabcut", str(tmp_path), "--boxes", str(tmp_path / "b.csv"), "--slice", "2",
                 "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == "error: --boxes prompts 2-D images: give it without --slice and --propagate\n"
