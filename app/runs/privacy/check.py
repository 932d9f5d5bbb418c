"""The last check of --anonymize before a volume counts as done: every file written for it (DICOM tags with their
nested sequences and file meta, a NIfTI header with its extensions, PNG text chunks), every file and folder name
and the report cells are searched for the source's identifying values (app.runs.privacy.ps315.IDENTIFYING, read from its
headers by app.runs.privacy.deidentify.source_facts) and its instance UIDs. A find names the kind of value and where,
never the value; the caller removes the volume's files and makes its row an error.

Values are compared case-insensitively as whole words, never as parts of one: a value is its words (runs of
letters and digits) in order, found only where a word begins and ends (`DOE^JANE` in "Doe, Jane" and in
"doe_jane.dcm", `PID-0042` in "pid 0042"), so a patient named Ana is not found in "Anatomical Structure", nor Otto
in CSS's "bottom", nor Lens in "SegLens". A person's name is also looked for word by word (family,
given…). A value or word shorter than 3 characters is not looked for alone (a two-letter "Li" would turn up in
chance places; the whole name "LI^TOM" still is looked for). A value that begins or ends with a digit is not found
inside a decimal. A number of 3 to 5 digits (a short PatientID "48151") is looked for as a whole word in the DICOM
text attributes only (not in numeric attributes, names or cells, where SegLens's own figures would match it by
chance). SegLens's own pseudonyms are left out of the search (their hex digits could spell a short name by
chance). A web page is searched in the text its reader sees (`page_text`), not in its CSS, markup or pictures.

Where a value came from matters, not only what it says: in the attributes SegLens writes from the
model's spec, a value wholly of the model's and SegLens's own words (a class "lung" for a patient Lung) is not
searched; any other value, and everything copied from the source, is (app.runs.privacy.words).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import with_article
from app.runs.privacy.ps315 import NAME_KINDS
from app.runs.privacy.words import SPEC_FIELDS, WORD, OwnWords, own_words, without, word_pattern, words_of

if TYPE_CHECKING:
    from pydicom import DataElement, Dataset

    from app.runs.privacy.deidentify import SourceFacts

_OWN = re.compile(r"anon-[0-9a-f]{12}|(?:vol|img|series|study)-[0-9a-f]{16}", re.IGNORECASE)
_PIXELS = {0x7FE00010, 0x7FE00008, 0x7FE00009}
# DICOM's text VRs, where an ID copied from the patient module would stand as a word
_TEXT_VRS = frozenset({"AE", "CS", "LO", "LT", "PN", "SH", "ST", "UC", "UT"})


_MIN_WORD = 3


@dataclass(frozen=True)
class Identifying:
    """What must not appear: (kind, lower-case text) pairs, each looked for as whole words (the module
    docstring), and the source's instance UIDs."""

    texts: tuple[tuple[str, str], ...]
    uids: frozenset[str]
    words: tuple[tuple[str, re.Pattern[str]], ...] = ()  # short numbers, as whole words in DICOM text

    @classmethod
    def of(cls, values: Iterable[tuple[str, str]], uids: Iterable[str] = ()) -> Identifying:
        found: dict[tuple[str, str], None] = {}
        words: dict[tuple[str, str], None] = {}
        for kind, value in values:
            parts = [value, *WORD.findall(value)] if kind in NAME_KINDS else [value]
            for part in (p.strip().lower() for p in parts):
                if _worth_looking_for(part):
                    found[(kind, part)] = None
                elif part.isdigit() and 3 <= len(part) < 6:
                    words[(kind, part)] = None
        return cls(tuple(found), frozenset(uids),
                   tuple((kind, re.compile(rf"(?<!\w)(?<!\d\.){word}(?!\w|\.\d)")) for kind, word in words))

    def in_dicom_text(self, text: str) -> str | None:
        """`in_text`, and a short number as a whole word (what a DICOM text attribute is searched for)."""
        found = self.in_text(text)
        if found or not self.words:
            return found
        text = _OWN.sub(" ", text)
        return next((kind for kind, word in self.words if word.search(text)), None)

    def in_text(self, text: str) -> str | None:
        """The kind of the first identifying value found in `text` as whole words, None when there is none. The
        text's words are gathered once: a value is matched only where all its words are among them (a page of a
        thousand inputs' values is one pass, not a pattern per value over the whole page)."""
        text = _OWN.sub(" ", text)
        present = {word.lower() for word in WORD.findall(text)}
        for kind, value in self.texts:
            words = words_of(value)
            if words and all(word in present for word in words):
                found = word_pattern(value)
                if found is not None and found.search(text):
                    return kind
        return None


def _worth_looking_for(text: str) -> bool:
    letters = "".join(WORD.findall(text))
    if len(letters) < _MIN_WORD:
        return False
    return not (letters.isdigit() and len(letters) < 6)


