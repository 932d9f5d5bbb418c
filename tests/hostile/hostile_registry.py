"""The registry of boundaries the hostile battery runs against (tests/hostile/test_battery.py).

A boundary registers once: a name, a thin callable that hands it the hostile thing (a path, a text, a URL or a
name), what counts as the right refusal (exception types whose message is one line naming the file or server),
and the time it has. The battery then runs every class of hostile input that applies to its kind:

- "file": FIFO, /dev/zero, socket, sparse 3 GiB, folder; + non-UTF-8 when `text`; + alias bomb and deep
  nesting when `yaml`; + a symlink out of its folder when `rooted` (the folder is the root it was found in);
- "text": alias bomb and deep nesting (a YAML value from the command line);
- "url": endless, trickling (body or headers), redirecting to another origin, lying Content-Length (loopback
  servers);
- "name": traversal names; the callable takes (root, name) and must refuse or return a path under root.

`weak` marks the classes the boundary still fails, each with the helper area that owns the fix: those tests are
xfail(strict=True), so the mark must go when the fix lands. `harmless` lists the classes where finishing
normally (within the time) is right — a stale lock over a planted FIFO is taken over, not refused.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hostile_kit import FILE_MAKERS, ROOTED_MAKERS, SERVER_BEHAVIOURS, TEXT_MAKERS, TRAVERSAL_NAMES, YAML_MAKERS


@dataclass(frozen=True)
class Boundary:
    name: str
    kind: str  # "file" | "text" | "url" | "name"
    call: Callable[..., object]
    refusal: tuple[type[BaseException], ...]
    file_name: str = "input.bin"  # the name the hostile thing is made under (kind "file")
    url_path: str = "/"  # the path the hostile server is asked for (kind "url")
    text: bool = False
    yaml: bool = False
    rooted: bool = False
    names_file: bool = True  # the refusal's message names the file (its name) or the server (127.0.0.1)
    seconds: float = 20.0
    weak: Mapping[str, str] = field(default_factory=dict)
    harmless: frozenset[str] = frozenset()

    def classes(self) -> tuple[str, ...]:
        if self.kind == "file":
            found = list(FILE_MAKERS)
            found += list(TEXT_MAKERS) if self.text else []
            found += list(YAML_MAKERS) if self.yaml else []
            found += list(ROOTED_MAKERS) if self.rooted else []
            return tuple(found)
        if self.kind == "text":
            return tuple(YAML_MAKERS)
        if self.kind == "url":
            return SERVER_BEHAVIOURS
        if self.kind == "name":
            return tuple(f"name {name!r}" for name in TRAVERSAL_NAMES)
        raise ValueError(self.kind)


BOUNDARIES: dict[str, Boundary] = {}


def register(boundary: Boundary) -> Boundary:
    """Add `boundary` to the battery (once per name)."""
    if boundary.name in BOUNDARIES:
        raise ValueError(f"boundary {boundary.name!r} registered twice")
    unknown = set(boundary.weak) - set(boundary.classes())
    if unknown:
        raise ValueError(f"boundary {boundary.name!r}: weak classes it is not run with: {sorted(unknown)}")
    BOUNDARIES[boundary.name] = boundary
    return boundary


def qualified(kind: type[BaseException]) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"
