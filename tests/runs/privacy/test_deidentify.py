"""--anonymize's parts (issue 24): the pseudonym key file, the PS3.15 profile on a dataset, a de-identified
source's status carried into its SEG and Secondary Capture, the last check that turns a volume with a leftover
identifying value into an error row, and error lines without the input's paths."""

from __future__ import annotations

import csv
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.errors import SegLensError
from app.runs.privacy import pseudonyms
from app.runs.privacy.pseudonyms import KEY_FILE, PseudonymKeyError, pseudonym_key
from tests.dicom_factory import write_series
from tests.runs.exports.test_volume_exports import ALGORITHM, SEGMENTS, known_labels, windowed

pytest.importorskip("dicognito")
KEY = b"k" * 32


# --- the key ---------------------------------------------------------------------------------------------------

@pytest.fixture
def no_env_key(monkeypatch):
    monkeypatch.delenv(pseudonyms.ENV, raising=False)


def test_a_new_key_file_is_made_once_private_and_whole(tmp_path, no_env_key):
    key = pseudonym_key(tmp_path)
    path = tmp_path / KEY_FILE
    assert len(key) == 32 and path.read_text().strip() == key.hex()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert pseudonym_key(tmp_path) == key and sorted(p.name for p in tmp_path.iterdir()) == [KEY_FILE]


@pytest.mark.parametrize(("content", "problem"), [
    (b"", "the pseudonym key file is empty"),  # a run that died between create and write (was: silently b"")
    (b"  \n", "the pseudonym key file is empty"),
    (b"0123456789abcdef\n", "the pseudonym key is cut short (8 bytes, expected 32)"),
    (b"not a key at all\n", "not a pseudonym key (expected 64 hex digits)"),
    (b"abc", "not a pseudonym key (expected 64 hex digits)"),  # odd: was "unexpected ValueError"
    (bytes(range(256)), "not a pseudonym key (expected 64 hex digits)"),
])
def test_an_empty_short_or_malformed_key_file_is_one_clear_error(tmp_path, no_env_key, content, problem):
    (tmp_path / KEY_FILE).write_bytes(content)
    with pytest.raises(PseudonymKeyError) as caught:
        pseudonym_key(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / KEY_FILE}: {problem}") and "\n" not in message
    assert (tmp_path / KEY_FILE).read_bytes() == content  # never replaced: earlier pseudonyms depend on it


def test_a_fifo_under_the_key_name_is_refused_without_hanging(tmp_path, no_env_key):
    os.mkfifo(tmp_path / KEY_FILE)
    with pytest.raises(PseudonymKeyError, match="not a regular file"):
        pseudonym_key(tmp_path)


@pytest.mark.parametrize(("value", "problem"), [("", "is set but empty"), ("   ", "is set but empty"),
                                                ("site-key", "is not a usable key"),
                                                ("a\x01" * 10, "is not a usable key")])
def test_a_bad_environment_key_is_one_clear_error(monkeypatch, tmp_path, value, problem):
    monkeypatch.setenv(pseudonyms.ENV, value)
    with pytest.raises(PseudonymKeyError, match=f"^SEGLENS_PSEUDONYM_KEY {problem}"):
        pseudonym_key(tmp_path)
    assert not (tmp_path / KEY_FILE).exists()


def test_a_bad_environment_key_stops_the_cli_run_in_one_line(monkeypatch, tmp_path, ct_model, capsys):
    monkeypatch.setenv(pseudonyms.ENV, "short")
    write_series(tmp_path / "in", slices=2)
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(tmp_path / "o"), "--anonymize"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: SEGLENS_PSEUDONYM_KEY is not a usable key")


RACE = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from app.runs.privacy.pseudonyms import pseudonym_key
start = float(sys.argv[2])
while time.time() < start:
    pass
