"""The sidecar's per-class `code:` (SNOMED CT category and type): validated in the sidecar's style, shown by
`info`, written into each DICOM SEG segment and read back; a class without one gets the documented default."""

from __future__ import annotations

import json
from pathlib import Path

import dciodvfy
import pytest
from test_volume_exports import ALGORITHM, dicom_volume, known_labels

from app.cli import main
from app.errors import SidecarError
from app.inference.model.builder import load_spec
from app.inference.model.codes import DEFAULT_CODE, ClassCode, Coded
from app.runs.exports.formats import segments_of, write_dicom_seg

REPO = Path(__file__).resolve().parents[3]
CT_DEMO = REPO / "models" / "ct_demo.onnx"
ANATOMY = Coded("SCT", "91723000", "Anatomical Structure")
LUNG = ClassCode(ANATOMY, Coded("SCT", "39607008", "Lung"))
BONE = ClassCode(ANATOMY, Coded("SCT", "272673000", "Bone"))

SIDECAR = """\
classes:
- background
- name: liver
  color: '#ff0000'
  code:
    category: [SCT, 91723000, Anatomical Structure]   # an unquoted identifier is read as its digits
    type: [SCT, '10200004', Liver]
- lesion
"""


def test_a_class_code_from_the_sidecar_reaches_the_spec(models):
    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text(SIDECAR)
    spec = load_spec(model)
    assert [c.code for c in spec.classes] == [None, ClassCode(ANATOMY, Coded("SCT", "10200004", "Liver")), None]
    assert spec.classes[1].color == (255, 0, 0)


@pytest.mark.parametrize(("code", "message"), [
    ("lung", "'classes[1].code' must be {category: [scheme, value, meaning], type: [scheme, value, meaning]}, "
             "got 'lung'"),
    ("{type: [SCT, 39607008, Lung]}", "'classes[1].code' needs category (a DICOM SEG segment has both a category "
                                      "and a type)"),
    ("{category: [SCT, 91723000, Anatomical Structure], type: [SCT, 39607008, Lung], modifier: x}",
     "'classes[1].code' has unknown key 'modifier' (expected category, type)"),
    ("{category: [SCT, 91723000, Anatomical Structure], type: [SCT, 39607008]}",
     "'classes[1].code.type' must be [scheme, value, meaning], e.g. [SCT, 39607008, Lung], got ['SCT', 39607008]"),
    ("{category: [SCT, 91723000, Anatomical Structure], type: [SCT, lung, Lung]}",
     "'classes[1].code.type' value must be a SNOMED CT identifier (6 to 18 digits) for scheme SCT, got 'lung'"),
    ("{category: ['S C T', 91723000, Anatomical Structure], type: [SCT, 39607008, Lung]}",
     "'classes[1].code.category' scheme must be a coding scheme designator such as SCT"),
    ("{category: [SCT, 91723000, ''], type: [SCT, 39607008, Lung]}",
     "'classes[1].code.category' meaning must be a text of 1 to 64 printable characters, got ''"),
])
def test_a_bad_code_is_one_line_naming_the_key(models, code: str, message: str):
    model = models("rgb_classes")
    sidecar = model.with_suffix(".yaml")
    sidecar.write_text(f"classes:\n- background\n- {{name: lung, code: {code}}}\n- bone\n")
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    text = str(caught.value)
    assert text.startswith(f"{sidecar}: ") and message in text
    assert "\n" not in text


def test_other_coding_schemes_keep_their_values(models):
    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text(
        "classes:\n- background\n- {name: a, code: {category: [DCM, '130047', Anatomical structure], "
        "type: [FMA, '7195', Lung]}}\n- b\n")
    assert load_spec(model).classes[1].code == ClassCode(Coded("DCM", "130047", "Anatomical structure"),
                                                         Coded("FMA", "7195", "Lung"))


# --- the bundled CT demo ------------------------------------------------------------------------------------------

