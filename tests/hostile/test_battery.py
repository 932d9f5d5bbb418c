"""The hostile battery: every class of hostile input against every registered boundary (tests/hostile/
boundaries.py), each call in a forked child bounded in time and memory (hostile_kit.run_bounded): a hang or an unbounded
read fails its test instead of blocking the suite."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import hostile_boundaries  # noqa: F401 - registers every boundary
import pytest
from hostile_kit import (
    ALIAS_BOMB,
    DEEP_NESTING,
    FILE_MAKERS,
    ROOTED_MAKERS,
    TEXT_MAKERS,
    TRAVERSAL_NAMES,
    YAML_MAKERS,
    Outcome,
    hostile_server,
    run_bounded,
)
from hostile_registry import BOUNDARIES, Boundary, qualified

_MAKERS = {**FILE_MAKERS, **TEXT_MAKERS, **YAML_MAKERS, **ROOTED_MAKERS}
_TEXTS = {"alias_bomb": ALIAS_BOMB, "deep_nesting": DEEP_NESTING}


def _cases() -> Iterator[object]:
    for boundary in BOUNDARIES.values():
        for hostile in boundary.classes():
            marks = []
            owner = boundary.weak.get(hostile)
            if owner:
                marks.append(pytest.mark.xfail(strict=True, reason=owner))
            yield pytest.param(boundary.name, hostile, id=f"{boundary.name}-{hostile}", marks=marks)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short folder (a Unix socket's path must stay under 108 bytes), the hostile input's root inside it."""
    folder = Path(tempfile.mkdtemp(prefix="hk-", dir="/tmp"))
    (folder / "root").mkdir()
    try:
        yield folder / "root"
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize(("name", "hostile"), list(_cases()))
def test_boundary_refuses(name: str, hostile: str, short_tmp: Path) -> None:
    boundary = BOUNDARIES[name]
    if boundary.kind == "url":
        _url_case(boundary, hostile)
        return
    call, named = _prepare(boundary, hostile, short_tmp)
    outcome = run_bounded(call, seconds=boundary.seconds)
    _judge(boundary, hostile, outcome, named)


def _prepare(boundary: Boundary, hostile: str, root: Path) -> tuple[Callable[[], object], str]:
    if boundary.kind == "file":
        path = _MAKERS[hostile](root / boundary.file_name)
        return (lambda: boundary.call(path)), path.name
    if boundary.kind == "text":
        text = _TEXTS[hostile]
        return (lambda: boundary.call(text)), ""
    name = TRAVERSAL_NAMES[[f"name {n!r}" for n in TRAVERSAL_NAMES].index(hostile)]
    return (lambda: _stays_under(root, boundary.call(root, name))), ""


def _stays_under(root: Path, result: object) -> object:
    if isinstance(result, os.PathLike):
        real = Path(os.path.realpath(result))
        if real != Path(os.path.realpath(root)) and Path(os.path.realpath(root)) not in real.parents:
            raise AssertionError(f"escaped the root: {result}")
    return result


def _url_case(boundary: Boundary, hostile: str) -> None:
    with hostile_server(hostile, boundary.url_path) as server:
        outcome = run_bounded(lambda: boundary.call(server.url), seconds=boundary.seconds)
        reached_other = list(server.hits) if hostile == "redirect" else []
    _judge(boundary, hostile, outcome, "127.0.0.1")
    assert not reached_other, f"{boundary.name}: the redirect was followed to another origin: {reached_other}"


def _judge(boundary: Boundary, hostile: str, outcome: Outcome, named: str) -> None:
    where = f"{boundary.name} with {hostile}"
    assert outcome.kind != "timeout", f"{where}: hung ({outcome.describe()})"
    assert outcome.kind != "crashed", f"{where}: {outcome.describe()}"
    if outcome.kind == "returned":
        assert hostile in boundary.harmless or boundary.kind == "name", f"{where}: accepted it ({outcome.describe()})"
        return
    wanted = {qualified(kind) for kind in boundary.refusal}
    assert wanted & set(outcome.classes), f"{where}: {outcome.describe()}; wanted one of {sorted(wanted)}"
    assert "MemoryError" not in outcome.classes[0], f"{where}: ran out of memory ({outcome.describe()})"
    assert "\n" not in outcome.message.strip(), f"{where}: not one line: {outcome.message[:500]!r}"
    if boundary.names_file and named:
        assert named in outcome.message, f"{where}: the message does not name {named!r}: {outcome.message!r}"


def test_every_boundary_the_issue_names_is_registered() -> None:
    """The boundaries issue 36 lists (a new one registers here too: it then gets the whole battery)."""
    assert {"sidecar", "classes_file", "prompt_sidecar", "station_file", "pacs_nodes", "runtime_values",
            "boxes_csv", "reference", "image", "dicom", "nifti", "onnx_graph", "review_log", "provenance",
            "run_lock", "station_journal", "mqtt_buffer", "opcua_certificate", "remote_sidecar_url",
            "dicomweb"} <= set(BOUNDARIES)
