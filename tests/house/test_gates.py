"""Every boundary through its gate (issue 36, ARCHITECTURE rule 6): an AST scan of app/ that fails when a raw call
a gate wraps appears outside its gate module.

What is banned, and where it is still allowed:

- `yaml`'s loaders (`load`, `safe_load`, `full_load`, `unsafe_load`, their `_all`, `compose`, `parse`, `scan`, any
  `*Loader` class): only in app/guard/yaml_load.py (`read_yaml`, `load_yaml`: size, no aliases, depth, duplicates).
  Dumping YAML is not a boundary.
- HTTP clients (`urllib.request`'s openers and `Request`, `http.client`'s connections, `requests`' verbs and
  `Session`): only in app/guard/net.py and its net_session.py (`fetch`, `guarded_session`: deadline per request,
  size cap, no redirect elsewhere). Code may use the session `guarded_session` returns, and name `requests`'
  exception classes.
- `os.open`: only in app/guard/ (the untrusted and shared opens choose its flags).
- The builtin `open()` (and `io.open`, `codecs.open`) and `Path.open/read_text/read_bytes`: only in app/guard/, or
  in a function of ALLOWED below (SegLens's own resources, /proc, files SegLens just wrote itself).
- `Path.write_text/write_bytes`, and the path-based writers that follow a link planted under the name
  (`shutil.copy*`, `os.truncate`, `os.chmod`, `os.chown`): only in app/guard/ (`shared.atomic_write`, `open_update`:
  never through a planted link, whole or not at all) or in ALLOWED.
- `shutil.rmtree`: only in app/guard/shared.py (`remove_under`: root + components, through `names.join_under`).
- `os.unlink/remove/replace/rename/rmdir` and `Path.unlink/rename/replace/rmdir`: only in app/guard/ — nothing is
  deleted or replaced through a path that did not come out of the gates — or in ALLOWED.
- A library that opens a path itself (`pydicom.dcmread`, `nibabel.load`, `PIL.Image.open`, `onnx.load`,
  `onnxruntime.InferenceSession`, `numpy.fromfile`/`load`, `cv2.imread`, `tifffile`): only in a function that
  itself opens the file through the untrusted gate (`open_untrusted` or `read_untrusted`: the library reads
  that handle or those bytes), or in ALLOWED. `untrusted_problem` alone does not count: a check, then the path
  handed over, is two lookups, and a file swapped for a FIFO between them hangs the library (audit finding 6).

A finding names file:line, the raw call and the gate to use. ALLOWED is the one list of exceptions, each with the
file, the function and why (as the import-linter contracts write theirs); an entry that no longer matches fails
too, so the list cannot rot. There is no other way out: a new raw call is moved into its gate or written into
ALLOWED with its reason, in review.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"


@dataclass(frozen=True)
class Rule:
    """One kind of raw call: where it may appear (`gate`: a file or a folder of app/) and what to use instead."""

    name: str
    gate: str
    use: str


YAML = Rule("yaml", "app/guard/yaml_load.py", "app.guard.yaml_load.read_yaml / load_yaml")
NET = Rule("net", "app/guard/net", "app.guard.net.fetch / guarded_session")  # net.py and its net_session.py
OS_OPEN = Rule("os.open", "app/guard/", "app.guard.untrusted.open_untrusted (reading) or app.guard.shared's opens")
READ = Rule("read", "app/guard/", "app.guard.untrusted.open_untrusted / read_untrusted with a limit")
WRITE = Rule("write", "app/guard/", "app.guard.shared.atomic_write / open_new / open_append")
RMTREE = Rule("rmtree", "app/guard/shared.py", "app.guard.shared.remove_under(root, *components)")
REMOVE = Rule("remove", "app/guard/", "app.guard.shared.remove_under / atomic_write (root + components, via "
              "app.guard.names.join_under)")
LIBRARY = Rule("library", "app/guard/", "app.guard.untrusted.open_untrusted / read_untrusted (hand the library the "
               "handle or the bytes, never the path)")

_YAML_LOADERS = {"load", "safe_load", "full_load", "unsafe_load", "load_all", "safe_load_all", "full_load_all",
                 "unsafe_load_all", "compose", "compose_all", "parse", "scan"}
_NET_NAMES = {
    "urllib.request.urlopen", "urllib.request.build_opener", "urllib.request.Request",
    "urllib.request.OpenerDirector", "urllib.request.install_opener", "urllib.request.urlretrieve",
    "urllib.request.HTTPRedirectHandler", "urllib.request.HTTPHandler", "urllib.request.HTTPSHandler",
    "http.client.HTTPConnection", "http.client.HTTPSConnection",
    "requests.Session", "requests.session", "requests.request", "requests.get", "requests.post", "requests.put",
    "requests.patch", "requests.delete", "requests.head", "requests.options", "requests.sessions.Session",
    "requests.api.request", "urllib3.PoolManager", "urllib3.request", "urllib3.HTTPConnectionPool",
    "urllib3.HTTPSConnectionPool", "httpx.Client", "httpx.AsyncClient", "httpx.get", "httpx.post",
}
_OS_REMOVERS = {"os.unlink", "os.remove", "os.replace", "os.rename", "os.renames", "os.rmdir", "os.removedirs",
                "shutil.move"}
_OPENERS = {"io.open", "codecs.open", "builtins.open"}
# by path, each follows a link planted under the name (a copy reads its target, a truncate or chmod changes it)
_PATH_WRITERS = {"shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "os.truncate", "os.chmod",
                 "os.chown", "os.lchown"}
_LIBRARY_READERS = {
    "pydicom.dcmread", "pydicom.read_file", "pydicom.filereader.dcmread", "nibabel.load", "PIL.Image.open",
    "onnx.load", "onnx.load_model", "onnxruntime.InferenceSession", "numpy.fromfile", "numpy.load",
    "numpy.memmap", "cv2.imread", "cv2.imreadmulti", "tifffile.imread", "tifffile.TiffFile",
}
_TEXT_MODES = {"r", "rb", "rt", "w", "wb", "wt", "a", "ab", "x", "xb", "r+", "r+b", "rb+", "w+", "w+b", "wb+",
               "a+", "ab+", "a+b"}
_UNTRUSTED_GATE = {"open_untrusted", "read_untrusted"}  # untrusted_problem is a check, not the open the library reads


@dataclass(frozen=True)
class Finding:
    rule: Rule
    file: str  # relative to the repository root
    line: int
    function: str  # the innermost def (Class.method), "<module>" at the top level
    what: str

    def line_text(self) -> str:
        return f"{self.file}:{self.line} ({self.function}): {self.what} outside {self.rule.gate} — use {self.rule.use}"


@dataclass(frozen=True)
class Allowed:
    """An exception: `rule` may appear in `function` of `file` because of `why`."""

    rule: Rule
    file: str
    function: str
    why: str


# The one list of exceptions. SegLens's own resources (under install_root() or the frozen bundle), the kernel's
# /proc, and files SegLens itself wrote a moment ago in a folder only it writes.
ALLOWED: tuple[Allowed, ...] = (
    Allowed(READ, "app/inference/runtime/telemetry.py", "process_rss_mb",
            "/proc/self/statm: the kernel's own file about this process, not something another user can plant"),
    Allowed(READ, "app/inference/volume3d/memory.py", "available_memory",
            "/proc/meminfo: the kernel's own file"),
    Allowed(READ, "app/inference/runtime/doctor.py", "_flavor",
            "the FLAVOR marker inside the frozen bundle (sys._MEIPASS): SegLens's own install, read-only"),
    Allowed(LIBRARY, "app/inference/runtime/doctor.py", "check_provider",
            "onnxruntime gets the bytes of a one-node model doctor builds in memory (_tiny_model), no file"),
    Allowed(LIBRARY, "app/inference/runtime/session.py", "_create_session",
            "ONNX Runtime is handed the model's path: from bytes it cannot find the model's external data files "
            "beside it, and a 2 GB model would be held twice; _create opens the file through open_untrusted first "
            "(non-blocking: a FIFO or device refused) and holds it open while ORT loads, and ORT itself refuses an "
            "external data file that is not a regular file"),
    Allowed(LIBRARY, "app/runs/station/privacy.py", "deidentified_dicom",
            "pydicom parses bytes in memory (io.BytesIO) that the folder sink read through the untrusted gate"),
    Allowed(REMOVE, "app/logs.py", "RotatingFile._shift",
            "SegLens's own log in its own per-user folder (platformdirs), rotated by renaming its numbered copies"),
)


def _python_files() -> Iterator[Path]:
    yield from sorted(APP.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


class _Scanner(ast.NodeVisitor):
    """Finds the raw calls of one module, names resolved through its imports (aliases included)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.imports: dict[str, str] = {}
        self.defined: set[str] = set()
        self.findings: list[Finding] = []
        self._functions: list[str] = []
        self._calls_gate: list[bool] = []
        self._pending_library: list[list[Finding]] = []

    # names -------------------------------------------------------------------------------------------------
    def collect_imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == "open":
                self.defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == "open":
                self.defined.add(node.id)

    def qualified(self, node: ast.expr) -> str | None:
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.imports:
            return None
        return ".".join([self.imports[node.id], *reversed(parts)])

    # where we are -----------------------------------------------------------------------------------------
    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self._functions.append(node.name)
        is_function = not isinstance(node, ast.ClassDef)
        if is_function:
            self._calls_gate.append(False)
            self._pending_library.append([])
        self._visit_body(node)
        if is_function:
            calls_gate = self._calls_gate.pop()
            pending = self._pending_library.pop()
            if not calls_gate:
                self.findings.extend(pending)
        self._functions.pop()

    def _visit_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for child in ast.iter_child_nodes(node):
            if child is getattr(node, "returns", None) or child is getattr(node, "args", None):
                self._visit_defaults(child)
                continue
            self.visit(child)

    def _visit_defaults(self, child: ast.AST) -> None:
        if isinstance(child, ast.arguments):
            for default in [*child.defaults, *(d for d in child.kw_defaults if d is not None)]:
                self.visit(default)

    visit_FunctionDef = _scope
    visit_AsyncFunctionDef = _scope
    visit_ClassDef = _scope

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)

    def function(self) -> str:
        return ".".join(self._functions) or "<module>"

    def add(self, rule: Rule, node: ast.AST, what: str) -> None:
        self.findings.append(Finding(rule, self.file, getattr(node, "lineno", 0), self.function(), what))

    # what we look for -------------------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._check_name(node)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self._check_name(node)

    def _check_name(self, node: ast.Attribute | ast.Name) -> None:
        name = self.qualified(node)
        if name is None or (isinstance(node, ast.Name) and name.count(".") == 0):
            return
        head, _, last = name.rpartition(".")
        if head == "yaml" and (last in _YAML_LOADERS or last.endswith("Loader")):
            self.add(YAML, node, f"yaml.{last}")
        elif name in _NET_NAMES:
            self.add(NET, node, name)
        elif name == "os.open":
            self.add(OS_OPEN, node, "os.open")
        elif name == "shutil.rmtree":
            self.add(RMTREE, node, "shutil.rmtree")
        elif name in _OS_REMOVERS:
            self.add(REMOVE, node, name)
        elif name in _OPENERS:
            self.add(READ, node, name)
        elif name in _PATH_WRITERS:
            self.add(WRITE, node, name)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open" and "open" not in self.imports | dict.fromkeys(
                self.defined):
            self.add(READ if _mode(node).startswith("r") else WRITE, node, f"open(…, {_mode(node)!r})")
        elif isinstance(func, ast.Attribute):
            self._check_method(node, func)
        name = self.qualified(func)
        if name in _LIBRARY_READERS and self._pending_library:
            self._pending_library[-1].append(Finding(LIBRARY, self.file, node.lineno, self.function(),
                                                     f"{name}(…) with no untrusted check in the same function"))
        elif name in _LIBRARY_READERS:
            self.add(LIBRARY, node, f"{name}(…) at module level")
        if self._calls_gate and _gate_call(func):
            self._calls_gate[-1] = True
        self.generic_visit(node)

    def _check_method(self, node: ast.Call, func: ast.Attribute) -> None:
        if self.qualified(func) is not None:
            return  # a module's function (yaml.load, os.unlink): _check_name has it
        attr, n_args = func.attr, len(node.args)
        if attr in ("read_text", "read_bytes"):
            self.add(READ, node, f".{attr}()")
        elif attr in ("write_text", "write_bytes"):
            self.add(WRITE, node, f".{attr}()")
        elif attr == "open" and _path_open(node):
            self.add(READ if _mode(node).startswith("r") else WRITE, node, f".open({_mode(node)!r})")
        elif attr in ("unlink", "rmdir") and not _string(func.value):
            self.add(REMOVE, node, f".{attr}()")
        elif attr in ("rename", "replace") and n_args == 1 and not node.keywords and not _string(func.value):
            self.add(REMOVE, node, f".{attr}(…)")


