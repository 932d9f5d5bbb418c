"""The keyed pseudonyms of --anonymize: this workstation's (or this site's) secret key, and the HMACs made with it.

The key is either SEGLENS_PSEUDONYM_KEY (a site may give every workstation the same key, so pseudonyms agree across
them) or 32 random bytes kept as 64 hex digits in `pseudonym.key` in the user's config folder. A key that is
empty, short or not hex is refused in one line naming where it came from: an HMAC under an empty key is a hash
anybody can recompute from a patient's ID, so a silently weak key would turn every pseudonym back into the ID.

The file is made once, atomically: written under a temporary name in the same folder, fsynced, then hard-linked to
its name (which fails when it exists: two runs racing to create it both end up using the one that won), so a run
that dies half-way leaves at most a temporary file, never an empty `pseudonym.key`.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from app.errors import SegLensError
from app.io.files import sync_folder

KEY_FILE = "pseudonym.key"
ENV = "SEGLENS_PSEUDONYM_KEY"
KEY_BYTES = 32  # what a new key file holds
MIN_FILE_BYTES = 16  # shorter than this (32 hex digits) is a truncated or hand-made key: refused
MIN_ENV_CHARACTERS = 16
_HEX = re.compile(r"[0-9a-fA-F]+")
_MAX_FILE = 4096  # a key file is 65 bytes; anything much bigger is not one (and is not read whole)


class PseudonymKeyError(SegLensError):
    """The pseudonym key cannot be used (empty, short, malformed, unreadable): one line naming where it is."""


def keyed_hex(key: bytes, purpose: str, text: str) -> str:
    """HMAC-SHA-256 of `text` under `key`, separated by `purpose` (a patient's pseudonym, a file's output name and
    the DICOM UID mapping's seed never share a value), as hex."""
    return hmac.new(key, f"{purpose}\x00{text}".encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def patient_identity(info: Mapping[str, str]) -> str:
    """The text a patient's pseudonym is made from: PatientID and the name, as the reader shows them."""
    return f"{info.get('Patient ID', '')}\x00{info.get('Patient', '')}"


def pseudonym_of(info: Mapping[str, str], key: bytes) -> str:
    """`anon-` and 12 hex digits of the HMAC of the patient's ID and name ("" when the volume names no patient).
    The same patient gets the same pseudonym in every report made with this key; nobody without it can test a
    guess. (Kept as earlier versions made it, so earlier reports' pseudonyms still match.)"""
    ident = patient_identity(info)
    if ident == "\x00":
        return ""
    return "anon-" + hmac.new(key, ident.encode("utf-8"), hashlib.sha256).hexdigest()[:12]


def person_name(pseudonym: str) -> str:
    """The pseudonym as a PatientName: a family name alone, `anon-…^` (PS3.5 6.2.1.2; dciodvfy calls a name
    without a component delimiter a "Retired Person Name form", and highdicom warns of it). PatientID, the report
    and the folder names keep `anon-…`."""
    return f"{pseudonym}^" if pseudonym else ""


def pseudonym_key(folder: Path | None = None) -> bytes:
    """This workstation's pseudonym key: SEGLENS_PSEUDONYM_KEY when set, else the key file in `folder` (default:
    the user's config folder), created atomically on first use. PseudonymKeyError when either is unusable."""
    if ENV in os.environ:
        return _env_key(os.environ[ENV])
    if folder is None:
        from platformdirs import user_config_dir

        folder = Path(user_config_dir("SegLens", appauthor=False))
    path = folder / KEY_FILE
    key = read_key_file(path)
    return key if key is not None else _create_key_file(path)


def _env_key(value: str) -> bytes:
    text = value.strip()
    if not text:
        raise PseudonymKeyError(f"{ENV} is set but empty: set it to a secret of at least {MIN_ENV_CHARACTERS} "
                                "characters (e.g. 64 hex digits), or unset it to use this workstation's key file")
    if len(text) < MIN_ENV_CHARACTERS or not text.isprintable():
        raise PseudonymKeyError(f"{ENV} is not a usable key: it needs at least {MIN_ENV_CHARACTERS} printable "
                                "characters (e.g. 64 hex digits); a short key lets anyone recompute the pseudonyms")
    return value.encode("utf-8")  # as earlier versions read it: a site's existing key keeps its pseudonyms


def read_key_file(path: Path) -> bytes | None:
    """The key kept in `path`, None when there is no file; PseudonymKeyError when it is not a whole key. Read
    through app.guard.untrusted: a FIFO or device planted under the name is refused at once, never waited on."""
    from app.guard.untrusted import NotRegularFile, TooLarge, read_untrusted

    try:
        data = read_untrusted(path, limit=_MAX_FILE)
    except FileNotFoundError:
        return None
    except NotRegularFile:
        raise PseudonymKeyError(f"{path}: the pseudonym key is not a regular file") from None
    except TooLarge:
        raise PseudonymKeyError(f"{path}: not a pseudonym key (expected {2 * KEY_BYTES} hex digits){_FIX}") from None
    except OSError as exc:
        raise PseudonymKeyError(f"{path}: cannot read the pseudonym key ({exc.strerror or exc})") from exc
    return parse_key(data, path)


# what a refused key file's line ends with
_FIX = (f"; if it was never used, delete it and a new key is made (pseudonyms then differ from earlier reports), "
        f"else restore it from a backup or set {ENV}")


def parse_key(data: bytes, path: Path) -> bytes:
    """The key held in a key file's bytes (hex digits, surrounding white space allowed), or PseudonymKeyError."""
    text = data.strip()
    if not text:
        raise PseudonymKeyError(f"{path}: the pseudonym key file is empty (a run may have died creating it){_FIX}")
    if len(data) > _MAX_FILE or not _HEX.fullmatch(text.decode("ascii", "replace")) or len(text) % 2:
        raise PseudonymKeyError(f"{path}: not a pseudonym key (expected {2 * KEY_BYTES} hex digits){_FIX}")
    key = bytes.fromhex(text.decode("ascii"))
    if len(key) < MIN_FILE_BYTES:
        raise PseudonymKeyError(f"{path}: the pseudonym key is cut short ({len(key)} bytes, expected "
                                f"{KEY_BYTES}){_FIX}")
    return key


def _create_key_file(path: Path) -> bytes:
    """Make a new key at `path` atomically; whichever run's link lands first is the key every run uses. The
    temporary is app.guard.shared's (exclusive, private, never a link planted under its name) and removed through
    it."""
    from app.guard.shared import create_temporary, remove_under

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = create_temporary(path.parent, path.name, private=True)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(KEY_BYTES).hex().encode("ascii") + b"\n")
                handle.flush()
                os.fsync(handle.fileno())
            _publish(temporary, path)
        finally:
            with contextlib.suppress(OSError):
                remove_under(temporary.parent, temporary.name)  # gone already where it was renamed
        sync_folder(path.parent)
    except OSError as exc:
        raise PseudonymKeyError(f"{path}: cannot keep the pseudonym key ({exc.strerror or exc}); set {ENV} "
                                "instead") from exc
    key = read_key_file(path)  # the winner's key, ours or another run's
    if key is None:
        raise PseudonymKeyError(f"{path}: the pseudonym key vanished as it was made")
    return key


def _publish(temporary: Path, path: Path) -> None:
    """`temporary` under `path`, never replacing a key already there."""
    from app.guard.shared import rename_under

    try:
        os.link(temporary, path)
    except FileExistsError:
        return  # another run made it first: use theirs
    except OSError:
        # No hard links on this file system (some network or FAT shares): renamed when nobody made the key
        # meanwhile (two runs racing within this window on such a share could each use their own key:
        # docs/SECURITY.md).
        if not os.path.lexists(path):
            rename_under(path.parent, temporary.name, path.name)