print(pseudonym_key(Path(sys.argv[1])).hex())
"""


def test_two_runs_racing_to_make_the_key_both_use_the_one_key_that_is_kept(tmp_path, no_env_key):
    import time

    script = tmp_path / "race.py"
    script.write_text(RACE.format(root=str(Path(__file__).resolve().parents[3])))
    for attempt in range(5):
        folder = tmp_path / f"config{attempt}"
        start = str(time.time() + 1.0)
        runs = [subprocess.Popen([sys.executable, str(script), str(folder), start], stdout=subprocess.PIPE, text=True)
                for _ in range(3)]
        keys = {run.communicate(timeout=60)[0].strip() for run in runs}
        assert all(run.returncode == 0 for run in runs)
        assert keys == {(folder / KEY_FILE).read_text().strip()}  # one key, the one on disk
        assert sorted(p.name for p in folder.iterdir()) == [KEY_FILE]  # no temporary left


# --- the profile on a dataset ----------------------------------------------------------------------------------

def identified(tmp_path: Path, **extra):
    import pydicom

    path = write_series(tmp_path, slices=1, patient=("DOE^JANE", "PID-0042"))[0]
    ds = pydicom.dcmread(path)
    ds.PatientBirthDate, ds.AccessionNumber, ds.InstitutionName = "19631117", "ACC88123X", "Saint Elsewhere"
    ds.OperatorsName, ds.StudyDescription, ds.PatientAge = "RATCHED^MILDRED", "CT CHEST", "056Y"
    ds.AcquisitionDate, ds.AcquisitionTime = "20260101", "101500"
    for keyword, value in extra.items():
        setattr(ds, keyword, value)
    ds.private_block(0x0019, "ACME", create=True).add_new(0x10, "LO", "DOE JANE")
    return ds


def test_the_profile_replaces_removes_shifts_and_declares(tmp_path):
    import datetime as dt

    from app.runs.privacy.deidentify import deidentifier, mapped_uid, source_facts

    ds = identified(tmp_path)
    original = {k: str(ds.get(k)) for k in ("StudyInstanceUID", "SOPInstanceUID", "FrameOfReferenceUID")}
    info = {"Patient": "DOE^JANE", "Patient ID": "PID-0042"}
    d = deidentifier(info, KEY, source_facts([ds]))
    d.apply(ds, derived=False)
    assert str(ds.PatientName) == f"{d.pseudonym}^" and ds.PatientID == d.pseudonym  # the name: a family name
    assert d.pseudonym.startswith("anon-")
    assert ds.PatientBirthDate == "" and ds.AccessionNumber == "" and ds.StudyID == ""
    for gone in ("InstitutionName", "OperatorsName", "StudyDescription", "SeriesDescription"):
        assert gone not in ds, gone
    assert not [e for e in ds if e.tag.is_private] and ds.PatientAge == "056Y" and ds.PatientSex == "F"
    for keyword, uid in original.items():
        assert ds.data_element(keyword).value == mapped_uid(d.seed, uid) != uid
    assert ds.file_meta.MediaStorageSOPInstanceUID == ds.SOPInstanceUID
    shift = dt.date(2026, 1, 1) - dt.datetime.strptime(ds.AcquisitionDate, "%Y%m%d").date()
    assert 62 <= shift.days <= 730 and ds.AcquisitionTime != "101500"
    assert ds.PatientIdentityRemoved == "YES" and ds.LongitudinalTemporalInformationModified == "MODIFIED"
    assert [(c.CodeValue, c.CodingSchemeDesignator) for c in ds.DeidentificationMethodCodeSequence] == \
        [("113100", "DCM"), ("113107", "DCM"), ("113108", "DCM")]
    other = deidentifier({"Patient": "ROE^RICK", "Patient ID": "PID-7"}, KEY, source_facts([ds]))
    assert other.seed != d.seed and other.uid(original["StudyInstanceUID"]) != d.uid(original["StudyInstanceUID"])


def test_an_unreadable_date_is_emptied_not_a_failure_and_a_source_with_burned_in_text_is_refused(tmp_path):
    from app.errors import OutputError
    from app.runs.privacy.deidentify import deidentifier, source_facts

    ds = identified(tmp_path / "a", ContentDate="2026-13-45", ContentTime="xx")
    deidentifier({}, KEY, source_facts([ds])).apply(ds, derived=False)
    assert ds.ContentDate == "" and ds.ContentTime == ""
    burned = identified(tmp_path / "b", BurnedInAnnotation="YES")
    with pytest.raises(OutputError, match="burned-in annotation"):
        deidentifier({}, KEY, source_facts([burned])).apply(burned, derived=False)


def test_an_already_de_identified_source_keeps_saying_so_with_and_without_anonymize(tmp_path, ct_model, monkeypatch):
    import pydicom

    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    paths = write_series(tmp_path / "in", slices=3, patient=("anon-1", "anon-1"))
    for path in paths:
        ds = pydicom.dcmread(path)
        ds.PatientIdentityRemoved, ds.DeidentificationMethod = "YES", "CTP DICOM-S142"
        ds.save_as(path)
    for out, flags in (("plain", []), ("anon", ["--anonymize"])):
        assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(tmp_path / out), "--export",
                     "dicom-seg,sc", *flags]) == 0
        written = list((tmp_path / out).rglob("*.dcm"))
        assert len(written) == 4, out
        for path in written:
            ds = pydicom.dcmread(path)
            assert ds.PatientIdentityRemoved == "YES", (out, path.name)  # SC dropped it before issue 24
            methods = list(ds.DeidentificationMethod) if ds["DeidentificationMethod"].VM > 1 \
                else [ds.DeidentificationMethod]
            assert methods[0] == "CTP DICOM-S142", (out, path.name)
            assert (len(methods) == 2) == (out == "anon")


# --- the last check --------------------------------------------------------------------------------------------

def test_a_leftover_identifying_value_makes_the_volume_an_error_and_removes_its_files(tmp_path, models,
                                                                                       monkeypatch):
    """A source's free text that names the patient (its ContentDescription, which the profile keeps in the source
    copy) is found by the last check, which names the kind only, and nothing is left claiming to be
    de-identified. The model's class "Jane" in the SEG's segment label is the model's word, not the patient's:
    patient Jane's other series is exported (issue 36: the class was once how this test made a leak)."""
    import pydicom

    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    model = models("binary_logits", "ct_disc")
    model.with_suffix(".yaml").write_text("input:\n  window: [40, 400]\nclasses:\n  - background\n  - Jane\n")
    write_series(tmp_path / "in" / "ok", slices=2, patient=("ROE^RICK", "PID-7"))
    write_series(tmp_path / "in" / "jane", slices=2, patient=("DOE^JANE", "PID-0042"))
    for path in write_series(tmp_path / "in" / "leak", slices=2, patient=("DOE^JANE", "PID-0042")):
        ds = pydicom.dcmread(path)
        ds.ContentDescription = "follow-up of Doe, Jane"
        ds.save_as(path)
    out = tmp_path / "out"
    assert main(["run", str(model), str(tmp_path / "in"), "--out", str(out), "--export", "dicom-seg,sc,nifti,source",
                 "--anonymize"]) == 1
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(r["status"] for r in rows) == ["error", "ok", "ok"], [r["error"] for r in rows]
    error = next(r for r in rows if r["status"] == "error")
    assert "de-identification check failed: a patient name in the DICOM tags of " in error["error"]
    assert f"{error['path']}_source/" in error["error"]
    assert "the volume's outputs were removed" in error["error"] and "jane" not in error["error"].lower()
    assert not list(out.glob(error["path"] + "*")) and not (out / error["path"]).parent.exists()
    for row in (r for r in rows if r["status"] == "ok"):  # both other volumes done, Jane's with her class
        assert len(list(out.glob(row["path"] + "*"))) == 4
        seg = pydicom.dcmread(out / (row["path"] + "_seg.dcm"))
        assert [item.SegmentLabel for item in seg.SegmentSequence] == ["Jane"]


