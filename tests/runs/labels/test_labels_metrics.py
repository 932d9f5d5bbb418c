"""Instance metrics: per-image precision and recall at IoU 0.5 on hand-built cases, and mAP@0.5:0.95 equal to
pycocotools' COCOeval (within 1e-6) on synthetic sets of a few images and classes with overlaps, misses, invented
instances and more than 100 detections in one image — masks (segm) and boxes (bbox), each read back from the
files SegLens writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from labels_samples import NAMES, blob, boxed, disc, masked

from app.inference.model.instances import Instance, Instances
from app.runs.labels import coco
from app.runs.labels.coco_read import read_coco, read_coco_results
from app.runs.labels.metrics import folder_score, image_score, iou, mean_average_precision
from app.runs.labels.records import LabelledImage, LabelSet, image_id

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pycocotools' own, under numpy 2


def _shifted(instance: Instance, hw: tuple[int, int], dx: int, dy: int, score: float,
             class_index: int | None = None) -> Instance:
    full = np.roll(instance.full_mask(hw), (dy, dx), axis=(0, 1))
    return masked(instance.class_index if class_index is None else class_index, score, full)


def _mask_sets(seed: int) -> tuple[LabelSet, LabelSet]:
    rng = np.random.default_rng(seed)
    reference, found = [], []
    for n in range(5):
        hw = (int(rng.integers(40, 90)), int(rng.integers(40, 90)))
        truth = [masked(int(rng.integers(0, 3)), 1.0, disc(hw, (int(rng.integers(12, hw[1] - 12)),
                                                             int(rng.integers(12, hw[0] - 12))),
                                                         int(rng.integers(4, 10))))
                 for _ in range(int(rng.integers(1, 5)))]
        truth.append(masked(int(rng.integers(0, 3)), 1.0, blob(hw, seed * 10 + n, (2, 2, 30, 30))))
        dets = []
        for item in truth:
            if rng.random() < 0.2:
                continue  # a miss
            wrong = int(rng.integers(0, 3)) if rng.random() < 0.15 else None
            dets.append(_shifted(item, hw, int(rng.integers(-3, 4)), int(rng.integers(-3, 4)),
                                 float(rng.random()), wrong))
        for _ in range(int(rng.integers(0, 3))):  # invented
            dets.append(masked(int(rng.integers(0, 3)), float(rng.random()),
                               disc(hw, (int(rng.integers(5, hw[1] - 5)), int(rng.integers(5, hw[0] - 5))), 3)))
        name = f"img{n}.png"
        reference.append(LabelledImage(name, Instances(tuple(truth), hw)))
        found.append(LabelledImage(name, Instances(tuple(sorted(dets, key=lambda d: -d.score)), hw)))
    return LabelSet(NAMES, tuple(reference)), LabelSet(NAMES, tuple(found))


def _box_sets(seed: int) -> tuple[LabelSet, LabelSet]:
    rng = np.random.default_rng(seed)
    reference, found = [], []
    for n in range(4):
        hw = (100, 120)
        truth = []
        for _ in range(int(rng.integers(2, 8))):
            x, y = rng.uniform(0, 90, 2)
            w, h = rng.uniform(5, 30, 2)
            truth.append(boxed(int(rng.integers(0, 3)), 1.0, (x, y, x + w, y + h)))
        dets = [boxed(t.class_index, float(rng.random()), tuple(np.add(t.box, rng.normal(0, 2, 4))))
                for t in truth if rng.random() > 0.2]
        crowd = 120 if n == 0 else 3  # more than COCOeval's 100 detections in one image
        for _ in range(crowd):
            x, y = rng.uniform(0, 100, 2)
            dets.append(boxed(0, float(rng.random()) * 0.5, (x, y, x + 8.0, y + 6.0)))
        name = f"box{n}.png"
        reference.append(LabelledImage(name, Instances(tuple(truth), hw)))
        found.append(LabelledImage(name, Instances(tuple(sorted(dets, key=lambda d: -d.score)), hw)))
    return LabelSet(NAMES, tuple(reference)), LabelSet(NAMES, tuple(found))


def _cocoeval(tmp_path: Path, reference: LabelSet, found: LabelSet, kind: str) -> float:
    pytest.importorskip("pycocotools")
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    coco.write_coco(tmp_path / "truth.json", reference)
    coco.write_coco(tmp_path / "found.json", found, results=True)
    truth = COCO(str(tmp_path / "truth.json"))
    evaluation = COCOeval(truth, truth.loadRes(str(tmp_path / "found.json")), kind)
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    return float(evaluation.stats[0])


def _seglens(tmp_path: Path, reference: LabelSet) -> float:
    """SegLens's mAP from the same files, read back, the images in COCOeval's order (ascending id)."""
    truth = read_coco(tmp_path / "truth.json", names=NAMES)
    found = read_coco_results(tmp_path / "found.json", truth)
    pairs = dict(zip((image.name for image in truth.images),
                     zip(truth.by_name().values(), found.by_name().values(), strict=True), strict=True))
    ordered = sorted(pairs, key=image_id)
    return mean_average_precision([pairs[name] for name in ordered])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mask_map_equals_cocoeval(tmp_path: Path, seed: int) -> None:
    reference, found = _mask_sets(seed)
    theirs = _cocoeval(tmp_path, reference, found, "segm")
    ours = _seglens(tmp_path, reference)
    assert 0.05 < theirs < 0.95  # neither trivial nor perfect
    assert abs(ours - theirs) < 1e-6, (ours, theirs)


def test_mask_map_equals_cocoeval_on_anyones_polygons(tmp_path: Path) -> None:
    """A reference whose polygons SegLens did not write (every vertex moved by up to 0.4 px): its masks are filled as
    pycocotools fills them, so the mAP still equals COCOeval's."""
    reference, found = _mask_sets(2)
    theirs_before = _cocoeval(tmp_path, reference, found, "segm")
    document = json.loads((tmp_path / "truth.json").read_text())
    rng = np.random.default_rng(0)
    moved = 0
    for annotation in document["annotations"]:
        if isinstance(annotation["segmentation"], list):
            annotation["segmentation"] = [list(np.add(shape, rng.uniform(-0.4, 0.4, len(shape))))
                                          for shape in annotation["segmentation"]]
            moved += 1
    (tmp_path / "truth.json").write_text(json.dumps(document))
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth = COCO(str(tmp_path / "truth.json"))
    evaluation = COCOeval(truth, truth.loadRes(str(tmp_path / "found.json")), "segm")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    theirs = float(evaluation.stats[0])
    assert moved > 5 and theirs != theirs_before
    assert abs(_seglens(tmp_path, reference) - theirs) < 1e-6


