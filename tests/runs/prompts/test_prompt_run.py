"""app.runs.prompts.boxes (boxes.csv over a folder): each image encoded once however many boxes, one image however
its name is spelled, two images never written to the same mask, a class cell that only looks like a number, an
empty boxes file."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from prompt_pairs import sam2_pair

from app.inference.prompt.model import PromptSession, load_prompt_spec, open_prompt_session
from app.runs.prompts.boxes import read_boxes, run_boxes


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sam2_pair(tmp_path_factory.mktemp("pair"), radius=20.0)


def _session(pair: Path) -> PromptSession:
    return open_prompt_session(load_prompt_spec(pair), "cpu")


def _image(path: Path, hw: tuple[int, int] = (120, 160), value: int = 40) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((*hw, 3), value, np.uint8))
    return path


def _read(path: Path) -> np.ndarray:
    mask = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert mask is not None
    return mask


def test_each_image_encoded_once_however_many_boxes(pair: Path, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    for k, name in enumerate(("a.png", "b.png", "c.png")):
        _image(folder / name, value=30 + 20 * k)  # other pixels: the cache (keyed by pixels) does not join them
    rows = [f"{name},{10 + 12 * k},{10 + 8 * k},{30 + 12 * k},{30 + 8 * k},{k % 3 + 1}"
            for k in range(8) for name in ("a.png", "b.png", "c.png")]  # interleaved: 8 boxes per image
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("\n".join(rows) + "\n", encoding="utf-8")
    session = _session(pair)
    result = run_boxes(session, boxes, folder, tmp_path / "out")
    assert result.problems == () and result.boxes_done == 24 and len(result.written) == 3
    assert session.encoder_runs == 3 and session.decoder_runs == 24


def test_one_image_however_its_name_is_spelled(pair: Path, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    _image(folder / "sub" / "a.png")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("sub/a.png,20,20,40,40,1\n./sub/a.png,100,60,120,80,2\nsub//a.png,60,90,80,110,3\n",
                     encoding="utf-8")
    session = _session(pair)
    result = run_boxes(session, boxes, folder, tmp_path / "out")
    assert result.problems == () and result.boxes_done == 3
    assert result.written == (tmp_path / "out" / "sub" / "a_mask.png",)
    assert set(np.unique(_read(result.written[0]))) == {0, 1, 2, 3}  # every row's box in the one mask
    assert session.encoder_runs == 1


def test_two_images_never_written_to_one_mask(pair: Path, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    _image(folder / "a.png")
    _image(folder / "a.jpg")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,20,20,40,40,1\na.jpg,100,60,120,80,2\n", encoding="utf-8")
    out = tmp_path / "out"
    result = run_boxes(_session(pair), boxes, folder, out)
    assert result.problems == (f"{boxes}: row 2: a.jpg: its mask {out / 'a_mask.png'} is a.png's (row 1): "
                               "not written; rename one of the two images",)
    assert result.written == (out / "a_mask.png",) and result.boxes_done == 1
    assert set(np.unique(_read(out / "a_mask.png"))) == {0, 1}  # a.png's, not overwritten by a.jpg's


@pytest.mark.parametrize(("cell", "message"), [
    ("²", "class '²' is not a mask value from 1 to 255 or a name"),  # str.isdigit is true, int() refuses it
    ("٣", "class '٣' is not a mask value from 1 to 255 or a name"),
    ("9" * 5000, f"class {'9' * 12}… is not a mask value from 1 to 255"),  # int() refuses over 4300 digits
])
def test_a_class_that_only_looks_like_a_number(tmp_path: Path, cell: str, message: str) -> None:
    boxes = tmp_path / "boxes.csv"
    boxes.write_text(f"a.png,1,1,5,5,{cell}\na.png,1,1,5,5,car\n", encoding="utf-8")
    parsed = read_boxes(boxes)
    assert parsed.problems == (f"{boxes}: row 1: {message}",)
    assert [row.value for row in parsed.rows] == [2] and parsed.class_names == {"car": 2}


def test_names_numbered_after_the_largest_valid_number(tmp_path: Path) -> None:
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,1,1,5,5,7\na.png,1,1,5,5,300\na.png,1,1,5,5,car\n", encoding="utf-8")
    parsed = read_boxes(boxes)
    assert parsed.problems == (f"{boxes}: row 2: class 300 is not a mask value from 1 to 255",)
    assert [row.value for row in parsed.rows] == [7, 8] and parsed.class_names == {"car": 8}


@pytest.mark.parametrize("text", ["", "\n\n", "file,x0,y0,x1,y1,class\n"])
def test_a_boxes_file_without_boxes_is_one_line(pair: Path, tmp_path: Path, text: str) -> None:
    boxes = tmp_path / "boxes.csv"
    boxes.write_text(text, encoding="utf-8")
    result = run_boxes(_session(pair), boxes, tmp_path, tmp_path / "out")
    assert result.problems == (f"{boxes}: no boxes: expected rows file,x0,y0,x1,y1[,class]",)
    assert result.written == () and not (tmp_path / "out").exists()


def test_a_file_name_with_a_nul_is_its_rows_line(pair: Path, tmp_path: Path) -> None:
    _image(tmp_path / "a.png")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a\x00.png,1,1,5,5\na.png,20,20,40,40\n", encoding="utf-8")  # ValueError from os.stat
    result = run_boxes(_session(pair), boxes, tmp_path, tmp_path / "out")
    assert result.problems == (f"{boxes}: row 1: the file 'a\\x00.png' has a NUL in its name: no file has",)
    assert result.written == (tmp_path / "out" / "a_mask.png",)


def test_a_volume_in_the_boxes_file_is_its_rows_line(pair: Path, tmp_path: Path) -> None:
    import nibabel as nib

    _image(tmp_path / "a.png")
    nib.save(nib.Nifti1Image(np.full((64, 48, 5), 20, np.int16), np.eye(4)), str(tmp_path / "v.nii.gz"))
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("v.nii.gz,1,1,5,5\nv.nii.gz,2,2,9,9\na.png,20,20,40,40\n", encoding="utf-8")
    result = run_boxes(_session(pair), boxes, tmp_path, tmp_path / "out")  # it was slice 1's mask, silently
    assert result.problems == (f"{boxes}: rows 1, 2: v.nii.gz is a volume of 5 slices: a boxes file prompts 2-D "
                               "images (a volume's slice: seglens-cli prompt MODEL VOLUME --slice K --box …)",)
    assert result.written == (tmp_path / "out" / "a_mask.png",)


@pytest.mark.parametrize("header", ["file,x0,y0,x1,y1", "filename,xmin,ymin,xmax,ymax,label",
                                    " Image , X1 , Y1 , X2 , Y2 "])
def test_a_header_row_by_its_words(tmp_path: Path, header: str) -> None:
    boxes = tmp_path / "boxes.csv"
    boxes.write_text(f"{header}\na.png,1,1,5,5\n", encoding="utf-8")  # a detector's own header was "row 1: x0 …"
    parsed = read_boxes(boxes)
    assert parsed.problems == () and [row.line for row in parsed.rows] == [2]


def test_a_first_row_with_one_bad_number_is_no_header(tmp_path: Path) -> None:
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,1,x,5,5\na.png,1,1,5,5\n", encoding="utf-8")
    assert read_boxes(boxes).problems == (f"{boxes}: row 1: y0 'x' is not a number",)


def test_rows_over_the_limit_refused_before_they_are_all_held(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import tracemalloc

    from app.errors import SegLensError
    from app.runs.prompts import boxes as prompt_run

    monkeypatch.setattr(prompt_run, "MAX_ROWS", 1000)  # the real limit's 1e6 rows, a thousandth of the time
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a,1,1,2,2\n" * 100_000, encoding="utf-8")  # 1 MB of text: every row parsed was ~40 MB
    tracemalloc.start()
    try:
        with pytest.raises(SegLensError) as caught:
            read_boxes(boxes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(caught.value) == f"{boxes}: over 1000 rows: split the boxes file"
    assert peak < 8 << 20


def test_a_mask_that_cannot_be_written_is_its_rows_line(pair: Path, tmp_path: Path) -> None:
    folder = tmp_path / "images"
    _image(folder / "sub" / "a.png")
    _image(folder / "b.png", value=90)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").write_bytes(b"")  # a file where the folder of sub/a.png's mask goes
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("sub/a.png,20,20,40,40\nb.png,20,20,40,40\n", encoding="utf-8")
    result = run_boxes(_session(pair), boxes, folder, out)  # FileExistsError ended the run before
    assert len(result.problems) == 1
    assert result.problems[0].startswith(f"{boxes}: row 1: {out / 'sub' / 'a_mask.png'}: cannot write (")
    assert result.written == (out / "b_mask.png",) and result.boxes_done == 1


def test_a_row_that_is_not_utf8_is_its_own_line_and_the_others_are_drawn(pair: Path, tmp_path: Path) -> None:
    """One Latin-1 byte (a detector on Windows writing `é`) refused the whole file; now that row is one line naming
    the file, the row and the byte, and the other rows' masks are written."""
    folder = tmp_path / "images"
    _image(folder / "a.png")
    _image(folder / "c.png", value=90)
    boxes = tmp_path / "boxes.csv"
    boxes.write_bytes(b"\xef\xbb\xbffile,x0,y0,x1,y1,class\na.png,20,20,40,40,car\nb\xe9.png,20,20,40,40,car\n"
                      b"c.png,20,20,40,40,caf\xe9\nc.png,60,60,90,90,car\n")
    parsed = read_boxes(boxes)
    assert [(row.line, row.file) for row in parsed.rows] == [(2, "a.png"), (5, "c.png")]
    assert parsed.problems == (
        f"{boxes}: row 3: not UTF-8 text (byte 0xE9 in column 1): save the boxes file as UTF-8",
        f"{boxes}: row 4: not UTF-8 text (byte 0xE9 in column 6): save the boxes file as UTF-8")
    result = run_boxes(_session(pair), boxes, folder, tmp_path / "out")
    assert result.problems == parsed.problems and result.boxes_done == 2
    assert sorted(p.name for p in result.written) == ["a_mask.png", "c_mask.png"]
