"""DICOM JSON (PS3.18 F.2) as DICOMweb servers send it, read into SegLens's PACS records: QIDO-RS search keys
and results, and STOW-RS store answers. Pure functions over plain dicts: no network, no library."""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

from app.io.pacs.client import SeriesRecord, StudyQuery, StudyRecord

# DICOM JSON keys (PS3.18 F.2): the attributes a search asks for and reads back.
STUDY_UID, SERIES_UID, SOP_UID = "0020000D", "0020000E", "00081155"
PATIENT_ID, PATIENT_NAME, STUDY_DATE = "00100020", "00100010", "00080020"
STUDY_DESCRIPTION, MODALITIES, ACCESSION, STUDY_SERIES = "00081030", "00080061", "00080050", "00201206"
MODALITY, SERIES_DESCRIPTION, SERIES_NUMBER, SERIES_INSTANCES = "00080060", "0008103E", "00200011", "00201209"
FAILED_SOPS, REFERENCED_SOPS, FAILURE_REASON = "00081198", "00081199", "00081197"
STUDY_FIELDS = ("StudyDate", "StudyDescription", "ModalitiesInStudy", "AccessionNumber", "NumberOfStudyRelatedSeries")
SERIES_FIELDS = ("Modality", "SeriesDescription", "SeriesNumber", "NumberOfSeriesRelatedInstances")
# PS3.4 C.4.2.1.4 / PS3.18 table I.2-1: the failure reasons a STOW-RS server reports, in words.
REASONS = {
    0xA700: "out of resources",
    0xA900: "data set does not match SOP class",
    0xC000: "cannot understand",
    0x0110: "processing failure",
    0x0111: "duplicate SOP instance",
    0x0122: "SOP class not supported",
    0x0124: "not authorized",
    0xC122: "referenced SOP instance is in another study",
}


# Characters a QIDO-RS value can carry without percent-encoding (RFC 3986 unreserved) and the two wildcards.
# Orthanc 1.10's DICOMweb plugin matches the query's raw text, never decoded: "Doe%5EJane" finds nobody.
_PLAIN = frozenset(string.ascii_letters + string.digits + "-._~*?")


def sendable(value: str) -> str:
    """`value` with each character a server might not decode (the name's "^", a space, …) as the one-character
    wildcard "?": the server's answer is a superset, `wanted` keeps what `value` itself matches."""
    return "".join(c if c in _PLAIN else "?" for c in value)


def matches(pattern: str, value: str, *, fold: bool = False) -> bool:
    """DICOM wildcard matching (PS3.4 C.2.2.2.4): "*" any run, "?" one character; `fold` ignores case (names)."""
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch("".join(parts), value, flags=re.IGNORECASE | re.DOTALL if fold else re.DOTALL) is not None


def wanted(study: StudyRecord, query: StudyQuery) -> bool:
    """Whether a study the server found matches `query`'s own values where `sendable` had to widen them (a
    server that reports no modalities is taken at its word)."""
    checks = [
        (query.patient_id, (study.patient_id,), False),
        (query.patient_name, (study.patient_name,), True),
        (query.accession, (study.accession,), False),
        (query.modality, study.modalities, False),
    ]
    for pattern, values, fold in checks:
        widened = pattern and sendable(pattern) != pattern
        if widened and values and not any(matches(pattern, value, fold=fold) for value in values):
            return False
    return True


def study_filters(query: StudyQuery) -> dict[str, str]:
    """QIDO-RS search keys for `query` (empty fields left out; a date range as "FROM-TO", open ends allowed;
    characters a server might not decode sent as "?")."""
    filters = {
        "PatientID": sendable(query.patient_id),
        "PatientName": sendable(query.patient_name),
        "ModalitiesInStudy": sendable(query.modality),
        "AccessionNumber": sendable(query.accession),
        "StudyInstanceUID": query.study_uid,
    }
    if query.study_date is not None:
        first, last = query.study_date
        filters["StudyDate"] = first if first and first == last else f"{first}-{last}"
    return {key: value for key, value in filters.items() if value and value != "-"}


