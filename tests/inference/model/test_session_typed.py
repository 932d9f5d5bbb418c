"""Each implementation of a session protocol satisfies it, as mypy sees it: LocalSession and RemoteSession are
ModelSessions (app.inference.model.session), PromptSession and grabCut are PromptModels
(app.inference.prompt.request). A class that lacks one member (cancel) is refused in the same run, so the check
is seen to bite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SNIPPET = '''
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from app.inference.model.session import ModelSession, RequestTiming, SessionInfo
from app.inference.model.spec import ModelSpec
from app.inference.prompt.grabcut import GrabCutSession
from app.inference.prompt.model import PromptSession
from app.inference.prompt.request import PromptModel
from app.inference.remote.session import RemoteSession
from app.inference.runtime.session import LocalSession


class NoCancel:
    spec: ModelSpec
    info: SessionInfo
    in_flight: int = 1
    timings: Sequence[RequestTiming] = ()

    def timing_line(self) -> str | None:
        return None

    def run(self, tensor: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        return tensor

    def warm_up(self, *, measure_warm: bool = False) -> SessionInfo:
        return self.info

    def close(self) -> None:
        pass


sessions: list[type[ModelSession]] = [LocalSession, RemoteSession]
prompt_models: list[type[PromptModel]] = [PromptSession, GrabCutSession]
refused: type[ModelSession] = NoCancel
'''


def test_each_session_implements_its_protocol_and_a_class_without_cancel_does_not(tmp_path):
    snippet = tmp_path / "sessions_typed.py"
    snippet.write_text(SNIPPET)
    checked = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml"),
                              "--cache-dir", str(tmp_path / "cache"), "--no-error-summary", "--hide-error-context",
                              str(snippet)], cwd=REPO, capture_output=True, text=True, timeout=600)
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    refused_line = SNIPPET.splitlines().index("refused: type[ModelSession] = NoCancel") + 1
    assert len(errors) == 1, checked.stdout + checked.stderr
    assert errors[0].startswith(f"{snippet}:{refused_line}: error: Incompatible types in assignment"), errors