def _string(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)


def _mode(call: ast.Call) -> str:
    """The mode an open() call names ("r" when it names none). The builtin's mode is its second argument,
    Path.open's its first."""
    positional = call.args[1:] if isinstance(call.func, ast.Name) else call.args
    for arg in positional[:1]:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
        return "?"
    for keyword in call.keywords:
        if keyword.arg == "mode":
            return keyword.value.value if isinstance(keyword.value, ast.Constant) else "?"
    return "r"


def _path_open(call: ast.Call) -> bool:
    """Whether `x.open(…)` is a Path's (or a file-like's) open: it names a mode or an encoding, or (no argument)
    `x` is named like a path; a dialog's or a controller's open() is neither."""
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value in _TEXT_MODES:
        return True
    if any(k.arg in ("mode", "encoding", "newline", "errors", "buffering") for k in call.keywords):
        return True
    receiver = ast.unparse(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    return not call.args and re.search(r"(path|file|sidecar|yaml|csv|json|report|folder|dir)\W*$", receiver,
                                       re.IGNORECASE) is not None


def _gate_call(func: ast.expr) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _UNTRUSTED_GATE


def scan(path: Path, source: str | None = None) -> list[Finding]:
    """The raw calls in one file of app/ (`source`: its text, when it is not the file's)."""
    file = _rel(path)
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    scanner = _Scanner(file)
    scanner.collect_imports(tree)
    scanner.visit(tree)
    return [f for f in scanner.findings if not f.file.startswith(f.rule.gate) and not _in_gate(f)]


def _in_gate(finding: Finding) -> bool:
    return finding.rule.gate.endswith("/") and finding.file.startswith(finding.rule.gate)


def _allowed(finding: Finding) -> bool:
    return any(a.rule == finding.rule and a.file == finding.file and a.function == finding.function
               for a in ALLOWED)


def all_findings() -> list[Finding]:
    return [finding for path in _python_files() for finding in scan(path)]


def test_no_raw_call_outside_its_gate() -> None:
    """Each raw call is in its gate or in ALLOWED (with its reason)."""
    found = [f for f in all_findings() if not _allowed(f)]
    assert not found, "raw calls outside their gate (ARCHITECTURE rule 6):\n" + "\n".join(
        f.line_text() for f in found)


def test_every_allowed_exception_still_matches() -> None:
    """An ALLOWED entry that matches nothing is stale: remove it, so it cannot excuse a later raw call."""
    findings = all_findings()
    stale = [a for a in ALLOWED if not any(f.rule == a.rule and f.file == a.file and f.function == a.function
                                           for f in findings)]
    assert not stale, "stale ALLOWED entries: " + "; ".join(f"{a.file} {a.function} ({a.rule.name})" for a in stale)


def test_every_allowed_exception_says_why() -> None:
    assert all(len(a.why) > 20 and a.function for a in ALLOWED)


_SCRATCH = {
    "yaml": ("import yaml\n\ndef f(p):\n    return yaml.safe_load(p)\n", YAML),
    "yaml alias": ("from yaml import SafeLoader as L, load\n\ndef f(t):\n    return load(t, Loader=L)\n", YAML),
    "urlopen": ("import urllib.request\n\ndef f(u):\n    return urllib.request.urlopen(u)\n", NET),
    "requests": ("import requests\n\ndef f(u):\n    return requests.get(u)\n", NET),
    "http.client": ("from http.client import HTTPSConnection\n\ndef f(h):\n    return HTTPSConnection(h)\n", NET),
    "rmtree": ("import shutil\n\ndef f(p):\n    shutil.rmtree(p)\n", RMTREE),
    "os.open": ("import os\n\ndef f(p):\n    return os.open(p, os.O_RDONLY)\n", OS_OPEN),
    "open": ("def f(p):\n    with open(p, 'rb') as h:\n        return h.read()\n", READ),
    "open write": ("def f(p):\n    with open(p, 'w') as h:\n        h.write('x')\n", WRITE),
    "read_text": ("def f(p):\n    return p.read_text(encoding='utf-8')\n", READ),
    "Path.open": ("def f(p):\n    with p.open('rb') as h:\n        return h.read()\n", READ),
    "Path.open()": ("def f(sidecar_path):\n    with sidecar_path.open() as h:\n        return h.read()\n", READ),
    "write_bytes": ("def f(p):\n    p.write_bytes(b'x')\n", WRITE),
    "os.replace": ("import os\n\ndef f(a, b):\n    os.replace(a, b)\n", REMOVE),
    "shutil.copy": ("from shutil import copy2\n\ndef f(a, b):\n    copy2(a, b)\n", WRITE),
    "os.truncate": ("import os\n\ndef f(p):\n    os.truncate(p, 0)\n", WRITE),
    "Path.unlink": ("def f(p):\n    p.unlink(missing_ok=True)\n", REMOVE),
    "Path.rename": ("def f(p, q):\n    p.rename(q)\n", REMOVE),
    "dcmread": ("import pydicom\n\ndef f(p):\n    return pydicom.dcmread(p)\n", LIBRARY),
    "Image.open": ("from PIL import Image\n\ndef f(p):\n    return Image.open(p)\n", LIBRARY),
    "checked, then the path": ("from app.guard.untrusted import untrusted_problem\nimport pydicom\n\ndef f(p):\n"
                               "    if untrusted_problem(p, limit=10) is None:\n        return pydicom.dcmread(p)\n",
                               LIBRARY),
}


@pytest.mark.parametrize("case", sorted(_SCRATCH))
def test_a_scratch_raw_call_is_found(case: str) -> None:
    """The scan finds each kind of raw call, aliases included, and names file:line and the gate to use."""
    source, rule = _SCRATCH[case]
    found = scan(APP / "io" / "scratch.py", source)
    assert {f.rule for f in found} == {rule}, found
    text = found[0].line_text()
    assert text.startswith("app/io/scratch.py:") and f"use {rule.use}" in text


@pytest.mark.parametrize("source", [
    "import yaml\n\ndef f(v):\n    return yaml.safe_dump(v)\n",  # dumping is not a boundary
    "import requests\n\ndef f(e):\n    return isinstance(e, requests.exceptions.HTTPError)\n",
    "import requests\n\ndef f(s: requests.Session) -> requests.Session:\n    return s\n",  # a type, not a call
    "def f(dialog):\n    dialog.open()\n",  # a Qt dialog's open
    "def f(text):\n    return text.replace('a', 'b')\n",
    "from app.guard.untrusted import open_untrusted\nfrom PIL import Image\n\ndef f(p):\n"
    "    with open_untrusted(p, limit=10) as h:\n        return Image.open(h)\n",
])
def test_what_is_not_a_raw_call(source: str) -> None:
    assert scan(APP / "io" / "scratch.py", source) == []


def test_the_gates_themselves_may_make_the_raw_calls() -> None:
    assert scan(APP / "guard" / "yaml_load.py", "import yaml\n\ndef f(t):\n    return yaml.load(t, Loader=L)\n") == []
    assert scan(APP / "guard" / "untrusted.py", "import os\n\ndef f(p):\n    return os.open(p, 0)\n") == []
    found = scan(APP / "guard" / "untrusted.py", "import shutil\n\ndef f(p):\n    shutil.rmtree(p)\n")
    assert [f.rule for f in found] == [RMTREE]  # rmtree only in shared.py
