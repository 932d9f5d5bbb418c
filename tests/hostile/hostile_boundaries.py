"""Every boundary of SegLens that reads a file, a YAML text or a network answer, registered for the hostile
battery. Each registration is a thin adapter over today's signature (imports inside, so one boundary's import
error fails only its own tests); `weak` names what still fails and the helper area that owns the fix."""

from __future__ import annotations

from pathlib import Path

from hostile_registry import Boundary, register

from app.errors import ImageError, ModelError, OutputError, SegLensError, SidecarError

REPO = Path(__file__).resolve().parents[2]  # the bundled models a station boundary runs with

SHA = "ab" * 32


# --- the gates themselves: they must pass everything ----------------------------------------------------------

def _read_untrusted(path: Path) -> object:
    from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted

    return read_untrusted(path, limit=SMALL_FILE_LIMIT, root=path.parent)


def _read_yaml(path: Path) -> object:
    from app.guard.yaml_load import read_yaml

    return read_yaml(path, root=path.parent)


def _load_yaml_text(text: str) -> object:
    from app.guard.yaml_load import load_yaml

    return load_yaml(text, source="a value")


def _net_fetch(url: str) -> object:
    from app.guard.net import fetch

    return fetch(url, deadline_s=2.0, max_bytes=1 << 20)


def _net_session(url: str) -> object:
    from app.guard.net_session import guarded_session

    with guarded_session(deadline_s=2.0, max_bytes=1 << 20) as session:
        return session.get(url, timeout=1.0).content


def _join_component(root: Path, name: str) -> Path:
    from app.guard.names import component, join_under

    return join_under(root, component(name))


def _remove_component(root: Path, name: str) -> object:
    from app.guard.names import component
    from app.guard.shared import remove_under

    (root.parent / "keep").mkdir(exist_ok=True)
    remove_under(root, component(name))
    assert (root.parent / "keep").is_dir(), "removed a folder outside the root"
    return root


_GATE = (OSError, ValueError)
# the gate's OSErrors carry the path in .filename and the problem in str() (callers quote it in their own line)
register(Boundary("gate_read_untrusted", "file", _read_untrusted, (OSError,), rooted=True, names_file=False))
register(Boundary("gate_read_yaml", "file", _read_yaml, _GATE, file_name="x.yaml", text=True, yaml=True,
                  rooted=True, names_file=False))
register(Boundary("gate_load_yaml", "text", _load_yaml_text, (ValueError,), names_file=False))
register(Boundary("gate_net_fetch", "url", _net_fetch, (OSError,), names_file=False))
register(Boundary("gate_net_session", "url", _net_session, (OSError,), names_file=False))
register(Boundary("gate_join_under", "name", _join_component, (ValueError,)))
register(Boundary("gate_remove_under", "name", _remove_component, (ValueError, OSError)))


# --- models: sidecars, labels, prompt sidecars, graphs --------------------------------------------------------

def _sidecar(path: Path) -> object:
    from app.inference.model.sidecar import load_sidecar

    return load_sidecar(path)


def _classes_file(path: Path) -> object:
    from app.inference.model.sidecar import load_sidecar

    sidecar = path.parent / "model.yaml"
    sidecar.write_text(f"classes_file: {path.name}\n")
    return load_sidecar(sidecar)


def _prompt_sidecar(path: Path) -> object:
    from app.inference.prompt.spec import load_prompt_spec

    return load_prompt_spec(path)


def _onnx_graph(path: Path) -> object:
    from app.inference.model.onnx_graph import read_graph

    return read_graph(path)


def _runtime_values(text: str) -> object:
    from app.inference.model.runtime_options import parse_runtime_arguments

    return parse_runtime_arguments([f"tensorrt={text}"])


register(Boundary("sidecar", "file", _sidecar, (SidecarError,), file_name="model.yaml", text=True, yaml=True))
register(Boundary("classes_file", "file", _classes_file, (SidecarError,), file_name="labels.txt", text=True,
                  rooted=True))
register(Boundary("prompt_sidecar", "file", _prompt_sidecar, (SegLensError,), file_name="pair.yaml", text=True,
                  yaml=True))