def test_the_viewers_send_writes_a_patient_named_like_a_class_and_refuses_a_source_text_naming_her(tmp_path):
    """Results ▸ Send to PACS under --anonymize runs the same last check with the model's classes and name as its
    own words: patient Lung's SEG, Secondary Capture and RTSTRUCT of the model `lung` (class "lung") are written;
    her source's manufacturer text naming her, copied into the SEG's equipment, is still refused (nothing sent)."""
    from dataclasses import replace

    import pydicom

    from app.inference.model.spec import ClassInfo
    from app.io.pacs.nodes import PacsNode
    from app.ui.state.pacs_messages import PacsSend, PacsTarget
    from app.ui.workers.pacs_send import write_exports
    from tests.runs.exports.test_volume_exports import dicom_volume

    model = tmp_path / "lung.onnx"
    model.write_bytes(b"a model")
    node = PacsNode(name="research", kind="dicomweb", host="127.0.0.1", port=9, url="http://127.0.0.1:9/dicom-web",
                    research=True)
    classes = (ClassInfo("background", None), ClassInfo("lung", (255, 0, 0)))

    def request(folder: str, **series) -> PacsSend:
        volume = replace(dicom_volume(tmp_path / folder, patient=("Lung", "PID-3001"), **series),
                         info={"Patient": "Lung", "Patient ID": "PID-3001"})
        return PacsSend(1, PacsTarget(node), volume, known_labels(), classes, model, ("dicom-seg", "sc", "rtstruct"),
                        anonymize=True)

    (tmp_path / "send").mkdir()
    written = write_exports(request("series"), tmp_path / "send")
    assert [kind for kind, _paths in written] == ["dicom-seg", "sc", "rtstruct"]
    seg = pydicom.dcmread(written[0][1][0])
    assert [item.SegmentLabel for item in seg.SegmentSequence] == ["lung"] and seg.SeriesDescription == "SegLens lung"
    leaky = request("leaky")
    for ref in leaky.volume.slices:
        ds = pydicom.dcmread(ref.path)
        ds.Manufacturer = "Lung's own scanner"
        ds.save_as(ref.path)
    (tmp_path / "send2").mkdir()
    with pytest.raises(SegLensError) as refused:
        write_exports(leaky, tmp_path / "send2")
    assert str(refused.value).startswith("de-identification check failed: a patient name in the DICOM tags of ")
    assert str(refused.value).endswith("; nothing was sent") and "lung" not in str(refused.value).lower()


