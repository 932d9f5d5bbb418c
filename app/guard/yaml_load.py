"""The one YAML loader: every YAML file SegLens reads (sidecars, station files, PACS nodes, settings, remote
sidecars, bundled models) is parsed here and nowhere else.

A YAML file is someone else's text. A few hundred bytes of nested anchors and aliases expand to billions of items
("billion laughs") in anything that walks the value — an error message, a validator; ten thousand `[` nest past
Python's recursion limit; a second `threshold:` silently wins over the first. So:
- the text is bounded before it is parsed (the caller names the limit, a file is read through app.guard.untrusted);
- anchors and aliases are refused (no SegLens file needs them), at the line they are on;
- nesting deeper than `max_depth` is refused while composing, before any object is built;
- a duplicate key is refused, naming it;
- every refusal is one YAMLRefused line naming the source, the line and the problem.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

import yaml

from app.guard.untrusted import TooLarge, read_untrusted

MAX_YAML_BYTES = 1 << 20  # a settings or station file is a page of text; a sidecar with 10,000 classes is 400 KB
MAX_DEPTH = 32
_MAX_KEY_SHOWN = 60


class YAMLRefused(ValueError):
    """One line: `<source>: invalid YAML at line 3: …` (the message is the whole line)."""


def read_yaml(path: str | os.PathLike[str], *, limit: int = MAX_YAML_BYTES, what: str = "YAML file",
              root: str | os.PathLike[str] | None = None, max_depth: int = MAX_DEPTH) -> Any:
    """The YAML document in the file at `path` (read through app.guard.untrusted with `limit` and `root`).
    YAMLRefused for a file too large, not UTF-8, or refused YAML; OSError as the untrusted open raises it
    (missing, a FIFO, a device, a symlink out of `root`)."""
    try:
        data = read_untrusted(path, limit=limit, root=root)
    except TooLarge as exc:
        raise YAMLRefused(f"{os.fspath(path)}: {what} too large ({exc.strerror})") from None
    return load_yaml(data, source=os.fspath(path), what=what, limit=limit, max_depth=max_depth)


def load_yaml(data: bytes | str, *, source: str, what: str = "YAML file", limit: int = MAX_YAML_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """The YAML document in `data` (bytes are UTF-8, a BOM allowed). YAMLRefused, naming `source`, for text
    over `limit` bytes, bytes that are not UTF-8 text, anchors or aliases, nesting over `max_depth`, a duplicate
    key, or invalid YAML."""
    text = _text(data, source=source, what=what, limit=limit)
    try:
        loader = _StrictLoader(text)
    except yaml.YAMLError as exc:  # the reader refuses a control character (\x01) as soon as it is made
        raise YAMLRefused(f"{source}: invalid YAML: {_short(str(exc).splitlines()[0])}") from None
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except _Refused as exc:
        raise YAMLRefused(f"{source}: {exc.problem_text} in {_article(what)} (line {exc.line + 1})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YAMLRefused(f"{source}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise YAMLRefused(f"{source}: invalid YAML: nested too deeply") from None
    except (ValueError, OverflowError) as exc:  # PyYAML's constructors: an int over 4300 digits, a 13th month
        raise YAMLRefused(f"{source}: invalid YAML: a value cannot be read ({_short(str(exc))})") from None
    finally:
        loader.dispose()


def _article(what: str) -> str:
    return what if what.split(" ")[0] in ("a", "an", "the") else f"{'an' if what[:1] in 'aeiouAEIOU' else 'a'} {what}"


def _text(data: bytes | str, *, source: str, what: str, limit: int) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > limit:
        raise YAMLRefused(f"{source}: {what} too large (over {limit} bytes)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise YAMLRefused(f"{source}: {what} is not UTF-8 text") from None
    if "\x00" in text:
        raise YAMLRefused(f"{source}: {what} is not text (it contains NUL bytes)")
    return text


def _short(text: str) -> str:
    return text if len(text) <= _MAX_KEY_SHOWN else text[: _MAX_KEY_SHOWN - 3] + "..."


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, line: int) -> None:
        super().__init__(f"{problem} at line {line + 1}")
        self.problem_text = problem
        self.line = line


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases or duplicate keys, and with a nesting limit."""

    max_depth = MAX_DEPTH
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # the stubs leave Parser.peek_event untyped
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise _Refused("YAML anchors/aliases are not allowed", event.start_mark.line)
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise _Refused(f"YAML nested deeper than {self.max_depth} levels is not allowed",
                               event.start_mark.line)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Hashable] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable):  # any key, not only text: `1:` twice (or `1:` and `true:`, one in a dict)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{_short(str(key))}'",
                                                            key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep=deep)
