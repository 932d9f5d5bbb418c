"""COCO instances JSON: what SegLens writes, it reads back as the same instances, and so does pycocotools (the same
boxes, areas and masks); image ids come from the image's path alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from labels_samples import NAMES, boxes_set, masks_set, obb_set, same_instances

from app.runs.labels import coco, polygons, rle
from app.runs.labels.coco_read import read_coco, read_coco_results
from app.runs.labels.records import LabelSet, image_id

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pycocotools' own, under numpy 2


def _round_trip(tmp_path: Path, labels: LabelSet, **options: object) -> LabelSet:
    path = tmp_path / "instances.json"
    coco.write_coco(path, labels, **options)
    return read_coco(path, names=NAMES)


@pytest.mark.parametrize("segmentation", ["polygons", "rle"])
def test_masks_round_trip(tmp_path: Path, segmentation: str) -> None:
    labels = masks_set()
    back = _round_trip(tmp_path, labels, segmentation=segmentation)
    assert back.names == NAMES
    assert [image.name for image in back.images] == [image.name for image in labels.images]
    for got, want in zip(back.images, labels.images, strict=True):
        same_instances(got.instances, want.instances)


def test_boxes_and_oriented_boxes_round_trip(tmp_path: Path) -> None:
    for labels in (boxes_set(), obb_set()):
        back = _round_trip(tmp_path, labels)
        for got, want in zip(back.images, labels.images, strict=True):
            same_instances(got.instances, want.instances)


def test_results_form_round_trip(tmp_path: Path) -> None:
    labels = masks_set()
    path = tmp_path / "results.json"
    coco.write_coco(path, labels, results=True)
    document = json.loads(path.read_text())
    assert isinstance(document, list) and len(document) == 6
    assert all(isinstance(d["segmentation"], dict) and "score" in d for d in document)  # run-length, scored
    back = read_coco_results(path, labels)
    for got, want in zip(back.images, labels.images, strict=True):
        same_instances(got.instances, want.instances)


def test_hole_goes_run_length_and_the_rest_as_polygons(tmp_path: Path) -> None:
    path = tmp_path / "instances.json"
    coco.write_coco(path, masks_set())
    annotations = json.loads(path.read_text())["annotations"]
    kinds = [type(a["segmentation"]).__name__ for a in annotations]
    assert kinds == ["list", "list", "dict", "list", "list", "list"]  # the ring (third) has a hole
    assert len(annotations[4]["segmentation"]) == 2  # two parts, two polygons
    assert all(a["iscrowd"] == 0 for a in annotations)


def test_image_ids_come_from_the_path_alone(tmp_path: Path) -> None:
    labels = masks_set()
    reordered = LabelSet(labels.names, tuple(reversed(labels.images[1:])))
    first, second = (json.loads(json.dumps(coco.coco_document(labels_))) for labels_ in (labels, reordered))
    ids = {image["file_name"]: image["id"] for image in first["images"]}
    assert {image["file_name"]: image["id"] for image in second["images"]} == \
        {name: number for name, number in ids.items() if name != "a.png"}
    assert ids["a.png"] == image_id("a.png") and 0 < ids["a.png"] < 2**53
    assert len(set(ids.values())) == len(ids)
    assert [c["id"] for c in first["categories"]] == [1, 2, 3]


def test_rle_is_cocos_compressed_string() -> None:
    """A hand-worked mask: column by column 0111 1000 0011, runs 1, 4, 5, 2; the fourth written as 2 - 4 = -2,
    whose 5-bit group 0b11110 (sign bit set, nothing more) is chr(48 + 30) = 'N'."""
    mask = np.array([[0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 1]], dtype=bool)
    assert rle.runs(mask) == [1, 4, 5, 2]
    assert rle.encode([1, 4, 5, 2]) == "145N"
    assert rle.decode("145N", most=13) == [1, 4, 5, 2]
    assert rle.runs(np.ones((2, 2), dtype=bool)) == [0, 4]  # a mask starting True: an empty run of zeros first


def test_pycocotools_reads_the_same_boxes_areas_and_masks(tmp_path: Path) -> None:
    pytest.importorskip("pycocotools")
    from pycocotools.coco import COCO

    labels = masks_set()
    for segmentation in ("polygons", "rle"):
        path = tmp_path / f"{segmentation}.json"
        coco.write_coco(path, labels, segmentation=segmentation)
        reference = COCO(str(path))
        for image in labels.images:
            number = image_id(image.name)
            assert reference.imgs[number]["file_name"] == image.name
            anns = reference.loadAnns(reference.getAnnIds(imgIds=[number]))
            assert len(anns) == len(image.instances)
            for ann, instance in zip(anns, image.instances.items, strict=True):
                x0, y0, x1, y1 = instance.box
                assert ann["bbox"] == [x0, y0, x1 - x0, y1 - y0]
                assert ann["area"] == instance.area_px
                assert ann["category_id"] == instance.class_index + 1
                assert np.array_equal(reference.annToMask(ann).astype(bool),
                                      instance.full_mask(image.instances.image_hw))


def test_pycocotools_encodes_as_seglens_does() -> None:
    mask_utils = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(7)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 50, 2))
        mask = rng.random((h, w)) < rng.random()
        theirs = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
        assert rle.to_rle(mask) == {"size": [h, w], "counts": theirs["counts"].decode()}
        counts = rle.decode(theirs["counts"].decode(), most=h * w + 1)
        assert np.array_equal(rle.from_counts(counts, (h, w)), mask)


def test_pycocotools_fills_seglens_polygons_exactly() -> None:
    """Random shapes: the polygons' union, as pycocotools rasterises it and as `fill` does, is the mask itself."""
    mask_utils = pytest.importorskip("pycocotools.mask")
    import cv2

    rng = np.random.default_rng(3)
    tried = 0
    for _ in range(300):
        h, w = (int(v) for v in rng.integers(3, 40, 2))
        mask = cv2.GaussianBlur(rng.random((h, w)), (0, 0), 1.5) > 0.5
        found = polygons.outer_polygons(mask)
        if found is None:
            continue
        tried += 1
        theirs = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(found, h, w))).astype(bool)
        assert np.array_equal(theirs, mask)
        assert np.array_equal(polygons.fill(found, (h, w)), mask)
        assert np.array_equal(polygons.coco_fill(found, (h, w)), mask)
    assert tried > 100