def study_record(item: Mapping[str, Any]) -> StudyRecord:
    """A StudyRecord from one QIDO-RS study result (missing attributes empty or None)."""
    return StudyRecord(
        study_uid=text(item, STUDY_UID),
        patient_id=text(item, PATIENT_ID),
        patient_name=text(item, PATIENT_NAME),
        study_date=text(item, STUDY_DATE),
        description=text(item, STUDY_DESCRIPTION),
        modalities=texts(item, MODALITIES),
        accession=text(item, ACCESSION),
        series_count=count(item, STUDY_SERIES),
    )


def series_record(item: Mapping[str, Any], study_uid: str) -> SeriesRecord:
    """A SeriesRecord from one QIDO-RS series result (missing attributes empty or None)."""
    return SeriesRecord(
        series_uid=text(item, SERIES_UID),
        study_uid=text(item, STUDY_UID) or study_uid,
        modality=text(item, MODALITY),
        description=text(item, SERIES_DESCRIPTION),
        number=integer(item, SERIES_NUMBER),
        instances=count(item, SERIES_INSTANCES),
    )


def items(answer: object) -> list[Mapping[str, Any]]:
    """The data sets of a QIDO-RS answer (a JSON list; anything else none)."""
    return [item for item in answer if isinstance(item, dict)] if isinstance(answer, list) else []


def values(item: Mapping[str, Any], tag: str) -> list[Any]:
    """The attribute's "Value" list, [] when it is absent or has none."""
    element = item.get(tag)
    values = element.get("Value") if isinstance(element, dict) else None
    return values if isinstance(values, list) else []


def text(item: Mapping[str, Any], tag: str) -> str:
    """The attribute's first value as text (a person name's alphabetic form), "" when absent."""
    found = values(item, tag)
    first = found[0] if found else None
    if isinstance(first, dict):  # a person name: {"Alphabetic": "Doe^Jane"}
        first = first.get("Alphabetic")
    return "" if first is None else str(first)


def texts(item: Mapping[str, Any], tag: str) -> tuple[str, ...]:
    """Every value of a multi-valued attribute (ModalitiesInStudy)."""
    # some servers send "CT\\SEG" as one value rather than two
    words = (part for value in values(item, tag) if value is not None for part in str(value).split("\\"))
    return tuple(word for word in words if word)


def integer(item: Mapping[str, Any], tag: str) -> int | None:
    """The attribute's first value as a number, None when absent or not one."""
    try:
        return int(values(item, tag)[0])
    except (IndexError, TypeError, ValueError):
        return None


def count(item: Mapping[str, Any], tag: str) -> int | None:
    """A number of things a server reports (instances of a series, series of a study): None when it is absent or
    cannot be one (negative), so that nothing is counted against a server's nonsense."""
    number = integer(item, tag)
    return number if number is not None and number >= 0 else None


def is_stow_answer(answer: Mapping[str, Any]) -> bool:
    """Whether a JSON body is a STOW-RS store answer (it lists stored or failed instances)."""
    return FAILED_SOPS in answer or REFERENCED_SOPS in answer


def stow_outcome(answer: Mapping[str, Any], *, sent: int) -> tuple[int, list[str]]:
    """How many of `sent` instances a STOW-RS answer says were stored, and a reason per refused one. A server
    that confirms fewer than it was sent without saying why: those count as "not confirmed by the server"."""
    failed = [reason(item) for item in values(answer, FAILED_SOPS) if isinstance(item, dict)]
    stored = len(values(answer, REFERENCED_SOPS))
    if not failed and stored < sent:
        failed = ["not confirmed by the server"] * (sent - stored)
    return stored, failed


def reason(item: Mapping[str, Any]) -> str:
    """A FailedSOPSequence item's FailureReason in words, with its code."""
    code = integer(item, FAILURE_REASON)
    if code is None:
        return "no reason given"
    return f"{REASONS.get(code, 'refused')} (0x{code:04X})"
