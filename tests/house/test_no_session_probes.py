"""Nothing in app/ asks an object of SegLens's own what it is (ARCHITECTURE, "The seams"): an AST scan of every module
of app/ that fails on a `getattr(` or `hasattr(` probing anything but a module, a command's parsed options or a
caught exception, unless the probe is on the allow-list below with its reason.

What every backend, source or sink offers is a member of its protocol — ModelSession (app.inference.model.session),
PromptModel (app.inference.prompt.request), Source (app.io.sources), Sink (app.runs.station.sinks) — and is called as
one; a member some implementation lacks is added to the protocol (each implementation saying what it means there), not
probed for. A record of a union is told apart by `isinstance`, and an optional field is read as the field it is.

What is left to probe are objects of other packages whose attributes vary by version or by kind (pydicom's datasets,
PyYAML's events, a third-party response), a record's fields read by a name held in a variable, and a widget's own
attribute made on its first layout: each is listed in ALLOWED with why. A probe on a name that reads as one of
SegLens's typed objects (a session, model, spec, result, source, sink, outcome…) is never allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROBES = {"getattr", "hasattr"}
TYPED_NAME = re.compile(r"(session|model|remote|spec|result|source|sink|outcome|judgement|verdict|proposal|record)",
                        re.IGNORECASE)
OPTIONS = "args"  # argparse's Namespace: an option only some commands define

# (module, the probe as ast.unparse writes it) -> why it stays a probe
ALLOWED: dict[tuple[str, str], str] = {
    ("app/cli/console.py", "getattr(self._stream, 'encoding', 'utf-8')"):
        "a text stream (sys.stderr, a test's StringIO): not every stream has an encoding",
    ("app/guard/net_session.py", "getattr(_CURRENT, 'watchdog', None)"):
        "a threading.local: the attribute exists only on the threads that set it",
    ("app/guard/net_session.py", "getattr(self._raw, name)"):
        "a wrapper passing every other attribute through to the third-party session it wraps",
    ("app/guard/yaml_load.py", "getattr(event, 'anchor', None)"): "PyYAML's events: only some kinds carry an anchor",
    ("app/guard/yaml_load.py", "getattr(event, 'tag', None)"): "PyYAML's events: only some kinds carry a tag",
    ("app/inference/remote/transport.py", "getattr(self._response, name)"):
        "a wrapper passing every other attribute through to urllib3's response",
    ("app/inference/remote/transport.py", "getattr(response, '_sock', None)"):
        "urllib3's response internals, which differ between its versions",
    ("app/inference/remote/transport.py", "getattr(response, '_pool', None)"):
        "urllib3's response internals, which differ between its versions",
    ("app/inference/remote/transport.py", "getattr(value, choice)"):
        "a protobuf message's oneof field, named by WhichOneof",
    ("app/inference/model/runtime_options.py", "getattr(over, name)"):
        "the options record's fields read by the names it says were given",
    ("app/inference/model/runtime_options.py", "getattr(self, f.name)"):
        "the options record's own fields read by name (dataclasses.fields)",
    ("app/inference/runtime/providers.py", "getattr(ort, 'preload_dlls', None)"):
        "onnxruntime, handed in as a module: preload_dlls exists from its 1.21 on",
    ("app/serve/server.py", "getattr(ex, 'reason', None)"):
        "any exception handed to KServe's interceptor: only KServe's own carry a reason",
    ("app/ui/state/remote_messages.py", "getattr(exc, 'hint', None)"):
        "an error of any kind handed in: only a RemoteError carries the CLI's hint",
    ("app/ui/state/remote_messages.py", "getattr(exc, 'kind', '')"):
        "an error of any kind handed in: only some SegLensErrors (remote, PACS) carry a kind",
    ("app/inference/runtime/diagnostics.py", "getattr(imported, '__version__', 'unknown')"):
        "a third-party module imported by name: not every one has __version__",
    ("app/io/dicom.py", "getattr(syntax, 'name', str(syntax))"):
        "pydicom's transfer syntax: a UID with a name, or a plain string",
    ("app/io/dicom.py", "hasattr(value, '__len__')"): "a pydicom element's value: one number or a sequence of them",
    ("app/io/geometry.py", "hasattr(value, '__iter__')"): "a DICOM value: one number or a sequence of them",
    ("app/io/images.py", "getattr(img, 'n_frames', 1)"): "Pillow's images: only multi-frame formats have n_frames",
    ("app/io/pacs/dicomweb.py", "getattr(instances, 'close', None)"):
        "dicomweb-client's answer: a generator to close, or a list",
    ("app/io/pacs/dicomweb_arrivals.py", "getattr(dataset, 'file_meta', None)"):
        "pydicom's Dataset: file_meta only once read from a file",
    ("app/io/pacs/dicomweb_errors.py", "getattr(cause, 'verify_message', '')"):
        "ssl's certificate error: verify_message is set by OpenSSL, not always",
    ("app/io/pacs/dicomweb_errors.py", "getattr(item, 'reason', None)"):
        "the exceptions of a chain (requests, urllib3): only some carry a reason",
    ("app/io/pacs/dimse_arrivals.py", "getattr(event.request, 'AffectedSOPInstanceUID', '')"):
        "pynetdicom's request: a DICOM message whose optional element may be absent",
    ("app/io/pacs/dimse_common.py", "getattr(getattr(assoc.dul, 'socket', None), 'socket', None)"):
        "pynetdicom's association internals, which differ between its versions",
    ("app/io/pacs/dimse_common.py", "getattr(assoc.dul, 'socket', None)"):
        "pynetdicom's association internals, which differ between its versions",
    ("app/io/pacs/nodes.py", "getattr(node, key)"): "a node's fields read by name (dataclasses.fields) to write it out",
    ("app/io/series.py", "getattr(ds, 'file_meta', None)"): "pydicom's Dataset: file_meta only once read from a file",
    ("app/logs.py", "getattr(h, 'baseFilename', None)"): "logging's handlers: only a file handler has a file name",
    ("app/runs/folder/metrics.py", "getattr(c, k)"): "a record's fields read by name (dataclasses.fields)",
    ("app/runs/outputs/provenance.py", "getattr(identity, key)"):
        "the run identity's fields read by the names of the checks that compare them",
    ("app/runs/privacy/check.py", "getattr(dataset, 'file_meta', None)"):
        "pydicom's Dataset: file_meta only once read from a file",
    ("app/runs/privacy/deidentify.py", "getattr(dataset, 'file_meta', None)"):
        "pydicom's Dataset: file_meta only once read from a file",
    ("app/runs/privacy/deidentify.py", "getattr(value, 'original_string', None)"):
        "pydicom's values: only a parsed DA/TM/PN keeps the original string",
    ("app/runs/station/sinks/mqtt.py", "getattr(reason, 'is_failure', False)"):
        "paho's reason code: a ReasonCode (MQTT 5) or a plain int (3.1.1)",
    ("app/ui/controllers/remote.py", "getattr(form, key)"): "the dialog's form record's fields read by name",
    ("app/ui/state/view_state.py", "getattr(self, by)"): "its own counters read by the name a caller passes",
    ("app/ui/state/view_state.py", "getattr(v, 'nbytes', 0)"):
        "a cache's values: numpy arrays weigh their bytes, anything else nothing",
    ("app/ui/widgets/panels.py", "getattr(self, '_widest', 0)"): "a widget's width remembered from its first layout",
    ("app/ui/widgets/viewer.py", "getattr(self, '_orientation', None)"):
        "a widget's attribute set once a volume is shown",
    ("app/ui/widgets/viewer.py", "getattr(self, '_detail_table', None)"): "a widget's table made on first use",
}


def _bound_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(the names the module's imports bind, the names its `except … as` bind)."""
    imported, caught = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            imported |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            caught.add(node.name)
    return imported, caught


