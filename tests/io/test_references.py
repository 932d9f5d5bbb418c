"""Ground-truth masks (app.io.references): which file belongs to an input, and how it is read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.errors import ImageError
from app.io.references import ReferenceIndex, check_labels, read_reference


def save(path: Path, values) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(values)).save(path)
    return path


MASK = np.array([[0, 1], [2, 1]], np.uint8)


@pytest.mark.parametrize("name", ["x.png", "x_mask.png", "x.tif"])
def test_matched_by_relative_path_and_stem(tmp_path, name):
    ref = tmp_path / "ref"
    expected = save(ref / "a" / "b" / name, MASK)
    save(ref / "x.png", MASK)  # a flat match exists too: the relative path wins
    assert ReferenceIndex(ref, [Path("a/b/x.jpg")]).find(Path("a/b/x.jpg")) == (expected, None)


def test_flat_folder_matched_by_a_unique_stem(tmp_path):
    ref = tmp_path / "ref"
    flat = save(ref / "x_mask.png", MASK)
    index = ReferenceIndex(ref, [Path("a/x.png"), Path("b/y.png")])
    assert index.find(Path("a/x.png")) == (flat, None)
    path, why = index.find(Path("b/y.png"))
    assert path is None and "no reference" in why and "b/y.png" in why


def test_an_ambiguous_stem_is_a_notice_not_a_guess(tmp_path):
    ref = tmp_path / "ref"
    save(ref / "p" / "x.png", MASK)
    save(ref / "q" / "x.png", MASK)
    path, why = ReferenceIndex(ref, [Path("x.png")]).find(Path("x.png"))
    assert path is None and "p/x.png" in why and "q/x.png" in why
    save(ref / "only" / "z.png", MASK)  # one reference, but two inputs named z: which one is it for?
    index = ReferenceIndex(ref, [Path("a/z.png"), Path("b/z.png")])
    assert index.find(Path("a/z.png"))[0] is None


def test_the_input_itself_is_never_its_own_reference(tmp_path):
    folder = tmp_path / "images"
    image = save(folder / "x.png", MASK)
    mask = save(folder / "x_mask.png", MASK)
    assert ReferenceIndex(folder, [Path("x.png")]).find(Path("x.png"), image) == (mask, None)


def test_palette_16_bit_and_binary_255_masks(tmp_path):
    palette = Image.new("P", (2, 2))
    palette.putdata(MASK.ravel().tolist())
    palette.putpalette([0, 0, 0, 255, 0, 0, 0, 255, 0] + [0] * 759)
    palette.save(tmp_path / "p.png")
    np.testing.assert_array_equal(read_reference(tmp_path / "p.png", 3), MASK)  # indices, not colours
    save(tmp_path / "w.png", MASK.astype(np.uint16))
    np.testing.assert_array_equal(read_reference(tmp_path / "w.png", 3), MASK)
    save(tmp_path / "b.png", np.array([[0, 255], [255, 0]], np.uint8))
    np.testing.assert_array_equal(read_reference(tmp_path / "b.png", 2), [[0, 1], [1, 0]])
    save(tmp_path / "g.png", np.stack([MASK] * 3, axis=-1))  # RGB with equal channels is gray
    np.testing.assert_array_equal(read_reference(tmp_path / "g.png", 3), MASK)


def test_bad_references_are_one_line_naming_the_file(tmp_path):
    with pytest.raises(ImageError, match=r"b\.png: reference value 255 but the model has 3 classes"):
        read_reference(save(tmp_path / "b.png", np.array([[0, 255]], np.uint8)), 3)  # 0/255: binary models only
    with pytest.raises(ImageError, match=r"c\.png: a colour reference mask"):
        read_reference(save(tmp_path / "c.png", np.array([[[255, 0, 0]]], np.uint8)), 3)
    (tmp_path / "d.png").write_bytes(b"not a png")
    with pytest.raises(ImageError, match=r"d\.png: cannot read"):
        read_reference(tmp_path / "d.png", 3)
    with pytest.raises(ImageError, match="value 7"):
        check_labels(Path("e.png"), np.array([[0, 7]], np.uint8), 2)


def test_x_jpg_is_never_scored_against_the_reference_of_x_png(tmp_path):
    ref = tmp_path / "ref"
    save(ref / "a" / "x.png", MASK)  # a stem both inputs share: whose is it?
    index = ReferenceIndex(ref, [Path("a/x.png"), Path("a/x.jpg")])
    for rel in (Path("a/x.png"), Path("a/x.jpg")):
        path, why = index.find(rel)
        assert path is None and "\n" not in why
        assert why == (f"ambiguous reference {ref / 'a' / 'x.png'}: inputs a/x.jpg and a/x.png share the stem x "
                       f"(name it {rel.name}_mask.png)")
    exact = save(ref / "a" / "x.jpg_mask.png", MASK)  # named with the extension, as the review folder names it
    assert index.find(Path("a/x.jpg")) == (exact, None)
    assert index.find(Path("a/x.png"))[0] is None  # a/x.png stays ambiguous
    flat = tmp_path / "flat"
    save(flat / "x.jpg_mask.png", MASK)
    assert ReferenceIndex(flat, [Path("a/x.png"), Path("a/x.jpg")]).find(Path("a/x.jpg"))[0] == flat / "x.jpg_mask.png"


def test_the_viewer_sees_the_ambiguity_on_disk(tmp_path):
    images = tmp_path / "images"
    save(images / "x.png", MASK)
    save(images / "x.jpg", MASK)
    save(images / "x_mask.png", MASK)  # masks beside images, no list of inputs (the viewer's index)
    index = ReferenceIndex(images)
    for name in ("x.jpg", "x.png"):
        path, why = index.find(Path(name), images / name)
        assert path is None and why.startswith(f"ambiguous reference {images}/x")
        assert why.endswith(f"inputs x.jpg and x.png share the stem x (name it {name}_mask.png)")
    assert index.find(Path("y.png"), images / "y.png")[0] is None
