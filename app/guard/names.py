"""Names from outside → one path component, and components joined under a root that they cannot leave.

A SeriesInstanceUID, a station id, a file name a server sends, a class or series description: any of them may be
`../../etc`, an absolute path, `CON`, 300 characters or hold a NUL. `component` makes one of them a single file
name that means only itself; `join_under` puts components under a root and proves, with every symlink resolved,
that the result is still inside it. Nothing is ever deleted or replaced through a path that did not come out of
`join_under` (app.guard.shared's removers take a root and components, not a path).

`component` is injective: two different names never give the same component. Characters that cannot stand in a
name are written `%XX` (their UTF-8 bytes), `%` itself included, so the spelling can be undone; a name too long is
cut on a character boundary and ends with a hash of the whole name.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from pathlib import Path

MAX_COMPONENT_BYTES = 200  # under every file system's 255-byte limit, with room for a suffix and a temporary's
_HASH_CHARS = 16
_UNSAFE = set('/\\:*?"<>|%~')  # `~` only ever marks a cut name's hash, so a cut and an uncut name never meet
# Windows's device names, also with an extension and with spaces before it (`CON .txt` is the console too), the
# superscript digits included (`COM¹`)
_WINDOWS_RESERVED = {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$",
                     *(f"{device}{n}" for device in ("COM", "LPT") for n in "0123456789¹²³")}


class PathEscape(ValueError):
    """A joined path that would leave its root (through `..`, an absolute part or a symlink)."""


def component(name: str, *, max_bytes: int = MAX_COMPONENT_BYTES) -> str:
    """`name` as one safe file-name component: no separator, never `.`, `..` or empty, no NUL or control
    character, not a Windows device name, no leading or trailing space or dot, at most `max_bytes` UTF-8 bytes.
    Distinct names give distinct components."""
    text = "".join(_escape(ch) if _unsafe(ch) else ch for ch in name)
    if not text or text.startswith((".", " ")):
        text = _escape(text[0]) + text[1:] if text else "%empty"  # no other name gives `%e…`
    if text.endswith((".", " ")):
        text = text[:-1] + _escape(text[-1])
    if text.split(".")[0].rstrip(" ").upper() in _WINDOWS_RESERVED:
        text = _escape(text[0]) + text[1:]
    return _cut(text, name, max_bytes)


def _unsafe(ch: str) -> bool:
    return ch in _UNSAFE or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _escape(ch: str) -> str:
    return "".join(f"%{byte:02X}" for byte in ch.encode("utf-8", "surrogatepass"))


def _cut(text: str, name: str, max_bytes: int) -> str:
    """`text` when it fits in `max_bytes`, else its head (whole characters only) + `~` + a hash of `name`."""
    if len(text.encode("utf-8", "surrogatepass")) <= max_bytes:
        return text
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    room = max_bytes - _HASH_CHARS - 1
    head = text.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
    head = re.sub(r"%[0-9A-F]?$", "", head)  # never half an escape
    return f"{head}~{digest}"


def join_under(root: str | os.PathLike[str], *components: str) -> Path:
    """`root / c1 / c2 …` after proving it stays under `root` with every symlink resolved (also a symlink already
    planted under one of the names). Each part must already be a single component (`component()`'s output or a
    name SegLens chose); PathEscape otherwise."""
    base = Path(root)
    for part in components:
        single_component(part, under=base)
    target = base.joinpath(*components)
    inside(base, target)
    return target


def single_component(part: str, *, under: str | os.PathLike[str]) -> str:
    """`part` when it is one path component (not empty, `.` or `..`, no separator of this system, no NUL);
    PathEscape naming `under` otherwise. No file system look-up: for a name whose own link is removed or renamed,
    never followed. A backslash is a separator on Windows only: on POSIX it is a letter of a name (SegLens spells an
    undecodable byte `\\xe9` in an output's name), so it is refused there alone (`component()` escapes it anyway)."""
    separators = {"/", os.sep, os.altsep or "/"}
    if not part or part in (".", "..") or "\x00" in part or any(sep in part for sep in separators):
        raise PathEscape(f"{part!r} is not a single path component (under {os.fspath(under)})")
    return part


def inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """`path` when, resolved with every symlink on the way, it is `root` or below it; PathEscape otherwise."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise PathEscape(f"{path} leads outside {root} (to {real})")
    return Path(path)
