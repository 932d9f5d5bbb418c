"""Trilinear resampling (app.inference.volume3d.resample) equal to torch's interpolate(mode="trilinear",
align_corners=False), and the orientation views (app.inference.volume3d.orient) that take a native array to a
model's axes and back."""

from __future__ import annotations

import numpy as np
import pytest
from volume3d_models import require

from app.errors import SegLensError
from app.inference.volume3d.orient import between, check_axes_code, native_codes, orientation
from app.inference.volume3d.resample import axis_weights, resample_linear, spacing_shape

SHAPES = [((7, 9, 11), (14, 18, 22)),  # ×2 up
          ((20, 32, 40), (10, 16, 20)),  # ×2 down (OpenCV's INTER_AREA shortcut must agree)
          ((13, 17, 19), (5, 29, 8)),  # mixed, non-integer
          ((6, 50, 50), (17, 23, 61)),
          ((1, 4, 5), (3, 4, 5)),  # one slice: copied
          ((8, 8, 8), (8, 8, 8))]  # unchanged


@pytest.mark.parametrize(("source", "target"), SHAPES)
def test_resample_linear_equals_torch_trilinear(source, target):
    torch = require("torch", "pip install torch==2.13.0 (as .ci/run does)")
    # probabilities' range: OpenCV and torch place a sample in float32 (≈ 1e-7 of a voxel apart), so a jump of
    # 100 between neighbours would differ by ~1e-4; a probability's by ~1e-6
    array = np.random.default_rng(sum(source)).random((2, *source), dtype=np.float32)
    ours = resample_linear(array, target)
    reference = torch.nn.functional.interpolate(torch.from_numpy(array)[None], size=target, mode="trilinear",
                                                align_corners=False)[0].numpy()
    assert ours.shape == (2, *target) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, reference, atol=1e-5, rtol=0)


def test_resample_reproduces_a_linear_ramp_inside():
    ramp = np.arange(12, dtype=np.float32).reshape(1, 12, 1, 1) * np.ones((1, 1, 3, 3), np.float32)
    up = resample_linear(ramp, (24, 3, 3))[0, :, 0, 0]
    # half-pixel centres: output d sits at (d + 0.5) / 2 − 0.5 in the source, clamped at the ends
    expected = np.clip((np.arange(24) + 0.5) / 2 - 0.5, 0, 11)
    np.testing.assert_allclose(up, expected, atol=1e-6)


def test_resample_writes_float16():
    array = np.random.default_rng(0).random((1, 4, 6, 6), dtype=np.float32)
    out = resample_linear(array, (8, 3, 3), dtype=np.float16)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, resample_linear(array, (8, 3, 3)), atol=1e-3)


def test_axis_weights_clamp_at_both_ends():
    low, high, fraction = axis_weights(3, 6)
    assert low.tolist() == [0, 0, 0, 1, 1, 2] and high.tolist() == [1, 1, 1, 2, 2, 2]
    np.testing.assert_allclose(fraction, [0, 0.25, 0.75, 0.25, 0.75, 0])


def test_spacing_shape_rounds_like_nnunet():
    assert spacing_shape((300, 512, 512), (1.0, 0.7, 0.7), (3.0, 1.4, 1.4)) == (100, 256, 256)
    assert spacing_shape((5, 10, 10), (2.5, 1.0, 1.0), (1.0, 1.0, 1.0)) == (12, 10, 10)  # 12.5 rounds to even
    assert spacing_shape((1, 3, 3), (1.0, 1.0, 1.0), (5.0, 5.0, 5.0)) == (1, 1, 1)  # never zero


def _affine(columns: list[list[float]]) -> np.ndarray:
    """4×4 affine whose columns for (i, j, k) are given (RAS+ directions × spacing)."""
    affine = np.eye(4)
    affine[:3, :3] = np.array(columns, float).T
    return affine


RAS_NIFTI = _affine([[1, 0, 0], [0, 1, 0], [0, 0, 2]])  # i → R, j → A, k → S
LPS_DICOM = _affine([[-0.7, 0, 0], [0, -0.7, 0], [0, 0, 2.5]])  # i → L, j → P, k → S (an axial series)
SAGITTAL = _affine([[0, -1, 0], [0, 0, -1], [1, 0, 0]])  # i → P, j → I, k → R


def test_native_codes_name_the_array_axes():
    assert native_codes(RAS_NIFTI) == "SAR"
    assert native_codes(LPS_DICOM) == "SPL"
    assert native_codes(SAGITTAL) == "RIP"


@pytest.mark.parametrize("affine", [RAS_NIFTI, LPS_DICOM, SAGITTAL])
@pytest.mark.parametrize("axes", ["RAS", "LPS", "SPL", "IRA", "native"])
def test_orientation_round_trip_and_direction(affine, axes):
    array = np.random.default_rng(1).random((2, 3, 4, 5), dtype=np.float32)
    orient = orientation(axes, affine)
    model = orient.to_model(array)
    assert np.shares_memory(model, array)  # views, not copies
    np.testing.assert_array_equal(orient.to_native(model), array)
    if axes == "native":
        assert orient.identity
        return
    # tensor axis n must increase toward letter n: compare the voxel world positions along it
    native = native_codes(affine)
    for n, letter in enumerate(axes):
        axis = orient.perm[n]
        assert native[axis] in (letter, {"R": "L", "L": "R", "A": "P", "P": "A", "S": "I", "I": "S"}[letter])
        assert orient.flip[n] == (native[axis] != letter)
    assert model.shape[1:] == orient.model_order(array.shape[1:])
    assert orient.native_order(model.shape[1:]) == array.shape[1:]


def test_between_permutes_and_flips():
    orient = between("SPL", "RAS")  # W → S: native axis 0 unflipped; D → R: native axis 2 (L) flipped
    assert orient.perm == (2, 1, 0) and orient.flip == (True, True, False)


def test_orientation_needs_geometry_and_a_code():
    with pytest.raises(SegLensError, match="no geometry"):
        orientation("RAS", None)
    assert orientation("native", None).identity
    for bad in ("RAR", "XYZ", "RA", "rasx"):
        with pytest.raises(SegLensError, match="input.axes"):
            check_axes_code(bad)
    assert check_axes_code("lps") == "LPS"


def test_float16_through_opencv_has_numpys_bits():
    """app.inference.image.half writes kept probabilities as float16 with OpenCV (numpy's cast is slow below float16's
    normal range); the bits must be numpy's, subnormals, zeros and ones included."""
    from app.inference.image.half import half_planes, to_half

    rng = np.random.default_rng(5)
    values = np.concatenate([rng.random(5000), 10.0 ** rng.uniform(-12, 0, 5000), [0.0, 1.0, 6.1e-5, 5.96e-8, 3e-8]])
    planes = values.astype(np.float32).reshape(1, 1, -1)
    np.testing.assert_array_equal(half_planes(planes).view(np.uint16), planes.astype(np.float16).view(np.uint16))
    assert to_half(planes[0]).dtype == np.float16
