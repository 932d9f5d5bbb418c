"""SAM and SAM2 encoder/decoder ONNX pairs built with onnx.helper, with exactly the public exports' input/output
names, shapes and dtypes, and hand-set maths so the coordinate transform can be checked:

- the encoders make embeddings of the right shapes (zeros, through the image so the input is used);
- the decoders' best mask (index 1 of 3 for SAM2, by iou_predictions) is a disc of radius R frame pixels around
  the first prompt point: SAM2's on the 256×256 low-res grid over the 1024 frame (cell j's centre at frame
  4j + 1.5), SAM's at `orig_im_size` as SamOnnxModel's postprocessing gives it (pixel centres mapped to the frame
  with ResizeLongestSide's scale, the point shifted +0.5 as SAM's prompt encoder does).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
OPSET = 17
SAM2_EMBEDS = {"high_res_feats_0": [1, 32, 256, 256], "high_res_feats_1": [1, 64, 128, 128],
               "image_embed": [1, 256, 64, 64]}
SAM_EMBEDS = {"image_embeddings": [1, 256, 64, 64]}


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _save(path: Path, nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
          outputs: list[onnx.ValueInfoProto]) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="seglens-test")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def encoder(path: Path, embeds: dict[str, list[int]], *, frame: int = 1024, dtype: int = F,
            image_shape: list[int | str] | None = None) -> Path:
    """image [1,3,frame,frame] float32 → each embedding, zeros of its shape (0 × the image's mean)."""
    nodes = [helper.make_node("ReduceMean", ["image"], ["mean"], keepdims=1),
             _const("zero", np.array(0.0, np.float32)), helper.make_node("Mul", ["mean", "zero"], ["nothing"])]
    outputs = []
    for name, shape in embeds.items():
        nodes += [_const(f"{name}_shape", np.array(shape, np.int64)),
                  helper.make_node("Expand", ["nothing", f"{name}_shape"], [f"{name}_f"]),
                  helper.make_node("Cast", [f"{name}_f"], [name], to=dtype)]
        outputs.append(helper.make_tensor_value_info(name, dtype, shape))
    image = helper.make_tensor_value_info("image", F, image_shape or [1, 3, frame, frame])
    return _save(path, nodes, [image], outputs)


def _first_point(nodes: list[onnx.NodeProto]) -> None:
    """px, py [1,1,1,1]: the first prompt point's frame coordinates."""
    for axis_value, name in ((0, "px"), (1, "py")):
        nodes += [_const(f"{name}_s", np.array([0, axis_value], np.int64)),
                  _const(f"{name}_e", np.array([1, axis_value + 1], np.int64)),
                  _const(f"{name}_a", np.array([1, 2], np.int64)),
                  helper.make_node("Slice", ["point_coords", f"{name}_s", f"{name}_e", f"{name}_a"], [f"{name}_3"]),
                  _const(f"{name}_r", np.array([1, 1, 1, 1], np.int64)),
                  helper.make_node("Reshape", [f"{name}_3", f"{name}_r"], [name])]


def _disc(nodes: list[onnx.NodeProto], fx: str, fy: str, cx: str, cy: str, radius: float, out: str) -> None:
    """out = R² − ((fx − cx)² + (fy − cy)²): positive inside the disc."""
    nodes += [helper.make_node("Sub", [fx, cx], [f"{out}_dx"]), helper.make_node("Sub", [fy, cy], [f"{out}_dy"]),
              helper.make_node("Mul", [f"{out}_dx", f"{out}_dx"], [f"{out}_dx2"]),
              helper.make_node("Mul", [f"{out}_dy", f"{out}_dy"], [f"{out}_dy2"]),
              helper.make_node("Add", [f"{out}_dx2", f"{out}_dy2"], [f"{out}_d2"]),
              _const(f"{out}_r2", np.array(radius * radius, np.float32)),
              helper.make_node("Sub", [f"{out}_r2", f"{out}_d2"], [out])]


def _grid_disc(nodes: list[onnx.NodeProto], radius: float, out: str) -> None:
    """A disc on the 256 low-res grid over the 1024 frame (cell j's centre at 4j + 1.5)."""
    centres = (np.arange(256, dtype=np.float32) * 4 + 1.5)
    nodes += [_const("grid_x", centres.reshape(1, 1, 1, 256)), _const("grid_y", centres.reshape(1, 1, 256, 1))]
    _disc(nodes, "grid_x", "grid_y", "px", "py", radius, out)


def _uses(nodes: list[onnx.NodeProto], names: list[str]) -> str:
    """A [1,1,1,1] zero made from every named input, so that no declared input is left unused."""
    previous = None
    for name in names:
        nodes += [helper.make_node("ReduceMean", [name], [f"{name}_m"], keepdims=0),
                  helper.make_node("Cast", [f"{name}_m"], [f"{name}_mf"], to=F)]
        if previous is not None:
            nodes.append(helper.make_node("Add", [previous, f"{name}_mf"], [f"{name}_acc"]))
        previous = f"{name}_mf" if previous is None else f"{name}_acc"
    nodes += [_const("uses_zero", np.array(0.0, np.float32)),
              helper.make_node("Mul", [previous, "uses_zero"], ["uses_0d"]),
              _const("uses_shape", np.array([1, 1, 1, 1], np.int64)),
              helper.make_node("Reshape", ["uses_0d", "uses_shape"], ["uses"])]
    return "uses"


def _prompt_inputs(coords_dtype: int = F) -> list[onnx.ValueInfoProto]:
    return [helper.make_tensor_value_info("point_coords", coords_dtype, [1, "num_points", 2]),
            helper.make_tensor_value_info("point_labels", F, [1, "num_points"]),
            helper.make_tensor_value_info("mask_input", F, [1, 1, 256, 256]),
            helper.make_tensor_value_info("has_mask_input", F, [1])]


def sam2_decoder(path: Path, *, radius: float = 40.0, embeds: dict[str, list[int]] | None = None,
                 coords_dtype: int = F) -> Path:
    """samexporter's SAM2 decoder: masks [1,3,256,256], iou_predictions [1,3]; the best (index 1) is the disc."""
    embeds = embeds or SAM2_EMBEDS
    nodes: list[onnx.NodeProto] = []
    if coords_dtype != F:
        nodes.append(helper.make_node("Cast", ["point_coords"], ["coords_f"], to=F))
    _first_point(nodes)
    if coords_dtype != F:
        for node in nodes[1:]:
            node.input[:] = ["coords_f" if i == "point_coords" else i for i in node.input]
    zero = _uses(nodes, [*embeds, "point_labels", "mask_input", "has_mask_input"])
    _grid_disc(nodes, radius, "disc_raw")
    nodes += [helper.make_node("Add", ["disc_raw", zero], ["disc"]),
              _const("minus", np.array(-50.0, np.float32)), helper.make_node("Add", ["disc", "minus"], ["worse"]),
              helper.make_node("Concat", ["worse", "disc", "worse"], ["masks"], axis=1),
              _const("ious", np.array([[0.2, 0.9, 0.3]], np.float32)),
              _const("flat", np.array([1, 1], np.int64)), helper.make_node("Reshape", [zero, "flat"], ["zero2"]),
              helper.make_node("Add", ["ious", "zero2"], ["iou_predictions"])]
    inputs = [helper.make_tensor_value_info(name, F, shape) for name, shape in embeds.items()]
    outputs = [helper.make_tensor_value_info("masks", F, [1, 3, 256, 256]),
               helper.make_tensor_value_info("iou_predictions", F, [1, 3])]
    return _save(path, nodes, inputs + _prompt_inputs(coords_dtype), outputs)


def sam_decoder(path: Path, *, radius: float = 40.0) -> Path:
    """Meta's SamOnnxModel (return_single_mask): masks [1,1,H,W] at orig_im_size, iou [1,1], low_res [1,1,256,256]."""
    nodes: list[onnx.NodeProto] = []
    _first_point(nodes)
    zero = _uses(nodes, ["image_embeddings", "point_labels", "mask_input", "has_mask_input"])
    nodes += [_const("i0", np.array(0, np.int64)), _const("i1", np.array(1, np.int64)),
              helper.make_node("Gather", ["orig_im_size", "i0"], ["H"]),
              helper.make_node("Gather", ["orig_im_size", "i1"], ["W"]),
              helper.make_node("Max", ["H", "W"], ["longest"]), _const("frame", np.array(1024.0, np.float32)),
              helper.make_node("Div", ["frame", "longest"], ["scale"]), _const("half", np.array(0.5, np.float32)),
              _const("fzero", np.array(0.0, np.float32)), _const("fone", np.array(1.0, np.float32))]
    for side, shape in (("W", [1, 1, 1, -1]), ("H", [1, 1, -1, 1])):  # ResizeLongestSide: new = int(old·s + 0.5)
        nodes += [helper.make_node("Mul", [side, "scale"], [f"{side}s"]),
                  helper.make_node("Add", [f"{side}s", "half"], [f"{side}sh"]),
                  helper.make_node("Floor", [f"{side}sh"], [f"{side}new"]),
                  helper.make_node("Div", [f"{side}new", side], [f"{side}k"]),
                  helper.make_node("Range", ["fzero", side, "fone"], [f"{side}idx"]),
                  helper.make_node("Add", [f"{side}idx", "half"], [f"{side}c"]),
                  helper.make_node("Mul", [f"{side}c", f"{side}k"], [f"{side}f"]),
                  _const(f"{side}shape", np.array(shape, np.int64)),
                  helper.make_node("Reshape", [f"{side}f", f"{side}shape"], [f"{side}grid"])]
    nodes += [helper.make_node("Add", ["px", "half"], ["pxc"]), helper.make_node("Add", ["py", "half"], ["pyc"])]
    _disc(nodes, "Wgrid", "Hgrid", "pxc", "pyc", radius, "disc_raw")
    _grid_disc(nodes, radius, "low_raw")
    nodes += [helper.make_node("Add", ["disc_raw", zero], ["masks"]),
              helper.make_node("Add", ["low_raw", zero], ["low_res_masks"]),
              _const("iou1", np.array([[0.8]], np.float32)), _const("flat", np.array([1, 1], np.int64)),
              helper.make_node("Reshape", [zero, "flat"], ["zero2"]),
              helper.make_node("Add", ["iou1", "zero2"], ["iou_predictions"])]
    inputs = [helper.make_tensor_value_info("image_embeddings", F, [1, 256, 64, 64]), *_prompt_inputs(),
              helper.make_tensor_value_info("orig_im_size", F, [2])]
    outputs = [helper.make_tensor_value_info("masks", F, [1, 1, "h", "w"]),
               helper.make_tensor_value_info("iou_predictions", F, [1, 1]),
               helper.make_tensor_value_info("low_res_masks", F, [1, 1, 256, 256])]
    return _save(path, nodes, inputs, outputs)


def sidecar(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def sam2_pair(folder: Path, *, radius: float = 40.0, extra: str = "") -> Path:
    encoder(folder / "sam2_enc.onnx", SAM2_EMBEDS)
    sam2_decoder(folder / "sam2_dec.onnx", radius=radius)
    return sidecar(folder, "sam2_pair", f"name: test sam2\nprompt:\n  encoder: sam2_enc.onnx\n"
                                        f"  decoder: sam2_dec.onnx\n{extra}")


def sam_pair(folder: Path, *, radius: float = 40.0) -> Path:
    encoder(folder / "sam_enc.onnx", SAM_EMBEDS)
    sam_decoder(folder / "sam_dec.onnx", radius=radius)
    return sidecar(folder, "sam_pair", "prompt:\n  encoder: sam_enc.onnx\n  decoder: sam_dec.onnx\n")
