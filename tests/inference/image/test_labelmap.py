"""Labels kept at the model's working size (app/inference/image/labelmap.py): the image-sized mask is made only when
used,
and what is made from the kept decision — the mask, a display-sized copy, a full-resolution window, the counts —
agrees with the mask the pipeline always made."""

from __future__ import annotations

import pickle

import cv2
import numpy as np
import pytest

from app.inference.image import pipeline
from app.inference.image.labelmap import LabelMap, estimated_counts, scaled_post
from app.inference.image.postprocess import class_pixel_counts
from app.inference.model.builder import load_spec
from app.inference.model.spec import PostprocessSpec
from app.inference.runtime.session import open_session


def blobs(height: int, width: int, seed: int = 3) -> np.ndarray:
    """A smooth RGB picture with colour blobs of many sizes: rgb_classes turns it into labels with long edges,
    specks (below min_area) and touching classes."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (max(2, height // 9), max(2, width // 9), 3), dtype=np.uint8)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)


def session(models, kind: str, sidecar: str):
    path = models(kind)
    path.with_suffix(".yaml").write_text(sidecar)
    return open_session(load_spec(path), "cpu")


SIDECARS = {  # a fixed 64² model, stretched or letterboxed, with and without cleaning
    "stretch": "input:\n  resize: stretch\n",
    "stretch_clean": "input:\n  resize: stretch\npostprocess:\n  min_area: 40\n  close_kernel: 5\n",
    "letterbox_clean": "input:\n  resize: letterbox\npostprocess:\n  min_area: 25\n",
}


def test_the_postprocess_stage_keeps_the_working_size_and_makes_the_mask_on_use(models):
    """Before: to_result made the 1000×1400 mask (and cleaned it) for a 64×64 model; now it keeps 64² planes."""
    model = session(models, "fixed_rgb_classes", SIDECARS["stretch_clean"])
    result = pipeline.run_image(model, blobs(1000, 1400))
    assert not result.labels.ready  # nothing image-sized was made by the pipeline
    assert result.labels.decision.planes.shape[1:] == (64, 64)
    assert result.labels.nbytes < 64 * 64 * 3 * 4 + 1
    mask = result.mask
    assert mask.shape == (1000, 1400) and mask.dtype == np.uint8 and result.labels.ready
    assert result.mask is mask  # made once
    assert result.labels.decision is None and result.labels.nbytes == mask.nbytes  # the planes let go


@pytest.mark.parametrize("name", SIDECARS)
def test_a_window_at_full_resolution_equals_the_full_mask_there(models, name):
    """The viewer's detail tiles: labels of a window decided and cleaned in the window alone."""
    model = session(models, "fixed_rgb_classes", SIDECARS[name])
    result = pipeline.run_image(model, blobs(700, 900))
    windows = [(0, 512, 0, 512), (512, 700, 512, 900), (100, 300, 650, 900), (333, 345, 10, 890)]
    fresh = [result.labels.region(*w) for w in windows]  # before the full mask exists
    full = result.mask
    for (y0, y1, x0, x1), labels in zip(windows, fresh, strict=True):
        expected = full[y0:y1, x0:x1]
        assert labels.shape == expected.shape
        # the decision is sampled by a warp in the window and by a resize for the whole image: the two agree
        # but for pixels within float rounding of a tie; cleaning (min_area, closing) is exact
        assert (labels != expected).mean() < 0.002, (y0, x0)
        np.testing.assert_array_equal(result.labels.region(y0, y1, x0, x1), expected)  # a window of it now


def test_cleaning_a_window_is_exact_around_components_cut_by_its_edges():
    """Specks below min_area removed, a long component cut by the window kept, closing near the edges right."""
    from app.inference.image.labelmap import Decision
    from app.inference.image.preprocess import Geometry

    rng = np.random.default_rng(5)
    labels = np.zeros((1, 120, 160), np.uint8)
    for _ in range(60):
        y, x, size = int(rng.integers(0, 120)), int(rng.integers(0, 160)), int(rng.choice([1, 2, 3, 9]))
        labels[0, y: y + size, x: x + int(rng.integers(1, 3 * size + 1))] = rng.integers(1, 4)
    labels[0, 50, :] = 2  # a 1-px line across the image: 160 px, cut by every window
    geometry = Geometry((120, 160), (120, 160), (120, 160))
    for post in (PostprocessSpec(min_area=12), PostprocessSpec(min_area=5, close_kernel=3)):
        whole = LabelMap((120, 160), post, Decision("labels", labels, geometry)).full()
        for y0, x0 in ((0, 0), (40, 30), (45, 100), (90, 140)):
            window = LabelMap((120, 160), post, Decision("labels", labels, geometry)).region(y0, y0 + 20, x0, x0 + 25)
            np.testing.assert_array_equal(window, whole[y0: y0 + 20, x0: x0 + 25])