def test_the_check_looks_into_nested_sequences_file_meta_nifti_headers_and_png_text(tmp_path):
    import nibabel as nib
    import numpy as np
    import pydicom
    from pydicom.dataset import Dataset

    from app.io.files import encode_png, png_with_text
    from app.runs.privacy.check import Identifying, leak

    identifying = Identifying.of([("patient name", "DOE^JANE"), ("accession number", "ACC88123X"),
                                  ("patient ID", "42")], uids={"1.2.3.4"})
    ds = pydicom.dcmread(write_series(tmp_path / "s", slices=1, patient=("x", "y"))[0])
    item = Dataset()
    item.CodeMeaning = "jane"  # nested, lower case
    ds.ReferencedImageSequence = [item]
    ds.save_as(tmp_path / "a.dcm")
    assert leak([tmp_path / "a.dcm"], identifying, root=tmp_path) == "a patient name in the DICOM tags of a.dcm"
    ds.ReferencedImageSequence = []
    ds.ReferencedSOPInstanceUID = "1.2.3.4"
    ds.save_as(tmp_path / "b.dcm")
    assert leak([tmp_path / "b.dcm"], identifying, root=tmp_path) == "a source UID in the DICOM tags of b.dcm"
    image = nib.Nifti1Image(np.zeros((2, 2, 2), np.uint8), np.eye(4))
    image.header["descrip"] = b"ACC88123X"
    nib.save(image, tmp_path / "m.nii.gz")
    assert leak([tmp_path / "m.nii.gz"], identifying, root=tmp_path) == \
        "an accession number in the NIfTI header of m.nii.gz"
    (tmp_path / "p.png").write_bytes(png_with_text(encode_png(np.zeros((2, 2), np.uint8)), {"Comment": "Doe"}))
    assert leak([tmp_path / "p.png"], identifying, root=tmp_path) == "a patient name in a PNG text chunk of p.png"
    (tmp_path / "DOE_scan").mkdir()
    assert leak([tmp_path / "DOE_scan"], identifying, root=tmp_path) == "a patient name in the output names (an output)"
    clean = tmp_path / "clean.png"
    clean.write_bytes(encode_png(np.full((2, 2), 42, np.uint8)))  # "42" is too short to look for
    assert leak([clean], identifying, root=tmp_path, cells=["anon-0123456789ab", "42"]) is None