register(Boundary("onnx_graph", "file", _onnx_graph, (ModelError,), file_name="model.onnx"))
register(Boundary("runtime_values", "text", _runtime_values, (ValueError,), names_file=False))


# --- images, volumes, references, boxes -----------------------------------------------------------------------

def _image(path: Path) -> object:
    from app.io.images import read_image

    return read_image(path)


def _dicom(path: Path) -> object:
    from app.io.dicom import read_dicom

    return read_dicom(path, max_pixels=1 << 24)


def _nifti(path: Path) -> object:
    from app.io.nifti import nifti_volume

    return nifti_volume(path)


def _nifti_channel(path: Path) -> object:
    """A case's second channel found beside its first (app.io.channels): `path` is `case_0001.nii.gz`."""
    import nibabel as nib
    import numpy as np

    from app.io.channels import Channels, case_volume
    from app.io.nifti import nifti_volume

    first = path.parent / "case_0000.nii.gz"
    nib.save(nib.Nifti1Image(np.zeros((4, 4, 2), np.int16), np.eye(4)), str(first))
    return case_volume(nifti_volume(first), Channels(2, ("T1", "T2")))


def _reference(path: Path) -> object:
    from app.io.references import read_reference

    return read_reference(path, 3)


def _boxes(path: Path) -> object:
    from app.runs.prompts.boxes import read_boxes

    return read_boxes(path)


register(Boundary("image", "file", _image, (ImageError,), file_name="picture.png"))
register(Boundary("tiff", "file", _image, (ImageError,), file_name="picture.tif"))
register(Boundary("dicom", "file", _dicom, (ImageError,), file_name="slice.dcm"))
register(Boundary("nifti", "file", _nifti, (ImageError,), file_name="ct.nii.gz"))
register(Boundary("nifti_channel", "file", _nifti_channel, (ImageError,), file_name="case_0001.nii.gz", rooted=True))
register(Boundary("reference", "file", _reference, (ImageError,), file_name="picture_mask.png"))
register(Boundary("boxes_csv", "file", _boxes, (SegLensError,), file_name="boxes.csv"))


# --- settings and station files -------------------------------------------------------------------------------

def _station_file(path: Path) -> object:
    from app.runs.station.file import read_station_file

    return read_station_file(path)


def _pacs_nodes(path: Path) -> object:
    from app.io.pacs.nodes import load_nodes

    return load_nodes(path)


register(Boundary("station_file", "file", _station_file, (SegLensError,), file_name="station.yaml", text=True,
                  yaml=True))


def _station_sidecar(path: Path) -> object:
    """A station file whose `verdict:` replaces its sidecar's: the sidecar is read by the station (station_setup)."""
    from app.runs.station.file import read_station_file
    from app.runs.station.setup import station_spec

    station = path.parent / "station.yaml"
    station.write_text(f"model: {REPO / 'models' / 'surface_anomaly.onnx'}\nsidecar: {path.name}\n"
                       "source: {watch: in}\nout: out\nverdict: {fail_if: [{score_above: 0.5}]}\n")
    return station_spec(read_station_file(station))


def _station_input(path: Path) -> object:
    """A file of a station's watched folder (its root), as the station prepares it: decoded, or refused."""
    from app.inference.model.builder import load_spec
    from app.io.sources import Frame
    from app.runs.station.frames import prepare_frame

    frame = Frame(path.name, 0.0, path=path, size=1, mtime_ns=1, root=path.parent)
    ready = prepare_frame(load_spec(REPO / "models" / "surface_anomaly.onnx"), frame)
    if ready.error is not None:
        raise ready.error
    return ready


register(Boundary("station_sidecar", "file", _station_sidecar, (SegLensError,), file_name="line.yaml", text=True,
                  yaml=True))
register(Boundary("station_input", "file", _station_input, (SegLensError,), file_name="part.png", rooted=True))
register(Boundary("pacs_nodes", "file", _pacs_nodes, (SegLensError,), file_name="settings.yaml", text=True,
                  yaml=True))


# --- SegLens's own state where others can write: review log, provenance, lock, journal, MQTT buffer -----------

