"""Which backend runs a model is data, not a question asked of an object (ARCHITECTURE, "The seams"):

- no face and no run checks a session's, a prompt model's or a source's concrete class (`isinstance(model,
  PromptSession)`): what differs between implementations is a member of their protocol (`PromptModel.model_free`,
  `Source.stalled`…);
- whether a spec's model is on a server is its `ModelSpec.remote`, so neither what a run writes (app.runs.outputs),
  nor the 2D pipeline (app.inference.image), nor the model's description (app.inference.describe) imports the remote
  room to sniff a path.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FACES = ("app/ui", "app/cli", "app/runs", "app/serve")
CONCRETE = {"LocalSession", "RemoteSession", "PromptSession", "GrabCutSession", "WatchSource", "VideoSource",
            "CapturedSource", "GenICamSource"}
NOT_REMOTE = ("app/runs/outputs", "app/inference/image", "app/inference/describe")
REMOTE = "app.inference.remote"


def _modules(*folders: str) -> list[tuple[str, ast.AST]]:
    return [(path.relative_to(REPO).as_posix(), ast.parse(path.read_text(encoding="utf-8")))
            for folder in folders for path in sorted((REPO / folder).rglob("*.py"))]


def _class_checks(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance" \
                and len(node.args) == 2:
            names = {n.id if isinstance(n, ast.Name) else getattr(n, "attr", "") for n in ast.walk(node.args[1])}
            if names & CONCRETE:
                found.append((node.lineno, ast.unparse(node)))
    return found


def _remote_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(REMOTE):
            found.append((node.lineno, str(node.module)))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith(REMOTE)]
    return found


def test_no_face_or_run_checks_a_backends_class():
    checks = [f"{path}:{line}: {call}" for path, tree in _modules(*FACES) for line, call in _class_checks(tree)]
    assert checks == [], "add what differs to the protocol (ModelSession, PromptModel, Source) and call it"


def test_outputs_the_pipeline_and_the_description_do_not_import_the_remote_room():
    imports = [f"{path}:{line}: {module}" for path, tree in _modules(*NOT_REMOTE)
               for line, module in _remote_imports(tree)]
    assert imports == [], "read ModelSpec.remote (or SessionInfo.remote) instead of the remote room's names"


def test_the_scans_see_what_they_look_for():
    source = ("from app.inference.remote.graph import is_remote_path\nimport app.inference.remote.name\n"
              "isinstance(model, PromptSession)\nisinstance(s, (int, remote.RemoteSession))\nisinstance(x, Outcome)\n")
    tree = ast.parse(source)
    assert [line for line, _ in _remote_imports(tree)] == [1, 2]
    assert [line for line, _ in _class_checks(tree)] == [3, 4]
