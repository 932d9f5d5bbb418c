"""The inference worker's kept 3D results (app/ui/workers/worker_volume3d.py, Volume3DRunner, driven directly on
this thread): one per (volume, model, settings) for the session, the least recently used going first once the
label volumes and probabilities kept pass the memory budget, and a result kept is never run again."""

from __future__ import annotations

import numpy as np
import pytest
from spec3d_models import sigmoid3d, with_sidecar

from app.inference.image.pipeline import Stopped
from app.inference.model.builder import load_spec
from app.inference.runtime.session import LocalSession, open_session
from app.io.discover import discover
from app.ui.state.messages import FillRequest, ViewKey, ViewRequest
from app.ui.workers import worker_volume3d
from app.ui.workers.worker_volume3d import Volume3DRunner


class Heard:
    """A worker signal's stand-in: what was emitted."""

    def __init__(self) -> None:
        self.said: list = []

    def emit(self, record) -> None:
        self.said.append(record)


def write_volume(path, depth: int):
    import nibabel as nib

    data = np.zeros((16, 16, depth), np.int16)
    data[4:12, 4:12, 1:depth - 1] = 100
    nib.save(nib.Nifti1Image(data, np.eye(4)), str(path))
    (item,) = discover([path])
    return str(path), item.volume


@pytest.fixture
def session(tmp_path):
    model = with_sidecar(sigmoid3d(tmp_path / "blob3d.onnx"), "input:\n  patch: [4, 16, 16]\n  scale: 0.01\n")
    return open_session(load_spec(model), "cpu", warm_up=False)


def runs_of(monkeypatch) -> list[int]:
    """Each predict run's volume depth (one entry per session run of a patch batch)."""
    calls: list[int] = []
    original = LocalSession.run

    def counted(self, tensor):
        calls.append(tensor.shape[2])
        return original(self, tensor)

    monkeypatch.setattr(LocalSession, "run", counted)
    return calls


def fill(runner: Volume3DRunner, session, path: str, volume) -> None:
    runner.want(path)
    runner.fill(FillRequest(path, volume), session, session, None)


def test_each_volume_runs_once_and_the_least_recently_used_goes_past_the_budget(tmp_path, session, monkeypatch):
    volumes = [write_volume(tmp_path / f"v{k}.nii.gz", 8) for k in range(3)]
    progress, counted, failed = Heard(), Heard(), Heard()
    runner = Volume3DRunner(progress=progress, counted=counted, failed=failed)
    runs = runs_of(monkeypatch)
    for path, volume in volumes[:2]:
        fill(runner, session, path, volume)
    one = runner.kept_bytes // 2
    assert one > 0 and not failed.said
    monkeypatch.setattr(worker_volume3d, "KEPT_BYTES", 2 * one)  # room for two volumes' results
    done = len(runs)
    fill(runner, session, *volumes[0])  # kept: no run, and now the most recently used
    assert len(runs) == done and counted.said[-1].path == volumes[0][0]
    fill(runner, session, *volumes[2])  # a third: the least recently used (v1) goes
    assert len(runs) > done
    done = len(runs)
    fill(runner, session, *volumes[0])
    assert len(runs) == done, "v0 was used more recently than v1: it stays"
    fill(runner, session, *volumes[1])
    assert len(runs) > done, "v1 went to keep within the budget: it runs again"
    assert runner.kept_bytes <= 2 * one
    assert [p.path for p in progress.said if p.stage == "done"] == [volumes[0][0], volumes[1][0], volumes[2][0],
                                                                    volumes[1][0]]


def test_a_kept_result_serves_its_slices_after_another_model_and_back(tmp_path, session, monkeypatch):
    path, volume = write_volume(tmp_path / "v.nii.gz", 8)
    runner = Volume3DRunner(progress=Heard(), counted=Heard(), failed=Heard())
    fill(runner, session, path, volume)
    runs = runs_of(monkeypatch)
    runner.reset()  # another model was loaded …
    request = ViewRequest(1, ViewKey(path, 3), volume=volume)
    with pytest.raises(Stopped):  # … its slices wait for its own fill
        runner.slice_result(request, session, None, 0.0)
    fill(runner, session, path, volume)  # … and this model again: its result was kept
    assert not runs
    assert runner.slice_result(request, session, None, 0.0).mask[8, 8] == 1