@pytest.mark.parametrize("seed", [4, 5])
def test_box_map_equals_cocoeval(tmp_path: Path, seed: int) -> None:
    reference, found = _box_sets(seed)
    theirs = _cocoeval(tmp_path, reference, found, "bbox")
    ours = _seglens(tmp_path, reference)
    assert 0.05 < theirs < 0.95
    assert abs(ours - theirs) < 1e-6, (ours, theirs)


def test_map_of_a_perfect_answer_is_one_and_of_no_reference_minus_one() -> None:
    reference, _ = _mask_sets(1)
    pairs = [(image.instances, image.instances) for image in reference.images]
    assert mean_average_precision(pairs) == pytest.approx(1.0)
    empty = Instances((), (10, 10))
    assert mean_average_precision([(empty, Instances((boxed(0, 0.5, (0, 0, 2, 2)),), (10, 10)))]) == -1.0


def test_image_precision_and_recall_at_half_iou() -> None:
    hw = (50, 50)
    a, b = masked(0, 1.0, disc(hw, (15, 15), 8)), masked(1, 1.0, disc(hw, (35, 35), 8))
    reference = Instances((a, b), hw)
    near_a = _shifted(a, hw, 2, 0, 0.9)  # IoU well over 0.5
    far_a = _shifted(a, hw, 12, 0, 0.8)  # a second try at a, too far
    b_as_pit = _shifted(b, hw, 0, 0, 0.7, class_index=0)  # the right place, the wrong class
    score = image_score(reference, Instances((near_a, far_a, b_as_pit), hw))
    assert (score.matched, score.found, score.reference) == (1, 3, 2)
    assert score.precision == pytest.approx(1 / 3) and score.recall == 0.5
    assert iou(near_a, a) > 0.5 > iou(far_a, a)
    nothing = image_score(Instances((), hw), Instances((), hw))
    assert (nothing.precision, nothing.recall) == (1.0, 1.0)


