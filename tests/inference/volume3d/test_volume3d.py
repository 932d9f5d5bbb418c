"""predict_volume (app.inference.volume3d.predict): the native volume to the model's spacing and axes and back, its
normalisation, label models, the binary threshold, TTA, cancellation and the memory estimate."""

from __future__ import annotations

import numpy as np
import pytest
from test_volume3d_resample import LPS_DICOM, RAS_NIFTI, SAGITTAL
from volume3d_models import box_sigmoid, conv3d, labels_argmax, runner, session, shift_w, smooth_volume, volume_spec

from app.errors import SegLensError
from app.inference.image.pipeline import Stopped
from app.inference.model.spec import Normalize3D, Tile3D
from app.inference.volume3d.normalize import intensity, statistics
from app.inference.volume3d.orient import native_codes
from app.inference.volume3d.predict import estimate_bytes, predict_volume
from app.inference.volume3d.resample import resample_linear
from app.inference.volume3d.window import window_grid

OPPOSITE = {"R": "L", "L": "R", "A": "P", "P": "A", "S": "I", "I": "S"}


@pytest.fixture(scope="module")
def identity(tmp_path_factory):
    path = conv3d(tmp_path_factory.mktemp("id") / "identity.onnx", np.ones((1, 1, 1, 1, 1), np.float32))
    return path, session(path)


def recording(sess, seen: list):
    run = runner(sess)

    def record(tensor):
        seen.append(tensor.copy())
        return run(tensor)

    return record


def ramp(shape: tuple[int, int, int]) -> np.ndarray:
    """A linear function of (k, j, i) in [0.1, 0.9]: linear resampling reproduces it away from the ends."""
    k, j, i = np.meshgrid(*[np.arange(n, dtype=np.float64) / n for n in shape], indexing="ij")
    return (0.1 + 0.8 * (0.5 * k + 0.3 * j + 0.2 * i)).astype(np.float32)


def test_anisotropic_spacing_round_trip(identity):
    path, sess = identity
    image = ramp((10, 40, 40))
    seen: list = []
    spec = volume_spec(path, patch=(8, 8, 8), spacing=(1.5, 1.6, 1.6), whole=True)
    prediction = predict_volume(image, spacing=(3.0, 0.8, 0.8), affine=None, spec=spec,
                                run_raw=recording(sess, seen))
    assert prediction.model_shape == (20, 20, 20)
    assert [t.shape for t in seen] == [(1, 1, 20, 20, 20)]  # the model ran on its own grid
    np.testing.assert_allclose(seen[0][0], resample_linear(image[None], (20, 20, 20)), atol=1e-6)
    assert prediction.probabilities.shape == (1, 10, 40, 40) and prediction.probabilities.dtype == np.float16
    assert prediction.labels.shape == (10, 40, 40) and prediction.labels.dtype == np.uint8
    back = prediction.probabilities[0].astype(np.float32)
    np.testing.assert_allclose(back[1:-1, 1:-1, 1:-1], image[1:-1, 1:-1, 1:-1], atol=2e-3)  # float16 rounding
    np.testing.assert_array_equal(prediction.labels, back > 0.5)


def test_spacing_follows_the_axes(identity):
    """An axial LPS series (native SPL) into a model of RAS axes: the spacings are reordered with the axes."""
    path, sess = identity
    spec = volume_spec(path, patch=(8, 8, 8), spacing=(1.0, 1.0, 4.0), axes="RAS", whole=True)
    prediction = predict_volume(ramp((6, 20, 30)), spacing=(4.0, 1.0, 0.5), affine=LPS_DICOM, spec=spec,
                                run_raw=runner(sess))
    assert prediction.model_shape == (15, 20, 6)  # R: 30 × 0.5 / 1, A: 20 × 1 / 1, S: 6 × 4 / 4


def _shifted(x: np.ndarray, axis: int, step: int) -> np.ndarray:
    """out[v] = x[v + step·e_axis], 0 past the end."""
    out = np.zeros_like(x)
    source = [slice(None)] * 3
    target = [slice(None)] * 3
    source[axis], target[axis] = (slice(1, None), slice(None, -1)) if step > 0 else (slice(None, -1), slice(1, None))
    out[tuple(target)] = x[tuple(source)]
    return out