def test_error_lines_in_the_report_carry_no_input_path(tmp_path, ct_model, monkeypatch):
    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    folder = tmp_path / "pacs" / "DOE^JANE_PID-0042"
    paths = write_series(folder, slices=4, patient=("DOE^JANE", "PID-0042"))
    data = paths[2].read_bytes()
    paths[2].write_bytes(data[: len(data) - 600])  # a slice cut short: the volume's error names that file
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "pacs"), "--out", str(out), "--anonymize"]) == 1
    text = (out / "seglens_report.csv").read_text(encoding="utf-8")
    assert "DOE" not in text and "PID-0042" not in text and str(tmp_path) not in text and "pacs" not in text
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        row = next(csv.DictReader(handle))
    assert row["status"] == "error" and row["error"].startswith(row["path"] + ":") and row["path"].startswith("anon-")


def test_the_names_under_anonymize_are_keyed_and_distinct(tmp_path):
    from app.io.discover import discover
    from app.runs.privacy.names import anonymized_stems, pseudonymous_path

    write_series(tmp_path / "DOE^JANE" / "a", slices=2, patient=("DOE^JANE", "PID-0042"))
    write_series(tmp_path / "DOE^JANE" / "b", slices=2, patient=("DOE^JANE", "PID-0042"))
    (tmp_path / "Doe_photo.png").write_bytes(b"")
    inputs = discover([tmp_path])
    stems = anonymized_stems(inputs, KEY)
    assert len({s.as_posix() for s in stems}) == len(stems) == 3
    assert all("doe" not in s.as_posix().lower() and "jane" not in s.as_posix().lower() for s in stems)
    image = next(s for s, i in zip(stems, inputs, strict=True) if i.volume is None)
    assert image.as_posix() == pseudonymous_path("Doe_photo.png", KEY) and image.parts[0] == "images"
    assert anonymized_stems(inputs, KEY) == stems and anonymized_stems(inputs, b"x" * 32) != stems
    with pytest.raises(SegLensError, match="needs a pseudonym key"):
        anonymized_stems(inputs, b"")


def test_secondary_capture_through_the_export_function_is_de_identified(tmp_path):
    """The SC writer's `prepare` hook: each image goes through the profile right before it is saved."""
    from dataclasses import replace

    import pydicom

    from app.runs.exports.formats import write_secondary_capture
    from app.runs.privacy.deidentify import volume_privacy
    from tests.runs.exports.test_volume_exports import dicom_volume

    volume = replace(dicom_volume(tmp_path / "series"), info={"Patient": "Doe^Jane", "Patient ID": "PID-0042"})
    privacy = volume_privacy(volume, anonymize=True, key=KEY)
    written = write_secondary_capture(volume, known_labels(), SEGMENTS, tmp_path / "sc", display=windowed,
                                      opacity=0.5, algorithm=ALGORITHM, privacy=privacy)
    for path in written:
        ds = pydicom.dcmread(path)
        assert ds.PatientIdentityRemoved == "YES" and str(ds.PatientName).startswith("anon-")
        assert ds.SourceImageSequence[0].ReferencedSOPInstanceUID.startswith("2.")
        assert ds.ImageComments.startswith("NOT FOR DIAGNOSIS")  # SegLens's own banner text is kept