def page_text(page: str, own: OwnWords | None = None) -> str:
    """The text a reader of an HTML page sees, with the titles and alternative texts that hover or stand in for
    it: no CSS, script, tag or attribute name, class or embedded picture. Words stay apart where elements part
    them (`<td>Ana</td><td>Pat</td>` reads "Ana Pat"), together across a `<wbr>`; entities are decoded. `own`: the
    text of an element the page marks `data-own` (what it wrote from the model's spec: a figure's class name) is
    left out where it is wholly `own`'s (app.runs.privacy.words), kept whole otherwise."""
    reader = _PageText(own)
    reader.feed(page)
    reader.close()
    return "".join(reader.parts)


class _PageText(HTMLParser):
    _HIDDEN = frozenset({"style", "script"})
    _SHOWN = frozenset({"title", "alt", "aria-label", "value", "placeholder"})
    _VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                       "wbr"})  # no end tag: never the end of a marked element

    def __init__(self, own: OwnWords | None) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0
        self._own, self._marked = own, 0  # the depth inside an element marked data-own
        self._held: list[str] = []  # its text until it ends

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1
        if tag not in self._VOID and (self._marked or (self._own is not None and
                                                       any(name == "data-own" for name, _ in attrs))):
            self._marked += 1
        if tag != "wbr":  # a line-break chance inside a word, not a space
            self._text(" ")
        self.parts += [f" {value} " for name, value in attrs if name in self._SHOWN and value]

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self._hidden = max(self._hidden - 1, 0)
        self._text(" ")
        if self._marked and tag not in self._VOID:
            self._marked -= 1
            if not self._marked:
                self._release()

    def close(self) -> None:
        super().close()
        self.parts.append("".join(self._held))  # a marked element left open: its text searched as any other
        self._held, self._marked = [], 0

    def _release(self) -> None:
        held, self._held = "".join(self._held), []
        if self._own is None or not self._own.holds(held):
            self.parts.append(held)

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self._text(data)

    def _text(self, text: str) -> None:
        (self._held if self._marked else self.parts).append(text)


def leak(paths: Sequence[Path], identifying: Identifying, *, root: Path, cells: Sequence[str] = (),
         own: OwnWords | None = None) -> str | None:
    """Where an identifying value remains in the volume's `paths` (files or folders under `root`), their names
    or the report `cells`: "a patient name in the DICOM tags of x_seg.dcm"; None when nowhere. `own`: what the
    model's spec and SegLens put there (`own_words`; None: SegLens's fixed texts only, for a copy of a source)."""
    own = own if own is not None else own_words()
    for path in _files(paths):
        rel = _relative(path, root)
        kind = identifying.in_text(rel)
        if kind:
            return f"{with_article(kind)} in the output names ({_shown(rel, identifying)})"
        found = _in_file(path, identifying, own)
        if found:
            return f"{with_article(found[0])} in {found[1]} of {_shown(rel, identifying)}"
    kind = next(filter(None, (identifying.in_text(_under(str(cell), root)) for cell in cells)), None)
    return f"{with_article(kind)} in the report row" if kind else None


def _under(cell: str, root: Path) -> str:
    """A cell that is a path under `root` (--out) as the report writes it, relative: the folder the user chose is
    theirs, not an output's name (an --out of /data/Tom/results is no leak of operator Tom)."""
    prefix = f"{root.as_posix().rstrip('/')}/"
    return cell[len(prefix):] if cell.startswith(prefix) else cell


# with_article (app.errors): `a patient name`, `an accession number`, the kind of value a find names; the review
# report takes it from here with Identifying
__all__ = ["SPEC_FIELDS", "Identifying", "OwnWords", "leak", "own_words", "page_text", "with_article", "without"]


def _files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        files.append(path)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*"))
    return files


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _shown(rel: str, identifying: Identifying) -> str:
    return rel if identifying.in_text(rel) is None else "an output"


def _in_file(path: Path, identifying: Identifying, own: OwnWords) -> tuple[str, str] | None:
    if path.is_dir():
        return None
    name = path.name.lower()
    if name.endswith(".dcm"):
        return _in_dicom(path, identifying, own)
    if name.endswith((".nii", ".nii.gz")):
        kind = identifying.in_text(_nifti_header_text(path))
        return (kind, "the NIfTI header") if kind else None
    if name.endswith(".png"):
        from app.io.files import png_text

        kind = identifying.in_text(" ".join(_png_texts(png_text(path), own)))
        return (kind, "a PNG text chunk") if kind else None
    from app.guard.untrusted import STATE_FILE_LIMIT, read_untrusted

    kind = identifying.in_text(read_untrusted(path, limit=STATE_FILE_LIMIT).decode("latin-1"))
    return (kind, "the contents") if kind else None


def _png_texts(items: Mapping[str, str], own: OwnWords) -> Iterator[str]:
    """A PNG's text items as searched: SegLens's provenance (its JSON) without the values that are wholly own
    (the model's file name, its classes); any other item, or one that is not such JSON, whole."""
    import json

    from app.runs.outputs.provenance import PNG_KEY

    for key, value in items.items():
        yield key
        try:
            record = json.loads(value) if key == PNG_KEY else None
        except ValueError:
            record = None
        if not isinstance(record, dict):
            yield value
            continue
        yield from (leaf for leaf in _leaves(record) if not own.holds(leaf))


