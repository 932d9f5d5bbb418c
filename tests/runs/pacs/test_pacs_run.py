"""app.runs.pacs.run: the PACS options refused in the plan (before anything connects), and against a real Orthanc on
loopback (tests/io/pacs/orthanc.py: skipped without Orthanc, failed in CI) the whole loop through the one folder-run
seam: the CT sample retrieved over C-GET into the cache, ct_demo run on the cached series, its SEG, SC and
RTSTRUCT (never the NIfTI) stored over STOW-RS and found by a series query instance for instance, the study's image
series afterwards still the CT alone; under --anonymize the pseudonymous outputs found and sent to a research node."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.pacs.cache import SeriesCache
from app.io.pacs.nodes import parse_node
from app.runs.folder.plan import PlanRefused
from app.runs.folder.run import LocalRunner, RunPlan, plan_run, run_folder
from app.runs.pacs.run import (
    PacsPlan,
    client_of,
    image_series,
    plan_pacs,
    retrieve,
    send_exports,
    written_exports,
)
from tests.dicom_factory import write_series
from tests.io.pacs.orthanc import Orthanc

ROOT = Path(__file__).resolve().parents[3]
CT_FILES = sorted((ROOT / "resources" / "samples" / "ct").glob("IM[0-9][0-9][0-9][0-9]"))
HEADER = pydicom.dcmread(CT_FILES[0], stop_before_pixels=True)
STUDY, SERIES = str(HEADER.StudyInstanceUID), str(HEADER.SeriesInstanceUID)
WEB = parse_node("dicomweb+http://127.0.0.1:1/dicom-web")
RESEARCH = parse_node("dicomweb+http://127.0.0.1:1/dicom-web?research=1")


@pytest.mark.parametrize(("options", "line"), [
    ({"send": WEB, "exports": ("dicom-seg",), "anonymize": True},
     f"--anonymize with --send {WEB.name}: a de-identified (pseudonymised) result is sent only to a research node "
     "(research: true in its settings): beside the identified study it would pass for another patient"),
    ({"send": RESEARCH, "exports": ("dicom-seg",), "anonymize": False},
     f"--send {RESEARCH.name} without --anonymize: an identified result is never sent to a research node "
     "(research: true in its settings): de-identify it first (--anonymize)"),
    ({"send": WEB, "exports": ("nifti",)},
     "--send stores the DICOM files --export writes: add --export with dicom-seg, sc or rtstruct (nifti, PNGs and "
     "reports stay local)"),
    ({"send": WEB, "exports": None}, "--send stores the DICOM files --export writes: add --export with dicom-seg, sc "
                                     "or rtstruct (nifti, PNGs and reports stay local)"),
    ({"source": WEB, "paths": [Path("x")], "study_uid": "1.2"},
     "--from NODE runs on the study it retrieves: give no PATH beside it"),
    ({"source": WEB, "paths": []}, "--from NODE needs --study UID (the StudyInstanceUID; `seglens-cli pacs find`)"),
    ({"study_uid": "1.2", "paths": [Path("x")]},
     "--study and --series name what to retrieve --from a PACS node: add --from NODE"),
    ({"paths": []}, "no inputs: give PATH... or --from NODE --study UID"),
    ({"source": WEB, "paths": [], "study_uid": "1.2", "ray": "auto"},
     "--from with --ray auto: the study is retrieved into this machine's cache, which the cluster's nodes cannot "
     "read; `seglens-cli pacs get` it to a folder every node can read and run on that"),
])
def test_the_plan_refuses_in_one_line(options, line):
    asked = {"source": None, "study_uid": "", "series_uid": "", "send": None, "paths": [Path("in")], "exports": None,
             "anonymize": False, **options}
    with pytest.raises(PlanRefused) as refused:
        plan_pacs(**asked)
    assert str(refused.value) == line


def test_one_environment_secret_for_two_nodes_is_refused_in_the_plan(monkeypatch):
    """--from and --send on two nodes with auth whose secret would both come from SEGLENS_PACS_SECRET."""
    source = parse_node("dicomweb+http://127.0.0.1:1/dicom-web?user=a")
    send = parse_node("dicomweb+http://127.0.0.1:2/dicom-web?user=b")
    asked = {"source": source, "study_uid": STUDY, "series_uid": "", "send": send, "paths": [],
             "exports": ("dicom-seg",), "anonymize": False}
    monkeypatch.delenv("SEGLENS_PACS_SECRET", raising=False)
    assert plan_pacs(**asked).send == send  # each from the keyring
    monkeypatch.setenv("SEGLENS_PACS_SECRET", "one-password")
    with pytest.raises(PlanRefused) as refused:
        plan_pacs(**asked)
    assert str(refused.value) == (
        f"$SEGLENS_PACS_SECRET would be sent to two nodes ({source.name} and {send.name}): give each node its own "
        "secret (a settings node NAME reads SEGLENS_PACS_SECRET_NAME, or the keyring)")


def test_a_pseudonymised_result_may_go_to_a_research_node():
    plan = plan_pacs(source=WEB, study_uid=STUDY, series_uid="", send=RESEARCH, paths=[],
                     exports=("dicom-seg", "nifti"), anonymize=True, ray="local")
    assert plan == PacsPlan(source=WEB, study_uid=STUDY, send=RESEARCH)


# --- against Orthanc ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Orthanc]:
    orthanc = Orthanc.launch(tmp_path_factory.mktemp("orthanc"))
    try:
        yield orthanc
    finally:
        orthanc.stop(graceful=True)


@pytest.fixture
def study(server: Orthanc, monkeypatch: pytest.MonkeyPatch) -> Iterator[Orthanc]:
    """The server holding the CT sample alone (cleared after), its password in SEGLENS_PACS_SECRET."""
    server.start()
    server.clear()
    server.upload(CT_FILES)
    monkeypatch.setenv("SEGLENS_PACS_SECRET", server.password)
    yield server
    server.clear()


def nodes(server: Orthanc) -> tuple[PacsPlan, str]:
    """A plan retrieving the study over DIMSE (C-GET), and the DICOMweb node URL (basic auth)."""
    return (PacsPlan(source=parse_node(server.dimse_url), study_uid=STUDY),
            f"dicomweb+http://127.0.0.1:{server.http_port}/dicom-web?user={server.user}")


def run_ct_demo(folders: list[Path], out: Path, *, exports: tuple[str, ...], anonymize: bool = False) -> RunPlan:
    spec = load_spec(ROOT / "models" / "ct_demo.onnx")
    plan = plan_run(spec, folders, out=out, exports=exports, anonymize=anonymize)
    run = run_folder(plan, LocalRunner(open_session(spec, "cpu")))
    assert (run.summary.ok, run.summary.failed) == (1, 0), (out / "seglens_report.csv").read_text()
    return plan


def test_retrieve_run_send_and_find(study, tmp_path):
    source, web = nodes(study)
    cache = SeriesCache(tmp_path / "cache")
    [got] = retrieve(source, cache=cache)
    assert (got.series_uid, got.files) == (SERIES, 32) and cache.complete(SERIES) == got.folder

    plan = run_ct_demo([got.folder], tmp_path / "out", exports=("dicom-seg", "sc", "rtstruct", "nifti"))
    files = written_exports(plan.spec, plan.inputs, out=tmp_path / "out", exports=("dicom-seg", "sc", "rtstruct",
                                                                                     "nifti"))
    names = sorted({p.name if p.parent.name != p.parent.parent.name else p.parent.name for p in files})
    assert len(files) == 34 and not [p for p in files if p.name.endswith((".nii.gz", ".png", ".csv"))], names
    sent = send_exports(parse_node(web), files)
    assert sent.complete and (sent.files, sent.stored) == (34, 34)
    assert sorted((s.modality, s.files, s.found) for s in sent.series) == [
        ("OT", 32, 32), ("RTSTRUCT", 1, 1), ("SEG", 1, 1)]
    assert {s.study_uid for s in sent.series} == {STUDY}
    for s in sent.series:  # on the server, as written
        assert len(study.series_instances(s.series_uid)) == s.files
    # the study's image series: the CT, not the results sent beside it
    assert [r.series_uid for r in image_series(client_of(parse_node(web)), STUDY)] == [SERIES]
    assert sent.line().startswith(f"sent to {web}: 34 of 34 files stored (")


def test_anonymized_results_are_found_under_their_pseudonyms_and_go_to_a_research_node(study, tmp_path, monkeypatch):
    monkeypatch.setenv("SEGLENS_PSEUDONYM_KEY", "a0" * 32)
    files = write_series(tmp_path / "in", slices=6, rows=64, columns=64)
    study.upload(files)
    _, web = nodes(study)
    source = PacsPlan(source=parse_node(study.dimse_url),
                      study_uid=str(pydicom.dcmread(files[0], stop_before_pixels=True).StudyInstanceUID))
    [got] = retrieve(source, cache=SeriesCache(tmp_path / "cache"))
    plan = run_ct_demo([got.folder], tmp_path / "out", exports=("dicom-seg",), anonymize=True)
    [seg] = written_exports(plan.spec, plan.inputs, out=tmp_path / "out", exports=("dicom-seg",), key=plan.key)
    header = pydicom.dcmread(seg, stop_before_pixels=True)
    assert "PID-0042" not in str(header.PatientID) and "Doe" not in str(header.PatientName)
    assert header.StudyInstanceUID != source.study_uid  # pseudonymised: not beside the identified study
    sent = send_exports(parse_node(web + "&research=1"), [seg])
    assert sent.complete and [(s.modality, s.found) for s in sent.series] == [("SEG", 1)]
    assert sent.series[0].study_uid == header.StudyInstanceUID  # found in the study it names, whichever that is


def test_a_run_from_keeps_every_series_of_its_study_in_a_cache_too_small_for_them(server, tmp_path, monkeypatch):
    """Eviction after the second series took the first before the run read it (a cache bound under the study)."""
    server.start()
    server.clear()
    monkeypatch.setenv("SEGLENS_PACS_SECRET", server.password)
    study_uid = pydicom.uid.generate_uid()
    for n in range(3):
        server.upload(write_series(tmp_path / f"s{n}", slices=2, rows=16, columns=16, study_uid=study_uid))
    _, web = nodes(server)
    cache = SeriesCache(tmp_path / "cache", max_bytes=1)  # smaller than any one series
    try:
        got = retrieve(PacsPlan(source=parse_node(web), study_uid=study_uid), cache=cache)
        assert len(got) == 3
        assert all(cache.complete(item.series_uid) == item.folder and item.folder.is_dir() for item in got)
        cache.close()  # the run is over: its series may go
        cache.evict()
        assert [cache.complete(item.series_uid) for item in got] == [None, None, None]
    finally:
        cache.close()
        server.clear()
