"""A prompt model's answer is checked (app.guard.answers through app.inference.runtime.finite) before a mask is made of
it:
a decoder's NaN or ±inf logits or IoU, or an encoder's NaN embedding, is one line naming the model file and the
output — never an empty mask, never a NaN IoU that the CLI then calls "grabcut"; a decoder whose masks are not of
the shape its graph declares is refused the same way. Real ONNX pairs (tests/prompt_pairs.py), poisoned
with one extra node after the named output."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from prompt_pairs import SAM2_EMBEDS, encoder, sam2_decoder, sidecar

from app.cli import main
from app.errors import InferenceError
from app.inference.prompt.model import Box, Point, load_prompt_spec, open_prompt_session
from app.runs.prompts.boxes import run_boxes

NAN, INF = float("nan"), float("inf")
MASK_VALUES = 3 * 256 * 256


def poison(path: Path, output: str, value: float) -> Path:
    """The graph's `output` multiplied by `value` (NaN, ±inf: every value of it is then not finite)."""
    model = onnx.load(str(path))
    graph = model.graph
    for node in graph.node:
        node.output[:] = [f"{output}_clean" if name == output else name for name in node.output]
        node.input[:] = [f"{output}_clean" if name == output else name for name in node.input]
    graph.node.extend([
        helper.make_node("Constant", [], ["poison"], value=numpy_helper.from_array(np.array(value, np.float32))),
        helper.make_node("Mul", [f"{output}_clean", "poison"], [output]),
    ])
    onnx.save(model, str(path))
    return path


def pair_with(folder: Path, *, decoder_output: str | None = None, encoder_output: str | None = None,
              value: float = NAN) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    encoder(folder / "enc.onnx", SAM2_EMBEDS)
    sam2_decoder(folder / "dec.onnx", radius=20.0)
    if decoder_output is not None:
        poison(folder / "dec.onnx", decoder_output, value)
    if encoder_output is not None:
        poison(folder / "enc.onnx", encoder_output, value)
    return sidecar(folder, "pair", "prompt:\n  encoder: enc.onnx\n  decoder: dec.onnx\n")


def image(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((120, 160, 3), 40, np.uint8))
    return path


@pytest.mark.parametrize(("output", "value", "says"), [
    ("masks", NAN, f"{MASK_VALUES} NaN of {MASK_VALUES} values"),
    ("masks", INF, f"225 +inf, {MASK_VALUES - 225} -inf of {MASK_VALUES} values"),  # the disc's 225 cells > 0
    ("iou_predictions", NAN, "3 NaN of 3 values"),
])
def test_a_decoders_non_finite_answer_is_one_line_naming_the_decoder_and_the_output(
        tmp_path: Path, output: str, value: float, says: str) -> None:
    session = open_prompt_session(load_prompt_spec(pair_with(tmp_path, decoder_output=output, value=value)), "cpu")
    embedding = session.embed(np.full((120, 160, 3), 40, np.uint8))
    with pytest.raises(InferenceError) as caught:
        session.decode(embedding, [Point(80, 60)])
    assert str(caught.value) == (f"dec.onnx: non-finite model output '{output}': {says}; the model is broken, so no "
                                 "decision is made from it")


def test_an_encoders_nan_embedding_is_refused_before_it_is_cached(tmp_path: Path) -> None:
    session = open_prompt_session(load_prompt_spec(pair_with(tmp_path, encoder_output="image_embed")), "cpu")
    with pytest.raises(InferenceError, match=r"^enc\.onnx: non-finite model output 'image_embed': "
                                             rf"{256 * 64 * 64} NaN of {256 * 64 * 64} values; the model is broken"):
        session.embed(np.full((120, 160, 3), 40, np.uint8))
    assert len(session.cache) == 0


def test_a_decoders_masks_of_another_shape_than_declared_are_refused(tmp_path: Path) -> None:
    """The decoder declares masks [1,3,256,256] and answers [1,3,128,128]: never resized into a mask."""
    folder = tmp_path / "pair"
    path = pair_with(folder)
    model = onnx.load(str(folder / "dec.onnx"))
    for node in model.graph.node:
        node.output[:] = ["masks_full" if name == "masks" else name for name in node.output]
    model.graph.node.extend([
        helper.make_node("Constant", [], ["half_sizes"],
                         value=numpy_helper.from_array(np.array([1, 3, 128, 128], np.int64))),
        helper.make_node("Resize", ["masks_full", "", "", "half_sizes"], ["masks"], mode="nearest"),
    ])
    onnx.save(model, str(folder / "dec.onnx"))
    session = open_prompt_session(load_prompt_spec(path), "cpu")
    with pytest.raises(InferenceError) as caught:
        session.decode(session.embed(np.full((120, 160, 3), 40, np.uint8)), box=Box(10, 10, 60, 60))
    assert str(caught.value) == "dec.onnx: output 'masks' has shape 1×3×128×128; declared 1×3×256×256"


def test_boxes_through_a_nan_decoder_write_no_mask_and_say_why_per_row(tmp_path: Path) -> None:
    session = open_prompt_session(load_prompt_spec(pair_with(tmp_path / "pair", decoder_output="masks")), "cpu")
    image(tmp_path / "images" / "a.png")
    boxes = tmp_path / "boxes.csv"
    boxes.write_text("a.png,10,10,60,60\na.png,70,20,120,80\n", encoding="utf-8")
    result = run_boxes(session, boxes, tmp_path / "images", tmp_path / "out")
    assert result.written == () and result.boxes_done == 0 and not (tmp_path / "out").exists()
    line = (f"dec.onnx: non-finite model output 'masks': {MASK_VALUES} NaN of {MASK_VALUES} values; the model is "
            "broken, so no decision is made from it")
    assert result.problems == (f"{boxes}: row 1: a.png: {line}", f"{boxes}: row 2: a.png: {line}")


def test_the_cli_says_the_decoder_is_broken_and_never_calls_it_grabcut(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = pair_with(tmp_path / "pair", decoder_output="iou_predictions")
    out = tmp_path / "mask.png"
    code = main(["prompt", str(pair), str(image(tmp_path / "a.png")), "--point", "80,60", "--out", str(out),
                 "--device", "cpu"])
    captured = capsys.readouterr()
    assert code != 0 and not out.exists() and "grabcut" not in captured.out + captured.err
    assert captured.err == ("error: dec.onnx: non-finite model output 'iou_predictions': 3 NaN of 3 values; the model "
                            "is broken, so no decision is made from it\n")


def test_a_float_image_with_inf_is_stretched_over_its_finite_values() -> None:
    """+inf in a float picture made the span inf: every pixel 0 (a black image encoded for the prompt model)."""
    from app.inference.prompt.frame import as_8bit

    image = np.array([[0.0, 1.0], [2.0, INF], [NAN, -INF]], np.float32)
    np.testing.assert_array_equal(as_8bit(image), [[0, 127], [255, 255], [0, 0]])
