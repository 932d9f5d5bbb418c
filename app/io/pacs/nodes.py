"""PACS nodes: the settings' named nodes, a node given as a URL on the command line, and its secret (keyring).

A node's password or token is never in the settings file nor in a log: it lives in the operating system's keyring
under the service "seglens-pacs" and the node's name, or, for scripts and CI, in an environment variable (which
wins) meant for that node alone (`PacsNode.secret_envs`):
- a settings node NAME reads SEGLENS_PACS_SECRET_NAME (upper case, every other character than A-Z and 0-9 as `_`),
  or the variable its `secret_env:` names;
- the plain SEGLENS_PACS_SECRET goes to a node given as a URL on the command line, or to the settings' node when it
  is the only one there with auth (never to one of several: it would go to every node);
- a secret is never sent in clear text to a DICOMweb node that is not on loopback (app.guard.net
  .credentials_problem) unless its settings say `allow_insecure: true`; and one variable is never sent to two
  nodes of one command (`shared_secret_problem`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from app.errors import MissingExtra, need_extra
from app.guard.untrusted import TooLarge, read_untrusted
from app.guard.yaml_load import MAX_YAML_BYTES, YAMLRefused, read_yaml
from app.io.pacs.errors import PacsError

KEYRING_SERVICE = "seglens-pacs"
SECRET_ENV = "SEGLENS_PACS_SECRET"
SETTINGS_ENV = "SEGLENS_SETTINGS"  # another settings file (tests, scripts)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_AE = re.compile(r"^[\x20-\x5b\x5d-\x7e]{1,16}$")  # AE title: 1-16 printable characters, no backslash
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class PacsNode:
    """One PACS node: where it is, how to speak to it, and whether research results may go to it."""

    name: str  # the settings' name, or the URL itself for a node given on the command line
    kind: str  # "dimse" | "dicomweb"
    host: str
    port: int
    called_ae: str = ""  # dimse: the server's AE title
    calling_ae: str = "SEGLENS"  # dimse: ours
    url: str = ""  # dicomweb: the service root, e.g. https://host/dicom-web
    tls: bool = False  # dicomweb+https, or dimse with TLS
    ca_bundle: Path | None = None  # TLS: the CA bundle; certificate errors are one line, never ignored
    auth: str = "none"  # "none" | "basic" | "bearer" (dicomweb)
    username: str = ""  # basic auth; the password / token is in the keyring, never here
    research: bool = False  # a research node: pseudonymised (--anonymize) results may be sent to it
    timeout_s: float = 30.0
    store_port: int = 0  # dimse C-MOVE: the port of our Storage SCP (0: C-GET, no SCP)
    store_host: str = ""  # dimse C-MOVE: the address it listens on (default: the one the node reaches us at)
    allow_insecure: bool = False  # dicomweb: the secret may go in clear text (http://) to a host not on loopback
    secret_envs: tuple[str, ...] = (SECRET_ENV,)  # the environment variables that may hold its secret, in order


def default_settings_file() -> Path:
    """The settings file holding the `pacs:` section: $SEGLENS_SETTINGS, else settings.yaml in the user config
    folder (beside the pseudonym key)."""
    if os.environ.get(SETTINGS_ENV):
        return Path(os.environ[SETTINGS_ENV])
    from platformdirs import user_config_dir

    return Path(user_config_dir("SegLens", appauthor=False)) / "settings.yaml"


def parse_node(text: str, nodes: Mapping[str, PacsNode] | None = None) -> PacsNode:
    """A node from `text`: the name of one of `nodes`, "dicomweb+https://host/dicom-web", "dicomweb+http://…", or
    "dimse://CALLED_AE@host:104" with optional "?calling=SEGLENS&research=1&ca=/path&tls=1&timeout=30&store_port=N"
    (dicomweb takes "?auth=basic&user=NAME&research=1&ca=…&timeout=…"). Bad text → PacsError naming the part."""
    text = text.strip()
    if nodes and text in nodes:
        return nodes[text]
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme == "dimse":
        return _dimse_node(text, name=text)
    if scheme in ("dicomweb+http", "dicomweb+https"):
        return _dicomweb_node(text, name=text)
    known = f" (known nodes: {', '.join(sorted(nodes))})" if nodes else ""
    raise PacsError(
        f"pacs node {text!r}: not a node name{known} nor a URL (dicomweb+https://host/dicom-web or dimse://AE@host:104)"
    )


_DIMSE_OPTIONS = frozenset({"calling", "research", "ca", "tls", "timeout", "store_port"})
_DICOMWEB_OPTIONS = frozenset({"auth", "user", "research", "ca", "timeout"})


def _query(text: str, query: str, allowed: frozenset[str]) -> dict[str, str]:
    options = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise PacsError(f"pacs node {text!r}: unknown option {unknown[0]!r} (known: {', '.join(sorted(allowed))})")
    return options


def _is_ae(title: str) -> bool:
    return bool(_AE.match(title)) and title.strip() == title


def _flag(text: str, key: str, value: str) -> bool:
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise PacsError(f"pacs node {text!r}: {key}={value!r} is not 1 or 0")


def _number(text: str, key: str, value: str, *, integer: bool) -> float:
    try:
        number = int(value) if integer else float(value)
    except ValueError:
        raise PacsError(f"pacs node {text!r}: {key}={value!r} is not a number") from None
    if number < 0 or (key == "port" and not 0 < number < 65536) or (key == "timeout" and number == 0):
        raise PacsError(f"pacs node {text!r}: {key}={value!r} is out of range")
    return number


def _port(text: str, raw: str, default: int) -> int:
    return default if not raw else int(_number(text, "port", raw, integer=True))


def _split_host(text: str, netloc: str, default_port: int) -> tuple[str, int]:
    host, _, raw_port = netloc.rpartition(":") if ":" in netloc.lstrip("[").split("]")[-1] else (netloc, "", "")
    host = host.strip("[]")
    if not host:
        raise PacsError(f"pacs node {text!r}: no host")
    return host, _port(text, raw_port, default_port)


def _dimse_node(text: str, *, name: str) -> PacsNode:
    parts = urlsplit(text)
    if "@" not in parts.netloc:
        raise PacsError(f"pacs node {text!r}: no called AE title (dimse://CALLED_AE@host:104)")
    called, _, hostport = parts.netloc.rpartition("@")
    if not _is_ae(called):
        raise PacsError(f"pacs node {text!r}: called AE title {called!r} is not 1-16 printable characters")
    if parts.path not in ("", "/"):
        raise PacsError(f"pacs node {text!r}: a DIMSE node has no path ({parts.path!r})")
    host, port = _split_host(text, hostport, 104)
    options = _query(text, parts.query, _DIMSE_OPTIONS)
    calling = options.get("calling", "SEGLENS")
    if not _is_ae(calling):
        raise PacsError(f"pacs node {text!r}: calling AE title {calling!r} is not 1-16 printable characters")
    ca = options.get("ca", "")
    return PacsNode(
        name=name,
        kind="dimse",
        host=host,
        port=port,
        called_ae=called,
        calling_ae=calling,
        tls=_flag(text, "tls", options.get("tls", "1" if ca else "0")),
        ca_bundle=Path(ca) if ca else None,
        research=_flag(text, "research", options.get("research", "0")),
        timeout_s=_number(text, "timeout", options.get("timeout", "30"), integer=False),
        store_port=int(_number(text, "store_port", options.get("store_port", "0"), integer=True)),
    )


def _dicomweb_node(text: str, *, name: str) -> PacsNode:
    parts = urlsplit(text)
    tls = parts.scheme.lower() == "dicomweb+https"
    if "@" in parts.netloc:
        raise PacsError(f"pacs node {text!r}: no user or password in the URL (use ?user=NAME and the keyring)")
    host, port = _split_host(text, parts.netloc, 443 if tls else 80)
    options = _query(text, parts.query, _DICOMWEB_OPTIONS)
    auth = options.get("auth", "basic" if options.get("user") else "none")
    if auth not in ("none", "basic", "bearer"):
        raise PacsError(f"pacs node {text!r}: auth={auth!r} is not none, basic or bearer")
    ca = options.get("ca", "")
    scheme = "https" if tls else "http"
    return PacsNode(
        name=name,
        kind="dicomweb",
        host=host,
        port=port,
        url=f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}",
        tls=tls,
        ca_bundle=Path(ca) if ca else None,
        auth=auth,
        username=options.get("user", ""),
        research=_flag(text, "research", options.get("research", "0")),
        timeout_s=_number(text, "timeout", options.get("timeout", "30"), integer=False),
    )


def load_nodes(settings_file: Path) -> dict[str, PacsNode]:
    """The named nodes of the settings file's `pacs:` section (YAML or JSON); none when the file is absent (but
    something else than a regular file under its name is refused in one line, not read as no nodes).

    Each entry is a node name with `url:` (a parse_node URL) and optional fields overriding it (calling_ae,
    research, ca_bundle, timeout_s, store_port, store_host, auth, username, allow_insecure, secret_env), e.g.
    `pacs: {ORTHANC: {url: "dimse://ORTHANC@pacs:4242", calling_ae: SEGLENS}}`. A password or token here is
    refused: secrets belong in the keyring (or the node's own environment variable)."""
    if not os.path.lexists(settings_file):
        return {}
    section = _pacs_section(settings_file)  # a FIFO, a device or a folder under the name: one line, never read
    nodes = {str(name): _settings_node(settings_file, str(name), entry) for name, entry in section.items()}
    return _with_secret_variables(settings_file, nodes, section)


def secret_variable(name: str) -> str:
    """The environment variable of a settings node's secret: SEGLENS_PACS_SECRET_<NAME> (upper case, any other
    character than A-Z and 0-9 written `_`)."""
    return f"{SECRET_ENV}_{re.sub(r'[^A-Z0-9]', '_', name.upper())}"


def _with_secret_variables(settings_file: Path, nodes: dict[str, PacsNode],
                           section: dict[Any, Any]) -> dict[str, PacsNode]:
    """Each settings node with the variables its secret may come from: its own; the one its `secret_env:` names;
    the plain SEGLENS_PACS_SECRET only for the one node that has auth, when exactly one has."""
    from dataclasses import replace

    owners: dict[str, str] = {}
    for name in nodes:
        other = owners.setdefault(secret_variable(name), name)
        if other != name:
            raise PacsError(f"{settings_file}: pacs.{other} and pacs.{name} would share the secret variable "
                            f"{secret_variable(name)}: rename one")
    with_auth = [name for name, node in nodes.items() if node.auth != "none"]
    result = {}
    for name, node in nodes.items():
        named = section[name].get("secret_env") if isinstance(section.get(name), dict) else None
        plain = (SECRET_ENV,) if with_auth == [name] and not named else ()
        result[name] = replace(node, secret_envs=(secret_variable(name), *((named,) if named else ()), *plain))
    return result


_SETTINGS_LIMIT = MAX_YAML_BYTES  # a settings file is a page of text


def _pacs_section(settings_file: Path) -> dict[Any, Any]:
    """The file's `pacs:` section, read through the gates: YAML by app.guard.yaml_load (size, no anchors or
    aliases, depth, duplicate keys: one line naming the file), JSON bounded by the same size."""
    try:
        if settings_file.suffix.lower() == ".json":
            data = json.loads(read_untrusted(settings_file, limit=_SETTINGS_LIMIT).decode("utf-8"))
        else:
            data = read_yaml(settings_file, limit=_SETTINGS_LIMIT, what="settings file")
    except YAMLRefused as e:
        raise PacsError(str(e)) from None
    except TooLarge as e:
        raise PacsError(f"{settings_file}: settings file too large ({e.strerror})") from None
    except OSError as e:  # NotRegularFile says what it is: "not a regular file: a named pipe (FIFO)"
        raise PacsError(f"{settings_file}: cannot read the settings ({e.strerror or type(e).__name__})") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise PacsError(f"{settings_file}: cannot read the settings ({type(e).__name__})") from e
    section = data.get("pacs", {}) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise PacsError(f"{settings_file}: the pacs section is not a mapping of node names")
    return section


_FIELDS = ({f.name for f in fields(PacsNode)} - {"name", "kind", "host", "port", "url", "secret_envs"}) | {"secret_env"}
_SECRET_KEYS = {"password", "token", "secret"}


def _settings_node(settings_file: Path, name: str, entry: object) -> PacsNode:
    where = f"{settings_file}: pacs.{name}"
    if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
        raise PacsError(f"{where}: needs a url (dicomweb+https://… or dimse://AE@host:port)")
    secret = sorted(_SECRET_KEYS & set(entry))
    if secret:
        raise PacsError(f"{where}: {secret[0]} does not belong in the settings (keep it in the keyring)")
    unknown = sorted(set(entry) - _FIELDS - {"url"})
    if unknown:
        raise PacsError(f"{where}: unknown key {unknown[0]!r}")
    url = entry["url"]
    node = _dimse_node(url, name=name) if url.lower().startswith("dimse://") else None
    if node is None:
        if not url.lower().startswith(("dicomweb+http://", "dicomweb+https://")):
            raise PacsError(f"{where}: url {url!r} is not dicomweb+https://… nor dimse://AE@host:port")
        node = _dicomweb_node(url, name=name)
    return _override(where, node, {k: v for k, v in entry.items() if k != "url"})


def _override(where: str, node: PacsNode, values: dict[str, Any]) -> PacsNode:
    from dataclasses import replace

    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key == "secret_env":
            if not isinstance(value, str) or not _ENV_NAME.match(value):
                raise PacsError(f"{where}: secret_env is not the name of an environment variable")
            continue  # read by _with_secret_variables
        default = getattr(node, key)
        if key == "ca_bundle":
            changes[key] = Path(str(value)) if value else None
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise PacsError(f"{where}: {key} is not true or false")
            changes[key] = value
        elif isinstance(default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PacsError(f"{where}: {key} is not a number ≥ 0")
            changes[key] = type(default)(value)
        else:
            changes[key] = str(value)
            if key in ("called_ae", "calling_ae") and not _is_ae(changes[key]):
                raise PacsError(f"{where}: {key} {changes[key]!r} is not 1-16 printable characters")
    if changes.get("auth", node.auth) not in ("none", "basic", "bearer"):
        raise PacsError(f"{where}: auth is not none, basic or bearer")
    return replace(node, **changes)


def node_secret(node: PacsNode) -> str | None:
    """The node's password or token: the first of its own environment variables that is set (`secret_envs`:
    never another node's), else the keyring's "seglens-pacs" entry for the node's name, else None. A missing or
    failing keyring backend (or no pacs extra) is one PacsError line. Never logged."""
    for variable in node.secret_envs:
        value = os.environ.get(variable)
        if value:
            return value
    where = secret_sources(node)
    try:
        need_extra("keyring", extra="pacs", feature="a password kept in the OS keyring")
    except MissingExtra as e:
        raise PacsError(f"pacs {node.name}: {e} (or set {where})") from e
    try:
        import keyring
        import keyring.errors

        return keyring.get_password(KEYRING_SERVICE, node.name)
    except Exception as e:  # keyring.errors.KeyringError, or a backend's own failure (D-Bus gone, locked)
        raise PacsError(
            f"pacs {node.name}: no usable keyring ({type(e).__name__}); set {where} or install a keyring backend"
        ) from e


def secret_sources(node: PacsNode) -> str:
    """Where the node's secret may come from besides the keyring, as a message says it ("SEGLENS_PACS_SECRET_A or
    SEGLENS_PACS_SECRET")."""
    return " or ".join(node.secret_envs) or "the keyring"


def credentials_refusal(node: PacsNode) -> str | None:
    """Why the node's secret must not be sent (clear text to a DICOMweb host that is not loopback, without
    `allow_insecure: true` in its settings), or None. Said before any connection."""
    if node.kind != "dicomweb" or node.auth == "none":
        return None
    from app.guard.net import credentials_problem

    setting = ("allow_insecure: true on a node of the settings" if "://" in node.name else
               f"allow_insecure: true in the settings of pacs.{node.name}")
    return credentials_problem(node.url, allow_insecure=node.allow_insecure, setting=setting)


def shared_secret_problem(*nodes: PacsNode | None) -> str | None:
    """Why one command may not use these nodes together: two different nodes with auth whose secret would come from
    the same environment variable (one secret sent to both), or None."""
    seen: dict[str, PacsNode] = {}
    for node in nodes:
        if node is None or node.auth == "none":
            continue
        variable = next((v for v in node.secret_envs if os.environ.get(v)), None)
        other = seen.setdefault(variable, node) if variable else node
        if other is not node and (other.name, other.url) != (node.name, node.url):
            return (f"${variable} would be sent to two nodes ({other.name} and {node.name}): give each node its own "
                    f"secret (a settings node NAME reads {SECRET_ENV}_NAME, or the keyring)")
    return None


def send_refusal(node: PacsNode, *, deidentified: bool) -> str | None:
    """Why results may not be stored to `node` (one line, without the node's name: each face says who sends), or
    None. The one rule of every send — `pacs send`, `run --send`, the viewer's Send to PACS: a de-identified
    (pseudonymised) result goes only to a node marked research (beside the identified study it would pass for
    another patient), and an identified one never to a research node (patient data where none is expected)."""
    if deidentified and not node.research:
        return ("a de-identified (pseudonymised) result is sent only to a research node (research: true in its "
                "settings): beside the identified study it would pass for another patient")
    if not deidentified and node.research:
        return ("an identified result is never sent to a research node (research: true in its settings): "
                "de-identify it first (--anonymize)")
    return None