def test_the_better_scored_detection_takes_the_match() -> None:
    """Two detections of one object: the higher score matches first (greedy by score). The close one first: where
    it misses (the strict thresholds) the exact one matches at precision 1/2; the exact one first: AP 1."""
    hw = (40, 40)
    a = masked(0, 1.0, disc(hw, (20, 20), 9))
    exact, close = _shifted(a, hw, 0, 0, 0.6), _shifted(a, hw, 1, 0, 0.9)
    reference = Instances((a,), hw)
    assert image_score(reference, Instances((close, exact), hw)).matched == 1
    alone_close = mean_average_precision([(reference, Instances((close,), hw))])
    missed = 1 - alone_close  # the share of thresholds the close one misses
    both = mean_average_precision([(reference, Instances((close, exact), hw))])
    assert 0 < missed < 1 and both == pytest.approx(alone_close + missed / 2)
    exact_first = _shifted(a, hw, 0, 0, 0.95)
    assert mean_average_precision([(reference, Instances((exact_first, close), hw))]) == pytest.approx(1.0)


def test_box_iou_when_either_has_no_mask() -> None:
    a = boxed(0, 1.0, (0.0, 0.0, 10.0, 10.0))
    b = masked(0, 1.0, disc((30, 30), (10, 10), 4))
    assert iou(a, boxed(0, 1.0, (5.0, 0.0, 15.0, 10.0))) == pytest.approx(50 / 150)
    assert iou(a, b) == pytest.approx(iou(a, boxed(0, 1.0, b.box)))
    assert json.dumps(iou(a, a)) == "1.0"


def test_folder_score_is_cocoevals_over_the_reference_images(tmp_path: Path) -> None:
    """An image the answer says nothing of counts as all missed; an answer for an image the reference lacks is
    listed, not scored; the mAP is COCOeval's, whatever order the images come in."""
    reference, found = _mask_sets(3)
    silent = reference.images[1].name
    answered = tuple(image for image in found.images if image.name != silent)
    theirs = _cocoeval(tmp_path, reference, LabelSet(NAMES, answered), "segm")
    stray = LabelledImage("elsewhere.png", found.images[0].instances)
    shuffled = LabelSet(NAMES, (stray, *reversed(answered)))
    score = folder_score(LabelSet(NAMES, tuple(reversed(reference.images))), shuffled)
    assert abs(score.mean_average_precision - theirs) < 1e-6
    assert score.unscored == ("elsewhere.png",)
    by_name = dict(score.images)
    assert [name for name, _ in score.images] == [image.name for image in reversed(reference.images)]
    assert by_name[silent].found == 0 and by_name[silent].recall == 0.0
    assert by_name[silent].reference == len(reference.images[1].instances)


def _with_crowds(reference: LabelSet, found: LabelSet, seed: int, *, masks: bool) -> tuple[LabelSet, LabelSet]:
    """Each image given a crowd region of a class (a disc or a box) and a few detections of that class inside it,
    one of them overlapping an object of the class when there is one."""
    rng = np.random.default_rng(seed)
    images, answers = [], []
    for image, answer in zip(reference.images, found.images, strict=True):
        hw = image.instances.image_hw
        cls = int(rng.integers(0, 3))
        cx, cy = int(rng.integers(15, hw[1] - 15)), int(rng.integers(15, hw[0] - 15))
        crowd = masked(cls, 1.0, disc(hw, (cx, cy), 12), crowd=True) if masks else \
            boxed(cls, 1.0, (cx - 12.0, cy - 12.0, cx + 12.0, cy + 12.0), crowd=True)
        inside = [masked(cls, float(rng.random()), disc(hw, (cx + int(dx), cy + int(dy)), 3)) if masks else
                  boxed(cls, float(rng.random()), (cx + dx - 3, cy + dy - 3, cx + dx + 3, cy + dy + 3))
                  for dx, dy in rng.integers(-7, 8, (int(rng.integers(1, 4)), 2))]
        images.append(LabelledImage(image.name, Instances((*image.instances.items, crowd), hw)))
        dets = sorted((*answer.instances.items, *inside), key=lambda d: -d.score)
        answers.append(LabelledImage(answer.name, Instances(tuple(dets), hw)))
    return LabelSet(NAMES, tuple(images)), LabelSet(NAMES, tuple(answers))


