"""Real-world export shapes beyond the basic patterns (found in review): each gives the right mask or a
clear refusal."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expected_stripes, stripes

from app.errors import InferenceError, ModelError, SidecarError
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def run(path, image):
    return run_image(open_session(load_spec(path), "cpu"), image)


def test_argmax_with_keepdims_is_a_label_map(models):
    path = models("argmax_keepdims")
    spec = load_spec(path)
    assert spec.output.kind == "labels" and len(spec.classes) == 3
    np.testing.assert_array_equal(run(path, stripes()).mask, expected_stripes())


@pytest.mark.parametrize("brightness, best", [(230, "class 1"), (20, "class 0")])
def test_single_probability_classifier_reports_both_classes(models, brightness, best):
    result = run(models("single_logit_classifier"), np.full((40, 40), brightness, np.uint8))
    assert result.predictions[0].name == best and len(result.predictions) == 2
    assert sum(p.score for p in result.predictions) == pytest.approx(1.0)


@pytest.mark.parametrize("width", [36, 100, 300])
def test_stride8_output_edges_stay_where_they_are(models, width):
    height = 40
    image = np.zeros((height, width, 3), np.uint8)
    edge = width // 2
    image[:, :edge, 0] = 200  # red left half, blue right half
    image[:, edge:, 2] = 200
    mask = run(models("stride8_classes"), image).mask
    assert mask.shape == (height, width)
    found = int(np.argmax(mask[height // 2] == 2))  # first blue column
    assert abs(found - edge) <= 4  # one stride-8 cell blurs the edge, but it must not drift with the width
    assert (mask[:, : edge - 6] == 0).all() and (mask[:, edge + 6:] == 2).all()


def test_fixed_head_with_many_classes_is_nchw(models):
    path = models("fixed_many_classes")
    spec = load_spec(path)
    assert spec.output.channel_axis == 1 and len(spec.classes) == 21
    mask = run(path, stripes(64, 96)).mask
    assert mask.shape == (64, 96)
    assert mask[30, 10] == 5 and mask[30, 48] == 7 and mask[30, 85] == 9


def test_output_shape_that_contradicts_the_file_is_an_inference_error(models):
    """Refused where the session answers (app.guard.answers), before postprocessing: at the warm-up already."""
    expected = r"^shape_liar.onnx: output 'labels' has shape 1×1×512×512; declared \?×\?×\?$"
    with pytest.raises(InferenceError, match=expected):
        run(models("shape_liar"), stripes())


def test_fixed_batch_other_than_one_is_refused(models):
    with pytest.raises(ModelError, match="batch size is fixed at 2"):
        load_spec(models("fixed_batch_two"))


def test_fixed_size_that_the_divisor_does_not_divide_is_refused(models):
    path = models("fixed_size_classes", size=50)
    path.with_suffix(".yaml").write_text("input:\n  size_divisor: 32\n")
    with pytest.raises(SidecarError, match="'input.size_divisor' is 32"):
        load_spec(path)
