"""PyTorch -> ONNX export path of the demo models (models/training), on tiny models: train a few steps, export
with the dynamo exporter (opset 17, one self-contained file), check ONNX Runtime parity. Skipped without torch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from models.training import common, export, nets, synth, train  # noqa: E402

pytestmark = pytest.mark.torch
CLASSES = ["background", "scratch", "pit", "stain"]


@pytest.fixture(autouse=True)
def _torch_setup():
    threads = torch.get_num_threads()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    torch.set_flush_denormal(True)
    yield
    # flush-to-zero is process-wide CPU state: left on, it broke hypothesis' float strategies in tests collected later
    torch.set_flush_denormal(False)
    torch.set_num_threads(threads)


def _surface_batch(n=4, h=64, w=96):
    xs, ys = [], []
    for i in range(n):
        img, lab = synth.surface_image(synth.rng_for(123, i), h, w, px=0.15)
        xs.append(common.normalize(img, common.SIDECARS["surface_defects"]["input"]))
        ys.append(lab)
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys).astype(np.int64))


@pytest.fixture(scope="module")
def tiny_unet_onnx(tmp_path_factory):
    """A tiny 3-level UNet (sizes must be multiples of 4), trained a few steps and exported with dynamic H/W."""
    torch.manual_seed(0)
    model = nets.UNet(3, 4, channels=(4, 8, 16))
    x, y = _surface_batch()
    loss = train.fit(model, lambda step: (x, y), train.seg_loss_multiclass, steps=5, lr=1e-2, log_every=0)
    assert np.isfinite(loss)
    path = export.export_onnx(model, tmp_path_factory.mktemp("onnx") / "tiny.onnx", in_ch=3, example_hw=(32, 48),
                              dynamic_hw=True, classes=CLASSES, output_name="logits", title="tiny")
    return model, path


def test_export_is_one_self_contained_opset17_file(tiny_unet_onnx):
    _, path = tiny_unet_onnx
    assert not path.with_name(path.name + ".data").exists()
    m = onnx.load(str(path))
    assert {o.domain: o.version for o in m.opset_import}[""] == 17
    assert all(init.data_location != onnx.TensorProto.EXTERNAL for init in m.graph.initializer)
    meta = {p.key: p.value for p in m.metadata_props}
    assert json.loads(meta["classes"]) == CLASSES
    dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 3, "height", "width"]


def test_parity_on_several_valid_sizes(tiny_unet_onnx):
    model, path = tiny_unet_onnx
    rng = np.random.default_rng(0)
    x, _ = _surface_batch(2)
    inputs = [x.numpy(), rng.standard_normal((1, 3, 32, 32)).astype(np.float32),
              rng.standard_normal((3, 3, 128, 36)).astype(np.float32)]
    assert export.check_parity(model, path, inputs, export.FP32_TOL) <= 1e-4


def test_parity_failure_is_loud(tiny_unet_onnx):
    model, path = tiny_unet_onnx
    broken = nets.UNet(3, 4, channels=(4, 8, 16))
    broken.load_state_dict(model.state_dict())
    with torch.no_grad():
        broken.head.bias += 0.01  # PyTorch now differs from the exported graph
    with pytest.raises(export.ParityError, match="PARITY FAILED"):
        export.check_parity(broken, path, [np.zeros((1, 3, 32, 32), np.float32)], export.FP32_TOL)


def test_binary_float16_export(tmp_path):
    """Fixed-size grayscale binary model ending in Sigmoid, exported with float16 inputs and outputs."""
    model = nets.UNet(1, 1, channels=(4, 8), sigmoid=True)
    x = torch.randn(2, 1, 32, 32)
    y = (x > 0.5).float()
    model.sigmoid = False
    train.fit(model, lambda step: (x, y), train.seg_loss_binary, steps=5, lr=1e-2, log_every=0)
    model.sigmoid = True
    half = nets.UNet(1, 1, channels=(4, 8), sigmoid=True)
    half.load_state_dict(model.state_dict())
    path = export.export_onnx(half.eval().half(), tmp_path / "tiny_fp16.onnx", in_ch=1, example_hw=(32, 32),
                              dynamic_hw=False, classes=["background", "nucleus"], output_name="probability",
                              title="tiny fp16", half=True)
    m = onnx.load(str(path))
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert m.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    assert m.graph.node[-1].op_type == "Sigmoid"
    assert export.check_parity(model, path, [x.numpy()], export.FP16_TOL, half=True, binary=True) <= 2e-2


def test_anomaly_autoencoder_export_has_both_normalised_outputs(tmp_path):
    """The anomaly model's graph computes anomalib's two outputs itself: anomaly_map [N,1,H,W] in 0..1 and
    pred_score [N,1] = the map's maximum, with dynamic H/W (multiples of 16), and matches PyTorch."""
    model = nets.AnomalyAE(widths=(4, 8, 8, 8), latent=2, smooth=5)
    x = torch.rand(2, 3, 64, 96)
    recon = train._Recon(model)
    train.fit(recon, lambda step: (model.to_log(x), model.to_log(x)), torch.nn.functional.mse_loss, steps=3,
              lr=1e-2, log_every=0)
    model.eval().scale.fill_(0.05)
    path = export.export_onnx(model, tmp_path / "tiny_anomaly.onnx", in_ch=3, example_hw=(64, 96), dynamic_hw=True,
                              classes=["ok", "anomaly"], output_name=["anomaly_map", "pred_score"], title="tiny")
    m = onnx.load(str(path))
    assert [o.name for o in m.graph.output] == ["anomaly_map", "pred_score"]
    rng = np.random.default_rng(0)
    inputs = [x.numpy(), rng.uniform(0, 1, (1, 3, 32, 48)).astype(np.float32)]
    assert export.check_parity(model, path, inputs, export.FP32_TOL) <= 1e-4
    sess = export.ort_session(path)
    amap, score = sess.run(None, {"input": inputs[1]})
    assert amap.shape == (1, 1, 32, 48) and score.shape == (1, 1)
    assert amap.min() >= 0 and amap.max() < 1 and score[0, 0] == pytest.approx(amap.max())