def _root(node: ast.expr) -> str:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else ""


def _probes(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, the probe, the probed object's own name) of every probe on anything but a module, the options or a
    caught exception."""
    imported, caught = _bound_names(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in PROBES
                and len(node.args) >= 2):
            continue
        probed = node.args[0]
        root = _root(probed)
        if root in imported or root == OPTIONS or (isinstance(probed, ast.Name) and root in caught):
            continue
        name = probed.attr if isinstance(probed, ast.Attribute) else root
        found.append((node.lineno, ast.unparse(node), name))
    return found


def _scan() -> list[tuple[str, int, str, str]]:
    found = []
    for path in sorted((REPO / "app").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        found += [(path.relative_to(REPO).as_posix(), line, call, name) for line, call, name in _probes(tree)]
    return found


def test_nothing_in_app_probes_an_object_of_its_own():
    probes = [f"{path}:{line}: {call}" for path, line, call, _ in _scan() if (path, call) not in ALLOWED]
    assert probes == [], ("call the protocol's member (ModelSession, PromptModel, Source, Sink) or read the record's "
                          "field instead of probing for it; a probe on another package's object goes on ALLOWED "
                          "with its reason")


def test_no_probe_of_a_typed_object_is_allowed():
    typed = [f"{path}:{line}: {call}" for path, line, call, name in _scan()
             if (path, call) in ALLOWED and TYPED_NAME.search(name)]
    assert typed == []


def test_every_allowed_probe_is_still_there():
    seen = {(path, call) for path, _line, call, _name in _scan()}
    assert sorted(key for key in set(ALLOWED) - seen if (REPO / key[0]).exists()) == []


def test_the_scan_sees_a_probe_in_each_of_its_forms():
    source = ("import os\nfrom x import y\n"
              "getattr(model, 'timings', ())\nhasattr(self._session, 'x')\ngetattr(runner, 'in_flight', 1)\n"
              "getattr(spec, 'review', ())\ngetattr(source, 'stalled', False)\ngetattr(sink, 'lost', 0)\n"
              "getattr(args, 'in_flight', 1)\ngetattr(os, 'O_NOFOLLOW', 0)\ngetattr(y.z, 'w', 0)\n"
              "try:\n    pass\nexcept OSError as exc:\n    getattr(exc, 'strerror', '')\n")
    assert [line for line, _, _ in _probes(ast.parse(source))] == [3, 4, 5, 6, 7, 8]
