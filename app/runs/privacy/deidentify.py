"""--anonymize for the DICOM files SegLens writes: the DICOM PS3.15 Basic Application Level Confidentiality
Profile, applied by dicognito (a maintained implementation) plus SegLens's stricter choices, to every dataset
right before it is saved (the SEG, each Secondary Capture image, each file of the de-identified source copy).

- PatientName and PatientID become the volume's keyed pseudonym (app.runs.privacy.pseudonyms), the one the report shows.
- Every instance UID is remapped by dicognito's keyed mapping (MD5 of a secret seed + the UID), the seed an HMAC
  of the patient under the pseudonym key: the same source UID gives the same new UID in the SEG's references,
  the Secondary Capture's, the output folder names and the de-identified source copy, so the pair still fits;
  without the key nobody can map a UID back or test a guess. DICOM's own UIDs (1.2.840.10008.…) are kept.
- Dates and date-times move back by one keyed offset per patient, 62 to 730 days (dicognito), times paired with
  a date with them: the Retain Longitudinal Temporal Information with Modified Dates Option. PatientBirthDate is
  emptied. An unreadable date is emptied rather than failing the file.
- Other person names, the accession number and study ID are emptied; the free text, institution, station and
  equipment attributes of app.runs.privacy.ps315.REMOVE, private attributes and overlays are removed; PatientAge, Sex,
  Size and Weight are kept (the Retain Patient Characteristics Option).
- PatientIdentityRemoved YES, LongitudinalTemporalInformationModified MODIFIED, DeidentificationMethod and its
  code sequence (CID 7050: 113100, 113107, 113108) say so, after whatever an already de-identified source said.
Pixel data is not inspected (no OCR): a source that says BurnedInAnnotation YES is refused for the outputs that
carry its pixels (Secondary Capture, source copy).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from app.errors import OutputError
from app.runs.privacy.methods import METHOD, PROFILE_CODES, declare_methods
from app.runs.privacy.ps315 import DICOM_ROOT, EMPTY, IDENTIFYING, OWN_IN_DERIVED, REMOVE
from app.runs.privacy.pseudonyms import keyed_hex, patient_identity, person_name, pseudonym_of

if TYPE_CHECKING:  # dicognito and pydicom are imported where they are used (lazily)
    from dicognito.element_anonymizer import ElementAnonymizer
    from pydicom import DataElement, Dataset

    from app.io.volumes import Volume

SEG_SOP_CLASS = "1.2.840.10008.5.1.4.1.1.66.4"


@dataclass(frozen=True)
class DeidStatus:
    """What an already de-identified source says about it (every file PatientIdentityRemoved YES)."""

    methods: tuple[str, ...]
    codes: tuple[tuple[str, str, str], ...]  # (CodeValue, CodingSchemeDesignator, CodeMeaning)
    dates: str | None  # LongitudinalTemporalInformationModified


@dataclass(frozen=True)
class SourceFacts:
    """What the outputs of a DICOM volume must not carry, and what they must keep saying, read from its source
    headers once: identifying values (kind, text), the source's instance UIDs, burned-in annotation, status."""

    values: tuple[tuple[str, str], ...]
    uids: frozenset[str]
    burned_in: bool
    status: DeidStatus | None


def source_facts(datasets: Sequence[Dataset]) -> SourceFacts:
    """The facts of a volume's source headers (app.io.volumes.source_datasets)."""
    values: dict[tuple[str, str], None] = {}
    uids: set[str] = set()
    for ds in {id(d): d for d in datasets}.values():
        for kind, keywords in IDENTIFYING.items():
            for keyword in keywords:
                for text in _texts(ds.get(keyword)):
                    values[(kind, text)] = None
        for element in _walk(ds):
            if element.VR == "UI" and not _class_uid(element.keyword):
                uids.update(t for t in _texts(element.value) if not t.startswith(DICOM_ROOT))
    burned = any(str(d.get("BurnedInAnnotation", "")).upper() == "YES" for d in datasets)
    return SourceFacts(tuple(values), frozenset(uids), burned, _status(datasets))


def _class_uid(keyword: str) -> bool:
    """A UID that names a kind of thing (SOP class, transfer syntax, implementation), not an instance: dicognito
    keeps these, and every file pydicom writes shares its ImplementationClassUID."""
    return keyword.endswith("ClassUID") or keyword == "TransferSyntaxUID"


def _status(datasets: Sequence[Dataset]) -> DeidStatus | None:
    if not datasets or any(str(d.get("PatientIdentityRemoved", "")).upper() != "YES" for d in datasets):
        return None  # one file that does not say it is de-identified: the series is not said to be
    first = datasets[0]
    codes = tuple((str(item.get("CodeValue", "")), str(item.get("CodingSchemeDesignator", "")),
                   str(item.get("CodeMeaning", ""))) for item in first.get("DeidentificationMethodCodeSequence", []))
    dates = first.get("LongitudinalTemporalInformationModified")
    return DeidStatus(tuple(_texts(first.get("DeidentificationMethod"))), codes, str(dates) if dates else None)


