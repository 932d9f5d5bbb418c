"""Sliding-window (tiled) inference: the grid, the blend weights, tiled vs untiled, small objects, batching."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from conftest import expected_stripes, stripes

from app.errors import SidecarError
from app.inference.image import pipeline, tiling
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def session(path, sidecar: str | None = None):
    if sidecar is not None:
        path.with_suffix(".yaml").write_text(sidecar)
    return open_session(load_spec(path), "cpu")


def spots(size: int = 2048, count: int = 60, seed: int = 0) -> np.ndarray:
    """Black gray image with `count` bright 3×3 spots, well apart from each other."""
    image = np.zeros((size, size), np.uint8)
    cells = np.random.default_rng(seed).choice((size // 32) ** 2, count, replace=False)
    for cell in cells:
        y, x = divmod(int(cell), size // 32)
        image[y * 32 + 14: y * 32 + 17, x * 32 + 14: x * 32 + 17] = 255
    return image


def components(mask: np.ndarray) -> int:
    return cv2.connectedComponents(mask, connectivity=8)[0] - 1


# --- the grid and the weights -------------------------------------------------------------------------------

def test_tiles_overlap_cover_every_pixel_and_edge_tiles_are_shifted_inside():
    assert tiling.starts(2048, 256, 0.25) == [*range(0, 1792, 192), 1792]
    assert tiling.starts(100, 256, 0.25) == [0]  # shorter than a tile: one tile, padded
    assert tiling.starts(256, 256, 0.5) == [0]
    for length, tile, overlap in ((1000, 256, 0.25), (257, 256, 0.0), (999, 64, 0.9)):
        origins = tiling.starts(length, tile, overlap)
        assert origins[-1] == length - tile  # shifted inside, never past the edge
        covered = np.zeros(length, bool)
        for start in origins:
            covered[start: start + tile] = True
        assert covered.all()


@pytest.mark.parametrize("blend", tiling.BLENDS)
@pytest.mark.parametrize("image_hw", [(300, 517), (64, 64), (20, 150), (257, 65)])
def test_normalised_weights_are_one_everywhere_borders_and_corners_included(blend, image_hw):
    tile = (64, 64)
    accumulator = tiling.Accumulator(image_hw, tile, 2, blend=blend, decide=tiling.argmax_decider)
    for y, x in tiling.grid(image_hw, tile, 0.25):
        h, w = min(tile[0], image_hw[0]), min(tile[1], image_hw[1])
        accumulator.add((y, x), np.ones((2, h, w), np.float32))
    _, kept = accumulator.finish()
    assert kept.shape == (2, *image_hw)
    np.testing.assert_allclose(kept.astype(np.float32), 1.0, atol=1e-3)
    weights = tiling.blend_weights(tile, blend)
    assert weights.min() > 0  # every pixel a tile covers counts, however far out


def test_kept_scores_are_reduced_by_a_whole_factor_on_large_images():
    accumulator = tiling.Accumulator((100, 130), (32, 32), 1, blend="gaussian",
                                     decide=tiling.binary_decider(0.5), kept_limit=1000)
    for y, x in tiling.grid((100, 130), (32, 32), 0.25):
        accumulator.add((y, x), np.full((1, 32, 32), 0.75, np.float32))
    mask, kept = accumulator.finish()
    assert accumulator.factor == 4 and kept.shape == (1, 25, 33)
    np.testing.assert_allclose(kept.astype(np.float32), 0.75, atol=1e-3)
    assert mask.all() and accumulator.highest == pytest.approx(0.75)


# --- through the pipeline ----------------------------------------------------------------------------------

def test_dynamic_model_tiled_gives_the_mask_untiled_gives(models):
    path = models("blurred_binary")
    image = np.zeros((2048, 2048), np.uint8)
    rng = np.random.default_rng(1)
    for y, x, r in zip(*rng.integers(0, 2048, (2, 80)), rng.integers(6, 60, 80), strict=True):
        cv2.circle(image, (int(x), int(y)), int(r), 255, -1)
    plain = session(path)
    untiled = pipeline.run_image(plain, image)
    tiled_model = session(path, "input:\n  resize: tile\n  tile: {overlap: 0.25, blend: gaussian, size: [512, 512],"
                                " max_pixels: 1000000}\n")
    tiled = pipeline.run_image(tiled_model, image)
    intersection = np.logical_and(tiled.mask, untiled.mask).sum()
    union = np.logical_or(tiled.mask, untiled.mask).sum()
    assert intersection / union >= 0.99
    seams = session(path, "input:\n  resize: tile\n  tile: {overlap: 0, blend: constant, size: [512, 512], "
                          "max_pixels: 1000000}\n")
    unblended = (pipeline.run_image(seams, image).mask != untiled.mask).sum()
    assert (tiled.mask != untiled.mask).sum() < unblended  # the blend removes the seams butted tiles leave
    assert tiled.scores.shape == (1, 2048, 2048) and tiled.geometry.image_hw == (2048, 2048)
    small = pipeline.run_image(tiled_model, image[:900, :900])  # under max_pixels: not tiled, as before
    np.testing.assert_array_equal(small.mask, pipeline.run_image(plain, image[:900, :900]).mask)


def test_fixed_model_tiled_finds_the_small_objects_stretch_misses(models):
    path = models("fixed_bright_spots")
    image = spots()
    stretched = pipeline.run_image(session(path, "input:\n  resize: stretch\n"), image)
    tiled = pipeline.run_image(session(path, "input:\n  resize: tile\n"), image)
    assert components(stretched.mask) == 0
    assert components(tiled.mask) == 60
    assert tiled.mask.shape == image.shape and tiled.image_score == pytest.approx(1.0, abs=1e-3)


def test_tile_batches_give_the_masks_and_scores_of_batch_one(models):
    path = models("fixed_bright_spots")
    model = session(path, "input:\n  resize: tile\n  tile: {batch: 4}\n")
    image = spots(1000, 30, seed=3)
    calls = []
    batched = pipeline.run_image(model, image, progress=lambda done, total: calls.append((done, total)))
    single = pipeline.run_image(model, image, batch=1)
    np.testing.assert_array_equal(batched.mask, single.mask)
    np.testing.assert_array_equal(batched.scores, single.scores)
    assert calls[-1] == (25, 25) and len(calls) == 7  # 5 × 5 tiles, 4 per run


def test_multiclass_fixed_model_tiles_small_and_large_images(models):
    model = session(models("fixed_rgb_classes"), "input:\n  resize: tile\n  tile: {blend: linear}\n")
    for hw in ((150, 200), (40, 50), (64, 300)):
        result = pipeline.run_image(model, stripes(*hw))
        np.testing.assert_array_equal(result.mask, expected_stripes(*hw))
        assert result.scores.shape == (3, *hw)
        np.testing.assert_array_equal(pipeline.relabel(result, spec=model.spec).mask, result.mask)
        assert pipeline.probability_at_image_size(result).shape == hw


def test_should_stop_between_tile_batches_ends_the_image(models):
    model = session(models("fixed_bright_spots"), "input:\n  resize: tile\n")
    asked = []
    with pytest.raises(pipeline.Stopped):
        pipeline.run_image(model, spots(1000, 10), should_stop=lambda: asked.append(1) or len(asked) > 3)
    assert len(asked) == 4


# --- the sidecar --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tile, key, words", [
    ("{overlap: 1.0}", "input.tile.overlap", "at most 0.9"),
    ("{overlap: -0.1}", "input.tile.overlap", "at most 0.9"),
    ("{blend: cubic}", "input.tile.blend", "gaussian | linear | constant"),
    ("{stride: 3}", "input.tile.stride", "unknown key"),
    ("{batch: 0}", "input.tile.batch", "whole number"),
    ("{size: null}", "input.tile.size", "[height, width]"),
])
def test_bad_tile_keys_are_refused_naming_key_and_file(models, tile, key, words):
    path = models("fixed_bright_spots")
    path.with_suffix(".yaml").write_text(f"input:\n  resize: tile\n  tile: {tile}\n")
    with pytest.raises(SidecarError) as err:
        load_spec(path)
    assert "fixed_bright_spots.yaml" in str(err.value) and key in str(err.value) and words in str(err.value)


def test_tiling_a_label_map_or_a_dynamic_model_with_a_working_size_is_refused(models):
    labels = models("embedded_argmax")
    labels.with_suffix(".yaml").write_text("input:\n  resize: tile\n")
    with pytest.raises(SidecarError, match="'input.resize' is tile, but the model's output is a labels output"):
        load_spec(labels)
    dynamic = models("blurred_binary")
    dynamic.with_suffix(".yaml").write_text("input:\n  resize: tile\n  size: [512, 512]\n")
    with pytest.raises(SidecarError, match="'input.size' must be null with resize: tile"):
        load_spec(dynamic)


def test_with_tiling_switches_the_sidecar_for_one_run(models):
    path = models("fixed_bright_spots")
    path.with_suffix(".yaml").write_text("input:\n  resize: tile\n  tile: {overlap: 0.5}\n")
    spec = load_spec(path)
    assert tiling.with_tiling(spec, None) is spec
    assert tiling.with_tiling(spec, False).input.resize == "stretch"
    assert tiling.with_tiling(tiling.with_tiling(spec, False), True).input.tile.overlap == 0.5
    with pytest.raises(ValueError, match="cannot be tiled"):
        tiling.with_tiling(load_spec(models("embedded_argmax")), True)


@pytest.mark.parametrize("kind", ["half_resolution_classes", "needs_divisor"])
def test_strided_outputs_and_tiles_padded_to_the_divisor_blend_exactly(models, kind):
    """A stride-2 output is mapped to each tile before blending; a 100×90 tile is padded to 128×96 (divisor 32)
    and the padding cut off again."""
    model = session(models(kind), "input:\n  resize: tile\n  tile: {size: [100, 90], max_pixels: 100, overlap: 0.3}\n")
    result = pipeline.run_image(model, stripes(257, 333))
    np.testing.assert_array_equal(result.mask, expected_stripes(257, 333))
