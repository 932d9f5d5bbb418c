"""The faces and the runs never ask a session what it is (ARCHITECTURE, "The seams"): an AST scan of app/ui, app/cli
and app/runs that fails on a `getattr(` or `hasattr(` probing a model session or a prompt model. What every
backend offers is a member of its protocol — ModelSession (app.inference.model.session) or PromptModel
(app.inference.prompt.request) — and is called as one; a member some backend lacks is added to the protocol
(each implementation saying what it means there), not probed for.

A probe is flagged when the probed object is named like a session or a model (`model`, `self._model`,
`remote`, `session`, `tuned_batch.model`, …) or when the attribute asked for is a member of either protocol on
anything but a command's parsed options (`args`: an option only some commands define).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("app/ui", "app/cli", "app/runs")
PROBES = {"getattr", "hasattr"}
SESSION_NAME = re.compile(r"(model|session|remote)", re.IGNORECASE)
MEMBERS = {  # ModelSession's and PromptModel's members
    "spec", "info", "in_flight", "timings", "timing_line", "run", "warm_up", "cancel", "close",
    "embed", "decode", "cached", "device_warning",
}


def _probes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES
                and len(node.args) >= 2):
            continue
        probed, attribute = node.args[0], node.args[1]
        name = probed.attr if isinstance(probed, ast.Attribute) else getattr(probed, "id", "")
        asked = attribute.value if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str) else ""
        if SESSION_NAME.search(name) or (asked in MEMBERS and name != "args"):
            found.append((node.lineno, ast.unparse(node)))
    return found


def _findings() -> list[str]:
    findings = []
    for folder in SCANNED:
        for path in sorted((REPO / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            findings += [f"{path.relative_to(REPO)}:{line}: {call}" for line, call in _probes(tree)]
    return findings


def test_no_face_or_run_probes_a_session_or_a_model():
    assert _findings() == [], "call the protocol's member (ModelSession, PromptModel) instead of probing for it"


def test_the_scan_sees_a_probe_in_each_of_its_forms():
    source = ("getattr(model, 'timings', ())\nhasattr(self._session, 'x')\ngetattr(runner, 'in_flight', 1)\n"
              "getattr(args, 'in_flight', 1)\ngetattr(exc, 'kind', '')\n")
    assert [line for line, _ in _probes(ast.parse(source))] == [1, 2, 3]
