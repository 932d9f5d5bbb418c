"""Propagate ▲/▼ over slices the reader never showed (issue 28): each propagated slice's correction is saved in the
background — the slice's model mask made on the inference worker at the reader's threshold, the propagated mask
painted into it in the class — without the reader visiting each slice; closing the window right after a
propagation waits for them, and nothing is lost. Was: those slices waited in `Propagation.pending` until shown,
and closing (or opening other files) lost them, with only a log warning."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from PySide6.QtCore import QObject, Qt, QThread, Signal, Slot
from PySide6.QtTest import QTest

from ui import test_smart_volume
from ui.test_smart_volume import CENTRE, DEPTH, TIMEOUT, accept_on_slice

volume_window = test_smart_volume.volume_window  # the fixture: a NIfTI ball, the binary test model


def model_mask(model_path, path: str, frame: int, threshold: float | None) -> np.ndarray:
    """The window's model's mask of slice `frame`, made here on its own session (as the viewer decides it)."""
    from app.inference.decide.tuning import with_threshold
    from app.inference.image import pipeline
    from app.inference.model.builder import load_spec
    from app.inference.runtime.session import open_session
    from app.io.images import read_slice
    from app.io.nifti import nifti_volume

    model = open_session(load_spec(model_path), "cpu")
    spec, min_confidence = with_threshold(model.spec, threshold)
    model.spec = spec
    result = pipeline.run_image(model, read_slice(nifti_volume(Path(path)), frame))
    if min_confidence is not None:
        result = pipeline.relabel(result, spec=spec, min_confidence=min_confidence)
    return result.mask


def propagate_down(qtbot, window):
    """Accept a proposal on the centre slice, record every slice the prompt worker propagates, then Propagate ▼."""
    smart = accept_on_slice(qtbot, window)
    propagated: dict[int, np.ndarray] = {}
    smart.worker.propagated.connect(lambda item: propagated.__setitem__(item.slice.index, item.slice.mask))
    QTest.keyClick(window, Qt.Key.Key_PageDown, Qt.KeyboardModifier.AltModifier)
    return smart.propagation, propagated


def expected_correction(window, path: str, frame: int, mask: np.ndarray) -> np.ndarray:
    expected = model_mask(window.model_path, path, frame, window.state.tuning.threshold).copy()
    expected[mask] = window.editor.label()
    return expected


def saved_file(path: str, frame: int) -> Path:
    from app.runs.review.log import review_folder

    name = Path(path).name
    return review_folder(Path(path).parent) / f"{name}_slice{frame + 1:04d}_mask.png"


@pytest.mark.parametrize("nudge", [0, 499], ids=["model threshold", "threshold 0.999"])
def test_slices_never_shown_are_saved_in_the_background(qtbot, volume_window, nudge):
    window, path = volume_window
    if nudge:
        with qtbot.waitSignal(window.tuner.retuned_shown, timeout=TIMEOUT):
            window.panel.decision.nudge(nudge)
        assert window.state.tuning.threshold == pytest.approx(0.999)
    propagation, propagated = propagate_down(qtbot, window)
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    qtbot.waitUntil(lambda: not propagation.pending, timeout=60_000)  # each slice's model mask made, merged, saved
    given = sorted(propagated)
    assert len(given) >= 5 and given[0] == CENTRE + 1 and all(frame < DEPTH for frame in given)
    assert sorted(propagation.saved) == given
    for frame in given:
        written = saved_file(path, frame)
        assert propagation.saved[frame] == str(written)
        np.testing.assert_array_equal(np.asarray(Image.open(written)),
                                      expected_correction(window, path, frame, propagated[frame]))
    line = window.panel.edit._propagation_line.text()
    assert line.startswith(f"{len(given)} slices given the mask, all saved; "), line
    assert window.state.shown.key.frame == CENTRE  # what is shown stays


class Hold(QObject):
    """Keeps the inference thread busy until `release` is set (so the slices' model masks are still to make)."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self._release = release

    @Slot()
    def hold(self) -> None:
        self._release.wait(60)


class Trigger(QObject):
    go = Signal()


@pytest.fixture
def release():
    """Set to let a held inference thread go on; set at the end whatever happened (before the window closes)."""
    event = threading.Event()
    yield event
    event.set()


def hold_inference(window, release: threading.Event) -> tuple[Hold, Trigger]:
    """The inference thread held from now until `release` is set (keep the pair alive meanwhile)."""
    hold, trigger = Hold(release), Trigger()
    hold.moveToThread(window.worker_thread)
    trigger.go.connect(hold.hold)  # queued: `hold` lives on the inference thread
    trigger.go.emit()
    return hold, trigger


def release_when_the_prompt_thread_ends(window, release: threading.Event) -> None:
    """Closing stops the prompt thread first; only then may the held inference thread go on."""
    prompt = next(thread for thread in window.findChildren(QThread) if thread.objectName() == "prompt")
    prompt.finished.connect(release.set, Qt.ConnectionType.DirectConnection)


def assert_saved(window, path: str, propagated: dict[int, np.ndarray]) -> None:
    for frame, mask in propagated.items():
        np.testing.assert_array_equal(np.asarray(Image.open(saved_file(path, frame))),
                                      expected_correction(window, path, frame, mask))


def test_closing_right_after_a_propagation_waits_and_loses_nothing(qtbot, volume_window, release):
    window, path = volume_window
    held = hold_inference(window, release)
    propagation, propagated = propagate_down(qtbot, window)
    release_when_the_prompt_thread_ends(window, release)
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    assert len(propagated) >= 5 and sorted(frame for _, frame in propagation.pending) == sorted(propagated)
    line = window.panel.edit._propagation_line.text()
    assert line.startswith(f"{len(propagated)} slices given the mask, 0 saved, {len(propagated)} being saved…; ")
    window.close()  # the slices' model masks are not made yet: the window waits for them
    assert not propagation.pending and sorted(propagation.saved) == sorted(propagated) and held
    assert_saved(window, path, propagated)


def test_closing_while_propagating_saves_every_slice_propagated(qtbot, volume_window, release):
    window, path = volume_window
    held = hold_inference(window, release)
    propagation, propagated = propagate_down(qtbot, window)
    release_when_the_prompt_thread_ends(window, release)
    qtbot.waitUntil(lambda: len(propagated) >= 2, timeout=60_000)
    window.close()  # the propagation stops; every slice it gave is saved before the window goes
    assert propagated and not propagation.pending and held
    assert_saved(window, path, propagated)


def test_opening_other_files_meanwhile_saves_them_where_they_belong(qtbot, volume_window, release, tmp_path):
    window, path = volume_window
    other = tmp_path / "other"
    other.mkdir()
    Image.fromarray(np.full((32, 32), 200, np.uint8)).save(other / "a.png")
    held = hold_inference(window, release)
    propagation, propagated = propagate_down(qtbot, window)
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    assert propagation.pending
    accepted = window.editor.smart.accepted.mask
    window.add_paths([other])  # the volume is no longer listed when its slices' model masks arrive
    centre = saved_file(path, CENTRE)  # the accepted proposal, being edited: saved first (was a KeyError, lost)
    assert centre.exists() and np.asarray(Image.open(centre))[accepted].all()
    release.set()
    qtbot.waitUntil(lambda: not propagation.pending, timeout=60_000)
    assert held and sorted(propagation.saved) == sorted(propagated)
    assert_saved(window, path, propagated)


def test_the_slice_masks_slots_and_signals_take_one_frozen_record_each():
    import dataclasses

    from PySide6.QtCore import QMetaMethod

    from app.ui.state import slice_mask_messages
    from app.ui.workers.worker_slice_masks import SliceMasks
    from ui.test_thread_records import _methods

    kinds = (QMetaMethod.MethodType.Signal, QMetaMethod.MethodType.Slot)
    methods = {name: types for kind in kinds for name, types in _methods(SliceMasks, kind).items()}
    assert methods == {name: ["PyObject"] for name in ("ready", "failed", "make", "make_now")}
    records = [value for value in vars(slice_mask_messages).values()
               if isinstance(value, type) and dataclasses.is_dataclass(value)]
    assert len(records) == 4 and all(record.__dataclass_params__.frozen for record in records)


def test_slices_whose_model_masks_cannot_be_made_are_said_by_slice(qtbot, volume_window, release, tmp_path, caplog):
    window, path = volume_window
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    held = hold_inference(window, release)
    propagation, propagated = propagate_down(qtbot, window)
    qtbot.waitUntil(lambda: not propagation.running, timeout=60_000)
    window.open_model(broken)  # replaces the model before the slices' masks are made: there is none to make them
    release.set()
    qtbot.waitUntil(lambda: len(propagation.unsaved) == len(propagated), timeout=60_000)
    last = max(propagated) + 1  # the model's change ended edit mode: the status bar says it, slice by slice
    assert window.status.currentMessage() == f"slice {last}: the propagated mask is not saved yet: {path}: no model " \
        "is loaded"
    window.close()
    slices = ", ".join(str(frame + 1) for frame in sorted(propagated))
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "not saved" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(f"closing: the propagated masks of slices {slices} are not saved (file "), said
    assert said[0].endswith(": no model is loaded)")
    assert "ball" not in said[0] and held  # the file is named by its reference at WARNING


def test_closing_while_editing_saves_the_edit(qtbot, volume_window):
    """Leaving the picture or edit mode saves an edit in progress; closing the window is leaving it too."""
    window, path = volume_window
    smart = accept_on_slice(qtbot, window)
    accepted, edited = smart.accepted.mask, window.editor.mask.copy()
    window.close()
    saved = np.asarray(Image.open(saved_file(path, CENTRE)))
    np.testing.assert_array_equal(saved, edited)
    assert saved[accepted].all()
