"""An image that does not fit the model is said (app.inference.image.fit): a colour photo into the gray CT demo, a gray
picture into a model whose colours matter, an MR series or a PNG into a CT model. A warning, never a failure."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pydicom
import pytest
from dicom_factory import write_series
from PIL import Image

from app.cli import main
from app.errors import SidecarError
from app.inference.image.fit import ImageFacts, fit_problems, image_facts, image_fit
from app.inference.model.builder import load_spec
from app.io.images import read_image

REPO = Path(__file__).resolve().parents[3]
CT_DEMO = REPO / "models" / "ct_demo.onnx"
CT_SAMPLE = REPO / "resources" / "samples" / "ct" / "IM0016"
COLOUR_MISFIT = "a colour image into ct_demo.onnx, a gray (1-channel) model: its colours are lost"


def photo(height: int = 60, width: int = 80) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([x * 3 % 256, y * 4 % 256, (x + y) % 256], -1).astype(np.uint8)


@pytest.fixture(scope="module")
def ct_spec():
    return load_spec(CT_DEMO)


def test_the_bundled_ct_sidecar_says_ct(ct_spec):
    assert ct_spec.input.modality == ("CT",) and ct_spec.sources["input.modality"] == "sidecar"


def test_a_colour_photo_into_the_ct_demo(ct_spec, tmp_path):
    Image.fromarray(photo()).save(tmp_path / "photo.png")
    assert image_fit(ct_spec, read_image(tmp_path / "photo.png")) == (
        COLOUR_MISFIT, "ct_demo.onnx expects CT (input.modality) but this is an 8-bit PNG photo, not a CT scan")


def test_a_gray_picture_into_the_ct_demo(ct_spec, tmp_path):
    Image.fromarray(photo()[..., 0]).save(tmp_path / "gray.jpg")
    assert image_fit(ct_spec, read_image(tmp_path / "gray.jpg")) == (
        "ct_demo.onnx expects CT (input.modality) but this is an 8-bit JPEG picture, not a CT scan",)


def test_a_ct_slice_fits_the_ct_demo(ct_spec):
    image = read_image(CT_SAMPLE)
    assert image.info["Modality"] == "CT" and image_fit(ct_spec, image) == ()


def test_an_mr_slice_does_not(ct_spec, tmp_path):
    path = write_series(tmp_path / "mr", slices=1)[0]
    ds = pydicom.dcmread(path)
    ds.Modality = "MR"
    ds.save_as(path)
    assert image_fit(ct_spec, read_image(path)) == ("ct_demo.onnx expects CT (input.modality) but this DICOM is MR",)


@pytest.mark.parametrize("facts", [ImageFacts("NIfTI", False, None, True), ImageFacts("DICOM", False, None, True),
                                   ImageFacts("TIFF", False, None, True)])
def test_scans_that_carry_no_modality_are_not_guessed(ct_spec, facts):
    assert fit_problems(ct_spec, facts) == ()  # a NIfTI, a DICOM without the tag, a 16-bit TIFF: cannot tell


def test_rgb_with_equal_channels_is_gray_and_jpeg_noise_is_no_colour():
    gray = np.repeat(photo()[..., :1], 3, axis=2)
    assert not image_facts(read_image_of(gray)).colour
    noisy = np.clip(gray.astype(int) + np.random.default_rng(0).integers(-4, 5, gray.shape), 0, 255)
    assert not image_facts(read_image_of(noisy.astype(np.uint8))).colour
    assert image_facts(read_image_of(photo())).colour


def read_image_of(pixels: np.ndarray):
    from app.io.images import from_array

    return from_array(pixels)


def test_color_matters_warns_a_gray_image_into_a_colour_model(models, tmp_path):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("input:\n  color_matters: true\n")
    spec = load_spec(path)
    gray = ImageFacts("PNG", False, None, False)
    assert fit_problems(spec, gray) == ("a gray image into rgb_classes.onnx, a colour model whose sidecar says "
                                        "colour matters (input.color_matters)",)
    assert fit_problems(spec, ImageFacts("PNG", True, None, False)) == ()
    path.with_suffix(".yaml").write_text("input:\n  color_matters: false\n")
    assert fit_problems(load_spec(path), gray) == ()  # without the key a gray image is no misfit either


@pytest.mark.parametrize(("text", "problem"), [
    ("input:\n  modality: 12\n", "'input.modality' must be a DICOM modality code (CT, MR, CR, DX, US, ...)"),
    ("input:\n  modality: [CT, 'C-T']\n", "'input.modality' must be a DICOM modality code"),
    ("input:\n  modality: []\n", "'input.modality' must be a DICOM modality code"),
    ("input:\n  color_matters: maybe\n", "'input.color_matters' must be true or false, got 'maybe'")])
def test_sidecar_keys_are_checked_with_their_name(models, text, problem):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text(text)
    with pytest.raises(SidecarError, match=problem.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        load_spec(path)


def test_modality_is_upper_cased_and_a_list(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("input:\n  modality: [ct, MR, ct]\n")
    assert load_spec(path).input.modality == ("CT", "MR")
    assert "expects CT or MR (input.modality) but this DICOM is US" in fit_problems(
        load_spec(path), ImageFacts("DICOM", False, "US", True))[0]


def test_color_matters_on_a_gray_model_is_refused(tmp_path):
    sidecar = tmp_path / "ct.yaml"
    sidecar.write_text(CT_DEMO.with_suffix(".yaml").read_text().replace("color: gray", "color: gray\n  "
                                                                        "color_matters: true"))
    with pytest.raises(SidecarError, match="'input.color_matters' is true, but the model's input has 1 channel"):
        load_spec(CT_DEMO, sidecar)


def _report(folder: Path) -> dict[str, dict]:
    with open(folder / "seglens_report.csv", newline="") as handle:
        return {Path(row["path"]).name: row for row in csv.DictReader(handle)}


def test_cli_report_has_the_warning_and_the_run_goes_on(tmp_path, capsys):
    Image.fromarray(photo()).save(tmp_path / "photo.png")
    assert main(["run", "ct_demo", str(tmp_path / "photo.png"), str(CT_SAMPLE), "--out", str(tmp_path / "o"),
                 "--device", "cpu"]) == 0
    rows = _report(tmp_path / "o")
    assert rows["photo.png"]["status"] == "ok" and rows["photo.png"]["warning"].startswith(COLOUR_MISFIT + "; ")
    assert rows["IM0016"]["warning"] == ""
    err = capsys.readouterr().err
    assert f"note: 1 input does not fit the model (e.g. photo.png; the report's warning column): {COLOUR_MISFIT}" \
        in err


def test_cli_an_mr_series_into_the_ct_demo_is_warned_on_its_volume_row(tmp_path, capsys):
    for path in write_series(tmp_path / "mr", slices=3):
        ds = pydicom.dcmread(path)
        ds.Modality = "MR"
        ds.save_as(path)
    assert main(["run", "ct_demo", str(tmp_path / "mr"), "--out", str(tmp_path / "o"), "--device", "cpu",
                 "--export", "none"]) == 0
    with open(tmp_path / "o" / "seglens_report.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["status"] == "ok" and row["warning"] == "ct_demo.onnx expects CT (input.modality) but this DICOM is MR"
    assert "this DICOM is MR" in capsys.readouterr().err


def test_compare_reports_a_misfit_of_either_model(tmp_path, capsys):
    Image.fromarray(photo()).save(tmp_path / "photo.png")
    assert main(["compare", "ct_demo", "ct_demo", str(tmp_path / "photo.png"), "--out", str(tmp_path / "o"),
                 "--device", "cpu"]) == 0
    with open(tmp_path / "o" / "seglens_compare.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["status"] == "ok" and row["warning"].split("; ") == [  # each reason once, though both models saw it
        COLOUR_MISFIT, "ct_demo.onnx expects CT (input.modality) but this is an 8-bit PNG photo, not a CT scan"]
    assert f"note: 1 input does not fit the model (e.g. photo.png; the report's warning column): {COLOUR_MISFIT}" \
        in capsys.readouterr().err


# --- the other way: a photo model on a scan ------------------------------------------------------------------

PHOTO_ON_CT = ("a photo model on a CT DICOM: rgb_classes.onnx takes 3-channel pictures and its sidecar names no "
               "input.modality (a scan model names its modality, e.g. input.modality: CT)")


@pytest.mark.parametrize(("facts", "scan"), [
    (ImageFacts("DICOM", False, "CT", True), "a CT DICOM"), (ImageFacts("DICOM", False, "MR", True), "an MR DICOM"),
    (ImageFacts("NIfTI", False, None, True), "a NIfTI volume"),
    (ImageFacts("TIFF", False, None, True), "a gray TIFF with values beyond 8 bits"),
    (ImageFacts("DICOM", False, None, True), "a gray DICOM with values beyond 8 bits")])
def test_a_three_channel_model_without_a_modality_on_a_scan_is_warned(models, facts, scan):
    (problem,) = fit_problems(load_spec(models("rgb_classes")), facts)
    assert problem == PHOTO_ON_CT.replace("a CT DICOM", scan)


@pytest.mark.parametrize("facts", [ImageFacts("PNG", True, None, False), ImageFacts("JPEG", False, None, False),
                                   ImageFacts("DICOM", True, "XC", False), ImageFacts("DICOM", True, None, False)])
def test_a_photo_or_a_photo_dicom_fits_a_three_channel_model(models, facts):
    assert fit_problems(load_spec(models("rgb_classes")), facts) == ()


def test_a_three_channel_scan_model_that_names_its_modality_is_not_warned(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("input:\n  modality: CT\n")  # three CT windows stacked, say
    assert fit_problems(load_spec(path), ImageFacts("DICOM", False, "CT", True)) == ()


def test_a_sidecar_naming_photo_modalities_fits_photos_and_warns_scans(models):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text("input:\n  modality: [XC, OT]\n")
    spec = load_spec(path)
    assert fit_problems(spec, ImageFacts("PNG", True, None, False)) == ()  # was 'not a XC or OT scan'
    assert fit_problems(spec, ImageFacts("NIfTI", False, None, True)) == (
        "a photo model on a NIfTI volume: rgb_classes.onnx expects XC or OT (input.modality)",)
    assert fit_problems(spec, ImageFacts("DICOM", False, "CT", True)) == (
        "rgb_classes.onnx expects XC or OT (input.modality) but this DICOM is CT",)


@pytest.mark.parametrize("model", ["surface_defects", "defect_type"])
def test_the_bundled_photo_models_on_the_ct_sample_are_warned(model):
    (problem,) = image_fit(load_spec(REPO / "models" / f"{model}.onnx"), read_image(CT_SAMPLE))
    assert problem.startswith(f"a photo model on a CT DICOM: {model}.onnx takes 3-channel pictures")


def test_a_sixteen_bit_gray_png_into_a_photo_model(models, tmp_path):
    Image.fromarray(np.arange(64 * 64, dtype=np.uint16).reshape(64, 64) * 16).save(tmp_path / "scan.png")
    image = read_image(tmp_path / "scan.png")
    assert image_fit(load_spec(models("rgb_classes")), image) == (
        PHOTO_ON_CT.replace("a CT DICOM", "a gray PNG with values beyond 8 bits"),)