def carry_status(dataset: Dataset, status: DeidStatus | None) -> None:
    """A derived object of an already de-identified source says so too (highdicom's constructors drop it)."""
    if status is None:
        return
    dataset.PatientIdentityRemoved = "YES"
    declare_methods(dataset, status.methods, status.codes)
    if status.dates:
        dataset.LongitudinalTemporalInformationModified = status.dates


@dataclass(frozen=True)
class Deidentifier:
    """The profile for one volume's outputs: its patient's pseudonym and UID seed, its source facts."""

    pseudonym: str
    seed: str
    facts: SourceFacts

    def apply(self, dataset: Dataset, *, derived: bool) -> None:
        """De-identify `dataset` in place. `derived`: a SEG or Secondary Capture SegLens made (its own series
        description, banner and model hash are kept); else a copy of a source file."""
        if self.facts.burned_in and "PixelData" in dataset and str(dataset.get("SOPClassUID")) != SEG_SOP_CLASS:
            raise OutputError("the source says its pixels carry burned-in annotation (BurnedInAnnotation YES); "
                              "SegLens cannot remove text from pixels, so this output is not written de-identified")
        from dicognito.anonymizer import Anonymizer

        _unshare_items(dataset)
        _clean_file_meta(dataset)
        dataset.remove_private_tags()
        _drop_overlays(dataset)
        _empty_unreadable_dates(dataset)
        anonymizer = Anonymizer(seed=self.seed)
        policy = _Policy(self.pseudonym, OWN_IN_DERIVED if derived else frozenset(), dataset)
        anonymizer.add_element_handler(cast("ElementAnonymizer", policy))  # its protocol, duck-typed
        try:
            anonymizer.anonymize(dataset)
        except (ValueError, TypeError, OverflowError, KeyError) as exc:  # no value in the message: it may be one
            raise OutputError(f"cannot de-identify a dataset ({type(exc).__name__} in dicognito)") from exc
        self._declare(dataset, derived=derived)

    def uid(self, uid: str) -> str:
        """The de-identified form of a source UID (what `apply` writes in its place)."""
        return mapped_uid(self.seed, uid)

    def _declare(self, dataset: Dataset, *, derived: bool) -> None:
        import dicognito

        earlier = self.facts.status
        dataset.PatientIdentityRemoved = "YES"
        dataset.LongitudinalTemporalInformationModified = "MODIFIED"
        declare_methods(dataset, (*(earlier.methods if earlier else ()), METHOD.format(version=dicognito.__version__)),
                        (*(earlier.codes if earlier else ()), *PROFILE_CODES))
        if derived and "BurnedInAnnotation" in dataset:
            # The Secondary Capture's burned-in text is SegLens's banner, which names no patient (a source whose
            # pixels carry annotation was refused above): PS3.3 asks whether the text identifies the patient.
            dataset.BurnedInAnnotation = "NO"


def deidentifier(info: Mapping[str, str], key: bytes, facts: SourceFacts) -> Deidentifier:
    """The Deidentifier of a volume whose reader info is `info` (the patient) under pseudonym key `key`."""
    return Deidentifier(pseudonym_of(info, key), uid_seed(info, key), facts)


def uid_seed(info: Mapping[str, str], key: bytes) -> str:
    """dicognito's seed for a patient: an HMAC under the pseudonym key, one per patient, so one patient's dates
    and UIDs cannot be lined up with another's by a shared offset."""
    return keyed_hex(key, "dicom-uids", patient_identity(info))


def mapped_uid(seed: str, uid: str) -> str:
    """What dicognito makes of `uid` under `seed` (through dicognito itself, so it can never drift from the UIDs
    written into the files)."""
    from dicognito.anonymizer import Anonymizer
    from pydicom.dataset import Dataset, FileMetaDataset

    probe = Dataset()
    probe.file_meta = FileMetaDataset()
    probe.SeriesInstanceUID = uid
    Anonymizer(seed=seed).anonymize(probe)
    return str(probe.SeriesInstanceUID)


