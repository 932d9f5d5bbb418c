"""The one YAML loader: every YAML file SegLens reads (sidecars, station files, PACS nodes, settings, remote
sidecars, bundled models) is parsed here and nowhere else.

A YAML file is someone else's text. A few hundred bytes of nested anchors and aliases expand to billions of items
("billion laughs") in anything that walks the value — an error message, a validator; ten thousand `[` nest past
Python's recursion limit; a second `threshold:` silently wins over the first. So:
- the text is bounded before it is parsed (the caller names the limit, a file is read through app.guard.untrusted);
- anchors and aliases are refused (no SegLens file needs them), at the line they are on;
- nesting deeper than `max_depth` is refused while composing, before any object is built;
- a duplicate key is refused, naming it;
- plain scalars resolve by the YAML 1.2 core schema (plus YAML 1.1's yes/no/on/off, which settings may use): no
  base-60 `1:1:1:…` integers (PyYAML builds those in time quadratic in their parts: 40 s for 1 MiB), no `0b`, `_`
  or timestamp forms, and a plain value longer than MAX_PLAIN_SCALAR characters is refused at its line;
- only the core tags (str, int, float, bool, null, seq, map) may be written: `!!omap`/`!!pairs` keep duplicate
  keys, `!!set`/`!!binary`/`!!timestamp` build what no validator expects, `!!python/…` and unknown tags are refused;
- every refusal is one YAMLRefused line naming the source, the line and the problem.
"""

from __future__ import annotations

import os
import re
from collections.abc import Hashable
from typing import Any

import yaml

from app.guard.untrusted import TooLarge, read_untrusted

MAX_YAML_BYTES = 1 << 20  # a settings or station file is a page of text; a sidecar with 10,000 classes is 400 KB
MAX_DEPTH = 32
MAX_PLAIN_SCALAR = 4096  # a path, a URL or a number is far shorter; bounds the int/float construction too
_MAX_KEY_SHOWN = 60
_CORE = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(_CORE + name for name in ("str", "int", "float", "bool", "null", "seq", "map"))
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


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
        _check_event(event)
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


def _check_event(event: yaml.Event) -> None:
    """Refuse, before anything is built, a tag outside the core schema and an over-long plain value."""
    line = event.start_mark.line if event.start_mark is not None else 0
    tag = getattr(event, "tag", None)
    if tag is not None and tag != "!" and tag not in _ALLOWED_TAGS:
        shown = "!!" + tag[len(_CORE):] if tag.startswith(_CORE) else tag
        raise _Refused(f"the YAML tag {_short(shown)} is not allowed", line)
    if isinstance(event, yaml.ScalarEvent) and event.style is None and len(event.value) > MAX_PLAIN_SCALAR:
        raise _Refused(f"a plain value longer than {MAX_PLAIN_SCALAR} characters is not allowed", line)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """An int by the YAML 1.2 core forms only (decimal, 0o, 0x): no base 60, no `_`, no `0b`, no leading-0 octal."""
    text = str(loader.construct_scalar(node))
    if not _INT.match(text):
        raise yaml.constructor.ConstructorError(None, None, f"not an integer: {_short(text)!r}", node.start_mark)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)


def _construct_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    """A float by the YAML 1.2 core forms only (no base 60, no `_`)."""
    text = str(loader.construct_scalar(node))
    if not _FLOAT.match(text):
        raise yaml.constructor.ConstructorError(None, None, f"not a number: {_short(text)!r}", node.start_mark)
    if text.lower().endswith(".nan"):
        return float("nan")
    if text.lower().endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    return float(text)


def _core_resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """SafeLoader's implicit resolvers less its YAML 1.1 int, float and timestamp patterns; the core schema's int
    and float patterns in their place (int first: `1` is both)."""
    dropped = {_CORE + "int", _CORE + "float", _CORE + "timestamp"}
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]] = {
        first: [(tag, pattern) for tag, pattern in entries if tag not in dropped]
        for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    for tag, pattern, firsts in ((_CORE + "int", _INT, "-+0123456789"), (_CORE + "float", _FLOAT, "-+.0123456789")):
        for first in firsts:
            resolvers.setdefault(first, []).append((tag, pattern))
    return resolvers


_StrictLoader.yaml_implicit_resolvers = _core_resolvers()
_StrictLoader.add_constructor(_CORE + "int", _construct_int)
_StrictLoader.add_constructor(_CORE + "float", _construct_float)
