"""A local session's answer is checked against the graph's declared outputs (app.guard.answers, through
ModelSession.run) before anything is made of it: an output of another shape than declared — which ONNX Runtime
only logs — is one line naming the model and the output, for a whole image as for its tiles and 3D patches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx_factory import FLOAT, const, save, tensor

from app.errors import InferenceError
from app.inference.image.pipeline import run_image
from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session


def half_size_liar(path: Path) -> Path:
    """Declares scores [1,3,32,32] for its [1,3,32,32] input but answers [1,3,16,16]: before, that was read as a
    stride-2 head and a mask was made of it."""
    nodes = [helper.make_node("Resize", ["image", "", "", "sizes"], ["scores"], mode="nearest")]
    return save(path, nodes, [tensor("image", FLOAT, [1, 3, 32, 32])], [tensor("scores", FLOAT, [1, 3, 32, 32])],
                [const("sizes", np.array([1, 3, 16, 16], np.int64))])


def test_an_output_of_another_shape_than_declared_is_refused(tmp_path: Path) -> None:
    spec = load_spec(half_size_liar(tmp_path / "liar.onnx"))
    with pytest.raises(InferenceError) as caught:
        run_image(open_session(spec, "cpu"), np.full((40, 50, 3), 90, np.uint8))
    assert str(caught.value) == "liar.onnx: output 'scores' has shape 1×3×16×16; declared 1×3×32×32"


def test_the_check_runs_on_each_answer_not_only_the_warm_up(tmp_path: Path) -> None:
    session = open_session(load_spec(half_size_liar(tmp_path / "liar.onnx")), "cpu", warm_up=False)
    with pytest.raises(InferenceError, match=r"^liar\.onnx: output 'scores' has shape 1×3×16×16; declared 1×3×32×32$"):
        session.run(np.zeros((1, 3, 32, 32), np.float32))


def test_a_fifo_named_as_a_model_is_refused_without_waiting(tmp_path: Path) -> None:
    """ONNX Runtime opens a path itself: the untrusted gate looks first (a FIFO would hold its read for ever)."""
    import os
    import threading

    from app.errors import ModelError
    from app.inference.runtime.session import open_onnx_session

    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    caught: list[BaseException] = []
    worker = threading.Thread(target=lambda: caught.append(_raised(lambda: open_onnx_session(fifo, "cpu"))),
                              daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and len(caught) == 1 and isinstance(caught[0], ModelError)
    assert str(caught[0]) == f"{fifo}: not a regular file: a named pipe (FIFO)"


def _raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # the test looks at what it was
        return exc
    raise AssertionError("nothing raised")