def test_the_ct_demo_sidecar_codes_lung_and_bone_as_snomed_ct_does():
    from pydicom.sr.codedict import codes

    spec = load_spec(CT_DEMO)
    assert [c.code for c in spec.classes] == [None, LUNG, BONE]
    # the same concepts as pydicom's SNOMED CT table and CID 7150 (Segmentation Property Categories)
    for code, concept in ((LUNG.type, codes.SCT.Lung), (BONE.type, codes.SCT.Bone),
                          (ANATOMY, codes.cid7150.AnatomicalStructure)):
        assert (code.scheme, code.value, code.meaning) == (concept.scheme_designator, concept.value, concept.meaning)


def test_info_shows_the_codes(capsys):
    assert main(["info", str(CT_DEMO)]) == 0
    out = capsys.readouterr().out
    lung_line = next(line for line in out.splitlines() if " lung " in line)
    assert "Anatomical Structure / Lung (SCT 39607008)" in lung_line and "#4aa3ff" in lung_line
    assert "Anatomical Structure / Bone (SCT 272673000)" in out
    assert main(["info", str(CT_DEMO), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["classes"][1]["code"] == {"category": ["SCT", "91723000", "Anatomical Structure"],
                                          "type": ["SCT", "39607008", "Lung"]}
    assert "code" not in data["classes"][0]


# --- the DICOM SEG ------------------------------------------------------------------------------------------------

def _seg_of(spec, tmp_path: Path):
    import pydicom

    volume = dicom_volume(tmp_path / "series")
    segments = segments_of(spec.classes)
    return pydicom.dcmread(write_dicom_seg(volume, known_labels(), segments, tmp_path / "seg.dcm",
                                           algorithm=ALGORITHM))


def _codes_of(item) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    category, kind = item.SegmentedPropertyCategoryCodeSequence[0], item.SegmentedPropertyTypeCodeSequence[0]
    return ((category.CodingSchemeDesignator, category.CodeValue, category.CodeMeaning),
            (kind.CodingSchemeDesignator, kind.CodeValue, kind.CodeMeaning))


def test_the_seg_segments_carry_the_sidecar_codes(tmp_path: Path):
    seg = _seg_of(load_spec(CT_DEMO), tmp_path)
    assert [s.SegmentLabel for s in seg.SegmentSequence] == ["lung", "bone"]
    assert _codes_of(seg.SegmentSequence[0]) == (("SCT", "91723000", "Anatomical Structure"),
                                                 ("SCT", "39607008", "Lung"))  # was Tissue / Tissue
    assert _codes_of(seg.SegmentSequence[1]) == (("SCT", "91723000", "Anatomical Structure"),
                                                 ("SCT", "272673000", "Bone"))


def test_a_class_without_a_code_gets_the_documented_default(models, tmp_path: Path):
    import highdicom as hd

    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text(SIDECAR)
    seg = _seg_of(load_spec(model), tmp_path)
    assert _codes_of(seg.SegmentSequence[0]) == (("SCT", "91723000", "Anatomical Structure"),
                                                 ("SCT", "10200004", "Liver"))
    tissue = ("SCT", "85756007", "Tissue")
    assert (DEFAULT_CODE.category.scheme, DEFAULT_CODE.category.value, DEFAULT_CODE.category.meaning) == tissue
    assert _codes_of(seg.SegmentSequence[1]) == (tissue, tissue) and seg.SegmentSequence[1].SegmentLabel == "lesion"
    described = hd.seg.segread(tmp_path / "seg.dcm").get_segment_description(1)
    assert described.segmented_property_type == hd.sr.CodedConcept("10200004", "SCT", "Liver")


def test_a_coded_seg_passes_dciodvfy(tmp_path: Path):
    dciodvfy.require()
    _seg_of(load_spec(CT_DEMO), tmp_path)
    assert dciodvfy.verify(tmp_path / "seg.dcm").errors == ()
