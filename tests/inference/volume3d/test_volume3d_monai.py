"""Parity with the field's reference: on the same ONNX session and volume, SegLens's blended probabilities equal
MONAI's `sliding_window_inference` (mode gaussian, sigma_scale 0.125, the same overlap) within 1e-4.

MONAI (and torch) are test-only: `.ci/run` installs them; without them these tests skip locally and fail in CI.
"""

from __future__ import annotations

import numpy as np
import pytest
from volume3d_models import box_sigmoid, pointwise, require, runner, session, smooth_volume, volume_spec

from app.inference.model.spec import Tile3D
from app.inference.volume3d.predict import predict_volume
from app.inference.volume3d.window import sliding_window

INSTALL = "pip install torch==2.13.0 monai==1.6.1 (as .ci/run does)"


@pytest.fixture(scope="module")
def monai_sliding():
    require("torch", INSTALL)
    return require("monai.inferers", INSTALL).sliding_window_inference


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    path = box_sigmoid(tmp_path_factory.mktemp("monai") / "box.onnx", classes=2)
    return path, session(path)


def monai_blend(sliding, sess, image: np.ndarray, *, patch, overlap, batch, mode="gaussian",
                padding_mode="constant") -> np.ndarray:
    """MONAI's blend of the same ORT session: the predictor wraps session.run, as a MONAI user would."""
    import torch

    run = runner(sess)

    def predictor(tensor):
        return torch.from_numpy(run(tensor.numpy()))

    with torch.no_grad():
        out = sliding(torch.from_numpy(image[None]), roi_size=patch, sw_batch_size=batch, predictor=predictor,
                      overlap=overlap, mode=mode, sigma_scale=0.125, padding_mode=padding_mode)
    return out[0].numpy()


CASES = [((21, 37, 41), (8, 16, 16), 0.5, 1),
         ((21, 37, 41), (8, 16, 16), 0.25, 3),
         ((30, 30, 30), (12, 10, 14), 0.6, 4),  # odd and even patch sizes, a step that does not divide
         ((5, 40, 9), (8, 16, 16), 0.5, 2)]  # smaller than the patch along D and W: padded, cropped


@pytest.mark.parametrize(("shape", "patch", "overlap", "batch"), CASES)
def test_blend_equals_monai_sliding_window_inference(monai_sliding, box, shape, patch, overlap, batch):
    image = smooth_volume(shape, seed=sum(shape))[None]
    tile = Tile3D(overlap=overlap, blend="gaussian", batch=batch, sigma_scale=0.125)
    ours = sliding_window(image, runner(box[1]), patch=patch, tile=tile)
    reference = monai_blend(monai_sliding, box[1], image, patch=patch, overlap=overlap, batch=batch)
    assert ours.shape == reference.shape == (2, *shape)
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0)
    assert np.abs(ours - reference).max() < 1e-5  # in practice float32 rounding apart


def test_edge_padding_of_a_small_volume_equals_monais_replicate(monai_sliding, box):
    """`input.tile.pad: edge`: a volume below the patch padded by repeating its border (MONAI's "replicate")."""
    image = smooth_volume((5, 40, 9), seed=3)[None]
    tile = Tile3D(overlap=0.5, batch=2, pad="edge")
    ours = sliding_window(image, runner(box[1]), patch=(8, 16, 16), tile=tile)
    reference = monai_blend(monai_sliding, box[1], image, patch=(8, 16, 16), overlap=0.5, batch=2,
                            padding_mode="replicate")
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0)
    zeros = sliding_window(image, runner(box[1]), patch=(8, 16, 16), tile=Tile3D(overlap=0.5, batch=2))
    assert np.abs(zeros - ours).max() > 1e-3  # the box filter sees the padding near the border


def test_constant_blend_equals_monai(monai_sliding, box):
    image = smooth_volume((17, 25, 23), seed=9)[None]
    ours = sliding_window(image, runner(box[1]), patch=(8, 12, 12), tile=Tile3D(overlap=0.5, blend="constant"))
    reference = monai_blend(monai_sliding, box[1], image, patch=(8, 12, 12), overlap=0.5, batch=1, mode="constant")
    np.testing.assert_allclose(ours, reference, atol=1e-4, rtol=0)


def test_predict_volume_probabilities_equal_monai_on_the_model_grid(monai_sliding, tmp_path):
    """The whole pipeline on a volume that needs no resampling or reorientation: its kept probabilities are
    MONAI's blend of the activated outputs (float16 kept: within float16's rounding of values ≤ 1)."""
    path = pointwise(tmp_path / "softmax3.onnx")
    sess = session(path)
    spec = volume_spec(path, patch=(8, 16, 16), classes=3, activation="none", tile=Tile3D(overlap=0.5))
    image = smooth_volume((20, 33, 29), seed=11)
    prediction = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=spec, run_raw=runner(sess))
    reference = monai_blend(monai_sliding, sess, image[None], patch=(8, 16, 16), overlap=0.5, batch=1)
    np.testing.assert_allclose(prediction.probabilities.astype(np.float32), reference, atol=5e-4, rtol=0)
    np.testing.assert_array_equal(prediction.labels, reference.argmax(axis=0))


def test_predict_volume_equals_monai_between_the_same_resampling(monai_sliding, box, tmp_path):
    """With resampling and reorientation (an LPS series into a RAS model at another spacing): MONAI's window over
    SegLens's model input, mapped back by SegLens, gives the kept probabilities and labels of predict_volume."""
    from test_volume3d_resample import LPS_DICOM

    from app.inference.volume3d.predict import model_input, native_outputs

    path, sess = box
    spec = volume_spec(path, patch=(8, 12, 12), classes=2, spacing=(1.0, 1.2, 2.0), axes="RAS",
                       tile=Tile3D(overlap=0.5, batch=2))
    image = smooth_volume((9, 26, 30), seed=13)
    geometry = {"spacing": (2.5, 0.8, 0.8), "affine": LPS_DICOM}
    prediction = predict_volume(image, **geometry, spec=spec, run_raw=runner(sess))
    tensor = model_input(image, **geometry, spec=spec)
    assert tensor.shape == (1, *prediction.model_shape) == (1, 24, 17, 11)
    blended = monai_blend(monai_sliding, sess, tensor, patch=(8, 12, 12), overlap=0.5, batch=2)
    probabilities, labels = native_outputs(blended, native_shape=image.shape, **geometry, spec=spec)
    np.testing.assert_allclose(prediction.probabilities.astype(np.float32), probabilities.astype(np.float32),
                               atol=1e-3, rtol=0)  # both float16
    assert np.mean(prediction.labels == labels) > 0.999
