"""How a de-identified DICOM says it was de-identified (PS3.3 C.7.1.1): DeidentificationMethod and its code sequence
(CID 7050), written by app.runs.privacy.deidentify into every file it de-identifies, after whatever an already
de-identified
source said; and those texts as SegLens's own words, which the last check does not take for a patient's name
(app.runs.privacy.words: a patient Basic is not in "Basic Application Confidentiality Profile")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydicom import Dataset

METHOD = "SegLens: DICOM PS3.15 Basic Profile (dicognito {version})"
PROFILE_CODES = (("113100", "DCM", "Basic Application Confidentiality Profile"),
                 ("113107", "DCM", "Retain Longitudinal Temporal Information Modified Dates Option"),
                 ("113108", "DCM", "Retain Patient Characteristics Option"))


def declare_methods(dataset: Dataset, methods: Sequence[str], codes: Sequence[tuple[str, str, str]]) -> None:
    """DeidentificationMethod and its code sequence, each written only with a value (PS3.3 C.7.1.1: one of them is
    required once PatientIdentityRemoved is YES, and an empty one is an error): a code item only whole (a known
    profile code without its meaning gets it, another is dropped); a source that said YES and nothing else gets
    a method that says so. Another tool's source said it in many ways (dciodvfy finds each one an error)."""
    from pydicom.dataset import Dataset

    texts = list(dict.fromkeys(m[:64] for m in methods if m.strip()))
    items: list[Dataset] = []
    for value, scheme, meaning in dict.fromkeys(codes):
        meaning = meaning.strip() or _KNOWN_MEANINGS.get((value, scheme), "")
        if value.strip() and scheme.strip() and meaning and value not in {item.CodeValue for item in items}:
            item = Dataset()
            item.CodeValue, item.CodingSchemeDesignator, item.CodeMeaning = value, scheme, meaning[:64]
            items.append(item)
    if not texts and not items:
        texts = [UNSAID_METHOD]
    said: tuple[tuple[str, list[str] | list[Dataset]], ...] = (("DeidentificationMethod", texts),
                                                                ("DeidentificationMethodCodeSequence", items))
    for keyword, values in said:
        if values:
            setattr(dataset, keyword, values)
        elif keyword in dataset:
            delattr(dataset, keyword)


UNSAID_METHOD = "de-identified before SegLens; the source did not say how"
# CID 7050's meanings, for a source whose code item lacks its CodeMeaning (Type 1 in the code sequence macro)
_KNOWN_MEANINGS = {(value, scheme): meaning for value, scheme, meaning in (
    *PROFILE_CODES, ("113101", "DCM", "Clean Pixel Data Option"),
    ("113102", "DCM", "Clean Recognizable Visual Features Option"), ("113103", "DCM", "Clean Graphics Option"),
    ("113104", "DCM", "Clean Structured Content Option"), ("113105", "DCM", "Clean Descriptors Option"),
    ("113106", "DCM", "Retain Longitudinal Temporal Information Full Dates Option"),
    ("113109", "DCM", "Retain Device Identity Option"), ("113110", "DCM", "Retain UIDs Option"),
    ("113111", "DCM", "Retain Safe Private Option"), ("113112", "DCM", "Retain Institution Identity Option"))}


def own_texts() -> tuple[str, ...]:
    """The texts the profile writes itself (its method, as written, and CID 7050's meanings): SegLens's words, the
    same for every patient, which the last check does not take for a name (app.runs.privacy.words.own_words)."""
    import dicognito

    return (METHOD.format(version=dicognito.__version__)[:64], UNSAID_METHOD[:64],
            *(meaning[:64] for meaning in _KNOWN_MEANINGS.values()))
