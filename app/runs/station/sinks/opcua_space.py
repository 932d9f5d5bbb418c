"""The OPC UA sink's address space and security (app.runs.station.sinks.opcua): the variables a PLC reads, their
types and NodeIds, the values one verdict gives them, and the server certificate, key and user checked before
anything listens.

Every variable is a child of the station's object, NodeId `ns=<urn:seglens:station>;s=<station>.<Name>`
(string NodeIds: a PLC program is configured once); the types are those a PLC maps without conversion.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from asyncua import ua
from asyncua.crypto.permission_rules import User, UserRole
from asyncua.server.user_managers import UserManager
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app.guard.untrusted import SMALL_FILE_LIMIT, read_untrusted
from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.options import OpcUaSinkOptions

NAMESPACE = "urn:seglens:station"
# VerdictCode: a PLC compares a number more easily than a string. 0: no verdict yet (since the station started).
VERDICT_CODES = {"OK": 1, "REVIEW": 2, "NG": 3, "ERROR": 4}
_UINT32 = 1 << 32

# name -> (its OPC UA type, its value before the first verdict)
VARIABLES: dict[str, tuple[ua.VariantType, Any]] = {
    "Verdict": (ua.VariantType.String, ""),
    "VerdictCode": (ua.VariantType.Int32, 0),
    "Score": (ua.VariantType.Double, math.nan),
    "Reason": (ua.VariantType.String, ""),
    "FrameId": (ua.VariantType.String, ""),
    "Counts": (ua.VariantType.String, ""),  # an instance model's objects per class as JSON, "" for another model
    "VerdictTime": (ua.VariantType.DateTime, datetime(1601, 1, 1, tzinfo=timezone.utc)),  # OPC UA's "no time"
    "LatencyMs": (ua.VariantType.Double, math.nan),
    "OkCount": (ua.VariantType.UInt32, 0),
    "ReviewCount": (ua.VariantType.UInt32, 0),
    "NgCount": (ua.VariantType.UInt32, 0),
    "ErrorCount": (ua.VariantType.UInt32, 0),
    "FrameCount": (ua.VariantType.UInt32, 0),
    "Sequence": (ua.VariantType.UInt32, 0),
    "Heartbeat": (ua.VariantType.UInt32, 0),
    "Running": (ua.VariantType.Boolean, False),
    "Stalled": (ua.VariantType.Boolean, False),  # the source's stall alarm (not a verdict's: OpcUaSink.stall)
}
NOT_OF_A_VERDICT = ("Heartbeat", "Running", "Stalled")  # the variables a verdict leaves as they are
_COUNT_OF = {"OK": "OkCount", "REVIEW": "ReviewCount", "NG": "NgCount", "ERROR": "ErrorCount"}

# The station file's names of the security policies, and asyncua's for them.
POLICIES: dict[str, ua.SecurityPolicyType] = {
    "none": ua.SecurityPolicyType.NoSecurity,
    "Basic256Sha256_Sign": ua.SecurityPolicyType.Basic256Sha256_Sign,
    "Basic256Sha256_SignAndEncrypt": ua.SecurityPolicyType.Basic256Sha256_SignAndEncrypt,
}


def node_id(station: str, name: str) -> str:
    """The string part of a variable's NodeId (`line-3.Verdict`); the station's object is `line-3`."""
    return f"{station}.{name}" if name else station


class Tally:
    """The values of the variables after each verdict taken (the counters since the sink started). Not
    thread-safe: the sink holds its lock around it."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {name: initial for name, (_, initial) in VARIABLES.items()}

    def take(self, verdict: StationVerdict) -> None:
        """The variables after `verdict`: its fields, its counter and FrameCount one more, Sequence one more. All
        or nothing: a verdict whose time no DateTime holds (ValueError, OverflowError, OSError) changes none."""
        score = verdict.score
        counter = _COUNT_OF.get(verdict.verdict, "ErrorCount")
        new = {
            "Verdict": verdict.verdict, "VerdictCode": VERDICT_CODES.get(verdict.verdict, 4),
            "Score": float(score) if score is not None and math.isfinite(score) else math.nan,
            "Reason": verdict.reason, "FrameId": verdict.frame_id, "Counts": counts_text(verdict.counts),
            "VerdictTime": datetime.fromtimestamp(verdict.time, tz=timezone.utc),
            "LatencyMs": float(verdict.latency_ms),
        }
        for name in (counter, "FrameCount", "Sequence"):  # UInt32: wraps after 4 294 967 295, as a PLC's counter
            new[name] = (self.values[name] + 1) % _UINT32
        self.values.update(new)

    def snapshot(self) -> dict[str, Any]:
        return dict(self.values)


