"""3D connected components (app.inference.decide.lesions): exact on hand-built volumes, and equal to scipy.ndimage.label
(a test-only reference: the app never imports scipy) on random volumes at both connectivities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from app.inference.decide.lesions import Lesion, connectivity_text, lesions

ndimage = pytest.importorskip("scipy.ndimage")

STRUCTURE = {6: ndimage.generate_binary_structure(3, 1), 26: ndimage.generate_binary_structure(3, 3)}


def ball(shape: tuple[int, int, int], centre: tuple[int, int, int], radius: float) -> np.ndarray:
    k, r, c = np.ogrid[:shape[0], :shape[1], :shape[2]]
    return (k - centre[0]) ** 2 + (r - centre[1]) ** 2 + (c - centre[2]) ** 2 <= radius ** 2


def diagonal_pair() -> np.ndarray:
    """Two balls of radius 2 whose only contact is one corner: (4, 4, 4) in one, (5, 5, 5) in the other."""
    first = ball((12, 12, 12), (3, 3, 3), 1.8)
    second = ball((12, 12, 12), (6, 6, 6), 1.8)
    assert first[4, 4, 4] and second[5, 5, 5] and not (first & second).any()
    return (first | second).astype(np.uint8)


def reference(labels: np.ndarray, connectivity: int, voxel_ml: float | None) -> list[Lesion]:
    """scipy.ndimage's components as Lesion records (voxels, bounding box, centroid), in lesions()' order."""
    found: list[Lesion] = []
    for value in (int(v) for v in np.unique(labels) if v != 0):
        numbered, count = ndimage.label(labels == value, structure=STRUCTURE[connectivity])
        boxes = ndimage.find_objects(numbered)
        sizes = np.bincount(numbered.ravel(), minlength=count + 1)[1:]
        centres = ndimage.center_of_mass(np.ones_like(numbered), numbered, range(1, count + 1))
        records = [(int(sizes[i]), tuple((s.start, s.stop) for s in boxes[i]), tuple(centres[i]))
                   for i in range(count)]
        records.sort(key=lambda r: (-r[0], r[1][0][0], r[1][1][0], r[1][2][0]))
        found += [Lesion(value, n + 1, size, None if voxel_ml is None else size * voxel_ml, box, centre)
                  for n, (size, box, centre) in enumerate(records)]
    return found


def same(ours: tuple[Lesion, ...], theirs: list[Lesion]) -> None:
    """Equal records; the centroids and mL to rounding (they are means and products of floats)."""
    assert [(x.label, x.voxels, x.bbox) for x in ours] == [(x.label, x.voxels, x.bbox) for x in theirs]
    assert np.allclose([x.centroid for x in ours], [x.centroid for x in theirs]) if ours else theirs == []
    assert [x.ml is None for x in ours] == [x.ml is None for x in theirs]
    assert np.allclose([x.ml or 0.0 for x in ours], [x.ml or 0.0 for x in theirs])


def test_two_balls_touching_only_at_a_corner_are_one_lesion_at_26_and_two_at_6():
    volume = diagonal_pair()
    assert [x.voxels for x in lesions(volume, voxel_ml=None, connectivity=26)] == [int(volume.sum())]
    at6 = lesions(volume, voxel_ml=None, connectivity=6)
    assert [x.index for x in at6] == [1, 2]
    assert [x.voxels for x in at6] == [int(volume.sum()) // 2] * 2
    assert [x.bbox for x in at6] == [((2, 5), (2, 5), (2, 5)), ((5, 8), (5, 8), (5, 8))]  # ties: by the box's start
    assert [x.centroid for x in at6] == [(3.0, 3.0, 3.0), (6.0, 6.0, 6.0)]


def test_an_empty_volume_has_no_lesions():
    assert lesions(np.zeros((4, 5, 6), np.uint8), voxel_ml=1.0) == ()
    assert lesions(np.zeros((0, 5, 6), np.uint8), voxel_ml=1.0) == ()
    assert lesions(np.zeros((3, 0, 6), np.uint8), voxel_ml=1.0) == ()


def test_one_voxel_is_one_lesion_with_its_box_centroid_and_millilitres():
    volume = np.zeros((5, 6, 7), np.uint8)
    volume[2, 3, 4] = 3
    spacing = (2.5, 0.7, 0.8)  # mm along (D, H, W), as Volume.spacing
    found = lesions(volume, voxel_ml=float(np.prod(spacing)) / 1000, connectivity=6)
    assert found == (Lesion(3, 1, 1, pytest.approx(0.0014), ((2, 3), (3, 4), (4, 5)), (2.0, 3.0, 4.0)),)


def test_millilitres_are_voxels_times_the_voxel_volume_and_none_without_geometry():
    volume = ball((20, 30, 30), (10, 15, 15), 6).astype(np.uint8)
    voxels = int(volume.sum())
    (found,) = lesions(volume, voxel_ml=3.0 * 0.5 * 0.5 / 1000)
    assert found.voxels == voxels and found.ml == pytest.approx(voxels * 0.75 / 1000)
    assert lesions(volume, voxel_ml=None)[0].ml is None


def test_each_class_its_own_components_largest_first_and_the_classes_asked_for():
    volume = np.zeros((6, 10, 10), np.uint8)
    volume[0:2, 0:2, 0:2] = 1  # 8 voxels
    volume[3:6, 5:8, 5:8] = 1  # 27
    volume[2, 2:4, 2:4] = 2  # touches the first class-1 block at a corner, but is another class
    found = lesions(volume, voxel_ml=None)
    assert [(x.label, x.index, x.voxels) for x in found] == [(1, 1, 27), (1, 2, 8), (2, 1, 4)]
    assert [x.label for x in lesions(volume, voxel_ml=None, classes=[2])] == [2]
    assert lesions(volume, voxel_ml=None, classes=[7]) == ()
    background = lesions(volume, voxel_ml=None, classes=[0])  # asked for by name: the background is a class too
    assert [x.voxels for x in background] == [600 - 27 - 8 - 4]


def test_a_lesion_spanning_non_adjacent_slices_is_two():
    volume = np.zeros((5, 4, 4), np.uint8)
    volume[1, 1, 1] = volume[3, 1, 1] = 1  # slice 2 between them is empty
    assert [x.bbox[0] for x in lesions(volume, voxel_ml=None)] == [(1, 2), (3, 4)]


def test_arms_joined_only_on_the_last_slice_are_one_component():
    """Pieces that meet only far from where they start (a union-find that stopped early would split them): two
    arms down 40 slices and a comb of teeth each joined at the bottom slice, and a staircase moving one column a
    slice (touching at 26, not at 6)."""
    volume = np.zeros((40, 5, 21), np.uint8)
    volume[:, 2, 0:21:2] = 1  # 11 teeth, apart in every slice
    volume[39, 2, :] = 1  # joined on the last
    stairs = np.zeros((40, 3, 3), np.uint8)
    for k in range(40):
        stairs[k, 1, k % 3 if (k // 3) % 2 == 0 else 2 - k % 3] = 1
    for connectivity in (6, 26):
        assert [x.voxels for x in lesions(volume, voxel_ml=None, connectivity=connectivity)] == [11 * 40 + 10]
        same(lesions(stairs, voxel_ml=None, connectivity=connectivity), reference(stairs, connectivity, None))
    assert len(lesions(stairs, voxel_ml=None, connectivity=26)) == 1


def test_the_connectivity_is_stated():
    assert connectivity_text(26) == "26-connected (faces, edges and corners touch)"
    assert connectivity_text(6) == "6-connected (faces touch)"


@pytest.mark.parametrize(("labels", "connectivity", "message"), [
    (np.zeros((2, 2, 2), np.uint8), 18, "connectivity must be 6 or 26, got 18"),
    (np.zeros((2, 2), np.uint8), 26, "a label volume is [D, H, W], got 2 dimensions"),
    (np.zeros((2, 2, 2), np.int32), 26, "a label volume is uint8, got int32"),
])
def test_refused_arguments(labels, connectivity, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        lesions(labels, voxel_ml=None, connectivity=connectivity)


def test_a_boolean_mask_is_class_one():
    assert [x.label for x in lesions(np.ones((2, 2, 2), bool), voxel_ml=None)] == [1]


@settings(max_examples=150, deadline=None)
@given(volume=arrays(np.uint8, st.tuples(st.integers(1, 7), st.integers(1, 9), st.integers(1, 9)),
                     elements=st.sampled_from([0, 0, 1, 2])),
       connectivity=st.sampled_from([6, 26]))
def test_equal_to_scipy_on_random_volumes(volume, connectivity):
    same(lesions(volume, voxel_ml=0.125, connectivity=connectivity), reference(volume, connectivity, 0.125))


@pytest.mark.parametrize("connectivity", [6, 26])
@pytest.mark.parametrize("density", [0.05, 0.3, 0.6])
def test_equal_to_scipy_on_larger_seeded_volumes(connectivity, density):
    """Noise at several densities (long chains of pieces across slices at 0.3 and 0.6) and balls."""
    rng = np.random.default_rng(int(density * 100) + connectivity)
    volume = (rng.random((30, 48, 40)) < density).astype(np.uint8) * rng.integers(1, 3, (30, 48, 40), np.uint8)
    for _ in range(6):
        centre = tuple(int(rng.integers(0, n)) for n in volume.shape)
        volume[ball(volume.shape, centre, float(rng.uniform(2, 8)))] = 3
    same(lesions(volume, voxel_ml=0.002, connectivity=connectivity), reference(volume, connectivity, 0.002))