def _review_log(path: Path) -> object:
    from app.runs.review.log import REVIEW_FILE, ReviewLog

    assert path.name == REVIEW_FILE
    return ReviewLog.open(path.parent, SHA)


def _provenance(path: Path) -> object:
    from app.runs.outputs.provenance import png_provenance

    return png_provenance(path)


def _run_record(path: Path) -> object:
    from app.runs.outputs.provenance import record_path, resume_problem

    report = path.parent / "report.csv"
    assert record_path(report) == path, record_path(report)
    problem = resume_problem(report, _identity())  # a refusal is a returned line, for --resume to print
    if problem is not None:
        raise ValueError(problem)
    return None


def _identity() -> object:
    from app.runs.outputs.provenance import RunIdentity

    fields = {name: "x" for name in RunIdentity.__dataclass_fields__}
    return RunIdentity(**fields)  # type: ignore[arg-type]


def _run_lock(path: Path) -> object:
    from app.runs.outputs.lock import LOCK_NAME, OutputLock

    assert path.name == LOCK_NAME
    lock = OutputLock(path.parent)
    lock.acquire()
    lock.release()
    return path.parent


def _journal(path: Path) -> object:
    from app.runs.station.journal import JOURNAL_NAME, StationJournal

    assert path.name == JOURNAL_NAME
    return StationJournal(path.parent)


def _mqtt_buffer(path: Path) -> object:
    from app.runs.station.sinks.mqtt_buffer import OutBuffer

    return OutBuffer(path, max_count=10, max_bytes=4096)


def _opcua_certificate(path: Path) -> object:
    from app.runs.station.sinks.opcua_space import _certificate

    return _certificate(path)


_TAKEN_OVER = frozenset({"fifo", "dev_zero", "socket", "sparse_3gib", "folder"})  # stale: removed, then taken
register(Boundary("review_log", "file", _review_log, (SegLensError,), file_name="seglens_review.csv"))
register(Boundary("provenance", "file", _provenance, (SegLensError, ValueError, OSError),
                  file_name="picture_mask.png"))
register(Boundary("run_record", "file", _run_record, (SegLensError, ValueError, OSError),
                  file_name="report.csv.run.json"))
register(Boundary("run_lock", "file", _run_lock, (OutputError,), file_name=".seglens-run.lock",
                  harmless=_TAKEN_OVER))
register(Boundary("station_journal", "file", _journal, (OutputError,), file_name="station-journal.jsonl"))
register(Boundary("mqtt_buffer", "file", _mqtt_buffer, (OSError, ValueError, SegLensError),
                  file_name="mqtt-buffer.jsonl"))
register(Boundary("opcua_certificate", "file", _opcua_certificate, (ValueError,), file_name="client.pem"))


# --- servers: a remote sidecar by URL, DICOMweb ---------------------------------------------------------------

def _remote_sidecar(url: str) -> object:
    import tempfile

    from app.inference.remote.sidecar import fetch_sidecar
    from app.inference.remote.transport import Wire

    host = url.split("//", 1)[1].split("/", 1)[0]
    wire = Wire(host=host, tls=False, model="m", version="", timeout_s=2.0, token="a-secret-token-0123456789")
    return fetch_sidecar(url, wire, Path(tempfile.mkdtemp()))


def _dicomweb(url: str) -> object:
    from app.io.pacs.dicomweb import DicomWebClient
    from app.io.pacs.nodes import parse_node

    node = parse_node(f"dicomweb+{url.rstrip('/')}/dicom-web?timeout=2")
    return DicomWebClient(node).find_series("1.2.3")


register(Boundary("remote_sidecar_url", "url", _remote_sidecar, (SidecarError,), url_path="/model.yaml"))


def _remote_session(url: str) -> object:
    from app.inference.remote.session import RemoteTarget, open_remote_session

    origin = url.rstrip("/")
    return open_remote_session(RemoteTarget(origin, "m", timeout_s=2.0, retries=0), warm_up=False)


register(Boundary("remote_session_http", "url", _remote_session, (SegLensError,)))  # its metadata request
register(Boundary("dicomweb", "url", _dicomweb, (SegLensError,)))