def test_any_polygon_is_filled_as_pycocotools_fills_it() -> None:
    """Anyone's polygons — fractional, half-pixel and repeated vertices, self-crossing, partly outside the image,
    two per object — fill as pycocotools' frPyObjects and merge fill them, pixel for pixel."""
    mask_utils = pytest.importorskip("pycocotools.mask")
    rng = np.random.default_rng(5)
    for trial in range(1500):
        h, w = (int(v) for v in rng.integers(1, 40, 2))
        shapes = [list(rng.uniform(-5, max(h, w) + 5, 2 * int(rng.integers(3, 9))))
                  for _ in range(int(rng.integers(1, 3)))]
        if trial % 4 == 0:
            shapes = [list(np.round(np.array(shape) * 2) / 2) for shape in shapes]
        if trial % 7 == 0:
            shapes[0][2:4] = shapes[0][0:2]
        theirs = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(shapes, h, w))).astype(bool)
        assert np.array_equal(polygons.coco_fill(shapes, (h, w)), theirs), trial


def test_a_mask_whose_box_passes_the_image_edge(tmp_path: Path) -> None:
    """A mask kept in a box that starts left of and above the image: written run-length, only its part inside."""
    from app.inference.model.instances import Instance, Instances
    from app.runs.labels.records import LabelledImage

    mask = np.zeros((6, 6), dtype=bool)
    mask[1:5, 1:5] = True
    instance = Instance(0, "pit", 0.5, (0.0, 0.0, 3.0, 3.0), mask=mask, mask_box=(-2, -2, 4, 4))
    labels = LabelSet(NAMES, (LabelledImage("a.png", Instances((instance,), (5, 5))),))
    back = _round_trip(tmp_path, labels, segmentation="rle")
    inside = np.zeros((5, 5), dtype=bool)
    inside[0:3, 0:3] = True
    assert np.array_equal(back.images[0].instances.items[0].full_mask((5, 5)), inside)


def test_a_crowd_region_round_trips_run_length_and_stays_out_of_yolo(tmp_path: Path) -> None:
    from labels_samples import disc, masked

    from app.inference.model.instances import Instances
    from app.runs.labels.records import LabelledImage
    from app.runs.labels.yolo import yolo_text

    crowd = masked(1, 1.0, disc((30, 30), (15, 15), 8), crowd=True)
    labels = LabelSet(NAMES, (LabelledImage("a.png", Instances((crowd,), (30, 30))),))
    back = _round_trip(tmp_path, labels)
    same_instances(back.images[0].instances, labels.images[0].instances)
    annotation = json.loads((tmp_path / "instances.json").read_text())["annotations"][0]
    assert annotation["iscrowd"] == 1 and isinstance(annotation["segmentation"], dict)
    assert yolo_text(labels.images[0].instances, polygon_set=True) == ""


def test_a_small_mask_of_a_huge_image_is_never_made_at_the_images_size(tmp_path: Path) -> None:
    """A 240-megapixel image's small polygon and run-length masks are read over the columns they reach alone:
    the read's peak memory stays under 20 MB (the image's size would be 240 MB a mask)."""
    import tracemalloc

    from app.inference.model.instances import Instances
    from app.runs.labels.records import LabelledImage

    hw = (15_000, 16_000)
    small = np.zeros((12, 9), dtype=bool)
    small[2:10, 1:8] = True
    from app.inference.model.instances import Instance

    items = (Instance(0, "pit", 0.9, (12_001.0, 9_002.0, 12_008.0, 9_010.0), mask=small,
                      mask_box=(12_000, 9_000, 12_009, 9_012)),)
    labels = LabelSet(NAMES, (LabelledImage("big.png", Instances(items, hw)),))
    document = json.loads(json.dumps(coco.coco_document(labels)))
    before = 12_001 * 15_000 + 9_002  # column 12,001, row 9,002: eight pixels down
    counts = rle.encode([before, 8, 15_000 * 16_000 - before - 8])
    document["annotations"].append({**document["annotations"][0], "id": 2,
                                    "segmentation": {"size": list(hw), "counts": counts}})
    (tmp_path / "big.json").write_text(json.dumps(document))
    tracemalloc.start()
    try:
        back = read_coco(tmp_path / "big.json", names=NAMES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 << 20, peak
    first, second = back.images[0].instances.items
    assert first.mask_box == (12_001, 9_002, 12_008, 9_010) and first.area_px == 56
    assert second.mask_box == (12_001, 9_002, 12_002, 9_010) and second.area_px == 8
