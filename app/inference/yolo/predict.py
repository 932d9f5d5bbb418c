"""A YOLO export run on one image: its head read (app.inference.model.yolo_head), an ONNX Runtime session opened by the
runtime (the same providers and the same truth about where it runs as every other model), the image letterboxed,
every output checked (dtype, shape, NaN or ±inf: one line naming the file) and decoded into instances or class
scores as Ultralytics' predictor decodes them.

`YoloModel.predict` takes a BGR (or gray) uint8 image, as OpenCV reads it and as Ultralytics' predictor takes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.errors import InferenceError, one_line
from app.inference.model.instances import Instances
from app.inference.model.onnx_graph import TensorInfo, read_graph
from app.inference.model.session import SessionInfo
from app.inference.model.yolo_head import YoloHead, read_head
from app.inference.model.yolo_options import YoloOptions
from app.inference.runtime.finite import check_outputs, declared
from app.inference.runtime.session import open_onnx_session
from app.inference.yolo.decode import ClassScores, class_scores, detections, instances
from app.inference.yolo.letterbox import classify_input, preprocess


@dataclass(frozen=True)
class YoloAnswer:
    """The outputs of one run, checked: the predictions, and a segment head's prototypes."""

    predictions: np.ndarray
    protos: np.ndarray | None


class YoloModel:
    """An Ultralytics export with its session; `predict` on the thread that opened it."""

    def __init__(self, head: YoloHead, session: Any, info: SessionInfo, *, options: YoloOptions,
                 outputs: Sequence[TensorInfo]) -> None:
        self.head, self.info, self.options = head, info, options
        self._session = session
        self._fetched = [head.output] + ([head.protos] if head.protos else [])
        graph = {tensor.name: tensor for tensor in outputs}
        self._declared = [declared(graph.get(name), name) for name in self._fetched]

    def predict(self, image_bgr: np.ndarray) -> Instances | ClassScores:
        """The image's instances (segment, detect, obb) or its class scores (classify)."""
        if self.head.task == "classify":
            answer = self.run(classify_input(image_bgr, self.head.imgsz))
            return class_scores(self.head, answer.predictions)
        tensor, box = preprocess(image_bgr, self.head.imgsz, stride=self.head.stride if self.head.dynamic else None)
        answer = self.run(tensor)
        return instances(self.head, detections(self.head, answer.predictions, self.options), box, answer.protos)

    def run(self, tensor: np.ndarray) -> YoloAnswer:
        """The session on one input tensor, its outputs checked against the graph and for NaN or ±inf."""
        if self._session is None:
            raise InferenceError(f"{self.head.path.name}: the session was closed")
        try:
            outputs = self._session.run(self._fetched, {self.head.input_name: tensor})
        except Exception as exc:  # ORT raises its own Fail/InvalidArgument types
            raise InferenceError(f"{self.head.path.name}: inference failed: {one_line(exc, most=500, first=True)}",
                                 ) from exc
        check_outputs(self.head.path.name, self._declared, outputs, finite=True)
        return YoloAnswer(outputs[0], outputs[1] if len(outputs) > 1 else None)

    def close(self) -> None:
        self._session = None


def open_yolo(path: Path, *, device: str = "auto", sidecar: Mapping[str, Any] | None = None,
              options: YoloOptions | None = None) -> YoloModel:
    """The export at `path` read and opened (ModelError in one line when it is no YOLO head or a malformed one)."""
    graph = read_graph(path)
    head = read_head(path, graph, sidecar=sidecar)
    session, info = open_onnx_session(path, device)
    return YoloModel(head, session, info, options=options or YoloOptions(), outputs=graph.outputs)
