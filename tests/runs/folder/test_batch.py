"""Pipelined folder runs: order, error rows, batching, cancel."""

from __future__ import annotations

import csv
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import expected_stripes, stripes
from PIL import Image

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.folder.batch import run_inputs
from app.runs.folder.plan import Callbacks, RunPlan
from app.runs.outputs.report import ReportWriter


def make_folder(root, count=12, bad_every=4):
    root.mkdir()
    for i in range(count):
        if i % bad_every == 2:
            (root / f"img{i}.png").write_bytes(b"broken")
        else:
            Image.fromarray(stripes(37 + i, 53 + 2 * i)).save(root / f"img{i}.png")
    return root


def rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def run(model_path, folder, out, *, batch_size=1, progress=None, **kwargs):
    model = open_session(load_spec(model_path), "cpu")
    inputs = discover([folder])
    plan = RunPlan(spec=model.spec, inputs=tuple(inputs), out=out, batch=batch_size)
    with ReportWriter(out / "report.csv", model.spec) as report:
        summary = run_inputs(model, plan, report=report, progress=Callbacks(outcome=progress), **kwargs)
    return summary, inputs


def plan_of(model, inputs, out):
    """The plan of a run of `inputs` into `out` with the defaults (masks saved)."""
    return RunPlan(spec=model.spec, inputs=tuple(inputs), out=out)


def test_report_is_in_input_order_with_error_rows_in_place(models, tmp_path):
    folder = make_folder(tmp_path / "in")
    summary, inputs = run(models("rgb_classes"), folder, tmp_path / "out")
    table = rows(tmp_path / "out" / "report.csv")
    assert [r["path"] for r in table] == [str(i.path) for i in inputs]
    assert [r["status"] for r in table] == ["error" if i % 4 == 2 else "ok" for i in range(12)]
    assert (summary.ok, summary.failed, summary.cancelled) == (9, 3, False)
    for i in (0, 5, 11):
        mask = np.asarray(Image.open(tmp_path / "out" / f"img{i}.png_mask.png"))
        np.testing.assert_array_equal(mask, expected_stripes(37 + i, 53 + 2 * i))


