"""Prompt models (SAM-family encoder/decoder ONNX pairs): encode an image once, decode each prompt change.

    spec = load_prompt_spec(Path("models/prompt_demo.yaml"))
    session = open_prompt_session(spec)
    embedding = session.embed(image)              # the encoder: once per image (cached, LRU by bytes)
    proposal = session.decode(embedding, points=[Point(120, 80)])   # the decoder: per prompt change

Use one PromptSession from the thread that created it (the viewer's worker, the CLI's main thread), as every
ONNX Runtime session here. The maths between image and frame is in app.inference.prompt.frame, the layouts in
app.inference.prompt.spec.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.errors import InferenceError, ModelError, one_line
from app.inference.model.onnx_graph import TensorInfo
from app.inference.model.session import SessionInfo
from app.inference.prompt.cache import Embedding, EmbeddingCache, image_identity
from app.inference.prompt.frame import MASK_GRID, encoder_tensor, frame_geometry, frame_points, low_res_to_image
from app.inference.prompt.request import (
    BOX_BOTTOM_RIGHT,
    BOX_TOP_LEFT,
    PADDING,
    Box,
    Point,
    PromptAbout,
    PromptError,
    PromptModel,
    Proposal,
    check_prompt,
    prompt_image_shape,
)
from app.inference.prompt.spec import SAM, PromptSpec, load_prompt_spec
from app.inference.runtime.finite import check_outputs, declared
from app.inference.runtime.session import DeviceRequest, open_onnx_session

__all__ = ["Box", "Point", "PromptError", "PromptModel", "PromptSession", "Proposal", "load_prompt_model",
           "load_prompt_spec", "open_prompt_session"]


class PromptSession:
    """An encoder and a decoder session for one PromptSpec, with the embeddings cache between them."""

    def __init__(self, spec: PromptSpec, encoder: Any, decoder: Any, *, info: SessionInfo,
                 decoder_info: SessionInfo, cache: EmbeddingCache | None = None) -> None:
        self.spec = spec
        self.info = info  # where the encoder runs (the heavy half); the decoder's in decoder_info
        self.decoder_info = decoder_info
        self.cache = cache if cache is not None else EmbeddingCache()
        self.encoder_runs = 0  # how many times the encoder ran (the cache's hits do not count)
        self.decoder_runs = 0
        self.last_feed: dict[str, np.ndarray] = {}  # the decoder's last inputs, as fed (for tests and `-v`)
        self._encoder = encoder
        self._decoder = decoder
        self._model_key: tuple[Hashable, ...] = (str(spec.encoder), spec.input_size, spec.resize, spec.mean, spec.std)

    @property
    def model_free(self) -> bool:
        """False: an encoder and a decoder run."""
        return False

    def about(self) -> PromptAbout:
        """The pair's name, where its encoder runs, and why not on the GPU asked for."""
        return PromptAbout(self.spec.name, self.info.provider_label, self.info.fallback_reason or "")

    def warm_up(self) -> None:
        """One encoder and decoder run on a blank 64² picture, then the run counts set back to 0."""
        self.decode(self.embed(np.zeros((64, 64), np.uint8), key=("warm-up",)), [Point(32, 32)])
        self.encoder_runs = self.decoder_runs = 0

    def embed(self, image: np.ndarray, *, key: Hashable | None = None, run_options: Any | None = None) -> Embedding:
        """The image's embedding: from the cache when this image (by `key`, else its pixels) was encoded by this
        model before, else one encoder run. `image`: HxW or HxWx3 RGB. `run_options`: an onnxruntime RunOptions
        whose `terminate` another thread may set to cancel the run (the viewer's prefetch of the next image): it
        then raises InferenceError and nothing is cached."""
        if not prompt_image_shape(image.shape):
            raise PromptError(f"a prompt model takes an HxW or HxWx3 image, got shape {list(image.shape)}")
        full_key = (key if key is not None else image_identity(image), *self._model_key)
        cached = self.cache.get(full_key)
        if cached is not None:
            return cached
        geometry = frame_geometry((int(image.shape[0]), int(image.shape[1])), self.spec.input_size,
                                  resize=self.spec.resize)
        tensor = encoder_tensor(image, geometry, mean=self.spec.mean, std=self.spec.std)
        names = list(self.spec.embed_outputs)
        outputs = self._run(self._encoder, self.spec.encoder.name, names, {self._encoder_input(): tensor},
                            run_options, self.spec.encoder_outputs)
        self.encoder_runs += 1
        embedding = Embedding(full_key, dict(zip(names, outputs, strict=True)), geometry)
        self.cache.put(embedding)
        return embedding

    def cached(self, key: Hashable) -> bool:
        """Whether the image under `key` is encoded already (a prefetch of the next image skips it)."""
        return (key, *self._model_key) in self.cache

    def device_warning(self) -> str | None:
        """The encoder's fallback reason when not being on the GPU is news (SessionInfo.fallback_warns)."""
        return self.info.fallback_reason if self.info.fallback_warns else None

    def decode(self, embedding: Embedding, points: Sequence[Point] = (), box: Box | None = None,
               mask_input: np.ndarray | None = None) -> Proposal:
        """The decoder on one prompt: points (image pixels, label 1/0), a box, and optionally the low-res logits
        of an earlier proposal as `mask_input`. The best of the decoder's masks by its predicted IoU."""
        geometry = embedding.geometry
        box = check_prompt(points, box, geometry.image_hw)
        feed = dict(embedding.tensors)
        feed.update(self._prompt_feed(points, box, embedding, mask_input))
        self.last_feed = feed
        names = ["masks", "iou_predictions"] + (["low_res_masks"] if self.spec.layout == SAM else [])
        outputs = self._run(self._decoder, self.spec.decoder.name, names, feed, graph=self.spec.decoder_outputs)
        self.decoder_runs += 1
        low_res = np.asarray(outputs[2]) if len(outputs) > 2 else None
        return self._proposal(np.asarray(outputs[0]), np.asarray(outputs[1]).reshape(-1), low_res, embedding)

    def _prompt_feed(self, points: Sequence[Point], box: Box | None, embedding: Embedding,
                     mask_input: np.ndarray | None) -> dict[str, np.ndarray]:
        coords = [(p.x, p.y) for p in points]
        labels = [float(p.label) for p in points]
        if box is not None:  # SAM's predictor: the points, then the box as two corner points labelled 2 and 3
            coords += [(box.x0, box.y0), (box.x1, box.y1)]
            labels += [float(BOX_TOP_LEFT), float(BOX_BOTTOM_RIGHT)]
        frame = frame_points(np.array(coords, np.float64), embedding.geometry)
        if self.spec.layout == SAM and box is None:  # SamOnnxModel has no padding point of its own (SAM2's has)
            frame = np.concatenate([frame, np.zeros((1, 2), np.float32)])
            labels.append(float(PADDING))
        if mask_input is not None and (mask_input.shape[-2:] != (MASK_GRID, MASK_GRID)
                                       or mask_input.size != MASK_GRID * MASK_GRID):
            raise PromptError(f"mask_input must be {MASK_GRID}×{MASK_GRID} low-res logits, got shape "
                              f"{list(mask_input.shape)}")
        mask = np.zeros((1, 1, MASK_GRID, MASK_GRID), np.float32) if mask_input is None else \
            mask_input.astype(np.float32).reshape(1, 1, MASK_GRID, MASK_GRID)
        feed = {"point_coords": frame[None].astype(np.float32), "point_labels": np.array([labels], np.float32),
                "mask_input": mask, "has_mask_input": np.array([0.0 if mask_input is None else 1.0], np.float32)}
        if self.spec.layout == SAM:
            feed["orig_im_size"] = np.array(embedding.geometry.image_hw, np.float32)
        return feed

    def _proposal(self, masks: np.ndarray, iou: np.ndarray, low_res_masks: np.ndarray | None,
                  embedding: Embedding) -> Proposal:
        geometry = embedding.geometry
        if masks.ndim != 4 or masks.shape[1] < 1 or iou.size != masks.shape[1]:
            raise InferenceError(f"{self.spec.decoder.name}: the decoder returned masks {list(masks.shape)} and "
                                 f"{iou.size} IoU values (expected [1, K, H, W] and K)")
        best = int(np.argmax(iou))
        logits = masks[0, best].astype(np.float32)
        if self.spec.layout == SAM:  # SamOnnxModel returns masks at orig_im_size already, low-res beside them
            if logits.shape != geometry.image_hw:
                raise InferenceError(f"{self.spec.decoder.name}: the decoder's masks are {list(logits.shape)} for a "
                                     f"{geometry.image_hw[1]}×{geometry.image_hw[0]} image (orig_im_size)")
            if low_res_masks is None or low_res_masks.shape[-2:] != (MASK_GRID, MASK_GRID):
                raise InferenceError(f"{self.spec.decoder.name}: the decoder's low_res_masks are not "
                                     f"{MASK_GRID}×{MASK_GRID}")
            low_res = low_res_masks[0, best].astype(np.float32)
        else:
            if logits.shape != (MASK_GRID, MASK_GRID):
                raise InferenceError(f"{self.spec.decoder.name}: the decoder's masks are {list(logits.shape)}, "
                                     f"expected {MASK_GRID}×{MASK_GRID} low-res logits")
            low_res, logits = logits, low_res_to_image(logits, geometry)
        return Proposal(mask=logits > self.spec.mask_threshold, iou=float(iou[best]), low_res=low_res)

    def _run(self, session: Any, name: str, outputs: list[str], feed: dict[str, np.ndarray],
             run_options: Any | None = None, graph: tuple[TensorInfo, ...] = ()) -> list[np.ndarray]:
        """The session's outputs, each checked against what `graph` declares of it and for NaN or ±inf
        (app.guard.answers): a broken decoder is one line naming it and the output, never an empty mask."""
        try:
            # run_options only when given: a session-like wrapper (a test's counter) may take two arguments
            result: list[np.ndarray] = session.run(outputs, feed) if run_options is None else \
                session.run(outputs, feed, run_options)
        except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
            raise InferenceError(f"{name}: inference failed: {one_line(exc, most=500, first=True)}") from exc
        infos = {info.name: info for info in graph}
        check_outputs(name, [declared(infos.get(output), output) for output in outputs], result, finite=True)
        return result

    def _encoder_input(self) -> str:
        name: str = self._encoder.get_inputs()[0].name
        return name


