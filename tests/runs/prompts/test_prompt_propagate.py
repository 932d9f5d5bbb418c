"""Propagation slice to slice (app.runs.prompts.propagate): the CT phantom's lung through the demo prompt model and
grabCut against the phantom's own labels, and the stopping rules on a synthetic sphere (the object ends, stop(),
the area jump, the volume's end, the predicted IoU)."""

from __future__ import annotations

import re
from collections.abc import Hashable, Sequence
from pathlib import Path

import cv2
import numpy as np
import pytest

from app.inference.prompt.cache import Embedding, image_identity
from app.inference.prompt.frame import frame_geometry, image_to_low_res
from app.inference.prompt.model import Box, Point, Proposal, load_prompt_model
from app.inference.prompt.request import PromptModel
from app.runs.prompts.propagate import (
    PropagatedSlice,
    PropagationEnd,
    PropagationSettings,
    continuing,
    grown_box,
    interior_point,
    propagate,
)

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "models" / "prompt_demo.yaml"
needs_demo = pytest.mark.skipif(not DEMO.exists(), reason="the demo prompt pair is not there")
DEPTH, SIDE, CENTRE, RADIUS = 40, 128, 20, 14.0  # the sphere spans slices 6..34 (0-based)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum()) / max(float((a | b).sum()), 1.0)