class _Policy:
    """SegLens's choices, asked before dicognito's own handlers (dicognito's ElementAnonymizer protocol)."""

    def __init__(self, pseudonym: str, keep: frozenset[str], top: Dataset) -> None:
        # `keep` holds at the top level only: a SEG's ContributingEquipmentSequence names the source's scanner
        self.pseudonym, self.keep, self.top = pseudonym, keep, top
        self.remove = frozenset(REMOVE)

    def __call__(self, dataset: Dataset, element: DataElement) -> bool:
        keyword = element.keyword
        if keyword == "PatientName":
            element.value = person_name(self.pseudonym)
        elif keyword == "PatientID":
            element.value = self.pseudonym
        elif keyword in self.keep and dataset is self.top:
            pass  # SegLens's own text in a derived object: not dicognito's to change
        elif keyword in self.remove:
            del dataset[element.tag]
        elif element.VR == "PN" or keyword in EMPTY:
            element.value = ""
        elif element.VR == "UI" and all(t.startswith(DICOM_ROOT) for t in _texts(element.value)):
            pass  # a registry UID (coding scheme, well-known frame of reference): no instance, nothing to hide
        else:
            return False
        return True

    def describe_actions(self) -> Iterator[str]:
        yield "Replace PatientName and PatientID with the keyed pseudonym"
        yield "Remove the PS3.15 Basic Profile attributes dicognito keeps (app.runs.privacy.ps315.REMOVE)"
        yield "Empty other person names, AccessionNumber, StudyID and PatientBirthDate"


def _unshare_items(dataset: Dataset) -> None:
    """A sequence item that appears twice (highdicom puts one source reference item both in the SEG's
    ReferencedSeriesSequence and its per-frame functional groups) becomes two copies: walked twice, its UIDs
    would be remapped twice and its dates shifted twice, and the SEG would no longer fit its source copy."""
    import copy

    seen: set[int] = set()

    def visit(ds: Dataset) -> None:
        for element in list(ds.values()):
            element = ds[element.tag]
            if element.VR != "SQ":
                continue
            for i, item in enumerate(element.value or ()):
                if id(item) in seen:
                    item = element.value[i] = copy.deepcopy(item)
                seen.add(id(item))
                visit(item)

    visit(dataset)


_FILE_META_KEPT = frozenset(range(0x00020000, 0x00020014))  # group length … implementation version name


def _clean_file_meta(dataset: Dataset) -> None:
    """The file meta's AE titles, presentation addresses and private information (a source file's may name the
    sending station or site) go; SOP class and instance, transfer syntax and implementation stay."""
    meta = getattr(dataset, "file_meta", None)
    if meta is not None:
        for tag in [element.tag for element in meta if int(element.tag) not in _FILE_META_KEPT]:
            del meta[tag]


def _drop_overlays(dataset: Dataset) -> None:
    """Overlay and curve groups (60xx, 50xx): the profile removes them (an overlay may hold burned-in text)."""
    for tag in [e.tag for e in dataset if 0x5000 <= e.tag.group <= 0x50FF or 0x6000 <= e.tag.group <= 0x60FF]:
        del dataset[tag]


_DATE = re.compile(r"\d{8}")
_TIME = re.compile(r"\d{2}(\d{2}(\d{2}(\.\d{1,6})?)?)?")
_DATETIME = re.compile(r"(\d{4})(\d{2}(\d{2}(\d{2}(\d{2}(\d{2}(\.\d{1,6})?)?)?)?)?)?([+-]\d{4})?")


def _empty_unreadable_dates(dataset: Dataset) -> None:
    """A DA, DT or (date-paired) TM value dicognito could not parse is emptied (the profile's Z) beforehand:
    a malformed date must neither fail the run nor survive unshifted."""
    for ds, element in _walk_with_parent(dataset):
        if element.VR in ("DA", "DT", "TM") and element.value:
            element.value = _as_text(element.value)  # highdicom stores date objects; dicognito edits strings
        if element.VR in ("DA", "DT") and element.value and not all(map(_readable(element.VR), _texts(element.value))):
            element.value = ""
            time = element.keyword.replace("Date", "Time") if element.VR == "DA" else ""
            if time and time in ds:
                ds[time].value = ""
        elif element.VR == "TM" and element.value and not all(_TIME.fullmatch(t.replace(":", ""))
                                                              for t in _texts(element.value)):
            element.value = ""


def _as_text(value: Any) -> str | list[Any]:  # a DA/DT/TM value as DICOM text (a list for several)
    if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue":
        return [_as_text(v) for v in value]
    if isinstance(value, str):
        return value
    original = getattr(value, "original_string", None)
    if original:
        return str(original)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y%m%d%H%M%S.%f") + (value.strftime("%z") if value.tzinfo else "")
    if isinstance(value, dt.date):
        return value.strftime("%Y%m%d")
    if isinstance(value, dt.time):
        return value.strftime("%H%M%S.%f")
    return str(value)