@pytest.mark.parametrize(("seed", "masks"), [(1, True), (2, True), (4, False), (5, False)])
def test_map_with_crowd_regions_equals_cocoeval(tmp_path: Path, seed: int, masks: bool) -> None:
    """Crowd regions (iscrowd 1) in the reference: detections inside them are ignored, as COCOeval ignores them."""
    reference, found = _with_crowds(*(_mask_sets(seed) if masks else _box_sets(seed)), seed, masks=masks)
    theirs = _cocoeval(tmp_path, reference, found, "segm" if masks else "bbox")
    ours = _seglens(tmp_path, reference)
    without = [(Instances(tuple(i for i in r.instances.items if not i.crowd), r.instances.image_hw), f.instances)
               for r, f in zip(reference.images, found.images, strict=True)]
    plain = mean_average_precision(without)
    assert abs(ours - theirs) < 1e-6, (ours, theirs)
    assert abs(plain - theirs) > 1e-3  # the crowd regions changed the score: their detections were ignored


def test_crowd_regions_in_one_image() -> None:
    hw = (60, 60)
    pit = masked(0, 1.0, disc(hw, (15, 15), 6))
    crowd = masked(0, 1.0, disc(hw, (40, 40), 15), crowd=True)
    reference = Instances((crowd, pit), hw)  # the crowd region first: objects are matched before it all the same
    inside = [masked(0, 0.8, disc(hw, (36, 40), 3)), masked(0, 0.7, disc(hw, (44, 42), 3))]
    on_pit = masked(0, 0.6, disc(hw, (15, 15), 6))
    score = image_score(reference, Instances((*inside, on_pit), hw))
    assert (score.matched, score.found, score.reference) == (1, 1, 1)  # the two inside the crowd are not counted
    assert iou(inside[0], crowd) == 1.0  # overlap over the detection's own area
    assert mean_average_precision([(reference, Instances((*inside, on_pit), hw))]) == pytest.approx(1.0)


def test_a_polygon_of_no_pixel_scores_as_cocoeval_scores_it(tmp_path: Path) -> None:
    """A reference polygon too thin to hold a pixel centre is an empty mask (IoU 0 with anything, as in COCOeval),
    not its box; an empty segmentation list is no mask at all (the box stands)."""
    reference, found = _mask_sets(1)
    theirs_file = _cocoeval(tmp_path, reference, found, "segm")
    document = json.loads((tmp_path / "truth.json").read_text())
    document["annotations"][0]["segmentation"] = [[5.0, 5.0, 5.2, 5.0, 5.1, 5.1]]
    (tmp_path / "truth.json").write_text(json.dumps(document))
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    truth = COCO(str(tmp_path / "truth.json"))
    evaluation = COCOeval(truth, truth.loadRes(str(tmp_path / "found.json")), "segm")
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    assert float(evaluation.stats[0]) != theirs_file
    assert abs(_seglens(tmp_path, reference) - float(evaluation.stats[0])) < 1e-6
    empty = read_coco(tmp_path / "truth.json", names=NAMES).images
    thin = next(item for image in empty for item in image.instances.items
                if item.mask is not None and item.area_px == 0)
    assert thin.mask_box == (0, 0, 0, 0)
    document["annotations"][0]["segmentation"] = []
    (tmp_path / "truth.json").write_text(json.dumps(document))
    boxes_only = [item for image in read_coco(tmp_path / "truth.json", names=NAMES).images
                  for item in image.instances.items if item.mask is None]
    assert len(boxes_only) == 1
