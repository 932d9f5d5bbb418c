"""Export the demo prompt model (prompt_demo) as an ONNX pair in SAM2's layout, its sidecar, and the parity check.

``python -m models.training.export_prompt`` (``train_prompt`` calls it): the checkpoint in models/training/runs/
-> models/prompt_demo_encoder.onnx, models/prompt_demo_decoder.onnx (samexporter's export_sam2.py names,
shapes and dtypes; encoder opset 17, decoder 18; the decoder's ``point_coords``/``point_labels`` take any
number of labels and points),
models/prompt_demo.yaml (the ``prompt:`` section). Parity: ONNX Runtime vs PyTorch, max |diff| <= 1e-3 on the
features and the mask logits, printed as ``ERROR: PARITY FAILED`` with exit code 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import torch
from torch.export import Dim

from . import common
from .prompt_data import DECODER, ENCODER, NAME, SIDECAR
from .prompt_nets import Decoder, Encoder, ExportDecoder, ExportEncoder

DEC_INPUTS = ["image_embed", "high_res_feats_0", "high_res_feats_1", "point_coords", "point_labels", "mask_input",
              "has_mask_input"]

SIDECAR_TEXT = """\
# Sidecar of the prompt_demo pair, written by models/training/export_prompt.py (see models/README.md)
name: Prompt demo (SAM2 layout, synthetic)
description: >-
  Click or box -> mask. A tiny demo encoder/decoder pair trained on SegLens's synthetic surface defects,
  nuclei and CT phantom slices only; SAM2's ONNX layout (samexporter), so a real SAM2 export drops in.
prompt:
  layout: sam2
  encoder: prompt_demo_encoder.onnx
  decoder: prompt_demo_decoder.onnx
  input_size: 1024
  resize: longest  # longest side to 1024, padded bottom/right (it was trained on both paddings)
  mean: [123.675, 116.28, 103.53]  # on 0..255 (ImageNet: SAM's and SAM2's)
  std: [58.395, 57.12, 57.375]
  mask_threshold: 0.0  # on the logits of `masks`
"""


def load() -> tuple[Encoder, Decoder]:
    from .train_prompt import CKPT

    ck = torch.load(CKPT, map_location="cpu")
    enc, dec = Encoder(), Decoder(proto=bool(ck.get("proto", False)), connect=int(ck.get("connect", 0)))
    enc.load_state_dict(ck["encoder"])
    dec.load_state_dict(ck["decoder"])
    return enc.eval(), dec.eval()


def example_prompts(n_labels: int = 2, n_points: int = 3) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(common.PARITY_SEED)
    coords = torch.rand(n_labels, n_points, 2, generator=g) * 1023
    labels = torch.tensor([[1.0, 0.0, -1.0], [2.0, 3.0, 1.0]])[:n_labels, :n_points]
    mask = torch.randn(n_labels, 1, 256, 256, generator=g) * 4
    return coords, labels, mask, torch.tensor([0.0, 1.0])[:n_labels]


def export(enc: Encoder, dec: Decoder) -> None:
    """Write the two ONNX files (dynamo exporter, one self-contained file each) and the sidecar."""
    e, d = ExportEncoder(enc).eval(), ExportDecoder(dec).eval()
    img = torch.randn(1, 3, 1024, 1024)
    torch.onnx.export(e, (img,), str(ENCODER), dynamo=True, opset_version=17, external_data=False,
                      input_names=["image"], output_names=["high_res_feats_0", "high_res_feats_1", "image_embed"])
    with torch.no_grad():
        h0, h1, emb = e(img)
    nl, npt = Dim("num_labels", min=1, max=16), Dim("num_points", min=1, max=64)
    shapes = {"image_embed": None, "high_res_feats_0": None, "high_res_feats_1": None,
              "point_coords": {0: nl, 1: npt}, "point_labels": {0: nl, 1: npt}, "mask_input": {0: nl},
              "has_mask_input": {0: nl}}
    # opset 18: the reductions over the dynamic point axis keep their axes as an input, which the converter
    # down to 17 cannot turn back into an attribute
    torch.onnx.export(d, (emb, h0, h1, *example_prompts()), str(DECODER), dynamo=True, opset_version=18,
                      external_data=False, input_names=DEC_INPUTS, output_names=["masks", "iou_predictions"],
                      dynamic_shapes=shapes)
    SIDECAR.write_text(SIDECAR_TEXT, encoding="utf-8")


def parity(enc: Encoder, dec: Decoder) -> float:
    """Max |ORT - torch| over the features and the decoder outputs for several prompt counts."""
    import onnxruntime as ort

    e, d = ExportEncoder(enc).eval(), ExportDecoder(dec).eval()
    se = ort.InferenceSession(str(ENCODER), providers=["CPUExecutionProvider"])
    sd = ort.InferenceSession(str(DECODER), providers=["CPUExecutionProvider"])
    img = torch.from_numpy(np.random.default_rng(common.PARITY_SEED).standard_normal((1, 3, 1024, 1024))
                           .astype(np.float32))
    worst = 0.0
    with torch.no_grad():
        ref = e(img)
        got = se.run(None, {"image": img.numpy()})
        worst = max(worst, *(float(np.abs(a.numpy() - b).max()) for a, b in zip(ref, got, strict=True)))
        for nl, npt in ((1, 1), (2, 3), (1, 3)):
            prompts = example_prompts(nl, npt)
            ref_d = d(ref[2], ref[0], ref[1], *prompts)
            feed = dict(zip(DEC_INPUTS, [ref[2].numpy(), ref[0].numpy(), ref[1].numpy(),
                                         *(p.numpy() for p in prompts)], strict=True))
            got_d = sd.run(None, feed)
            worst = max(worst, *(float(np.abs(a.numpy() - b).max()) for a, b in zip(ref_d, got_d, strict=True)))
    return worst


def main() -> None:
    enc, dec = load()
    export(enc, dec)
    diff = parity(enc, dec)
    size = (ENCODER.stat().st_size + DECODER.stat().st_size) / 1e6
    common.save_results({NAME: {"parity_max_abs_diff": float(f"{diff:.2e}"), "file_mb": round(size, 2),
                                "encoder_mb": round(ENCODER.stat().st_size / 1e6, 2),
                                "decoder_mb": round(DECODER.stat().st_size / 1e6, 2)}})
    print(f"{ENCODER.name} + {DECODER.name}: {size:.2f} MB, parity max |diff| {diff:.2e}")
    if diff > 1e-3:
        print(f"ERROR: PARITY FAILED ({diff:.2e} > 1e-3)")
        sys.exit(1)


if __name__ == "__main__":
    main()