def _readable(vr: str) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        text = text.replace(".", "") if vr == "DA" else text
        if not (_DATE if vr == "DA" else _DATETIME).fullmatch(text):
            return False
        date = text[:8] if len(text) >= 8 else text[:6] if len(text) >= 6 else text[:4]
        try:
            dt.datetime.strptime(date, {8: "%Y%m%d", 6: "%Y%m"}.get(len(date), "%Y"))
        except ValueError:
            return False
        return True

    return check


def _walk(dataset: Dataset) -> Iterator[DataElement]:
    for _ds, element in _walk_with_parent(dataset):
        yield element


def _walk_with_parent(dataset: Dataset) -> Iterator[tuple[Dataset, DataElement]]:
    """(dataset, element) for every element, nested sequence items and the file meta included."""
    meta = getattr(dataset, "file_meta", None)
    if meta is not None:
        yield from _elements(meta)
    yield from _elements(dataset)


def _elements(dataset: Dataset) -> Iterator[tuple[Dataset, DataElement]]:
    for element in list(dataset.values()):
        element = dataset[element.tag]  # a RawDataElement becomes a DataElement
        yield dataset, element
        if element.VR == "SQ":
            for item in element.value or ():
                yield from _elements(item)


def _texts(value: Any) -> list[str]:
    """The non-empty text values of an element's value (multi-valued, a PersonName, or plain)."""
    if value is None or isinstance(value, (bytes, bytearray)):
        return []
    values = value if isinstance(value, (list, tuple)) or type(value).__name__ == "MultiValue" else [value]
    return [text for text in (str(v).strip() for v in values) if text]


@dataclass(frozen=True)
class VolumePrivacy:
    """What every DICOM written for one volume goes through right before it is saved."""

    facts: SourceFacts
    deidentifier: Deidentifier | None  # None: not --anonymize (a de-identified source's status is still carried)

    def finish_derived(self, dataset: Dataset) -> None:
        """A SEG or Secondary Capture image: de-identified under --anonymize, else the source's status carried."""
        if self.deidentifier is not None:
            self.deidentifier.apply(dataset, derived=True)
        else:
            carry_status(dataset, self.facts.status)

    def writer_sources(self, datasets: list[Dataset]) -> list[Dataset]:
        """The source headers the DICOM writer is given: under --anonymize copies with no identifying value
        (`blinded` below), else `datasets` themselves."""
        if self.deidentifier is None:
            return datasets
        return blinded(datasets, self.deidentifier.pseudonym)

    def finish_source(self, dataset: Dataset) -> None:
        """A copy of a source file (written under --anonymize only)."""
        if self.deidentifier is None:
            raise OutputError("a copy of the source is written de-identified only (--anonymize)")
        self.deidentifier.apply(dataset, derived=False)


def volume_privacy(volume: Volume, *, anonymize: bool, key: bytes) -> VolumePrivacy | None:
    """The VolumePrivacy of a DICOM volume (its source headers read once), None for NIfTI."""
    from app.io.volumes import DICOM_KINDS, source_datasets

    if volume.kind not in DICOM_KINDS:
        return None
    facts = source_facts(source_datasets(volume))
    return VolumePrivacy(facts, deidentifier(volume.info, key, facts) if anonymize else None)


def scrub_nifti_header(header: Any) -> None:  # a nibabel Nifti1Header
    """A NIfTI label volume's free-text fields and extensions emptied (a source NIfTI's header is copied whole,
    and its description or an extension may name the patient)."""
    for field in ("descrip", "aux_file", "intent_name", "db_name"):
        if field in header:
            header[field] = b""
    del header.extensions[:]


def blinded(datasets: list[Dataset], pseudonym: str) -> list[Dataset]:
    """Copies of a volume's source headers for the DICOM writer under --anonymize: PatientName and PatientID the
    keyed pseudonym, every other identifying attribute (app.runs.privacy.ps315.IDENTIFYING) emptied. highdicom copies
    the patient and study modules from the headers it is given and quotes them in its warnings and log lines ('The
    string "SMITHSON" is unlikely…'): given these, nothing identifying ever enters it. The profile proper
    (app.runs.privacy.deidentify) then runs on what it built, as before. One copy per file (a multi-frame file's slices
    share it)."""
    import copy

    from app.runs.privacy.ps315 import IDENTIFYING
    from app.runs.privacy.pseudonyms import person_name

    copies: dict[int, Dataset] = {}
    for dataset in datasets:
        if id(dataset) in copies:
            continue
        blind = copy.deepcopy(dataset)
        for keyword in (k for keywords in IDENTIFYING.values() for k in keywords):
            if keyword in blind:
                setattr(blind, keyword, "")  # Type 2 where the writer copies it: present, empty
        blind.PatientName, blind.PatientID = person_name(pseudonym), pseudonym
        copies[id(dataset)] = blind
    return [copies[id(dataset)] for dataset in datasets]