def counts_text(counts: tuple[tuple[str, int], ...] | None) -> str:
    """`Counts`: the objects per class as JSON (`{"pit": 2, "scratch": 0}`), "" without counts."""
    return "" if counts is None else json.dumps(dict(counts), ensure_ascii=False)


def is_loopback(host: str) -> bool:
    """Whether `host` (an endpoint's) is this machine only: localhost, 127.0.0.0/8, ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def endpoint_host_port(endpoint: str) -> tuple[str, int]:
    """The host and port of `opc.tcp://HOST[:PORT][/path]` (4840 by default); ValueError naming it otherwise."""
    parts = urlsplit(endpoint)
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"endpoint {endpoint!r}: {exc}") from exc
    if parts.scheme != "opc.tcp" or not parts.hostname:
        raise ValueError(f"endpoint {endpoint!r}: expected opc.tcp://HOST[:PORT][/PATH]")
    return parts.hostname, 4840 if port is None else port


@dataclass(frozen=True)
class Security:
    """The server's checked security: its policies, certificate and key (None with `none` only), one user."""

    policies: tuple[str, ...]
    certificate: x509.Certificate | None = None
    private_key: rsa.RSAPrivateKey | None = None
    username: str | None = None
    password: str | None = None
    trusted: frozenset[bytes] | None = None  # the client certificates (DER) let in; None: any client's

    def __repr__(self) -> str:  # never the key or the password in a log line
        return f"Security(policies={self.policies!r}, username={self.username!r})"

    @property
    def application_uri(self) -> str | None:
        """The certificate's URI (its subjectAltName): the server's ApplicationUri must be the same."""
        if self.certificate is None:
            return None
        try:
            names = self.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        except x509.ExtensionNotFound:
            return None
        uris = names.get_values_for_type(x509.UniformResourceIdentifier)
        return uris[0] if uris else None


def check_security(options: OpcUaSinkOptions) -> Security:
    """The security the options describe, their files read and checked; ValueError in one line naming the
    option (by its station-file key) or the file otherwise."""
    host, _ = endpoint_host_port(options.endpoint)
    policies, username, password = options.security, options.username, options.password
    certificate, private_key, trusted_clients = options.certificate, options.private_key, options.trusted_clients
    for policy in policies:
        if policy not in POLICIES:
            raise ValueError(f"security {policy!r}: expected one of {', '.join(POLICIES)}")
    if not policies:
        raise ValueError(f"security: give one or more of {', '.join(POLICIES)}")
    if "none" in policies and not is_loopback(host) and not options.allow_insecure:
        raise ValueError(f"security none on {host}, which is not loopback: anyone on that network can read the "
                         "verdicts; give security Basic256Sha256_SignAndEncrypt (or allow_insecure: true)")
    if username is not None and password is None:
        raise ValueError(f"username {username!r} needs a password (password_env)")
    if username is not None and policies == ("none",):
        raise ValueError("username needs a Basic256Sha256 security policy: with none alone the password would "
                         "cross the network in clear")
    if trusted_clients is not None and "none" in policies:
        raise ValueError("trusted_clients needs every security policy to be a Basic256Sha256 one: a client on none "
                         "has no certificate to check")
    if policies == ("none",):
        if certificate is not None or private_key is not None:
            raise ValueError("certificate and private_key are for a Basic256Sha256 security policy, not none")
        return Security(policies, username=username, password=password)
    if certificate is None or private_key is None:
        raise ValueError(f"security {' '.join(p for p in policies if p != 'none')} needs certificate and "
                         "private_key (the server's, PEM or DER)")
    cert, key = _certificate(certificate), _private_key(private_key)
    if _public(cert.public_key()) != _public(key.public_key()):
        raise ValueError(f"private key {private_key.name} is not the key of certificate {certificate.name}")
    trusted = None if trusted_clients is None else _trusted(trusted_clients)
    return Security(policies, cert, key, username, password, trusted)