if TYPE_CHECKING:
    _IMPLEMENTS: type[PromptModel] = PromptSession  # mypy (.ci/run) proves PromptSession is a PromptModel


def load_prompt_model(text: str | Path, device: str | DeviceRequest = "auto", *,
                      cache: EmbeddingCache | None = None) -> PromptModel:
    """PROMPT_MODEL as the CLI and settings name it: `grabcut` (the model-free fallback for boxes), or the
    sidecar YAML of an encoder/decoder pair."""
    if str(text).strip().lower() == "grabcut":
        from app.inference.prompt.grabcut import GrabCutSession

        return GrabCutSession()
    path = Path(text)
    if path.suffix.lower() not in (".yaml", ".yml"):
        from app.paths import models_dir

        bundled = models_dir() / f"{path.name}.yaml"  # a bundled pair by its name: `prompt_demo`
        if path.name != str(path) or not path.name or not bundled.is_file():
            raise ModelError(f"{path}: a prompt model is named by its sidecar (.yaml with a prompt: section), "
                             "a bundled pair's name or 'grabcut'")
        path = bundled
    return open_prompt_session(load_prompt_spec(path), device, cache=cache)


def open_prompt_session(spec: PromptSpec, device: str | DeviceRequest = "auto", *,
                        cache: EmbeddingCache | None = None) -> PromptSession:
    """Both sessions of the pair on the requested device (through app.inference.runtime.session: the same providers, a
    CPU fallback's reason kept in `PromptSession.info`)."""
    encoder, info = open_onnx_session(spec.encoder, device)
    decoder, decoder_info = open_onnx_session(spec.decoder, device)
    return PromptSession(spec, encoder, decoder, info=info, decoder_info=decoder_info, cache=cache)
