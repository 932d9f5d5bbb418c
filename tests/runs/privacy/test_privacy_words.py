"""The last check of --anonymize (app.runs.privacy.check) compares whole values and whole name components, never
parts of SegLens's own words (issue 36, found by outside validators: patients or staff named Ana, Pat, Art, Tom,
Otto, Lens… could never get a de-identified SEG, RTSTRUCT or report, "Ana" being in "Anatomical Structure" and
"Otto" in the report's CSS "bottom"). A real identifier — the name as a word, the whole name in any spelling, an
ID as a whole value — is still caught, in DICOM text, file names, NIfTI headers, PNG text and report cells; error
lines (app.runs.privacy.names.redact) withhold a line for a whole word, not a part of one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.dataset import Dataset

from app.io.discover import InputFile
from app.runs.privacy.check import Identifying, leak
from app.runs.privacy.names import redact
from app.runs.review.html import ReportItem, write_review_report
from tests.dicom_factory import write_series

SHORT_NAMES = ("Ana", "Pat", "Art", "Tom", "Otto", "Lens", "Lung", "Bone", "Li")
# SegLens's own text in which each short name is a part of a word, never the word
OWN_TEXT = ("Anatomical Structure", "Patient Characteristics Option", "Artificial Intelligence", "Tomography",
            "bottom", "SegLens", "Lungs", "Bones", "Segmentation by ct_disc", "Basic Application Confidentiality",
            "Retain Longitudinal Temporal Information", "NOT FOR DIAGNOSIS - SegLens liver-net", "split")


def names(*people: str) -> Identifying:
    return Identifying.of([("patient name", people[0]), *(("physician or operator", p) for p in people[1:])])


@pytest.mark.parametrize("name", SHORT_NAMES)
def test_a_short_name_is_not_found_inside_seglens_words(name):
    identifying = names(f"{name}^{name}", f"{name}^Doe")
    for text in OWN_TEXT:
        assert identifying.in_text(text) is None, (name, text)
        assert identifying.in_dicom_text(text) is None, (name, text)


@pytest.mark.parametrize("text, kind", [
    ("Dr Tom, 2nd reader", "physician or operator"),  # a component as a word
    ("ana", "patient name"),  # a whole value (a segment label, lower case)
    ("for PAT ANA: see notes", "patient name"),  # the name in another order and case
    ("ana_pat_scan", "patient name"),  # a file name's words
    ("Otto-Lens", "physician or operator"),
    ("Li Tom", "physician or operator"),  # a two-letter component: found as part of the whole name
])
def test_a_real_name_is_still_found_as_a_word_or_the_whole_value(text, kind):
    identifying = names("Ana^Pat", "Li^Tom", "Lens^Otto")
    assert identifying.in_text(text) == kind


def test_ids_addresses_and_institutions_are_whole_values_at_word_boundaries():
    identifying = Identifying.of([("patient ID", "PID-0042"), ("institution", "Saint Elsewhere Hospital"),
                                  ("accession number", "ACC88123X"), ("patient ID", "7781234")])
    assert identifying.in_text("see pid-0042") == "patient ID"
    assert identifying.in_text("Saint  Elsewhere\nHospital") == "institution"
    assert identifying.in_text("x_ACC88123X.dcm") == "accession number"
    assert identifying.in_text("ACC88123XY or XPID-0042") is None  # part of a longer word: not the value
    assert identifying.in_text("spacing 0.7781234 and 77812345") is None  # inside a decimal or a longer number
    assert identifying.in_text("ID 7781234.") == "patient ID"


def _seg_like(tmp_path: Path, **attributes) -> tuple[Path, Path]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    pseudonym = "anon-0123456789ab"
    ds = pydicom.dcmread(write_series(tmp_path / "src", slices=1, patient=(f"{pseudonym}^", pseudonym))[0])
    ds.PatientBirthDate = ""
    for keyword, value in attributes.items():
        setattr(ds, keyword, value)
    path = out / "x_seg.dcm"
    ds.save_as(path)
    return path, out


def test_a_dicom_with_seglens_codes_is_clean_for_short_names_and_caught_for_a_name_left_in_it(tmp_path):
    category = Dataset()
    category.CodeValue, category.CodingSchemeDesignator, category.CodeMeaning = "91723000", "SCT", \
        "Anatomical Structure"
    family = Dataset()
    family.CodeValue, family.CodingSchemeDesignator, family.CodeMeaning = "113112", "DCM", "Artificial Intelligence"
    identifying = names("Ana^Pat", "Art^Lens", "Otto^Tom")
    path, out = _seg_like(tmp_path, SegmentedPropertyCategoryCodeSequence=[category],
                          AnatomicRegionSequence=[family], SeriesDescription="SegLens Tomography net",
                          ImageComments="NOT FOR DIAGNOSIS - SegLens bottom")
    assert leak([path], identifying, root=out, cells=["anon-0123456789ab", "Patient ok"]) is None
    path, out = _seg_like(tmp_path, OperatorsName="Otto")  # the profile would empty it: here it was left
    assert leak([path], identifying, root=out) == "a physician or operator in the DICOM tags of x_seg.dcm"


def test_the_review_report_is_written_for_a_patient_named_like_a_css_word_and_refused_for_the_name(tmp_path):
    from app.errors import OutputError

    identifying = names("Otto^White", "Ana^Bottom")  # CSS holds `bottom`, `white-space`, `anywhere`
    item = ReportItem(rel="anon-0123456789ab/1.2.3/4.5.6", overlay_png=None, identifying=identifying)
    path = write_review_report(tmp_path / "r.html", [item], model_name="m", model_sha256="a" * 64,
                               seglens_version="0.1.0")
    assert path.is_file()
    named = ReportItem(rel="anon-0123456789ab/1.2.3/4.5.6", overlay_png=None, identifying=identifying,
                       figures=(("slices", "Otto"),))
    with pytest.raises(OutputError, match="a patient name of an input is still in it"):
        write_review_report(tmp_path / "s.html", [named], model_name="m", model_sha256="a" * 64,
                            seglens_version="0.1.0")
    assert not (tmp_path / "s.html").exists()


def test_an_error_line_is_withheld_for_a_whole_word_of_the_patient_not_a_part_of_one(tmp_path):
    folder = tmp_path / "Pat_Otto"
    item = InputFile(folder / "scan.png", Path("Pat_Otto/scan.png"))
    line = redact(f"{folder}/scan.png: cannot decode the image (a truncated pattern at the bottom)", item, "img-1")
    assert line == "img-1: cannot decode the image (a truncated pattern at the bottom)"
    assert redact("img-1: the model says Otto", item, "img-1").endswith("withheld under --anonymize)")


def test_a_nifti_header_or_png_text_with_a_short_name_as_a_word_is_caught(tmp_path):
    import nibabel as nib

    from app.io.files import encode_png, png_with_text

    identifying = names("Bone^Li")
    image = nib.Nifti1Image(np.zeros((2, 2, 2), np.uint8), np.eye(4))
    image.header["descrip"] = b"Bones of the skull"
    nib.save(image, tmp_path / "m.nii.gz")
    assert leak([tmp_path / "m.nii.gz"], identifying, root=tmp_path) is None
    image.header["descrip"] = b"bone li"
    nib.save(image, tmp_path / "n.nii.gz")
    assert leak([tmp_path / "n.nii.gz"], identifying, root=tmp_path) == \
        "a patient name in the NIfTI header of n.nii.gz"
    (tmp_path / "p.png").write_bytes(png_with_text(encode_png(np.zeros((2, 2), np.uint8)), {"Comment": "Bone"}))
    assert leak([tmp_path / "p.png"], identifying, root=tmp_path) == "a patient name in a PNG text chunk of p.png"


def test_the_out_folder_the_user_chose_is_not_searched_in_a_cell_naming_an_output_under_it(tmp_path):
    out = tmp_path / "Tom" / "results"
    identifying = names("Ana^Pat", "Tom^Otto")
    cell = f"{out.as_posix()}/anon-0123456789ab/1.2.3/4.5.6"  # the output stem a volume's check is given
    assert leak([], identifying, root=out, cells=[cell]) is None
    assert leak([], identifying, root=out, cells=[f"{out.as_posix()}/Tom_scan"]) == "a physician or operator in the " \
                                                                                      "report row"


def test_a_reviewers_login_is_left_out_of_the_search_as_a_word_not_cut_out_of_a_patients_name(tmp_path):
    from app.errors import OutputError
    from app.runs.review.log import Review

    identifying = names("Patrick^Doe")
    note = Review("x", "accepted", "", "Pat", "2026-12-01T10:00:00Z", "a" * 64)  # the reviewer logged in as "Pat"
    item = ReportItem(rel="anon-0123456789ab/1.2.3/4.5.6", overlay_png=None, identifying=identifying, review=note,
                      figures=(("slices", "Patrick"),))
    with pytest.raises(OutputError, match="a patient name of an input is still in it"):
        write_review_report(tmp_path / "r.html", [item], model_name="m", model_sha256="a" * 64,
                            seglens_version="0.1.0")


@pytest.mark.parametrize("kind", ["Nifti1Image", "Nifti2Image"])
@pytest.mark.parametrize("name", ["m.nii", "m.nii.gz"])
def test_the_header_of_a_nifti_1_or_2_file_plain_or_gzipped_is_searched_not_its_voxels(tmp_path, kind, name):
    import nibabel as nib

    identifying = names("Bone^Otto")
    voxels = np.frombuffer(b" otto " * 8, np.uint8).reshape(4, 4, 3)  # the name's letters as voxel values
    image = getattr(nib, kind)(voxels, np.eye(4))
    nib.save(image, tmp_path / name)
    assert leak([tmp_path / name], identifying, root=tmp_path) is None
    image.header["descrip"] = b"otto"
    nib.save(image, tmp_path / name)
    assert leak([tmp_path / name], identifying, root=tmp_path) == f"a patient name in the NIfTI header of {name}"


def test_a_refused_volumes_outputs_are_removed_a_planted_link_itself_never_its_target(tmp_path):
    from app.runs.privacy.check import remove_outputs

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("someone else's")
    out = tmp_path / "out"
    study = out / "anon-0123456789ab" / "1.2.3"
    study.mkdir(parents=True)
    (study / "4.5.6_seg.dcm").write_bytes(b"seg")
    (study / "4.5.6_sc").symlink_to(victim)  # planted where the Secondary Capture folder was
    (study / "7.8.9_seg.dcm").write_bytes(b"another series of the study")
    remove_outputs([study / "4.5.6_seg.dcm", study / "4.5.6_sc"], root=out)
    assert sorted(p.name for p in study.iterdir()) == ["7.8.9_seg.dcm"]
    assert (victim / "keep.txt").read_text() == "someone else's"
    remove_outputs([study / "7.8.9_seg.dcm"], root=out)
    assert not study.exists() and out.is_dir()  # the emptied folder goes, --out stays


def test_a_page_of_many_inputs_is_searched_in_one_pass_over_its_words():
    import time

    values = [("patient name", f"Family{n}^Given{n}") for n in range(3000)]
    identifying = Identifying.of([*values, ("patient ID", "PID-0042")])
    page = " ".join(f"row {n}: anon-0123456789ab <td>{n * 7} mL</td> Tissue" for n in range(40_000))  # ~1.6 MB
    started = time.perf_counter()
    assert identifying.in_text(page) is None
    assert identifying.in_text(page + " given2999 ") == "patient name"
    assert time.perf_counter() - started < 10  # one pattern of every value over the page: over 3 minutes


# --- where a value came from (issue 36: a patient named like a class of the model) ----------------------------

def _lung_model():
    from app.inference.model.codes import ClassCode, Coded
    from app.runs.outputs.segments import Algorithm, Segment
    from app.runs.privacy.check import own_words

    lung = Coded("SCT", "39607008", "Lung")
    segments = (Segment(1, "lung", (255, 0, 0), ClassCode(category=Coded("SCT", "91723000", "Anatomical Structure"),
                                                              type=lung)),
                Segment(2, "liver nodule", (0, 255, 0)))
    return own_words(segments, Algorithm("lung", "a1b2c3d4e5f60718", "a1b2c3d4e5f60718" + "9" * 48, "0.1.0"))


def test_the_models_vocabulary_is_its_own_whole_and_in_seglens_phrases_never_with_another_word():
    own = _lung_model()
    for text in ("lung", "LUNG", "Liver Nodule", "class 2", "Segmentation by lung",
                 "SegLens lung (NOT FOR DIAGNOSIS)", f"Contours by lung, model sha256 {'a1b2c3d4e5f60718' + '9' * 48}",
                 "lung.onnx", "Tissue", "Basic Application Confidentiality Profile", "Artificial Intelligence",
                 "model_sha256=a1b2c3d4e5f60718"):
        assert own.holds(text), text
    for text in ("Lung Lung biopsy", "lung Jane", "Dr Lung", "lung 48151", "class 3", "Liver", "Segmentation by Ana",
                 "", "^"):
        assert not own.holds(text), text


def test_a_patient_named_like_a_class_is_not_found_in_what_the_spec_wrote_but_is_in_what_the_source_did(tmp_path):
    identifying = names("Lung^Liver", "Tissue^Basic")
    meaning = Dataset()
    meaning.CodeValue, meaning.CodingSchemeDesignator, meaning.CodeMeaning = "39607008", "SCT", "Lung"
    segment = Dataset()
    segment.SegmentLabel, segment.SegmentedPropertyTypeCodeSequence = "lung", [meaning]
    method = "SegLens: DICOM PS3.15 Basic Profile (dicognito {})"
    import dicognito

    spec_wrote = {"SegmentSequence": [segment], "SeriesDescription": "SegLens lung",
                  "ContentDescription": "Segmentation by lung",
                  "DeidentificationMethod": method.format(dicognito.__version__)}
    path, out = _seg_like(tmp_path, **spec_wrote)
    assert leak([path], identifying, root=out, own=_lung_model()) is None
    assert leak([path], identifying, root=out) == "a patient name in the DICOM tags of x_seg.dcm"  # not told
    for keyword, value in (("ContentDescription", "Lung Lung biopsy"), ("StudyDescription", "lung"),
                           ("DeidentificationMethod", [method.format(dicognito.__version__), "by Liver"])):
        path, out = _seg_like(tmp_path, **{**spec_wrote, keyword: value})
        assert leak([path], identifying, root=out, own=_lung_model()) == \
            "a patient name in the DICOM tags of x_seg.dcm", keyword
    label = Dataset()
    label.SegmentLabel = "lung Liver"  # not a class of the model: the patient's name is in it
    path, out = _seg_like(tmp_path, **{**spec_wrote, "SegmentSequence": [label]})
    assert leak([path], identifying, root=out, own=_lung_model()) == "a patient name in the DICOM tags of x_seg.dcm"


def test_a_pngs_provenance_naming_the_model_and_its_classes_is_its_own_a_comment_naming_the_patient_is_not(tmp_path):
    import json

    from app.io.files import encode_png, png_with_text

    identifying = names("Lung^Ana")
    provenance = json.dumps({"model": "lung.onnx", "sidecar": "lung.yaml", "classes": ["background", "lung"],
                             "thresholds": {"threshold": 0.5}})
    png = encode_png(np.zeros((2, 2), np.uint8))
    (tmp_path / "m.png").write_bytes(png_with_text(png, {"SegLens": provenance, "Software": "SegLens 0.1.0"}))
    assert leak([tmp_path / "m.png"], identifying, root=tmp_path, own=_lung_model()) is None
    for items in ({"SegLens": provenance, "Comment": "Lung"},
                  {"SegLens": json.dumps({"model": "lung.onnx", "note": "Lung biopsy"})}, {"SegLens": "lung"}):
        (tmp_path / "n.png").write_bytes(png_with_text(png, items))
        assert leak([tmp_path / "n.png"], identifying, root=tmp_path, own=_lung_model()) == \
            "a patient name in a PNG text chunk of n.png", items


def test_the_review_report_of_a_patient_named_like_a_class_is_written_and_refused_for_her_name_elsewhere(tmp_path):
    """The review report's title, model name and figure names ("mL lung") are the model's words; a figure's value
    or a verdict reason holding her name is not (issue 36: the report of a patient Lung was refused)."""
    from app.errors import OutputError

    identifying = names("Lung^Ana")
    item = ReportItem(rel="anon-0123456789ab/1.2.3/4.5.6", overlay_png=None, identifying=identifying,
                      figures=(("slices", "3"), ("mL lung", "12.00")))
    report = dict(model_name="lung.onnx", model_sha256="a" * 64, seglens_version="0.1.0",
                  title="SegLens review — lung.onnx", own=_lung_model())
    assert write_review_report(tmp_path / "r.html", [item], **report).is_file()
    for named in (replace(item, figures=(("mL lung", "Lung"),)), replace(item, verdict_reason="lung of Lung"),
                  replace(item, figures=(("mL lung Ana", "1.00"),))):
        with pytest.raises(OutputError, match="a patient name of an input is still in it"):
            write_review_report(tmp_path / "s.html", [named], **report)
        assert not (tmp_path / "s.html").exists()
    with pytest.raises(OutputError, match="a patient name of an input is still in it"):  # not told the classes
        write_review_report(tmp_path / "s.html", [item], **{**report, "own": None})
    from app.runs.privacy.check import page_text

    own = _lung_model()
    assert page_text("<p>lung <th data-own>mL lung</th> <b data-own>lung<br>Ana</b></p>", own).split() == \
        ["lung", "lung", "Ana"]  # unmarked, or marked but not wholly the model's: searched
    assert page_text("<th data-own>lung", own).split() == ["lung"]  # left open: searched
    assert page_text("<th data-own>lung</th>").split() == ["lung"]  # no own words given: searched