def test_a_nifti_volume_under_anonymize_gets_a_keyed_name_and_a_clean_header(tmp_path, ct_model, monkeypatch):
    import gzip

    import nibabel as nib

    from tests.dicom_factory import write_nifti

    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    source = tmp_path / "in" / "DOE^JANE" / "DOE_JANE_brain.nii.gz"
    source.parent.mkdir(parents=True)
    write_nifti(source)
    image = nib.load(source)
    image.header["descrip"], image.header["aux_file"] = b"DOE^JANE 19631117", b"PID-0042"
    image.header.extensions.append(nib.nifti1.Nifti1Extension(6, b"patient DOE JANE"))  # a comment extension
    nib.save(image, source)
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--anonymize"]) == 0
    (mask,) = out.rglob("*_mask.nii.gz")
    assert mask.relative_to(out).parts[0] == "nifti" and mask.name.startswith("vol-")
    header = gzip.decompress(mask.read_bytes())[: int(nib.load(mask).header.get_data_offset())].lower()
    assert b"doe" not in header and b"jane" not in header and b"pid-0042" not in header
    assert not nib.load(mask).header.extensions
    text = (out / "seglens_report.csv").read_text(encoding="utf-8").lower()
    assert "doe" not in text and "jane" not in text


def test_resume_under_anonymize_matches_rows_by_their_pseudonymous_names(tmp_path, ct_model, model_runs,
                                                                          monkeypatch):
    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    write_series(tmp_path / "in" / "a", slices=3, patient=("DOE^JANE", "PID-0042"))
    write_series(tmp_path / "in" / "b", slices=4, patient=("ROE^RICK", "PID-7"))
    out = tmp_path / "out"
    args = ["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--anonymize", "--export", "dicom-seg"]
    assert main(args) == 0
    assert len([s for s in model_runs if s[-2:] == (32, 32)]) == 7
    min(out.rglob("*_seg.dcm"), key=lambda p: p.stat().st_size).unlink()  # a's (3 slices) is the smaller
    assert main([*args, "--resume"]) == 0
    assert len([s for s in model_runs if s[-2:] == (32, 32)]) == 7 + 3  # only a again
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["status"] for r in rows] == ["ok", "ok"] and len(list(out.rglob("*_seg.dcm"))) == 2


def test_a_source_with_burned_in_annotation_leaves_no_de_identified_output_behind(tmp_path, ct_model, monkeypatch):
    import pydicom

    monkeypatch.setenv(pseudonyms.ENV, "0123456789abcdef0123")
    for path in write_series(tmp_path / "in", slices=3, patient=("DOE^JANE", "PID-0042")):
        ds = pydicom.dcmread(path)
        ds.BurnedInAnnotation = "YES"
        ds.save_as(path)
    out = tmp_path / "out"
    assert main(["run", str(ct_model), str(tmp_path / "in"), "--out", str(out), "--anonymize", "--export",
                 "dicom-seg,sc,nifti"]) == 1
    with open(out / "seglens_report.csv", newline="", encoding="utf-8") as handle:
        (row,) = csv.DictReader(handle)
    assert row["status"] == "error" and "burned-in annotation (BurnedInAnnotation YES)" in row["error"]
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["seglens_report.csv",
                                                                      "seglens_report.csv.run.json"]


def test_a_multiframe_source_and_its_seg_stay_a_pair_when_de_identified(tmp_path):
    from dataclasses import replace

    import highdicom as hd
    import numpy as np
    import pydicom

    from app.runs.exports.formats import write_dicom_seg, write_source_copy
    from app.runs.privacy.deidentify import volume_privacy
    from tests.runs.exports.test_volume_exports import multiframe_volume

    volume = replace(multiframe_volume(tmp_path), info={"Patient": "Doe^Jane", "Patient ID": "PID-0042"})
    privacy = volume_privacy(volume, anonymize=True, key=KEY)
    labels = known_labels(depth=4)
    seg = hd.seg.segread(write_dicom_seg(volume, labels, SEGMENTS[:2], tmp_path / "seg.dcm", algorithm=ALGORITHM,
                                         privacy=privacy))
    (copy,) = write_source_copy(volume, tmp_path / "source", privacy=privacy)
    copy = pydicom.dcmread(copy)
    assert copy.SOPInstanceUID != volume.slices[0].sop_instance_uid and copy.PatientIdentityRemoved == "YES"
    for k, ref in enumerate(volume.slices):
        pixels = seg.get_pixels_by_source_frame(source_sop_instance_uid=copy.SOPInstanceUID,
                                                source_frame_numbers=[ref.frame + 1], segment_numbers=[1])
        np.testing.assert_array_equal(pixels[0, ..., 0].astype(bool), labels[k] == 1)