def _sphere(block: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 volume [40, 128, 128], the sphere's voxels): a bright ball in grey noise; `block`: a bright slab
    touching it from slice 25 on (a neighbour the mask may run into)."""
    zz, yy, xx = np.mgrid[:DEPTH, :SIDE, :SIDE]
    sphere = (zz - CENTRE) ** 2 + (yy - 60) ** 2 + (xx - 70) ** 2 <= RADIUS**2
    bright = sphere | ((zz >= 25) & (yy >= 40) & (yy < 100) & (xx >= 78) & (xx < 120)) if block else sphere
    noise = np.random.default_rng(0).normal(0, 8, sphere.shape)
    return np.clip(np.where(bright, 190, 60) + noise, 0, 255).astype(np.uint8), sphere


def _run(model: PromptModel, volume: np.ndarray, mask: np.ndarray, *, start: int, step: int,
         **options: object) -> tuple[list[PropagatedSlice], PropagationEnd]:
    records = list(propagate(model, lambda i: volume[i], start=start, mask=mask, low_res=None, step=step,
                             count=len(volume), **options))  # type: ignore[arg-type]
    *slices, end = records
    assert isinstance(end, PropagationEnd) and all(isinstance(s, PropagatedSlice) for s in slices)
    return slices, end  # type: ignore[return-value]


@pytest.fixture(scope="module")
def demo() -> PromptModel:
    return load_prompt_model(DEMO, "cpu")


@pytest.mark.parametrize("name", ["grabcut", pytest.param("demo", marks=needs_demo)])
def test_the_sphere_is_followed_to_its_ends(name: str, request: pytest.FixtureRequest) -> None:
    model = load_prompt_model("grabcut") if name == "grabcut" else request.getfixturevalue("demo")
    volume, sphere = _sphere()
    first, last = 6, 34
    for step, end_at in ((1, last), (-1, first)):
        slices, end = _run(model, volume, sphere[CENTRE], start=CENTRE, step=step)
        assert [s.index for s in slices] == list(range(CENTRE + step, end.last + step, step))
        assert abs(end.last - end_at) <= 1, end.reason  # the object ends → stops there ±1
        assert any(rule in end.reason for rule in ("ended", "jumped", "grey level moved"))
        ious = [_iou(s.mask, sphere[s.index]) for s in slices]
        # the first slice is prompted without mask_input (there is no previous low-res yet): a little looser
        assert ious[0] >= 0.85 and min(ious[1:-1]) >= 0.9 and np.median(ious) >= 0.95, ious
        assert all(s.mask.dtype == bool and s.mask.shape == (SIDE, SIDE) for s in slices)
        assert all(s.low_res.shape == (256, 256) and s.low_res.dtype == np.float32 for s in slices)
        if name == "grabcut":
            assert all(np.isnan(s.iou) for s in slices)


def test_the_end_reason_names_the_slice_where_the_object_ended() -> None:
    volume, sphere = _sphere()
    slices, end = _run(load_prompt_model("grabcut"), volume, sphere[CENTRE], start=CENTRE, step=1)
    assert end.last == slices[-1].index
    assert end.reason.startswith(f"the object ended at slice {end.last + 2} (area ")  # 1-based, the next slice
    assert end.reason.endswith(" px < 20)")


def test_stop_is_honoured_between_slices() -> None:
    volume, sphere = _sphere()
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3  # three slices go, the fourth is not started

    slices, end = _run(load_prompt_model("grabcut"), volume, sphere[CENTRE], start=CENTRE, step=-1, stop=stop)
    assert [s.index for s in slices] == [19, 18, 17]
    assert end == PropagationEnd(17, "stopped")


def test_stop_before_the_first_slice_gives_nothing_and_last_is_the_start() -> None:
    volume, sphere = _sphere()
    slices, end = _run(load_prompt_model("grabcut"), volume, sphere[CENTRE], start=CENTRE, step=1,
                       stop=lambda: True)
    assert slices == [] and end == PropagationEnd(CENTRE, "stopped")


@needs_demo
def test_a_mask_creeping_onto_a_neighbour_ends_where_it_leaves_the_object(demo: PromptModel) -> None:
    """The slab touches the ball from slice 25 (0-based), as bright as it: the demo pair takes in a crescent of it
    there (62 px, under every area ratio) and keeps it, the ball shrinking under it, until the mask is half slab
    (177 px on slice 32) long after the ball has gone. The outside rule ends it where it first left the ball."""
    volume, sphere = _sphere(block=True)
    zz, yy, xx = np.mgrid[:DEPTH, :SIDE, :SIDE]
    slab = (zz >= 25) & (yy >= 40) & (yy < 100) & (xx >= 78) & (xx < 120) & ~sphere
    slices, end = _run(demo, volume, sphere[CENTRE], start=CENTRE, step=1,
                       settings=PropagationSettings(max_area_ratio=1.5))
    assert end.last in (24, 25), end.reason
    assert re.fullmatch(rf"the mask left the object at slice {end.last + 2}: \d+% of it outside the previous "
                        r"slice's mask grown by \d+\.\d px \(more than 3%\)", end.reason), end.reason
    assert all(_iou(s.mask, sphere[s.index]) >= 0.85 for s in slices)
    assert all((s.mask & slab[s.index]).sum() <= 70 for s in slices)
    # without the rule: no other rule fires while the mask creeps onto the slab
    slices, end = _run(demo, volume, sphere[CENTRE], start=CENTRE, step=1,
                       settings=PropagationSettings(max_area_ratio=1.5, max_outside=None))
    assert end.last > 30 and max((s.mask & slab[s.index]).sum() for s in slices) > 150, end.reason


def test_the_outside_rule_exactly() -> None:
    """A mask that moves sideways by 3 px (its area the same) leaves the object; one that grows around itself, to
    twice its area, does not: the band allowed outside the previous mask is 1 px + twice the growth of its radius."""
    masks = np.zeros((5, 64, 64), bool)
    masks[:3, 20:30, 20:30] = True  # 100 px
    masks[3, 18:32, 18:32] = True  # 196 px around it: the radius grows by 2.26 px, all within 2 px of it
    masks[4, 18:32, 21:35] = True  # moved 3 px right: 28 of 196 px more than 1 px outside the one before
    slices, end = _run(_Labels(masks), _stamped(5), masks[1], start=1, step=1)
    assert [s.index for s in slices] == [2, 3]
    assert end == PropagationEnd(3, "the mask left the object at slice 5: 14% of it outside the previous slice's "
                                    "mask grown by 1.0 px (more than 3%)")
    slices, end = _run(_Labels(masks), _stamped(5), masks[1], start=1, step=1,
                       settings=PropagationSettings(max_outside=None))
    assert end == PropagationEnd(4, "reached the last slice")


class _Labels:
    """A hand-written prompt model that answers each slice with the given masks, and a fixed predicted IoU: the
    rules' exact boundaries without a network's tolerance."""

    def __init__(self, masks: np.ndarray, iou: float = 0.9) -> None:
        self.masks, self.iou, self.boxes = masks, iou, []  # type: ignore[var-annotated]
        self.embedded: list[Hashable] = []

    model_free = False  # a model: a propagated slice's prompt has its centre point (PropagationSettings)

    def embed(self, image: np.ndarray, *, key: Hashable | None = None) -> Embedding:
        self.embedded.append(key)
        return Embedding(key if key is not None else image_identity(image), {"index": np.array(int(image[0, 0]))},
                         frame_geometry(image.shape[:2], 1024))

    def decode(self, embedding: Embedding, points: Sequence[Point] = (), box: Box | None = None,
               mask_input: np.ndarray | None = None) -> Proposal:
        self.boxes.append((box, tuple(points), mask_input is not None))
        mask = self.masks[int(embedding.tensors["index"])]
        return Proposal(mask, self.iou, image_to_low_res(mask, embedding.geometry))


def _stamped(depth: int) -> np.ndarray:
    """Slices whose top-left pixel says which slice they are (what the _Labels model reads)."""
    volume = np.zeros((depth, 64, 64), np.uint8)
    volume[:, 0, 0] = np.arange(depth)
    return volume


def test_the_area_jump_rule_exactly() -> None:
    masks = np.zeros((10, 64, 64), bool)
    masks[:, 20:30, 20:30] = True  # 100 px
    masks[6, 15:35, 20:30] = True  # 200 px, around it: a jump of exactly 2× is allowed
    masks[7, 10:40, 10:40] = True  # 900 px: 4.5× the previous
    slices, end = _run(_Labels(masks), _stamped(10), masks[4], start=4, step=1)
    assert [s.index for s in slices] == [5, 6]
    assert end == PropagationEnd(6, "the area jumped at slice 8 (200 → 900 px, more than 2×)")


def test_the_grey_level_rule_exactly() -> None:
    volume = np.full((6, 64, 64), 50, np.uint8)
    volume[:, 0, 0] = np.arange(6)  # the slice's stamp
    volume[:, 10:20, 10:20] = 200  # the object, on slices 0..3
    volume[4:, 10:20, 10:20] = 50  # gone from slice 5 (1-based) on: the mask now lies on the ground
    masks = np.zeros((6, 64, 64), bool)
    masks[:, 10:20, 10:20] = True
    slices, end = _run(_Labels(masks), volume, masks[1], start=1, step=1)
    assert [s.index for s in slices] == [2, 3]
    assert end == PropagationEnd(3, "the mask's grey level moved from 200 to 50 at slice 5 (more than 40 from the "
                                    "accepted mask's)")
    slices, end = _run(_Labels(masks), volume, masks[1], start=1, step=1,
                       settings=PropagationSettings(max_level_change=None))
    assert end == PropagationEnd(5, "reached the last slice")


@needs_demo
def test_a_dark_ball_in_a_bright_ground_does_not_leak(demo: PromptModel) -> None:
    """The demo pair fills the box it is given: with a margin its masks grew 2 px a side per slice until they
    covered the slice (each step under the area-jump ratio). The default carries the box as it is, and the grey
    level rule ends a mask that slid onto the ground."""
    zz, yy, xx = np.mgrid[:40, :96, :96]
    ball = (zz - 20) ** 2 + (yy - 48) ** 2 + (xx - 40) ** 2 <= 12.0**2  # slices 8..32
    values = np.where(ball, 20, 200) + np.random.default_rng(0).normal(0, 6, ball.shape)
    volume = np.clip((values - 11.0) * 255 / 203, 0, 255).astype(np.uint8)  # through the window 113/204
    for step, end_at in ((1, 32), (-1, 8)):
        slices, end = _run(demo, volume, ball[20], start=20, step=step)
        assert abs(end.last - end_at) <= 2, end.reason
        assert all(s.mask.sum() <= 1.5 * ball[20].sum() for s in slices)  # never runs onto the ground (9216 px)
        assert np.median([_iou(s.mask, ball[s.index]) for s in slices]) >= 0.6


def test_the_volume_ends_and_the_predicted_iou_rule() -> None:
    masks = np.zeros((6, 64, 64), bool)
    masks[:, 10:20, 10:20] = True
    slices, end = _run(_Labels(masks), _stamped(6), masks[2], start=2, step=1)
    assert [s.index for s in slices] == [3, 4, 5] and end == PropagationEnd(5, "reached the last slice")
    slices, end = _run(_Labels(masks), _stamped(6), masks[2], start=2, step=-1)
    assert [s.index for s in slices] == [1, 0] and end == PropagationEnd(0, "reached the first slice")
    slices, end = _run(_Labels(masks, iou=0.31), _stamped(6), masks[2], start=2, step=-1)
    assert slices == [] and end == PropagationEnd(2, "predicted IoU 0.31 < 0.5 at slice 2")
    slices, end = _run(_Labels(masks), _stamped(6), masks[2], start=2, step=1,
                       settings=PropagationSettings(max_slices=2))
    assert [s.index for s in slices] == [3, 4] and end == PropagationEnd(4, "reached the limit of 2 slices")


def test_each_slice_is_prompted_with_the_grown_box_the_point_and_the_previous_mask() -> None:
    masks = np.zeros((4, 64, 64), bool)
    masks[:, 10:20, 30:44] = True
    model = _Labels(masks)
    _run(model, _stamped(4), masks[0], start=0, step=1, key=lambda i: ("volume", i))
    box, points, fed = model.boxes[0]
    assert box == Box(30.0, 10.0, 44.0, 20.0)  # x 30..43, y 10..19: pixel edges, x1/y1 exclusive
    assert len(points) == 1 and masks[0][int(points[0].y), int(points[0].x)] and fed
    assert model.embedded == [("volume", 1), ("volume", 2), ("volume", 3)]  # the caller's keys: its cache
    model = _Labels(masks)
    _run(model, _stamped(4), masks[0], start=0, step=1,
         settings=PropagationSettings(mask_input=False, center_point=False, margin_px=2))
    assert model.boxes[0] == (Box(28.0, 8.0, 46.0, 22.0), (), False)  # grown by 2 px


def test_a_neighbour_the_decoder_took_in_is_dropped() -> None:
    previous = np.zeros((32, 32), bool)
    previous[5:15, 5:12] = True
    found = previous.copy()
    found[5:15, 20:28] = True  # a second part, not touching the previous mask
    assert np.array_equal(continuing(found, previous), previous)
    assert not continuing(np.roll(previous, 16, axis=1), previous).any()  # nothing goes on: empty


def test_helpers_box_and_point() -> None:
    mask = np.zeros((20, 30), bool)
    assert grown_box(mask, 3) is None
    mask[0:4, 25:30] = True
    assert grown_box(mask, 3) == Box(22.0, 0.0, 30.0, 7.0)  # clipped to the image
    ring = np.zeros((41, 41), np.uint8)
    cv2.circle(ring, (20, 20), 15, 1, -1)
    cv2.circle(ring, (28, 20), 12, 0, -1)  # a crescent: its centroid lies outside it
    point = interior_point(ring.astype(bool))
    assert ring[int(point.y), int(point.x)]


def test_bad_start_or_step() -> None:
    volume, sphere = _sphere()
    model = load_prompt_model("grabcut")
    with pytest.raises(ValueError, match="step is 1 .down. or -1 .up., got 2"):
        next(propagate(model, lambda i: volume[i], start=3, mask=sphere[3], low_res=None, step=2, count=40))
    with pytest.raises(ValueError, match="start slice 41 is outside the volume's slices 1 to 40"):
        next(propagate(model, lambda i: volume[i], start=40, mask=sphere[3], low_res=None, step=1, count=40))


# -- the CT phantom (resources/samples/ct): its left lung against the phantom's own labels ---------------------

@pytest.fixture(scope="module")
def phantom() -> tuple[list[np.ndarray], np.ndarray]:
    """(the sample series' slices as the viewer shows them by default: the series' own window, the labels)."""
    from app.io.discover import discover
    from app.io.images import read_slice
    from models.training import ct_sample

    (item,) = discover([REPO / "resources" / "samples" / "ct"])
    assert item.volume is not None
    _, labels = ct_sample.sample_volume()
    return [read_slice(item.volume, k).display() for k in range(item.volume.depth)], labels


def _lung_truth(labels: np.ndarray, start: int, slices: list[PropagatedSlice]) -> dict[int, np.ndarray]:
    """Per slice, the lung component that continues the one under the start mask (the labels' own tracking)."""
    truth: dict[int, np.ndarray] = {}
    previous = _first_lung(labels[start])
    for s in slices:
        count, parts = cv2.connectedComponents((labels[s.index] == 1).astype(np.uint8))
        votes = np.bincount(parts[previous].ravel(), minlength=count)
        votes[0] = 0
        truth[s.index] = parts == int(votes.argmax()) if votes.max() else np.zeros_like(previous)
        previous = truth[s.index] if truth[s.index].any() else previous
    return truth


def _first_lung(label: np.ndarray) -> np.ndarray:
    _, parts = cv2.connectedComponents((label == 1).astype(np.uint8))
    return np.asarray(parts == 1)


@pytest.mark.parametrize("name", ["grabcut", pytest.param("demo", marks=needs_demo)])
def test_a_lung_of_the_ct_phantom_is_propagated_across_its_slices(
        name: str, phantom: tuple[list[np.ndarray], np.ndarray], request: pytest.FixtureRequest) -> None:
    model = load_prompt_model("grabcut") if name == "grabcut" else request.getfixturevalue("demo")
    pixels, labels = phantom
    lung_slices = [k for k in range(len(labels)) if (labels[k] == 1).any()]  # 3..28 in the sample
    start = 16
    for step, end_at in ((1, lung_slices[-1]), (-1, lung_slices[0])):
        slices, end = _run(model, np.stack(pixels), _first_lung(labels[start]), start=start, step=step)
        assert abs(end.last - end_at) <= 1, end.reason  # the lung's own end, ±1
        truth = _lung_truth(labels, start, slices)
        ious = [_iou(s.mask, truth[s.index]) for s in slices if truth[s.index].any()]
        assert np.median(ious) >= 0.9 and min(ious[:-2]) >= 0.5, [round(v, 2) for v in ious]