@pytest.mark.parametrize("name", ["stretch", "stretch_clean"])
def test_display_sized_labels_agree_with_the_full_mask_brought_down(models, name):
    """The overview: labels decided at the display size. They differ from the full mask brought down (nearest,
    which samples each 2×2 block's top-left pixel where the display samples its centre) only on label edges —
    and, with cleaning, where a component is near min_area at one size and not the other."""
    model = session(models, "fixed_rgb_classes", SIDECARS[name])
    result = pipeline.run_image(model, blobs(900, 1200))
    display = result.labels.at_size((450, 600))
    brought_down = cv2.resize(result.mask, (600, 450), interpolation=cv2.INTER_NEAREST)
    assert display.shape == (450, 600)
    kernel = np.ones((3, 3), np.uint8)
    edges = cv2.dilate(brought_down, kernel) != cv2.erode(brought_down, kernel)
    off_edges = (display != brought_down) & ~edges
    assert off_edges.mean() < (1e-4 if name == "stretch" else 0.002)  # thin slivers one sampling catches
    assert (display != brought_down).mean() < 0.035
    np.testing.assert_array_equal(result.labels.at_size((450, 600)), brought_down)  # exact once it exists


def test_estimated_counts_are_within_a_tenth_of_a_percent_of_the_exact_ones(models):
    """The legend of a downscaled display: its counts, each pixel standing for the image pixels it covers.
    Tolerance: 0.1 % of the image's pixels per class (measured: ≤ 0.03 % on these label-rich pictures), and they
    add up to the image."""
    model = session(models, "fixed_rgb_classes", SIDECARS["stretch_clean"])
    for seed in range(3):
        result = pipeline.run_image(model, blobs(1200, 1600, seed))
        estimate = estimated_counts(result.labels.at_size((600, 800)), result.image_hw)
        exact = result.class_pixels()
        assert estimate.sum() == 1200 * 1600
        assert np.abs(estimate - exact).max() <= 0.001 * 1200 * 1600, (seed, estimate[:4], exact[:4])


def test_relabelled_labels_stay_lazy_and_exact(models):
    model = session(models, "fixed_rgb_classes", SIDECARS["stretch_clean"])
    result = pipeline.run_image(model, blobs(800, 1000))
    tuned = pipeline.relabel(result, spec=model.spec, min_confidence=0.6)
    assert not tuned.labels.ready and not result.labels.ready
    from app.inference.image.labelmap import relabel_scores

    expected = relabel_scores(result.scores, result.geometry, model.spec, min_confidence=0.6)
    np.testing.assert_array_equal(tuned.mask, expected)
    assert (tuned.mask == 0).sum() >= (result.mask == 0).sum()  # unsure pixels became background


def test_a_model_at_the_image_size_makes_its_mask_at_once(models):
    """No resampling to defer: the planes would hold more than the mask."""
    result = pipeline.run_image(open_session(load_spec(models("rgb_classes")), "cpu"), blobs(60, 80))
    assert result.labels.ready and result.labels.decision is None


def test_a_mask_given_as_an_array_and_pickling():
    mask = np.arange(12, dtype=np.uint8).reshape(3, 4) % 3
    labels = LabelMap.of_array(mask)
    assert labels.ready and labels.full() is mask and labels.region(1, 3, 1, 9).shape == (2, 3)
    np.testing.assert_array_equal(class_pixel_counts(pickle.loads(pickle.dumps(labels)).full()),
                                  class_pixel_counts(mask))


def test_scaled_post_keeps_a_component_s_share_of_the_image():
    post = PostprocessSpec(min_area=60, close_kernel=7)
    # a 7-px closing reaches 3 px: 1.5 → 2 px at half the size, a 5-px kernel (odd: it stays centred)
    assert scaled_post(post, (9000, 12000), (4500, 6000)) == PostprocessSpec(min_area=15, close_kernel=5)
    assert scaled_post(post, (9000, 12000), (900, 1200)) == PostprocessSpec(min_area=1, close_kernel=0)
    assert scaled_post(PostprocessSpec(), (10, 10), (5, 5)) == PostprocessSpec()


def test_a_folder_run_makes_the_image_sized_mask_in_its_postprocess_stage(models):
    """The batch writer writes and counts every pixel: it makes the mask at once (pipeline.with_mask), its time
    added to the postprocess stage (the report's postprocess_ms)."""
    model = session(models, "fixed_rgb_classes", SIDECARS["stretch_clean"])
    result = pipeline.run_image(model, blobs(600, 800))
    assert not result.labels.ready
    made = pipeline.with_mask(result)
    assert made.labels.ready and made.mask is result.mask  # the same labels, made once
    assert set(made.timings) == set(result.timings) and made.timings["inference"] == result.timings["inference"]
    assert pipeline.with_mask(made) is made  # nothing left to make


def test_a_probability_layer_for_a_downscaled_display_is_sampled_at_its_size(models):
    """The viewer's heatmap of a big image: the kept scores brought to the display size directly (before: to the
    image's size — a float32 plane of every pixel — and then down)."""
    from app.inference.decide.tuning import plane

    model = session(models, "fixed_rgb_classes", SIDECARS["stretch"])
    result = pipeline.run_image(model, blobs(900, 1200))
    small = plane(result, model.spec, "probability", hw=(450, 600))
    full = plane(result, model.spec, "probability")
    assert small.shape == (450, 600) and full.shape == (900, 1200)
    brought_down = cv2.resize(full, (600, 450), interpolation=cv2.INTER_AREA)
    assert np.abs(small - brought_down).max() < 0.05 and np.abs(small - brought_down).mean() < 0.005
