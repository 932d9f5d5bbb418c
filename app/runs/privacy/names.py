"""--anonymize: output names and report paths that carry no input folder or file name, and error lines that
carry no input path.

Without --anonymize an input's outputs mirror the input tree (app.io.discover.output_stems). With it, a DICOM
volume's go to `<patient pseudonym>/<study UID>/<series UID>…` where both UIDs are the de-identified ones written
into its SEG, Secondary Capture and source copy (app.runs.privacy.deidentify), so a NIfTI mask can still be paired with
the shared series; a NIfTI volume's to `nifti/vol-<keyed id>`, an image's to `images/img-<keyed id>` (an HMAC of its
relative path under the pseudonym key: stable across runs, meaningless without the key). The report's `path` is
that name, relative to --out: no absolute path, no input folder.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from app.io.discover import InputFile
from app.runs.privacy.pseudonyms import keyed_hex, pseudonym_of

if TYPE_CHECKING:
    from app.io.volumes import Volume

NO_PATIENT = "no-patient"  # the folder of a DICOM volume whose files name no patient
_ID_DIGITS = 16


def anonymized_stems(inputs: Sequence[InputFile], key: bytes) -> list[Path]:
    """A distinct relative output stem per input, as the module docstring says (`_2`… for a repeated one)."""
    if len(key) < 16:  # never names from an empty key: anybody could recompute them
        from app.runs.privacy.pseudonyms import PseudonymKeyError

        raise PseudonymKeyError("--anonymize needs a pseudonym key (app.runs.privacy.pseudonyms.pseudonym_key)")
    taken: set[str] = set()
    stems: list[Path] = []
    for item in inputs:
        base = Path(pseudonymous_name(item, key))
        candidate, n = base, 2
        while candidate.as_posix().lower() in taken:
            candidate, n = base.with_name(f"{base.name}_{n}"), n + 1
        taken.add(candidate.as_posix().lower())
        stems.append(candidate)
    return stems


def pseudonymous_name(item: InputFile, key: bytes) -> str:
    """The name an input goes by under --anonymize (its output stem before de-duplication, `/`-separated): for the
    report, the HTML review report and anything else that would show its path."""
    volume = item.volume
    if volume is not None and volume.kind.startswith("dicom"):
        patient = pseudonym_of(volume.info, key) or NO_PATIENT
        return f"{patient}/{study_id(volume, key)}/{series_id(volume, key)}"
    folder, prefix = ("nifti", "vol") if volume is not None else ("images", "img")
    return f"{folder}/{prefix}-{keyed_hex(key, 'output-name', item.rel.as_posix())[:_ID_DIGITS]}"


def shown_name(item: InputFile, name: str | None, key: bytes | None) -> str:
    """How a run's line names an input: its path; under --anonymize (`key`) the name the run gave it, else its keyed
    pseudonym."""
    if not key:
        return str(item.path)
    return name if name is not None else pseudonymous_name(item, key)


def pseudonymous_path(rel: str | Path, key: bytes) -> str:
    """An image's name under --anonymize from its path relative to the folder it was found in (what
    `pseudonymous_name` gives that image)."""
    return pseudonymous_name(InputFile(Path(rel), Path(rel)), key)


def series_id(volume: Volume, key: bytes) -> str:
    """The volume's SeriesInstanceUID as its de-identified files carry it (a split series' `_2`… kept)."""
    uid = str(volume.series.get("SeriesInstanceUID") or "")
    if uid and volume.key.startswith(uid):
        return _mapped(volume, key, uid) + volume.key[len(uid):]
    return f"series-{keyed_hex(key, 'series', volume.key)[:_ID_DIGITS]}"


def study_id(volume: Volume, key: bytes) -> str:
    uid = str(volume.series.get("StudyInstanceUID") or "")
    return _mapped(volume, key, uid) if uid else f"study-{keyed_hex(key, 'study', str(volume.source))[:_ID_DIGITS]}"


def _mapped(volume: Volume, key: bytes, uid: str) -> str:
    from app.runs.privacy.deidentify import mapped_uid, uid_seed

    return mapped_uid(uid_seed(volume.info, key), uid)


def redact(message: str, item: InputFile, name: str, *, out_dir: Path | None = None) -> str:
    """An error line with the input's paths (its files, folder, the folders above it up to where it was found)
    replaced by its pseudonymous `name`, and --out's own path dropped. If a word of the input's path or patient
    is still in it (a whole word, as `LineRedactor` looks for: patient Pat is not in "path", Otto not in "bottom"),
    the line says only that it failed: its details stay in the debug log."""
    text = message
    if out_dir is not None:
        text = text.replace(f"{out_dir}{os.sep}", "")
    for path in sorted(_paths_of(item), key=len, reverse=True):
        text = text.replace(path, name)
    words = {word.lower() for word in _TOKEN.findall(_OWN_NAME.sub(" ", text))}
    if words & _identifying_parts(item):
        return f"{name}: failed (the message named the input's files or patient; withheld under --anonymize)"
    return text


def _paths_of(item: InputFile) -> set[str]:
    paths = {str(item.path)}
    volume = item.volume
    if volume is not None:
        paths.add(str(volume.source))
        paths.update(str(ref.path) for ref in volume.slices)
    depth = len(item.rel.parts)
    paths.update(str(parent) for parent in list(item.path.parents)[:depth] if str(parent) not in (".", os.sep))
    return paths


def identifying_words(item: InputFile) -> frozenset[str]:
    """The words of an input that name it or its patient (what `redact` withholds a line for): lower case."""
    return frozenset(_identifying_parts(item))


_WORD = re.compile(r"[^\W_]{3,}")
_SHORT_NUMBER = re.compile(r"\d{1,5}")


def _identifying_parts(item: InputFile) -> set[str]:
    """Words (3+ letters or digits) of the input's relative path and its patient's name and ID."""
    texts = [*item.rel.parts]
    volume = item.volume
    if volume is not None:
        texts += [str(volume.info.get("Patient", "")), str(volume.info.get("Patient ID", ""))]
        texts += [ref.path.name for ref in volume.slices]
    words = {word.lower() for text in texts for word in _WORD.findall(text)}
    return {word for word in words if not _SHORT_NUMBER.fullmatch(word)} - _COMMON


# words of a folder or file name that say nothing about a patient and appear in ordinary error lines
_COMMON = frozenset({"dcm", "dicom", "nii", "png", "jpg", "jpeg", "tif", "tiff", "bmp", "slice", "series", "image",
                     "images", "the", "and", "file", "files"})


_WITHHELD = "[withheld]"
_TOKEN = re.compile(r"[^\W_]+")  # a word as `_identifying_parts` splits names: an underscore does not join
# SegLens's own names (`pseudonymous_name`): their hex digits may spell a short word by chance, never withheld
_OWN_NAME = re.compile(r"(?:anon-[0-9a-f]{12}|no-patient)/(?:[0-9.]+|study-[0-9a-f]{16})/"
                       r"(?:[0-9.]+|series-[0-9a-f]{16})(?:_[0-9]+)?|(?:images/img|nifti/vol)-[0-9a-f]{16}(?:_[0-9]+)?")


@dataclass(frozen=True)
class LineRedactor:
    """The last pass over every line the CLI prints during a run under --anonymize (app.cli.console.Terminal):
    each input's paths (its files, its folder, the folders above it up to where it was found) become its
    pseudonymous name, the folders typed and --out stay as typed, and any word left of an input's relative path or
    of its patient's name and ID (3+ letters or digits, as `redact` looks for; whole words) is replaced by
    `[withheld]`, outside SegLens's own pseudonymous names. A line without a path costs one scan of its words."""

    roots: tuple[tuple[tuple[str, ...], tuple[tuple[str, str], ...]], ...]  # (root spellings, (path, name)…)
    words: frozenset[str]

    def line(self, text: str) -> str:
        """`text` with no input path and no identifying word left (see the class docstring)."""
        for spellings, pairs in self.roots:
            if any(root in text for root in spellings):
                for path, name in pairs:  # the longest path first: a file before its folder
                    if path in text:
                        text = text.replace(path, name)
        if not self.words:
            return text
        own = [match.span() for match in _OWN_NAME.finditer(text)]

        def withheld(word: re.Match[str]) -> str:
            if word.group().lower() not in self.words or any(a <= word.start() < b for a, b in own):
                return word.group()
            return _WITHHELD

        return _TOKEN.sub(withheld, text)


def line_redactor(inputs: Sequence[InputFile], key: bytes) -> LineRedactor:
    """The LineRedactor of a run's inputs under pseudonym key `key` (their names as `anonymized_stems` makes)."""
    from app.errors import shown

    stems = anonymized_stems(inputs, key)
    by_root: dict[str, dict[str, str]] = {}
    words: set[str] = set()
    for item, stem in zip(inputs, stems, strict=True):
        root = str(Path(*item.path.parts[:len(item.path.parts) - len(item.rel.parts)]))
        pairs = by_root.setdefault(root, {})
        name = stem.as_posix()
        for path in _paths_of(item) - {root}:  # the folder the user named is theirs: it stays as typed
            for spelt in {path, shown(path)}:  # as the line has it, raw or as app.errors.shown escapes it
                # a folder that holds more than one input is no one input's name
                pairs[spelt] = name if pairs.get(spelt, name) == name else "[an input folder]"
        words |= _identifying_parts(item)
    roots = tuple(((root, shown(root)), tuple(sorted(pairs.items(), key=lambda pair: len(pair[0]), reverse=True)))
                  for root, pairs in by_root.items())
    return LineRedactor(roots, frozenset(words))