def _leaves(value: object) -> Iterator[str]:
    """The strings of a JSON value: keys and string leaves (numbers name nobody)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)


def _in_dicom(path: Path, identifying: Identifying, own: OwnWords) -> tuple[str, str] | None:
    import pydicom

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:  # a file just written, in a folder others share
        dataset = pydicom.dcmread(handle, force=True)
    datasets = [getattr(dataset, "file_meta", None) or pydicom.Dataset(), dataset]
    for top in datasets:
        for element in _elements(top):
            if element.tag in _PIXELS:
                continue
            if element.VR == "UI":
                values = element.value if isinstance(element.value, (list, tuple)) or \
                    type(element.value).__name__ == "MultiValue" else [element.value]
                if any(str(v) in identifying.uids for v in values):
                    return "source UID", "the DICOM tags"
                continue
            text = _element_text(element, own if element.keyword in SPEC_FIELDS else None)
            kind = identifying.in_dicom_text(text) if element.VR in _TEXT_VRS else identifying.in_text(text)
            if kind:
                return kind, "the DICOM tags"
    return None


def _elements(dataset: Dataset) -> Iterator[DataElement]:
    for element in list(dataset.values()):
        element = dataset[element.tag]
        yield element
        if element.VR == "SQ":
            for item in element.value or ():
                yield from _elements(item)


def _element_text(element: DataElement, own: OwnWords | None = None) -> str:
    """An element's value as searched; in a SPEC_FIELDS attribute (`own` given) without its values that are
    wholly SegLens's or the spec's (a multi-valued DeidentificationMethod keeps the source's method searched)."""
    value = element.value
    if value is None or element.VR == "SQ":
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    values = [str(v) for v in value] if isinstance(value, (list, tuple)) or \
        type(value).__name__ == "MultiValue" else [str(value)]
    return "\\".join(v for v in values if own is None or not own.holds(v))


_NIFTI_HEAD = 1 << 20  # the header and extensions searched: at most the first MiB


def _nifti_header_text(path: Path) -> str:
    """The header and extensions of a NIfTI-1 or -2 file (everything before its voxels), as text."""
    import gzip

    from app.guard.untrusted import INPUT_FILE_LIMIT, open_untrusted

    with open_untrusted(path, limit=INPUT_FILE_LIMIT) as handle:
        stream = gzip.GzipFile(fileobj=handle) if path.name.lower().endswith(".gz") else handle
        head = stream.read(_NIFTI_HEAD)
    return head[:_data_offset(head)].decode("latin-1")


def _data_offset(head: bytes) -> int:
    """Where the voxels begin in a NIfTI file that starts with `head`, at most its length: all of it when no
    header can be read there (more is searched, never less)."""
    import io

    import nibabel as nib

    for kind in (nib.Nifti1Header, nib.Nifti2Header):
        try:
            header: Any = kind.from_fileobj(io.BytesIO(head))
        except Exception:  # nibabel raises several types for a header of the other kind or a damaged one
            continue
        return min(int(header.get_data_offset()) or len(head), len(head))
    return len(head)


def volume_leak(files: Sequence[Path], *, facts: SourceFacts | None, info: Mapping[str, str], root: Path,
                cells: Sequence[str], own: OwnWords | None = None) -> str | None:
    """`leak` for one volume: its source facts (app.runs.privacy.deidentify.SourceFacts, None for NIfTI), the patient
    the reader found (`info`) and what the model's spec put in its outputs (`own_words` of its segments and
    algorithm; None: SegLens's fixed texts only)."""
    values = [*(facts.values if facts is not None else ()), ("patient name", str(info.get("Patient", ""))),
              ("patient ID", str(info.get("Patient ID", "")))]
    return leak(files, Identifying.of(values, facts.uids if facts is not None else ()), root=root, cells=cells,
                own=own)


def remove_outputs(paths: Sequence[Path], *, root: Path | None = None) -> None:
    """Remove a volume's files and folders (a failed check leaves nothing that claims to be de-identified), and
    the folders they leave empty, through app.guard.shared: by `root` (--out) and the components under it, else
    by each one's folder and name; a link planted under a name is removed itself, never followed."""
    from app.guard.shared import remove_empty_under, remove_under

    for path in paths:
        base, parts = _root_and_parts(path, root)
        with contextlib.suppress(OSError, ValueError):  # ValueError: PathEscape, a name leading out is left
            remove_under(base, *parts)
    for folder in sorted({p.parent for p in paths}, key=lambda p: len(p.parts), reverse=True):
        base, parts = _root_and_parts(folder, root)
        with contextlib.suppress(OSError, ValueError):
            remove_empty_under(base, *parts)  # a per-slice folder left with nothing in it; never --out itself


def _root_and_parts(path: Path, root: Path | None) -> tuple[Path, tuple[str, ...]]:
    """(`root`, the components of `path` under it), or (its folder, its name) when there is no root over it."""
    if root is not None:
        with contextlib.suppress(ValueError):
            return root, path.relative_to(root).parts
    return path.parent, (path.name,)