# --- keys, certificates, names a server sends -----------------------------------------------------------------

def _pseudonym_key(path: Path) -> object:
    from app.runs.privacy.pseudonyms import read_key_file

    return read_key_file(path)


def _serve_tls(path: Path) -> object:
    from app.serve.server import read_tls

    other = path.parent / "key.pem"
    other.write_text("-----BEGIN PRIVATE KEY-----\n")
    return read_tls(path, other)


def _cache_series(root: Path, name: str) -> Path:
    from app.io.pacs.cache import instance_name, series_key

    return root / series_key(name) / instance_name(name)


register(Boundary("pseudonym_key", "file", _pseudonym_key, (SegLensError,), file_name="pseudonym.key"))
register(Boundary("serve_tls", "file", _serve_tls, (SegLensError, ValueError, OSError), file_name="cert.pem"))
register(Boundary("pacs_cache_names", "name", _cache_series, (ValueError,)))


def _remote_http(url: str) -> object:
    from app.inference.remote.session import RemoteTarget, open_remote_session

    target = RemoteTarget(url=url.rstrip("/"), model="m", timeout_s=2.0, retries=0, token="a-secret-token-0123456789")
    return open_remote_session(target, warm_up=False)


register(Boundary("remote_http_session", "url", _remote_http, (SegLensError,)))


def _device_argmax(path: Path) -> object:
    from app.inference.runtime.options import with_device_argmax

    return with_device_argmax(path, 1)


register(Boundary("device_argmax", "file", _device_argmax, (ModelError,), file_name="model.onnx"))


# --- instance labels read back as references: COCO JSON, YOLO txt and its data.yaml, label files' names ------

def _coco_json(path: Path) -> object:
    from app.runs.labels.coco_read import read_coco

    return read_coco(path, root=path.parent)


def _yolo_txt(path: Path) -> object:
    from app.runs.labels.yolo_read import read_yolo_labels

    return read_yolo_labels(path, image_hw=(8, 8), names=("pit",), root=path.parent)


def _data_yaml(path: Path) -> object:
    from app.runs.labels.yolo_read import read_data_yaml

    return read_data_yaml(path, root=path.parent)


def _yolo_label_path(root: Path, name: str) -> Path:
    from app.runs.labels.yolo_read import label_path

    return label_path(root, name)


register(Boundary("coco_json", "file", _coco_json, (SegLensError,), file_name="instances.json", text=True,
                  rooted=True))
register(Boundary("yolo_txt", "file", _yolo_txt, (SegLensError,), file_name="a.txt", text=True, rooted=True))
register(Boundary("data_yaml", "file", _data_yaml, (SegLensError,), file_name="data.yaml", text=True, yaml=True,
                  rooted=True))
register(Boundary("yolo_label_names", "name", _yolo_label_path, (SegLensError,)))


# --- an instance model's `run --reference`: its COCO file, a YOLO dataset's label files and the inputs' names -----

def _instance_scorer(reference: Path, inputs: list[object]) -> object:
    from types import SimpleNamespace

    from app.runs.folder.instance_reference import InstanceScorer

    return InstanceScorer(reference, SimpleNamespace(class_names=("pit",), detector=None), inputs)  # type: ignore[arg-type]


def _instance_reference_coco(path: Path) -> object:
    return _instance_scorer(path, [])


def _instance_reference_label(path: Path) -> object:
    """The hostile thing moved to labels/ of a dataset folder, scored as an input's label file: its notice (the
    run goes on without metrics for that image) is the refusal."""
    import os
    from types import SimpleNamespace

    from app.inference.model.instances import Instances
    from app.io.discover import InputFile

    (path.parent / "labels").mkdir(exist_ok=True)
    os.rename(path, path.parent / "labels" / path.name)
    item = InputFile(path.parent / "images" / "a.png", Path("a.png"))
    scorer = _instance_scorer(path.parent, [item])
    scored = scorer.score_result(item, SimpleNamespace(instances=Instances((), (8, 8))))  # type: ignore[attr-defined]
    if scored is not None and scored.notice:
        raise SegLensError(scored.notice)
    return scored


