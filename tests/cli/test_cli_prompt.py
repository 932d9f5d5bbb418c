"""seglens-cli prompt: a point or a box → mask.png, --boxes boxes.csv over a folder (bad rows one line naming the
row, the rest written), grabcut without a model, and `info` on a pair's sidecar."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from prompt_pairs import sam2_pair, sam_pair

from app.cli import main

RADIUS = 40.0


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sam2_pair(tmp_path_factory.mktemp("pair"), radius=RADIUS)


def _image(path: Path, hw: tuple[int, int], *, square: tuple[int, int, int, int] | None = None) -> Path:
    image = np.full((*hw, 3), 40, np.uint8)
    if square is not None:
        x0, y0, x1, y1 = square
        image[y0:y1, x0:x1] = (230, 200, 60)
    cv2.imwrite(str(path), image)
    return path


def _read(path: Path) -> np.ndarray:
    mask = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert mask is not None
    return mask


def test_a_point_to_a_mask_png(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (300, 500))
    out = tmp_path / "masks" / "mask.png"
    assert main(["prompt", str(pair), str(image), "--point", "100,200", "--out", str(out), "--device", "cpu"]) == 0
    mask = _read(out)
    assert mask.shape == (300, 500) and set(np.unique(mask)) == {0, 1}
    ys, xs = np.nonzero(mask)
    assert abs(xs.mean() - 100) <= 0.5 and abs(ys.mean() - 200) <= 0.5
    assert capsys.readouterr().out.strip() == (f"{out}: {len(xs)} pixels ({100 * len(xs) / 150000:.1f} % of 500×300), "
                                               "predicted IoU 0.900")


def test_a_click_outside_the_image_is_one_line(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (300, 500))
    out = tmp_path / "mask.png"
    assert main(["prompt", str(pair), str(image), "--point", "500,10", "--out", str(out), "--device", "cpu"]) == 2
    assert capsys.readouterr().err == ("error: point (500, 10) is outside the image (500×300 pixels: x from 0 to 499, "
                                       "y from 0 to 299)\n")
    assert not out.exists()


def test_no_prompt_and_bad_values(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (30, 50))
    assert main(["prompt", str(pair), str(image), "--out", str(tmp_path / "m.png")]) == 2
    assert capsys.readouterr().err == ("error: no prompt: give --point X,Y (repeatable), --box X0,Y0,X1,Y1 or "
                                       "--boxes BOXES.csv\n")
    assert main(["prompt", str(pair), str(image), "--box", "5,5,5,20", "--out", str(tmp_path / "m.png"),
                 "--device", "cpu"]) == 2
    assert capsys.readouterr().err == "error: box (5, 5, 5, 20) has zero area: x1 must be above x0 and y1 above y0\n"
    with pytest.raises(SystemExit):
        main(["prompt", str(pair), str(image), "--point", "1,2,7", "--out", str(tmp_path / "m.png")])
    assert "a point's label is 1 (positive) or 0 (negative), got '1,2,7'" in capsys.readouterr().err


def test_boxes_csv_over_a_folder(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "images"
    (folder / "sub").mkdir(parents=True)
    _image(folder / "a.png", (300, 500))
    _image(folder / "sub" / "b.jpg", (500, 300))
    (folder / "broken.png").write_bytes(b"not a png")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("file,x0,y0,x1,y1,class\n"
                     "a.png,80,180,120,220,car\n"          # row 2
                     "a.png,300,50,340,90,person\n"        # row 3
                     "sub/b.jpg,40,40,60,60\n"             # row 4: class 1
                     "a.png,10,10,10,40,car\n"             # row 5: zero area
                     "a.png,1,2,3\n"                       # row 6: four columns
                     "broken.png,0,0,5,5\n"                # row 7: not an image
                     "../x.png,0,0,5,5\n", encoding="utf-8")  # row 8: outside the folder
    out = tmp_path / "out"
    code = main(["prompt", str(pair), str(folder), "--boxes", str(boxes), "--out", str(out), "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 1
    errors = captured.err.splitlines()
    assert errors[:2] == [f"error: {boxes}: row 6: expected file,x0,y0,x1,y1[,class], got 4 columns",
                          f"error: {boxes}: row 8: the file '../x.png' must be a path inside the folder (relative, "
                          "without '..')"]
    assert errors[2] == (f"error: {boxes}: row 5: a.png: box (10, 10, 10, 40) has zero area: x1 must be above x0 "
                         "and y1 above y0")
    assert errors[3].startswith(f"error: {boxes}: row 7: {folder / 'broken.png'}: ") and len(errors) == 4
    assert captured.out.strip() == f"2 masks from 3 boxes in {out}; 4 problems; classes: 2 car, 3 person"
    a = _read(out / "a_mask.png")
    assert a.shape == (300, 500) and set(np.unique(a)) == {0, 2, 3}
    ys, xs = np.nonzero(a == 2)  # the test decoder's disc sits on the first prompt point: the box's corner
    assert abs(xs.mean() - 80) <= 0.5 and abs(ys.mean() - 180) <= 0.5
    b = _read(out / "sub" / "b_mask.png")
    assert b.shape == (500, 300) and set(np.unique(b)) == {0, 1}
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["a_mask.png", "b_mask.png"]  # no temporaries


def test_grabcut_without_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (120, 160), square=(50, 30, 110, 90))
    out = tmp_path / "mask.png"
    assert main(["prompt", "grabcut", str(image), "--box", "40,20,120,100", "--out", str(out)]) == 0
    mask = _read(out).astype(bool)
    truth = np.zeros((120, 160), bool)
    truth[30:90, 50:110] = True
    assert (mask & truth).sum() / (mask | truth).sum() >= 0.95
    assert capsys.readouterr().out.endswith("no predicted IoU (grabcut)\n")
    assert main(["prompt", "grabcut", str(image), "--point", "60,60", "--out", str(out)]) == 2
    assert capsys.readouterr().err == "error: grabcut needs a box (without a prompt model, points only refine a box)\n"


def test_info_shows_the_pair_with_each_values_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sidecar = sam_pair(tmp_path)
    assert main(["info", str(sidecar), "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:9] == ["prompt model sam_pair (sam_pair.yaml)",
                         "  layout          sam  (graph)",
                         "  encoder         sam_enc.onnx  (sidecar)",
                         "  decoder         sam_dec.onnx  (sidecar)",
                         "  input_size      1024  (graph)",
                         "  resize          longest  (default)",
                         "  mean            [123.675, 116.28, 103.53]  (default)",
                         "  std             [58.395, 57.12, 57.375]  (default)",
                         "  mask_threshold  0.0  (default)"]
    assert lines[10].startswith("  encoder runs    CPU") and lines[11].startswith("  decoder runs    CPU")
    assert main(["info", str(sidecar), "--json", "--no-session"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["layout"] == "sam" and facts["sources"]["input_size"] == "graph" and facts["sessions"] == {}


def test_an_unknown_prompt_model_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (30, 50))
    assert main(["prompt", "no_such_pair", str(image), "--point", "1,1", "--out", str(tmp_path / "m.png")]) == 2
    assert capsys.readouterr().err == ("error: no_such_pair: a prompt model is named by its sidecar (.yaml with a "
                                       "prompt: section), a bundled pair's name or 'grabcut'\n")
    assert main(["prompt", str(tmp_path / "gone.yaml"), str(image), "--point", "1,1",
                 "--out", str(tmp_path / "m.png")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path / 'gone.yaml'}: cannot read the prompt model's "
                                              "sidecar (")


def test_boxes_never_overwrite_an_input(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _image(tmp_path / "a.png", (60, 80))
    original = _image(tmp_path / "a_mask.png", (60, 80)).read_bytes()  # an input named like a.png's mask
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,10,10,30,30\na_mask.png,10,10,30,30\n", encoding="utf-8")
    code = main(["prompt", str(pair), str(tmp_path), "--boxes", str(boxes), "--out", str(tmp_path), "--device", "cpu"])
    assert code == 1
    assert capsys.readouterr().err == (f"error: {boxes}: row 1: {tmp_path / 'a_mask.png'} would overwrite an input "
                                       "image: choose another --out\n")
    assert (tmp_path / "a_mask.png").read_bytes() == original and (tmp_path / "a_mask_mask.png").is_file()


def test_a_boxes_file_that_is_missing_or_not_a_file(pair: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for boxes, problem in ((tmp_path / "gone.csv", "boxes file not found"), (tmp_path, "not a regular file")):
        code = main(["prompt", str(pair), str(tmp_path), "--boxes", str(boxes), "--out", str(tmp_path / "o"),
                     "--device", "cpu"])
        assert code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {boxes}: {problem}") and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_out_never_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (120, 160), square=(50, 30, 110, 90))
    original = image.read_bytes()
    for out in (image, tmp_path / "." / "photo.png"):
        assert main(["prompt", "grabcut", str(image), "--box", "40,20,120,100", "--out", str(out)]) == 2
        assert capsys.readouterr().err == (f"error: --out {out} is the input image: it would be replaced; choose "
                                           "another file\n")
    volume = tmp_path / "volume.nii.gz"
    volume.write_bytes((Path(__file__).resolve().parents[2] / "resources" / "samples" / "ct3d" /
                        "ct3d_sample.nii.gz").read_bytes())
    before = volume.read_bytes()
    assert main(["prompt", "grabcut", str(volume), "--slice", "30", "--box", "40,40,90,90", "--out", str(volume)]) == 2
    assert capsys.readouterr().err == (f"error: --out {volume} is the input image: it would be replaced; choose "
                                       "another file\n")
    assert image.read_bytes() == original and volume.read_bytes() == before


@pytest.mark.parametrize("name", ["mask.nii.gz", "mask.jpg", "mask"])
def test_a_picture_mask_is_a_png(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (120, 160), square=(50, 30, 110, 90))
    out = tmp_path / name  # PNG bytes were written under any name: a .nii.gz that was no NIfTI
    assert main(["prompt", "grabcut", str(image), "--box", "40,20,120,100", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"error: --out {out}: the mask of a picture is a PNG (0 background, 1 the "
                                       "object): name it .png\n")
    assert not out.exists()
    assert main(["prompt", "grabcut", str(image), "--box", "40,20,120,100", "--out", str(tmp_path / "m.PNG")]) == 0


def test_a_series_label_volume_never_inside_the_series_folder(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    series = tmp_path / "series"
    shutil.copytree(Path(__file__).resolve().parents[2] / "resources" / "samples" / "ct", series)
    for out in (series / "lung.nii.gz", series / "sub" / "lung.nii.gz"):  # the folder then held 2 volumes
        assert main(["prompt", "grabcut", str(series), "--slice", "17", "--box", "61,65,128,166",
                     "--out", str(out)]) == 2
        assert capsys.readouterr().err == (f"error: --out {out} is inside the series' folder {series}: the next "
                                           "time it is opened it would hold two volumes; choose a file outside it\n")
        assert not out.exists()
    assert main(["prompt", "grabcut", str(series), "--slice", "17", "--box", "61,65,128,166",
                 "--out", str(tmp_path / "lung.nii.gz")]) == 0


def test_info_says_why_a_half_runs_on_the_cpu_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.inference.model.session import NO_GPU

    assert main(["info", str(sam_pair(tmp_path))]) == 0  # auto: "CPU (no NVIDIA GPU) (no NVIDIA GPU)" before
    for line in capsys.readouterr().out.splitlines()[-2:]:
        assert line.count(NO_GPU) <= 1 and line.count("(") == line.count(")")


def test_info_on_the_bundled_pair_by_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "prompt_demo", "--no-session"]) == 0  # prompt takes the name; info said "unknown model"
    assert capsys.readouterr().out.splitlines()[1] == "  layout          sam2  (sidecar)"


def test_boxes_out_that_is_a_file(pair: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _image(tmp_path / "a.png", (60, 80))
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,10,10,30,30\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    out.write_text("mine", encoding="utf-8")
    code = main(["prompt", str(pair), str(tmp_path), "--boxes", str(boxes), "--out", str(out), "--device", "cpu"])
    assert code == 2 and out.read_text(encoding="utf-8") == "mine"  # "unexpected FileExistsError" before
    assert capsys.readouterr().err == (f"error: --out {out}: with --boxes, --out is a folder (the masks go in it), "
                                       "and this is a file\n")


def test_an_out_under_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image = _image(tmp_path / "photo.png", (120, 160), square=(50, 30, 110, 90))
    (tmp_path / "afile").write_text("mine", encoding="utf-8")
    volume = Path(__file__).resolve().parents[2] / "resources" / "samples" / "ct3d" / "ct3d_sample.nii.gz"
    for source, extra, name in ((image, [], "m.png"), (volume, ["--slice", "30"], "m.nii.gz")):
        out = tmp_path / "afile" / name  # "unexpected FileExistsError" before
        assert main(["prompt", "grabcut", str(source), *extra, "--box", "40,20,120,100", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {out}: cannot write (") and err.count("\n") == 1
