"""The words of --anonymize's last check (app.runs.privacy.check): how a value is found as whole words, and which
values are SegLens's own — what the model's spec and SegLens itself write into an output, never a patient's.

A text that SegLens or the model's spec put into an output — a class name, the model's name and hashes, a code
meaning, SegLens's fixed phrases — is the same for every patient and identifies nobody, even when it equals a
patient's name (a patient called Lung, a model with the class "lung"; a patient Basic and the profile's "Basic
Application Confidentiality Profile"). In the attributes SegLens writes from the spec (`SPEC_FIELDS`) and
in a PNG's provenance, a value that is wholly such text (`OwnWords.holds`) is not searched; any other value of those
attributes is searched whole, as is everything copied or derived from the source. `own_words` is the one place every
caller (a run's volume, the viewer's Send to PACS, a station's copy) takes them from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.runs.outputs.segments import Algorithm, Segment

WORD = re.compile(r"[^\W_]+")  # a word: letters and digits; `_`, `^`, `-`, `.`, spaces and the rest part words


@lru_cache(maxsize=4096)
def words_of(value: str) -> tuple[str, ...]:
    """`value`'s words, lower case."""
    return tuple(word.lower() for word in WORD.findall(value))


@lru_cache(maxsize=4096)
def word_pattern(value: str) -> re.Pattern[str] | None:
    """`value`'s words in order, any separator between them, where words begin and end (a value that begins or
    ends with a digit not inside a decimal either); None when it holds no word."""
    words = WORD.findall(value)
    if not words:
        return None
    before = r"(?<![^\W_])" + (r"(?<!\d\.)" if words[0][0].isdigit() else "")
    after = r"(?![^\W_])" + (r"(?!\.\d)" if words[-1][-1].isdigit() else "")
    return re.compile(before + r"[\W_]+".join(map(re.escape, words)) + after, re.IGNORECASE)


def without(text: str, value: str) -> str:
    """`text` with `value` taken out where it stands as whole words (a reviewer's login "pat" leaves "Patrick"
    and "path" whole, where replacing the letters would have cut into them)."""
    found = word_pattern(value)
    return found.sub(" ", text) if found is not None else text


# The attributes SegLens writes from the model's spec or its own vocabulary (app.runs.exports.seg, rtstruct,
# secondary_capture, deidentify): where a value wholly of `OwnWords` is SegLens's, not the source's.
SPEC_FIELDS = frozenset({
    "SegmentLabel", "SegmentDescription", "SegmentAlgorithmName", "SegmentAlgorithmType", "ROIName",
    "ROIObservationLabel", "ROIObservationDescription", "ROIGenerationAlgorithm", "ROIGenerationDescription",
    "DimensionDescriptionLabel", "SeriesDescription", "ContentLabel", "ContentDescription", "StructureSetLabel",
    "StructureSetName", "StructureSetDescription", "ImageComments", "DerivationDescription", "AlgorithmName",
    "AlgorithmVersion", "AlgorithmParameters", "CodeMeaning", "DeidentificationMethod", "Manufacturer",
    "ManufacturerModelName", "SoftwareVersions", "DeviceSerialNumber",
})
# the words SegLens's phrases put around the model's name, hash and classes ("Segmentation by <model>", "SegLens
# <model> (NOT FOR DIAGNOSIS)", "Contours by <model>, model sha256 <hash>", "<model>.onnx", the review report's
# "mL <class>" and "voxels <class>"); a phrase of these and own values only is SegLens's — anything else in it (a
# digit, a word of the source) makes it searched whole
_PHRASE_WORDS = frozenset({"seglens", "segmentation", "by", "contours", "model", "sha256", "not", "for", "diagnosis",
                           "onnx", "yaml", "ml", "voxels"})


# SegLens's and highdicom's fixed texts in a SEG, RTSTRUCT or Secondary Capture (CID 7162's algorithm family, the
# Secondary Capture's derivation, highdicom's dimension labels, purpose of reference and contributing equipment)
_FIXED = ("SegLens", "AUTOMATIC", "Artificial Intelligence", "Segmentation overlay burned in", "Acquisition Equipment",
          "Image Position Patient", "Referenced Segment Number", "Highdicom open-source contributors", "highdicom")


@dataclass(frozen=True)
class OwnWords:
    """What the model's spec and SegLens itself put into an output: lower-case values (class names, the model's
    name and hashes, code meanings, SegLens's fixed texts), the longest first. Never a value of the source."""

    values: tuple[str, ...]

    def holds(self, text: str) -> bool:
        """Whether `text` is wholly SegLens's or the spec's: one own value, or own values and `_PHRASE_WORDS`
        only (whole words). A text with anything else in it is not (and is then searched whole)."""
        present = {word.lower() for word in WORD.findall(text)}
        if not present:
            return False  # nothing to find in it anyway: searched as any other text
        rest = text
        for value in self.values:
            its = words_of(value)
            if its and present.issuperset(its):
                rest = without(rest, value)
        return all(word.lower() in _PHRASE_WORDS for word in WORD.findall(rest))

    def also(self, *texts: str) -> OwnWords:
        """These and `texts` (what a caller wrote from them: the review report's title naming the model)."""
        return _own([*self.values, *texts])


def _own(values: Sequence[str]) -> OwnWords:
    unique = {" ".join(value.lower().split()): None for value in values if WORD.search(value)}
    return OwnWords(tuple(sorted(unique, key=lambda value: (-len(words_of(value)), -len(value), value))))


def own_words(segments: Sequence[Segment] = (), algorithm: Algorithm | None = None) -> OwnWords:
    """The OwnWords of a volume's outputs: the model's classes as segments (their names, "class N", their codes'
    meanings), its algorithm identification (name, hashes, SegLens's version) and SegLens's fixed texts (the
    de-identification method and CID 7050 meanings, the default code "Tissue", CID 7162's "Artificial
    Intelligence", the Secondary Capture's derivation). The one place every caller takes them from."""
    from app.inference.model.codes import DEFAULT_CODE
    from app.runs.privacy.methods import own_texts

    values = [*own_texts(), *_FIXED, DEFAULT_CODE.category.meaning, DEFAULT_CODE.type.meaning]
    for segment in segments:
        values += [segment.name, f"class {segment.value}"]
        if segment.code is not None:
            values += [segment.code.category.meaning, segment.code.type.meaning]
    if algorithm is not None:
        values += [algorithm.name, algorithm.version, algorithm.sha256, algorithm.software_version]
    return _own(values)
