"""A prompt model that does not fit, and prompts that cannot be used, are refused in one line naming what."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto
from prompt_pairs import SAM2_EMBEDS, SAM_EMBEDS, encoder, sam2_decoder, sam2_pair, sam_decoder, sidecar

from app.errors import ModelError, SidecarError
from app.inference.prompt.model import Box, Point, PromptError, load_prompt_spec, open_prompt_session


def _yaml(folder: Path, body: str) -> Path:
    return sidecar(folder, "pair", "prompt:\n" + body)


def test_a_decoder_without_its_encoder(tmp_path: Path) -> None:
    sam2_decoder(tmp_path / "dec.onnx")
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  decoder: dec.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'pair.yaml'}: 'prompt.encoder' is missing: the decoder dec.onnx "
                                 "needs its encoder (the ONNX file that makes the image embeddings)")


def test_an_encoder_file_that_is_not_there(tmp_path: Path) -> None:
    sam2_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: gone.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == f"{tmp_path / 'gone.onnx'}: model file not found"


def test_mismatched_embedding_shapes_between_the_pair(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", {**SAM2_EMBEDS, "image_embed": [1, 256, 32, 32]})
    sam2_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'dec.onnx'}: decoder input 'image_embed' is [1,256,64,64] but the "
                                 "encoder enc.onnx makes [1,256,32,32]")


def test_an_embedding_of_the_wrong_dtype(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS, dtype=TensorProto.FLOAT16)
    sam2_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'dec.onnx'}: decoder input 'high_res_feats_0' is float32 but the "
                                 "encoder enc.onnx makes float16")


def test_prompt_coordinates_of_the_wrong_dtype(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS)
    sam2_decoder(tmp_path / "dec.onnx", coords_dtype=TensorProto.INT64)
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == f"{tmp_path / 'dec.onnx'}: decoder input 'point_coords' is int64, expected float32"


def test_a_sam_decoder_paired_with_a_sam2_encoder(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS)
    sam_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'enc.onnx'}: not the sam decoder's encoder: it has no output "
                                 "'image_embeddings' (outputs: high_res_feats_0, high_res_feats_1, image_embed)")


def test_encoder_and_decoder_swapped(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM_EMBEDS)
    sam_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: dec.onnx\n  decoder: enc.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'enc.onnx'}: not a SAM or SAM2 decoder: no input 'image_embeddings' "
                                 "(inputs: image)")


def test_a_layout_the_decoder_does_not_have(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS)
    sam2_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n  layout: sam\n"))
    assert str(caught.value).startswith(f"{tmp_path / 'dec.onnx'}: not a sam decoder: it has no input "
                                        "'image_embeddings' (inputs: ")


@pytest.mark.parametrize(("body", "message"), [
    ("  encoder: e.onnx\n  decoder: d.onnx\n  resize: crop\n",
     "'prompt.resize' must be one of longest | stretch, got 'crop'"),
    ("  encoder: e.onnx\n  decoder: d.onnx\n  mean: [1, 2]\n",
     "'prompt.mean' must be a list of 3 numbers (R, G, B), got [1, 2]"),
    ("  encoder: e.onnx\n  decoder: d.onnx\n  std: [1, 0, 1]\n",
     "'prompt.std' must be 3 numbers above 0, got [1, 0, 1]"),
    ("  encoder: e.onnx\n  decoder: d.onnx\n  threshold: 0.5\n",
     "unknown key 'prompt.threshold' (expected one of: encoder, decoder, layout, input_size, resize, mean, std, "
     "mask_threshold)"),
    ('  encoder: "e\\0.onnx"\n  decoder: d.onnx\n',  # a NUL in a path: ValueError from os.stat, a traceback
     "'prompt.encoder' must be a file name without control characters, got '\\x00' in it"),
    ('  encoder: e.onnx\n  decoder: "d\\x1b[2J.onnx"\n',
     "'prompt.decoder' must be a file name without control characters, got '\\x1b' in it"),
    ("  encoder: e.onnx\n  decoder: d.onnx\n  mean: [a, 1, 2]\n", "'prompt.mean' must be a number, got str"),
])
def test_sidecar_values_refused_naming_the_key(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(_yaml(tmp_path, body))
    assert str(caught.value) == f"{tmp_path / 'pair.yaml'}: {message}"


def test_input_size_that_is_not_the_encoders(tmp_path: Path) -> None:
    path = sam2_pair(tmp_path, extra="  input_size: 512\n")
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(path)
    assert str(caught.value) == f"{path}: 'prompt.input_size' is 512 but the encoder's input is 1024×1024"


def test_stretch_refused_for_a_sam_decoder(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM_EMBEDS)
    sam_decoder(tmp_path / "dec.onnx")
    path = _yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n  resize: stretch\n")
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(path)
    assert str(caught.value) == (f"{path}: 'prompt.resize' stretch does not fit a sam decoder (SamOnnxModel crops "
                                 "its masks to the longest-side resize: use longest)")


def test_an_encoder_taking_an_hwc_image_is_refused(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM_EMBEDS, image_shape=[684, 1024, 3])  # samexporter's SAM encoder input
    sam_decoder(tmp_path / "dec.onnx")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(_yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n"))
    assert str(caught.value) == (f"{tmp_path / 'enc.onnx'}: encoder input image[684,1024,3] float32 is not a "
                                 "[1,3,S,S] image (SAM's 1×3×1024×1024)")


def test_a_symbolic_frame_needs_input_size(tmp_path: Path) -> None:
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS, image_shape=[1, 3, "h", "w"])
    sam2_decoder(tmp_path / "dec.onnx")
    path = _yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n")
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(path)
    assert str(caught.value) == (f"{path}: the encoder's input size is not fixed in its graph: give "
                                 "'prompt.input_size' (1024 for SAM and SAM2)")
    path.write_text(path.read_text() + "  input_size: 1024\n")
    spec = load_prompt_spec(path)
    assert (spec.input_size, spec.sources["input_size"]) == (1024, "sidecar")


def test_mean_std_on_0_to_1_read_as_such(tmp_path: Path) -> None:
    spec = load_prompt_spec(sam2_pair(tmp_path, extra="  mean: [0.485, 0.456, 0.406]\n  std: [0.229, 0.224, 0.225]\n"))
    np.testing.assert_allclose(spec.mean, (123.675, 116.28, 103.53))
    np.testing.assert_allclose(spec.std, (58.395, 57.12, 57.375))
    assert spec.sources["mean"] == "sidecar (on 0..1, ×255)"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return open_prompt_session(load_prompt_spec(sam2_pair(tmp_path_factory.mktemp("pair"))), "cpu")


@pytest.mark.parametrize(("points", "box", "message"), [
    ((), None, "no prompt: give at least one point or a box"),
    ((Point(200, 10),), None, "point (200, 10) is outside the image (200×100 pixels: x from 0 to 199, y from 0 to 99)"),
    ((Point(-1, 10),), None, "point (-1, 10) is outside the image (200×100 pixels: x from 0 to 199, y from 0 to 99)"),
    ((Point(5, 5, 2),), None, "point (5, 5) has label 2: a point's label is 1 (positive) or 0 (negative)"),
    ((), Box(10, 10, 10, 50), "box (10, 10, 10, 50) has zero area: x1 must be above x0 and y1 above y0"),
    ((), Box(10, 60, 50, 20), "box (10, 60, 50, 20) has zero area: x1 must be above x0 and y1 above y0"),
    ((), Box(300, 10, 400, 50), "box (300, 10, 400, 50) lies outside the image (200×100 pixels)"),
    ((Point(float("nan"), 1),), None, "point (nan, 1) is not a number"),
    ((Point(float("nan"), 5.0),), None, "point (nan, 5) is not a number"),  # as the CLI gives it: floats
    ((Point(1e308, 5.0),), None, "point (1e+308, 5) is outside the image (200×100 pixels: x from 0 to 199, y from 0 "
                                 "to 99)"),  # not its 309 digits
    ((), Box(0, 0, 1e300, -1e20), "box (0, 0, 1e+300, -1e+20) has zero area: x1 must be above x0 and y1 above y0"),
])
def test_prompts_that_cannot_be_used(session, points, box, message) -> None:  # type: ignore[no-untyped-def]
    embedding = session.embed(np.zeros((100, 200), np.uint8))
    with pytest.raises(PromptError) as caught:
        session.decode(embedding, points, box=box)
    assert str(caught.value) == message


def test_a_box_overhanging_the_image_is_clipped(session) -> None:  # type: ignore[no-untyped-def]
    embedding = session.embed(np.zeros((100, 200), np.uint8))
    session.decode(embedding, box=Box(-5, 10, 250, 90))
    np.testing.assert_allclose(session.last_feed["point_coords"][0], [[0, 51.2], [1024, 460.8]], rtol=1e-5)


@pytest.mark.parametrize(("extra", "mean", "std"), [
    ("  mean: [100, 100, 100]\n  std: [1, 1, 1]\n", (100, 100, 100), (1, 1, 1)),  # the mean's scale: 0..255
    ("  std: [0.229, 0.224, 0.225]\n", (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)),
    ("  std: [1, 1, 1]\n", (123.675, 116.28, 103.53), (1, 1, 1)),
])
def test_mean_and_std_share_one_scale(tmp_path: Path, extra: str, mean: tuple[float, ...],
                                      std: tuple[float, ...]) -> None:
    spec = load_prompt_spec(sam2_pair(tmp_path, extra=extra))
    np.testing.assert_allclose(spec.mean, mean)
    np.testing.assert_allclose(spec.std, std)


@pytest.mark.parametrize(("shape", "message"), [
    ((40, 60, 2), "a prompt model takes an HxW or HxWx3 image, got shape [40, 60, 2]"),  # broadcast ValueError
    ((40, 60, 5), "a prompt model takes an HxW or HxWx3 image, got shape [40, 60, 5]"),
])
def test_images_a_prompt_model_cannot_take(session, shape, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PromptError) as caught:
        session.embed(np.zeros(shape, np.uint8))
    assert str(caught.value) == message


def test_a_one_channel_image_is_gray(session) -> None:  # type: ignore[no-untyped-def]
    gray = np.random.default_rng(1).integers(0, 255, (40, 60), np.uint8)
    one = session.embed(gray[:, :, None], key="one channel")  # HxWx1: a broadcast ValueError before
    two = session.embed(gray, key="gray")
    np.testing.assert_array_equal(session.decode(one, [Point(5, 5)]).mask, session.decode(two, [Point(5, 5)]).mask)


def test_a_mask_input_of_another_size_is_one_line(session) -> None:  # type: ignore[no-untyped-def]
    embedding = session.embed(np.zeros((100, 200), np.uint8))
    with pytest.raises(PromptError) as caught:  # [2, 256, 256]: reshape's ValueError before
        session.decode(embedding, [Point(5, 5)], mask_input=np.zeros((2, 256, 256), np.float32))
    assert str(caught.value) == "mask_input must be 256×256 low-res logits, got shape [2, 256, 256]"


def test_telling_a_prompt_sidecar_reads_at_most_a_sidecars_size(tmp_path: Path) -> None:
    import tracemalloc

    from app.inference.prompt.spec import is_prompt_sidecar

    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:  # sparse: 200 MiB that read_text held whole, several times over
        handle.write(b"name: x\n")
        handle.truncate(200 << 20)
    tracemalloc.start()
    try:
        assert not is_prompt_sidecar(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    (tmp_path / "pair.yaml").write_text("name: p\nprompt:\n  encoder: e.onnx\n", encoding="utf-8")
    assert is_prompt_sidecar(tmp_path / "pair.yaml")
    (tmp_path / "bom.yaml").write_text("prompt:\n  encoder: e.onnx\n", encoding="utf-8-sig")  # Notepad's BOM
    assert is_prompt_sidecar(tmp_path / "bom.yaml")


@pytest.mark.parametrize(("text", "says"), [
    ("a: &x [1, 2]\nb: *x\nprompt:\n  encoder: e.onnx\n  decoder: d.onnx\n",
     "YAML anchors/aliases are not allowed in a sidecar (line 1)"),
    ("prompt:\n  encoder: e.onnx\n  decoder: d.onnx\n  decoder: other.onnx\n",
     "invalid YAML at line 4: duplicate key 'decoder'"),
])
def test_a_prompt_sidecars_yaml_goes_through_the_one_loader(tmp_path: Path, text: str, says: str) -> None:
    """Anchors (an alias bomb's material) and a second `decoder:` that silently won: refused in one line."""
    path = sidecar(tmp_path, "pair", text)
    with pytest.raises(SidecarError) as caught:
        load_prompt_spec(path)
    assert str(caught.value) == f"{path}: {says}"


def test_an_encoder_declaring_a_giant_frame_is_refused_before_a_tensor_is_made(tmp_path: Path) -> None:
    """[1,3,100000,100000] from the graph: 120 GB of encoder input per image; the sidecar's input_size is held to
    64..4096 already, the graph's now too."""
    encoder(tmp_path / "enc.onnx", SAM2_EMBEDS, image_shape=[1, 3, 100_000, 100_000])
    sam2_decoder(tmp_path / "dec.onnx")
    path = _yaml(tmp_path, "  encoder: enc.onnx\n  decoder: dec.onnx\n")
    with pytest.raises(ModelError) as caught:
        load_prompt_spec(path)
    assert str(caught.value) == (f"{tmp_path / 'enc.onnx'}: encoder input image[1,3,100000,100000] float32 is a "
                                 "100000×100000 frame; a prompt encoder's is 64 to 4096 pixels a side (SAM's 1024)")