@pytest.mark.parametrize("affine", [RAS_NIFTI, LPS_DICOM, SAGITTAL], ids=["nifti-ras", "dicom-lps", "sagittal"])
@pytest.mark.parametrize("axes", ["RAS", "LPS", "IPR", "native"])
def test_each_orientation_round_trip(tmp_path, affine, axes):
    """The shift model reads the next voxel along its tensor's W axis: on the native grid, the answer is the
    next voxel toward the patient direction `axes` names for W (as stored, for "native")."""
    path = shift_w(tmp_path / "shift.onnx")
    image = smooth_volume((6, 9, 11), seed=7)
    spec = volume_spec(path, patch=(4, 4, 4), axes=axes, whole=True)
    prediction = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=affine, spec=spec, run_raw=runner(session(path)))
    native = native_codes(affine)
    letter = native[2] if axes == "native" else axes[2]
    axis = next(a for a, have in enumerate(native) if have in (letter, OPPOSITE[letter]))
    expected = _shifted(image, axis, 1 if native[axis] == letter else -1)
    np.testing.assert_allclose(prediction.probabilities[0].astype(np.float32), expected, atol=1e-3)


def test_normalisation_is_what_the_model_sees(identity):
    path, sess = identity
    hu = np.linspace(-1500, 2500, 6 * 8 * 8, dtype=np.float32).reshape(6, 8, 8)
    seen: list = []
    spec = volume_spec(path, patch=(6, 8, 8), whole=True,
                       normalize=Normalize3D(kind="ct", clip=(-1000.0, 1000.0), mean=100.0, std=250.0))
    predict_volume(hu, spacing=None, affine=None, spec=spec, run_raw=recording(sess, seen))
    np.testing.assert_allclose(seen[0][0, 0], (np.clip(hu, -1000, 1000) - 100) / 250, rtol=1e-6, atol=1e-5)


def test_zscore_over_nonzero_voxels_keeps_the_background():
    rng = np.random.default_rng(0)
    mr = np.zeros((5, 6, 7), np.float32)
    mr[1:4, 2:5, 1:6] = rng.normal(300, 40, (3, 3, 5))
    inside, every = mr[mr != 0].astype(np.float64), mr.astype(np.float64)
    assert statistics(mr, nonzero=True) == pytest.approx((inside.mean(), inside.std()), rel=1e-9)
    assert statistics(mr, nonzero=False) == pytest.approx((every.mean(), every.std()), rel=1e-9)
    mapping = intensity(Normalize3D(kind="zscore", nonzero=True), mr)
    out = mapping.apply(mr)
    assert np.all(out[mr == 0] == 0)
    np.testing.assert_allclose(out[mr != 0], (inside - inside.mean()) / inside.std(), rtol=1e-5, atol=1e-5)
    constant = intensity(Normalize3D(kind="zscore"), np.full((2, 2, 2), 7.0, np.float32)).apply(np.full((2, 2), 7.0))
    assert np.all(np.isfinite(constant)) and np.all(constant == 0)
    scaled = intensity(Normalize3D(kind="scale", scale=1 / 255, mean=0.5, std=0.25), mr).apply(np.array([255.0]))
    assert scaled.tolist() == [2.0]


def test_label_model_patches_vote(tmp_path):
    path = labels_argmax(tmp_path / "labels.onnx")
    image = ramp((12, 20, 20))
    spec = volume_spec(path, patch=(8, 8, 8), classes=3, kind="labels", tile=Tile3D(overlap=0.5))
    prediction = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=spec,
                                run_raw=runner(session(path)))
    expected = np.digitize(image, [1 / 3, 2 / 3]).astype(np.uint8)
    clear = (np.abs(image - 1 / 3) > 1e-4) & (np.abs(image - 2 / 3) > 1e-4)  # a tie's winner is float rounding's
    assert clear.mean() > 0.95
    np.testing.assert_array_equal(prediction.labels[clear], expected[clear])
    assert prediction.probabilities.shape == (3, 12, 20, 20)
    np.testing.assert_allclose(prediction.probabilities.astype(np.float32).sum(axis=0), 1.0, atol=2e-3)
    assert set(np.unique(prediction.probabilities)) <= {0.0, 1.0}  # every window agrees (the model is pointwise)


def test_binary_model_thresholds_its_probability(tmp_path):
    path = box_sigmoid(tmp_path / "box.onnx")
    image = smooth_volume((14, 18, 18), seed=8)
    spec = volume_spec(path, patch=(8, 12, 12), threshold=0.3)
    prediction = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=spec,
                                run_raw=runner(session(path)))
    probability = prediction.probabilities[0].astype(np.float32)
    assert 0.05 < (probability > 0.3).mean() < 0.95
    decided = prediction.labels == 1
    assert np.all(probability[decided] >= 0.299) and np.all(probability[~decided] <= 0.301)