def _instance_reference_label_names(root: Path, name: str) -> Path:
    from app.io.discover import InputFile

    (root / "labels").mkdir(exist_ok=True)
    scorer = _instance_scorer(root, [])
    return scorer.yolo.label(InputFile(root / "images" / name, Path(name)))  # type: ignore[attr-defined, no-any-return]


register(Boundary("instance_reference_coco", "file", _instance_reference_coco, (SegLensError,),
                  file_name="instances.json", text=True))
register(Boundary("instance_reference_label", "file", _instance_reference_label, (SegLensError,), file_name="a.txt",
                  text=True, rooted=True))
register(Boundary("instance_reference_label_names", "name", _instance_reference_label_names, (SegLensError,)))


# --- an Ultralytics export's metadata (free text from the model file) and the YOLO labels written from a run -----

def _yolo_graph(metadata: dict[str, str]) -> object:
    from app.inference.model.onnx_graph import GraphInfo, TensorInfo
    from app.inference.model.yolo_head import read_head

    graph = GraphInfo(inputs=(TensorInfo("images", (1, 3, 160, 160), "float32"),),
                      outputs=(TensorInfo("output0", (1, 7, 525), "float32"),), metadata=metadata, final_ops={},
                      argmax_channels={}, opset=17, producer="pytorch")
    return read_head(Path("model.onnx"), graph)


def _yolo_metadata_task(text: str) -> object:
    return _yolo_graph({"author": "Ultralytics", "task": text, "names": "{0: 'a', 1: 'b', 2: 'c'}"})


def _yolo_metadata_values(text: str) -> object:
    """Every value Ultralytics writes as a Python literal set to the hostile text: read defensively, the graph's
    own sizes taken instead (finishing is right; hanging, crashing or a stack overflow is not)."""
    return _yolo_graph({"task": "detect", **dict.fromkeys(("names", "imgsz", "stride", "args", "end2end"), text)})


def _yolo_label_export(root: Path, name: str) -> Path:
    from app.guard.names import join_under
    from app.inference.model.instances import Instances
    from app.runs.labels.records import LabelledImage, LabelSet
    from app.runs.labels.yolo import LABELS, label_parts, write_yolo

    write_yolo(root, LabelSet(("pit",), (LabelledImage(name, Instances((), (8, 8))),)))
    return join_under(root, LABELS, *label_parts(name))


register(Boundary("yolo_metadata_task", "text", _yolo_metadata_task, (ModelError,), names_file=False))
register(Boundary("yolo_metadata_values", "text", _yolo_metadata_values, (ModelError,), names_file=False,
                  harmless=frozenset({"alias_bomb", "deep_nesting"})))
register(Boundary("yolo_label_export_names", "name", _yolo_label_export, (SegLensError,)))


# --- imported models: a PyTorch checkpoint (a pickle: only tensors and plain values are rebuilt) -----------------

def _torch_checkpoint(path: Path) -> object:
    from app.io.checkpoint import network_weights, read_checkpoint

    return network_weights(read_checkpoint(path))


register(Boundary("torch_checkpoint", "file", _torch_checkpoint, (ModelError,), file_name="checkpoint_final.pth"))


# --- imported models: an nnU-Net trained-model folder's JSON (plans.json, dataset.json, dataset_fingerprint.json) --

def _nnunet_json(path: Path) -> object:
    from app.runs.imports.nnunet.folder import load_json

    return load_json(path, root=path.parent)


register(Boundary("nnunet_json", "file", _nnunet_json, (ModelError,), file_name="plans.json", text=True,
                  rooted=True))


# --- imported models: a MONAI bundle's inference config (JSON, or YAML through the one loader) -----------------

def _monai_config(path: Path) -> object:
    from app.runs.imports.monai.reader import load_config

    return load_config(path, root=path.parent)


register(Boundary("monai_config_json", "file", _monai_config, (ModelError,), file_name="inference.json", text=True,
                  rooted=True))
register(Boundary("monai_config_yaml", "file", _monai_config, (ModelError,), file_name="inference.yaml", text=True,
                  yaml=True, rooted=True))