def test_batching_same_shape_images_gives_the_same_masks(models, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(7):
        image = stripes(40, 60)
        image[i, i] = 255
        Image.fromarray(image).save(folder / f"s{i}.png")
    run(models("rgb_classes"), folder, tmp_path / "one")
    summary, _ = run(models("rgb_classes"), folder, tmp_path / "four", batch_size=4)
    assert summary.ok == 7
    for i in range(7):
        a = np.asarray(Image.open(tmp_path / "one" / f"s{i}.png_mask.png"))
        b = np.asarray(Image.open(tmp_path / "four" / f"s{i}.png_mask.png"))
        np.testing.assert_array_equal(a, b)


def test_cancel_leaves_complete_files_and_lists_every_input_once(models, tmp_path):
    folder = make_folder(tmp_path / "in", count=30, bad_every=1000)
    stop = threading.Event()

    def progress(outcome, summary):
        if summary.ok >= 3:
            stop.set()

    summary, inputs = run(models("rgb_classes"), folder, tmp_path / "out", progress=progress,
                          should_stop=stop.is_set)
    table = rows(tmp_path / "out" / "report.csv")
    assert summary.cancelled and [r["path"] for r in table] == [str(i.path) for i in inputs]
    done = [r for r in table if r["status"] == "ok"]
    skipped = [r for r in table if r["status"] == "skipped"]
    failed = [r for r in table if r["status"] == "error"]  # img2 is broken
    assert len(done) >= 3 and len(failed) == 1 and len(done) + len(failed) + len(skipped) == 30 and skipped
    assert all("cancelled" in r["error"] for r in skipped)
    masks = sorted((tmp_path / "out").glob("*_mask.png"))
    assert len(masks) == len(done)
    for mask in masks:
        Image.open(mask).load()  # every written file is complete
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_a_model_that_dies_mid_run_leaves_the_rest_listed_as_not_processed(models, tmp_path):
    folder = make_folder(tmp_path / "in", count=10, bad_every=1000)
    model = open_session(load_spec(models("rgb_classes")), "cpu")
    calls = {"n": 0}
    real_run = model.run

    def dying_run(tensor):
        calls["n"] += 1
        if calls["n"] > 4:
            raise MemoryError("device lost")
        return real_run(tensor)

    model.run = dying_run
    inputs = discover([folder])
    with ReportWriter(tmp_path / "out" / "report.csv", model.spec) as report:
        summary = run_inputs(model, plan_of(model, inputs, tmp_path / "out"), report=report)
    table = rows(tmp_path / "out" / "report.csv")
    assert [r["path"] for r in table] == [str(i.path) for i in inputs]  # nobody dropped
    skipped = [r for r in table if r["status"] == "skipped"]
    assert skipped and all("MemoryError: device lost" in r["error"] for r in skipped)
    assert summary.failed >= len(skipped) and not summary.cancelled


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is a Linux feature")
def test_helper_threads_run_at_lower_priority_and_the_caller_does_not(models, tmp_path, monkeypatch):
    import app.runs.folder.batch as batch

    def niceness() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    seen: dict[str, set[int]] = {"prefetch": set(), "writer": set()}
    real_prepare = batch._prepare

    def spy_prepare(*args):
        seen["prefetch"].add(niceness())
        return real_prepare(*args)

    monkeypatch.setattr(batch, "_prepare", spy_prepare)
    base = niceness()
    folder = make_folder(tmp_path / "in", count=6)
    summary, _ = run(models("rgb_classes"), folder, tmp_path / "out", helper_niceness=5,
                     progress=lambda _o, _s: seen["writer"].add(niceness()))
    assert summary.ok + summary.failed == 6
    assert seen == {"prefetch": {min(19, base + 5)}, "writer": {min(19, base + 5)}}
    assert niceness() == base  # the thread that owns the session (and joins ORT's intra-op work) is untouched


class _FailingReport:
    """A report whose disk fills up after `ok` rows (what a `.partial` on a full disk does)."""

    def __init__(self, spec, ok: int) -> None:
        self.real_rows: list[str] = []
        self.skipped: list[str] = []
        self.ok = ok

    def add_result(self, path, result, *, verdict=None) -> None:
        if len(self.real_rows) >= self.ok:
            time.sleep(0.5)  # meanwhile inference fills the writer's queue: nobody will drain it
            raise OSError(28, "No space left on device")
        self.real_rows.append(str(path))

    def add_error(self, path, message, *, provider="", status="error") -> None:
        if status != "skipped":
            raise OSError(28, "No space left on device")
        self.skipped.append(str(path))

    def add_row(self, values) -> None:
        raise AssertionError("nothing to resume here")


def test_a_writer_that_dies_with_a_full_queue_ends_the_run_in_one_line(models, tmp_path):
    """The audit's hang: the writer died (report on a full disk) with its queue full, and close() waited forever."""
    from app.runs.folder.batch import RunStopped

    folder = tmp_path / "in"
    folder.mkdir()
    Image.fromarray(stripes(300, 300)).save(folder / "a_big.png")
    for i in range(4):  # as many as the writer's queue holds: the inference loop ends while the queue is full
        Image.fromarray(stripes(16, 16)).save(folder / f"b{i:02d}.png")
    model = open_session(load_spec(models("rgb_classes")), "cpu")
    inputs = discover([folder])
    report = _FailingReport(model.spec, ok=0)
    outcome: dict = {}

    def go() -> None:
        try:
            run_inputs(model, plan_of(model, inputs, tmp_path / "out"), report=report)
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the run hung after its writer died"
    error = outcome.get("error")
    assert isinstance(error, RunStopped), error
    message = str(error)
    assert "\n" not in message and "No space left on device" in message
    assert "0 of 5 inputs finished and reported" in message
    assert report.real_rows == []
    assert report.skipped == [str(i.path) for i in inputs]  # every input listed, where the report could write


def test_a_folder_that_could_not_be_listed_gets_an_error_row(models, tmp_path):
    from app.io.discover import InputFile

    Image.fromarray(stripes()).save(tmp_path / "a.png")
    locked = InputFile(tmp_path / "locked", Path("locked"),
                       "cannot list this folder (Permission denied): the images in it were not read")
    model = open_session(load_spec(models("rgb_classes")), "cpu")
    with ReportWriter(tmp_path / "out" / "report.csv", model.spec) as report:
        summary = run_inputs(model, plan_of(model, [*discover([tmp_path / "a.png"]), locked], tmp_path / "out"),
                             report=report)
    table = rows(tmp_path / "out" / "report.csv")
    assert (summary.ok, summary.failed) == (1, 1)
    assert table[1]["status"] == "error" and "cannot list this folder (Permission denied)" in table[1]["error"]