def _trusted(folder: Path) -> frozenset[bytes]:
    """The client certificates in `folder` (each .der, .pem, .crt or .cer file one), as DER bytes."""
    try:
        files = sorted(path for path in folder.iterdir() if path.suffix.lower() in (".der", ".pem", ".crt", ".cer"))
    except OSError as exc:
        raise ValueError(f"trusted_clients {folder.name}: cannot read the folder ({exc.strerror or exc})") from exc
    found = {_certificate(path, what="trusted client certificate").public_bytes(serialization.Encoding.DER)
             for path in files}
    if not found:
        raise ValueError(f"trusted_clients {folder.name}: no certificate in it (.der, .pem, .crt or .cer)")
    return frozenset(found)


def _public(key: Any) -> bytes:
    """A public key's bytes, to compare a certificate's with a private key's."""
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def _read(path: Path, what: str) -> bytes:
    try:
        data = read_untrusted(path, limit=SMALL_FILE_LIMIT)
    except OSError as exc:
        raise ValueError(f"{what} {path.name}: cannot read it ({exc.strerror or exc})") from exc
    if len(data) > 1 << 20:
        raise ValueError(f"{what} {path.name}: over 1 MiB, not a certificate or key")
    return data


def _certificate(path: Path, *, what: str = "certificate") -> x509.Certificate:
    data = _read(path, what)
    try:
        if b"-----BEGIN" in data:
            return x509.load_pem_x509_certificate(data)
        return x509.load_der_x509_certificate(data)
    except ValueError as exc:
        raise ValueError(f"{what} {path.name}: not an X.509 certificate (PEM or DER)") from exc


def _private_key(path: Path) -> rsa.RSAPrivateKey:
    data = _read(path, "private key")
    try:
        if b"-----BEGIN" in data:
            key = serialization.load_pem_private_key(data, password=None)
        else:
            key = serialization.load_der_private_key(data, password=None)
    except TypeError as exc:  # a key with a passphrase
        raise ValueError(f"private key {path.name}: protected by a passphrase (give it unencrypted, "
                         "readable by the station's user only)") from exc
    except ValueError as exc:
        raise ValueError(f"private key {path.name}: not a private key (PEM or DER)") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"private key {path.name}: not an RSA key (Basic256Sha256 signs with RSA)")
    return key


class Gate(UserManager):
    """Who may open a session: without `none` among the policies, only a client on a secure channel (asyncua
    2.1 lets a client on the None channel it keeps for discovery create and activate a session even when no
    endpoint offers None: its peer certificate is then empty); with trusted clients, only a channel whose
    certificate is one of them (checked here, at activation, with the channel's own certificate: asyncua's
    certificate validator looks only at the one a client chooses to put in CreateSession); with a `username`,
    only that user and password."""

    def __init__(self, security: Security) -> None:
        self._secure_only = "none" not in security.policies
        self._trusted = security.trusted
        self._username, self._password = security.username, security.password or ""

    def get_user(self, iserver: Any, username: str | None = None, password: str | None = None,
                 certificate: Any = None) -> User | None:
        if self._secure_only and not certificate:  # b"" on the None channel
            return None
        if self._trusted is not None and bytes(certificate or b"") not in self._trusted:
            return None
        if self._username is None:
            return User(role=UserRole.User)
        given_name, given_password = (username or "").encode(), (password or "").encode()
        # compare_digest: the time taken does not tell how much of a guess was right
        same_name = hmac.compare_digest(given_name, self._username.encode())
        same_password = hmac.compare_digest(given_password, self._password.encode())
        return User(role=UserRole.User, name=username) if same_name and same_password else None


def variant_types() -> Mapping[str, ua.VariantType]:
    """Each variable's OPC UA type by its name."""
    return {name: kind for name, (kind, _) in VARIABLES.items()}