def test_tta_and_counts_and_timings(tmp_path):
    path = box_sigmoid(tmp_path / "box.onnx", classes=2)
    image = smooth_volume((12, 16, 16), seed=9)
    spec = volume_spec(path, patch=(8, 8, 8), classes=2, tile=Tile3D(batch=4), tta=(0, 2))
    calls: list = []
    prediction = predict_volume(image, spacing=(1.0, 1.0, 1.0), affine=None, spec=spec,
                                run_raw=runner(session(path)), progress=lambda d, t: calls.append((d, t)))
    windows = len(window_grid((12, 16, 16), (8, 8, 8), 0.5))
    assert prediction.patches == 4 * windows and calls[-1] == (4 * windows, 4 * windows)
    assert prediction.runs == 4 * -(-windows // 4)
    assert set(prediction.timings) >= {"preprocess", "inference", "postprocess", "session"}


def test_stop_between_runs(identity):
    path, sess = identity
    spec = volume_spec(path, patch=(4, 4, 4))
    runs: list = []
    with pytest.raises(Stopped):
        predict_volume(ramp((8, 8, 8)), spacing=None, affine=None, spec=spec, run_raw=recording(sess, runs),
                       should_stop=lambda: len(runs) == 3)
    assert len(runs) == 3


def test_a_volume_too_big_is_refused_in_one_line_before_running(identity):
    path, sess = identity
    spec = volume_spec(path, patch=(8, 8, 8), spacing=(0.5, 0.5, 0.5))
    runs: list = []
    with pytest.raises(SegLensError) as caught:
        predict_volume(np.zeros((20, 64, 64), np.float32), spacing=(1.0, 1.0, 1.0), affine=None, spec=spec,
                       run_raw=recording(sess, runs), memory_limit=5 * 1024**2)
    message = str(caught.value)
    assert message.startswith("the 3D model needs about ")
    assert "(40×128×128 voxels on the model's grid, 1 class)" in message
    assert message.endswith("more than the 5 MB available") and "\n" not in message
    assert runs == []


def test_a_large_ct_fits_in_a_few_gigabytes():
    """512 × 512 × 300 with 3 classes on its own grid, 128³ patches, batch 2: float32 accumulators, float16 kept."""
    needed = estimate_bytes((300, 512, 512), (300, 512, 512), 3, patch=(128, 128, 128), batch=2)
    assert 1.0 * 1024**3 < needed < 2.5 * 1024**3


def test_a_sidecar_described_model_through_its_session(tmp_path):
    """The real chain: load_spec reads the 3D keys of the sidecar, open_session runs 5-D patches, predict_volume
    orients an LPS series to the model's RAS grid, windows it in batches with TTA, and back. The model is pointwise
    (sigmoid(8x − 4)), so the answer on the native grid is known voxel by voxel."""
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session

    path = conv3d(tmp_path / "point.onnx", np.full((1, 1, 1, 1, 1), 8.0), bias=np.array([-4.0]), activation="sigmoid")
    (tmp_path / "point.yaml").write_text(
        "input:\n  patch: [8, 12, 12]\n  spacing: [0.7, 0.7, 2.5]\n  axes: RAS\n"
        "  tile: {overlap: 0.5, blend: gaussian, batch: 2}\n  tta: {mirror: [0]}\n")
    spec = load_spec(path)
    assert spec.is_3d and spec.volume is not None and spec.volume.tta == (0,)
    model = open_session(spec, "cpu")
    image = smooth_volume((9, 20, 22), seed=12)
    prediction = predict_volume(image, spacing=(2.5, 0.7, 0.7), affine=LPS_DICOM, spec=spec, run_raw=model.run)
    assert prediction.model_shape == (22, 20, 9)  # R from the columns, A from the rows, S from the slices
    assert prediction.runs == -(-prediction.patches // 2 // 2) * 2  # batches of 2, two TTA passes each
    expected = 1 / (1 + np.exp(-(8 * image - 4)))
    np.testing.assert_allclose(prediction.probabilities[0].astype(np.float32), expected, atol=1e-3)
    np.testing.assert_array_equal(prediction.labels, expected > 0.5)


def test_whole_volume_run_pads_to_the_divisor_and_crops(identity):
    path, sess = identity
    image = ramp((10, 13, 7))
    seen: list = []
    spec = volume_spec(path, patch=(8, 8, 8), whole=True, size_divisor=4, tta=(1,))
    prediction = predict_volume(image, spacing=None, affine=None, spec=spec, run_raw=recording(sess, seen))
    assert [t.shape for t in seen] == [(1, 1, 12, 16, 8)] * 2  # one run and its H-mirrored pass
    sent = seen[0][0, 0]  # the last voxels repeated after the volume (zeros would be a mean-HU band)
    assert np.array_equal(sent[10:], np.repeat(sent[9:10], 2, 0))
    assert np.array_equal(sent[:, 13:], np.repeat(sent[:, 12:13], 3, 1))
    assert prediction.patches == 2 and prediction.model_shape == (10, 13, 7)
    np.testing.assert_allclose(prediction.probabilities[0].astype(np.float32), image, atol=1e-3)


def test_two_channel_input_is_normalised_per_channel(tmp_path):
    """out = x₀ − x₁ after a zscore of each channel over its own voxels (two modalities, as nnU-Net's)."""
    path = conv3d(tmp_path / "diff.onnx", np.array([1.0, -1.0], np.float32).reshape(1, 2, 1, 1, 1), channels=2)
    rng = np.random.default_rng(4)
    image = np.stack([rng.normal(100, 10, (6, 8, 8)), rng.normal(-5, 2, (6, 8, 8))]).astype(np.float32)
    seen: list = []
    spec = volume_spec(path, patch=(6, 8, 8), channels=2, normalize=Normalize3D(kind="zscore"))
    predict_volume(image, spacing=None, affine=None, spec=spec, run_raw=recording(session(path), seen))
    for c in range(2):
        channel = image[c].astype(np.float64)
        np.testing.assert_allclose(seen[0][0, c], (channel - channel.mean()) / channel.std(), atol=1e-4)
    with pytest.raises(SegLensError, match=r"wants 2 channels .* has 1 channel of \[6, 8, 8\]$"):
        predict_volume(image[0], spacing=None, affine=None, spec=spec, run_raw=runner(session(path)))


def test_activations():
    from app.inference.volume3d.activate import activate

    rng = np.random.default_rng(6)
    raw = (rng.standard_normal((2, 3, 4, 5, 6)) * 30).astype(np.float32)
    raw[0, 0, 0, 0, :2] = (-200.0, 200.0)  # exp under- and overflow territory
    shifted = np.exp(raw.astype(np.float64) - raw.max(axis=1, keepdims=True))
    np.testing.assert_allclose(activate(raw, "softmax"), shifted / shifted.sum(axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(activate(raw[:, :1], "sigmoid"), 1 / (1 + np.exp(-raw[:, :1].astype(np.float64))),
                               atol=1e-6)
    given = raw.copy()
    np.testing.assert_array_equal(activate(given[:, :, :2], "none"), np.clip(raw[:, :, :2], 0, 1))  # a view: copied
    np.testing.assert_array_equal(given, raw)


def test_a_non_finite_patch_output_is_an_error(identity):
    from app.errors import InferenceError

    path, sess = identity
    spec = volume_spec(path, patch=(4, 4, 4), activation="sigmoid")
    run = runner(sess)

    def broken(tensor):
        out = run(tensor)
        out[0, 0, 1, 2, 3] = np.nan
        return out

    with pytest.raises(InferenceError, match=r"^identity.onnx: non-finite model output 'scores': 1 NaN of 64 values"):
        predict_volume(ramp((4, 4, 4)), spacing=None, affine=None, spec=spec, run_raw=broken)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_voxels_are_the_volumes_problem_not_the_models(identity, bad):
    """A NaN voxel (outside a mask in processed MR, say) went through the normalisation into every patch, and the
    run ended 'non-finite model output …: the model is broken'."""
    path, sess = identity
    image = ramp((6, 8, 8))
    image[3, 2, 5] = bad
    runs: list = []
    spec = volume_spec(path, patch=(4, 4, 4), normalize=Normalize3D(kind="zscore"))
    with pytest.raises(SegLensError) as caught:
        predict_volume(image, spacing=None, affine=None, spec=spec, run_raw=recording(sess, runs))
    assert str(caught.value) == ("the volume has 1 voxel that is not a number (NaN or infinite), the first in slice "
                                 "4 of 6: a 3D model cannot run on it")
    assert runs == []


def test_a_whole_volume_run_of_the_demo_model_labels_what_its_sliding_window_does():
    """--no-tile pads the model grid to the size divisor by repeating its last voxels: zeros there are the
    training set's mean HU after a CT normalisation (-655 HU for the demo model), a band the model took for lung
    (was: 504 mL of lung against the sliding window's 290, every border voxel of air)."""
    from dataclasses import replace
    from pathlib import Path

    from app.inference.model.builder import load_spec
    from app.io.nifti import nifti_volume, read_nifti_slice

    repo = Path(__file__).resolve().parents[3]
    spec = load_spec(repo / "models" / "ct3d_demo.onnx")
    volume = nifti_volume(repo / "resources" / "samples" / "ct3d" / "ct3d_sample.nii.gz")
    image = np.stack([read_nifti_slice(volume, k, max_pixels=10_000_000).raw for k in range(volume.depth)])
    run = runner(session(spec.path))
    assert spec.volume is not None
    whole = replace(spec, volume=replace(spec.volume, whole=True))
    labels = [predict_volume(image.astype(np.float32), spacing=volume.spacing, affine=volume.affine, spec=s,
                             run_raw=run).labels for s in (spec, whole)]
    counts = [np.bincount(found.ravel(), minlength=4) for found in labels]
    np.testing.assert_allclose(counts[1], counts[0], rtol=0.01)
    assert (labels[0] != labels[1]).mean() < 0.001
