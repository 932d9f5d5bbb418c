"""A MONAI bundle's own geometry and blending in SegLens's 3D path: `input.grid: corner` resamples as MONAI's
Orientation + Spacing (bilinear, padding border) do and maps the model's grid back as their inverse (Invertd) does;
`output.activate: after_blend` blends the raw outputs, as MONAI's sliding_window_inference does, and activates the
blend. Each compared with MONAI itself on the same arrays (MONAI and torch are test-only: .ci/run installs them).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from test_volume3d_resample import LPS_DICOM
from volume3d_models import conv3d, require, runner, session, smooth_volume, volume_spec

from app.inference.model.spec import ModelSpec, Tile3D
from app.inference.volume3d.predict import model_input, native_outputs, predict_volume
from app.inference.volume3d.resample import spacing_shape

INSTALL = "pip install torch==2.13.0 monai==1.6.1 (as .ci/run does)"
TARGET = (1.1, 1.3, 2.0)  # mm along R, A, S: the model's pixdim


@pytest.fixture(scope="module")
def monai():
    require("torch", INSTALL)
    return require("monai.transforms", INSTALL)


def corner(spec: ModelSpec, *, activate: str = "each_patch") -> ModelSpec:
    assert spec.volume is not None
    return replace(spec, volume=replace(spec.volume, grid="corner", activate=activate))


def monai_spaced(monai, image: np.ndarray, affine: np.ndarray):
    """MONAI's Orientation(RAS) + Spacing(TARGET) of a native [k, j, i] array: the MetaTensor [1, x, y, z] and the
    transform that made it (to invert)."""
    import torch
    from monai.data import MetaTensor

    voxels = MetaTensor(torch.from_numpy(np.ascontiguousarray(image.transpose(2, 1, 0))[None]),
                        affine=torch.from_numpy(affine))
    transform = monai.Compose([monai.Orientation(axcodes="RAS"),
                               monai.Spacing(pixdim=TARGET, mode="bilinear", padding_mode="border")])
    return transform(voxels), transform


@pytest.mark.parametrize(("shape", "spacing", "target"), [
    ((5, 10, 10), (2.5, 1.0, 1.0), (1.0, 1.0, 1.0)),  # 11 (centre: 12)
    ((4, 9, 7), (1.5, 0.5, 1.0), (1.0, 1.0, 1.0)),  # 5.5 + ... a tie, to even: 6
    ((50, 44, 20), (1.1, 1.3, 2.6), (1.5, 1.5, 2.0)),
    ((3, 8, 8), (1.0, 1.0, 1.0004), (2.0, 1.0, 1.0))])  # within 1e-3 mm: the volume's own spacing kept
def test_corner_shape_is_monais(monai, shape, spacing, target):
    from monai.data.utils import compute_shape_offset

    kept = tuple(s if abs(s - t) <= 1e-3 else t for s, t in zip(spacing, target, strict=True))
    expected, _ = compute_shape_offset(shape, np.diag([*spacing, 1.0]), np.diag([*kept, 1.0]))
    assert spacing_shape(shape, spacing, target, grid="corner") == tuple(expected.tolist())
    assert spacing_shape((5, 10, 10), (2.5, 1.0, 1.0), (1.0, 1.0, 1.0)) == (12, 10, 10)  # the centre grid's rule


@pytest.mark.parametrize("spacing", [(2.5, 0.8, 0.7), (0.6, 1.7, 1.3)])  # down- and up-sampling
def test_corner_grid_equals_monai_spacing_and_its_inverse(monai, tmp_path, spacing):
    """An LPS-like series (two axes reversed) into a RAS model at another spacing: the model's input equals MONAI's
    Orientation + Spacing output, and a field on the model's grid mapped back equals MONAI's inverse of them."""
    import torch
    from monai.data import MetaTensor

    image = smooth_volume((9, 26, 30), seed=5)
    affine = LPS_DICOM.copy()
    affine[:3, :3] = affine[:3, :3] / np.abs(affine[:3, :3]).sum(0) * spacing[::-1]  # column i, j, k: (i, j, k) mm
    spec = volume_spec(conv3d(tmp_path / "id.onnx", np.ones((1, 1, 1, 1, 1))), patch=(8, 8, 8), spacing=TARGET,
                       axes="RAS")
    geometry = {"spacing": spacing, "affine": affine}
    ours = model_input(image, **geometry, spec=corner(spec))
    spaced, transform = monai_spaced(monai, image, affine)
    assert ours.shape == tuple(spaced.shape)
    np.testing.assert_allclose(ours, spaced.numpy(), atol=1e-5, rtol=0)
    centred = model_input(image, **geometry, spec=spec)
    assert centred.shape != ours.shape or np.abs(centred - ours).max() > 1e-2  # the centre grid is another one

    field = np.stack([smooth_volume(ours.shape[1:], seed=s) for s in (1, 2)])
    back = transform.inverse(MetaTensor(torch.from_numpy(field), affine=spaced.affine, meta=spaced.meta,
                                        applied_operations=spaced.applied_operations)).numpy()
    probabilities, _ = native_outputs(field, native_shape=image.shape, **geometry, spec=corner(spec))
    expected = back.transpose(0, 3, 2, 1)  # MONAI's [C, i, j, k] → SegLens's [C, k, j, i]
    np.testing.assert_allclose(probabilities.astype(np.float32), expected, atol=1e-3, rtol=0)  # kept as float16


def test_after_blend_equals_monai_blend_of_raw_outputs_then_softmax(monai, tmp_path):
    """A 3-class model whose raw outputs depend on the patch (a 3×3×3 filter sees zero padding at each patch's
    border): SegLens's after_blend equals MONAI's sliding_window_inference of the raw outputs, softmax after."""
    import torch
    from monai.inferers import sliding_window_inference

    rng = np.random.default_rng(3)
    path = conv3d(tmp_path / "raw.onnx", rng.normal(0, 2, (3, 1, 3, 3, 3)), bias=np.zeros(3, np.float32))
    sess = session(path)
    tile = Tile3D(overlap=0.5, batch=2)
    spec = volume_spec(path, patch=(8, 12, 12), classes=3, activation="softmax", tile=tile)
    blended = replace(spec, volume=replace(spec.volume, activate="after_blend"))
    image = smooth_volume((17, 30, 26), seed=21)
    ours = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=blended, run_raw=runner(sess))
    run = runner(sess)
    with torch.no_grad():
        raw = sliding_window_inference(torch.from_numpy(image[None, None]), roi_size=(8, 12, 12), sw_batch_size=2,
                                       predictor=lambda t: torch.from_numpy(run(t.numpy())), overlap=0.5,
                                       mode="gaussian", sigma_scale=0.125)
    reference = torch.softmax(raw, dim=1)[0].numpy()
    np.testing.assert_allclose(ours.probabilities.astype(np.float32), reference, atol=1e-3, rtol=0)
    np.testing.assert_array_equal(ours.labels, reference.argmax(axis=0))
    per_patch = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=spec, run_raw=run)
    assert np.abs(per_patch.probabilities.astype(np.float32) - reference).max() > 1e-2  # the default differs


def test_after_resample_activates_the_raw_blend_once_mapped_back(tmp_path):
    """Invertd before Activations: the blended raw outputs are resampled back first, then activated — not the
    same as activating on the model's grid and resampling the probabilities."""
    from app.inference.volume3d.activate import activate
    from app.inference.volume3d.window import sliding_window

    rng = np.random.default_rng(4)
    path = conv3d(tmp_path / "raw.onnx", rng.normal(0, 2, (2, 1, 3, 3, 3)), bias=np.zeros(2, np.float32))
    run = runner(session(path))
    spec = corner(volume_spec(path, patch=(8, 8, 8), classes=2, activation="softmax", spacing=(1.0, 1.5, 1.5)))
    image = smooth_volume((12, 20, 18), seed=8)
    geometry = {"spacing": (2.0, 1.0, 1.0), "affine": None}
    late = predict_volume(image, **geometry, spec=corner(spec, activate="after_resample"), run_raw=run)
    assert spec.volume is not None
    raw = sliding_window(model_input(image, **geometry, spec=spec), run, patch=(8, 8, 8), tile=spec.volume.tile)
    raw_back, _ = native_outputs(raw, native_shape=image.shape, **geometry, spec=spec)
    expected = activate(raw_back.astype(np.float32)[None], "softmax")[0]
    np.testing.assert_allclose(late.probabilities.astype(np.float32), expected, atol=5e-3, rtol=0)
    early = predict_volume(image, **geometry, spec=corner(spec, activate="after_blend"), run_raw=run)
    assert np.abs(early.probabilities.astype(np.float32) - expected).max() > 1e-2
