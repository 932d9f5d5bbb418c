"""The OPC UA sink (app.runs.station.sinks.opcua) against a real asyncua client on loopback, a free port per test: each
verdict and the counters read as they change (a data-change subscription and plain reads), Sequence bumped by a
repeated verdict, the heartbeat with no frames, Stalled following the stall alarm, Running False on close and the
port freed, a port in use as a problem line, read-only variables, an encrypted endpoint with a generated certificate
and a user, refused configurations in one line, the station file's keys, and `seglens-cli watch --opcua` end to
end."""

from __future__ import annotations

import asyncio
import ipaddress
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
import yaml
from asyncua import Client, ua
from asyncua.crypto import cert_gen
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from waiting import until, until_async

from app.runs.station.sinks import StallAlarm, StationVerdict
from app.runs.station.sinks.opcua import NAMESPACE, OpcUaSink
from app.runs.station.sinks.opcua_space import VARIABLES
from app.runs.station.sinks.options import OpcUaSinkOptions
from tests.io.pacs.orthanc import free_port

REPO = Path(__file__).resolve().parents[4]
SAMPLES = REPO / "resources" / "samples" / "anomaly"
WAIT_S = 60.0  # generous: a loaded 2-core machine; no timing is asserted


def endpoint(port: int | None = None) -> str:
    return f"opc.tcp://127.0.0.1:{port or free_port()}/seglens/"


def verdict(state: str, score: float | None, *, frame: str = "part.png", reason: str = "") -> StationVerdict:
    return StationVerdict(station="line-3", frame_id=frame, time=1_764_600_000.5, verdict=state, score=score,
                          reason=reason, latency_ms=42.5)


def run(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """The client's side of a test, on its own loop, bounded."""
    return asyncio.run(asyncio.wait_for(coroutine, WAIT_S * 2))


def node(name: str, station: str = "line-3") -> str:
    """A variable's NodeId as a PLC program would be configured with it."""
    return f"ns=2;s={station}.{name}"


async def read_all(client: Client) -> dict[str, Any]:
    names = list(VARIABLES)
    values = await client.read_values([client.get_node(node(name)) for name in names])
    return dict(zip(names, values, strict=True))


async def sequence_at(changes: Changes, n: int) -> None:
    """Wait until the subscription was told Sequence is `n` (the n-th verdict out)."""
    await until_async(lambda: changes.seen["Sequence"][-1] == n, what=f"Sequence {n}", within_s=WAIT_S)


def distinct(values: list[Any]) -> list[Any]:
    """`values` without repeats in a row (a server may notify an unchanged value again)."""
    return [value for i, value in enumerate(values) if i == 0 or value != values[i - 1]]


class Changes:
    """A data-change handler that keeps every value notified, by variable name."""

    def __init__(self) -> None:
        self.seen: dict[str, list[Any]] = defaultdict(list)

    def datachange_notification(self, changed: Any, value: Any, data: Any) -> None:
        self.seen[str(changed.nodeid.Identifier).rsplit(".", 1)[-1]].append(value)


async def subscribe(client: Client, names: tuple[str, ...]) -> Changes:
    changes = Changes()
    subscription = await client.create_subscription(20, changes)
    await subscription.subscribe_data_change([client.get_node(node(name)) for name in names])
    await until_async(lambda: all(changes.seen[name] for name in names), what="the initial values", within_s=WAIT_S)
    return changes


@pytest.fixture
def sink():
    opened: list[OpcUaSink] = []

    def open_sink(url: str, **options: Any) -> OpcUaSink:
        made = OpcUaSink(OpcUaSinkOptions(endpoint=url, **options), station="line-3")
        opened.append(made)
        return made

    yield open_sink
    for made in opened:
        made.close()


def test_a_client_reads_each_verdict_and_the_counters_as_they_change(sink):
    url = endpoint()
    server = sink(url)
    assert server.wait_ready(WAIT_S) and server.problem is None
    verdicts = [verdict("OK", 0.21, frame="a.png"), verdict("NG", 0.93, frame="b.png", reason="score 0.93 > 0.88"),
                verdict("REVIEW", 0.6, frame="c.png", reason="review: score 0.6 > 0.56"),
                verdict("ERROR", None, frame="d.png", reason="d.png: not an image")]
    counts = {"OK": 0, "REVIEW": 0, "NG": 0, "ERROR": 0}

    async def client_side() -> Changes:
        async with Client(url) as client:
            assert await client.get_namespace_index(NAMESPACE) == 2  # the NodeIds a PLC is configured with
            before = await read_all(client)
            assert (before["Verdict"], before["VerdictCode"], before["Sequence"], before["FrameCount"]) == ("", 0, 0, 0)
            assert math.isnan(before["Score"]) and before["Running"] is True
            changes = await subscribe(client, ("Verdict", "Sequence", "NgCount", "Score"))
            for sequence, given in enumerate(verdicts, 1):
                server.publish(given)
                await sequence_at(changes, sequence)
                counts[given.verdict] += 1
                values = await read_all(client)
                assert (values["Verdict"], values["Reason"], values["FrameId"], values["Sequence"]) == (
                    given.verdict, given.reason, given.frame_id, sequence)
                assert values["VerdictCode"] == {"OK": 1, "REVIEW": 2, "NG": 3, "ERROR": 4}[given.verdict]
                assert (values["OkCount"], values["ReviewCount"], values["NgCount"], values["ErrorCount"]) == (
                    counts["OK"], counts["REVIEW"], counts["NG"], counts["ERROR"])
                assert values["FrameCount"] == sequence and values["LatencyMs"] == 42.5
                assert values["VerdictTime"].timestamp() == pytest.approx(1_764_600_000.5, abs=1e-3)
                if given.score is None:
                    assert math.isnan(values["Score"])  # an ERROR has no score: NaN, documented
                else:
                    assert values["Score"] == given.score
            return changes

    changes = run(client_side())
    assert distinct(changes.seen["Verdict"]) == ["", "OK", "NG", "REVIEW", "ERROR"]  # each seen as it changed
    assert distinct(changes.seen["Sequence"]) == [0, 1, 2, 3, 4]
    assert distinct(changes.seen["NgCount"]) == [0, 1]
    assert [s for s in changes.seen["Score"] if not math.isnan(s)] == [0.21, 0.93, 0.6]


def test_a_repeated_verdict_still_bumps_sequence(sink):
    url = endpoint()
    server = sink(url)
    assert server.wait_ready(WAIT_S)

    async def client_side() -> Changes:
        async with Client(url) as client:
            changes = await subscribe(client, ("Verdict", "Sequence"))
            for n in (1, 2, 3):
                server.publish(verdict("NG", 0.95, frame="same.png"))
                await sequence_at(changes, n)
            values = await read_all(client)
            assert (values["NgCount"], values["FrameCount"], values["Sequence"]) == (3, 3, 3)
            return changes

    changes = run(client_side())
    assert distinct(changes.seen["Sequence"]) == [0, 1, 2, 3]  # a PLC sees three parts
    assert distinct(changes.seen["Verdict"]) == ["", "NG"]  # the same verdict each time


def test_the_heartbeat_advances_with_no_frames(sink):
    url = endpoint()
    assert sink(url).wait_ready(WAIT_S)

    async def client_side() -> None:
        async with Client(url) as client:
            beat = client.get_node(node("Heartbeat"))
            first = await beat.read_value()
            seen = [first]

            async def later() -> bool:
                seen.append(await beat.read_value())
                return seen[-1] > first + 1

            await until_async(later, what="the heartbeat two beats on", within_s=WAIT_S, every_s=0.2)
            assert await client.get_node(node("Sequence")).read_value() == 0  # no frame came

    run(client_side())


def test_stalled_follows_the_stall_alarm_and_leaves_the_verdict_as_it_was(sink):
    url = endpoint()
    opened = sink(url)
    assert opened.wait_ready(WAIT_S)
    opened.publish(verdict("NG", 0.93, reason="score 0.93 > 0.88"))

    def alarm(stalled: bool) -> StallAlarm:
        return StallAlarm(station="line-3", stalled=stalled, since=1_764_600_000.0, limit_s=30.0,
                          time=1_764_600_031.0)

    async def client_side() -> tuple[Changes, dict[str, Any]]:
        async with Client(url) as client:
            changes = await subscribe(client, ("Stalled", "Sequence"))
            await sequence_at(changes, 1)
            opened.stall(alarm(True))
            await until_async(lambda: changes.seen["Stalled"][-1] is True, what="Stalled True", within_s=WAIT_S)
            opened.stall(alarm(False))  # frames again
            await until_async(lambda: distinct(changes.seen["Stalled"])[-2:] == [True, False],
                              what="Stalled False again", within_s=WAIT_S)
            return changes, await read_all(client)

    changes, values = run(client_side())
    assert distinct(changes.seen["Stalled"]) == [False, True, False]
    assert (values["Verdict"], values["Sequence"], values["NgCount"]) == ("NG", 1, 1)  # no verdict in an alarm
    assert distinct(changes.seen["Sequence"]) == [0, 1] or distinct(changes.seen["Sequence"]) == [1]


def test_close_says_running_false_and_frees_the_port(sink):
    url = endpoint()
    first = sink(url, close_grace_s=2.0)  # more than the default 0.5 s: a loaded machine's client is slower
    assert first.wait_ready(WAIT_S)
    first.publish(verdict("OK", 0.1))

    async def client_side() -> Changes:
        async with Client(url) as client:
            changes = await subscribe(client, ("Running", "Sequence"))
            await sequence_at(changes, 1)
            closing = threading.Thread(target=first.close)
            closing.start()
            await until_async(lambda: changes.seen["Running"][-1] is False, what="Running False", within_s=WAIT_S)
            await asyncio.get_running_loop().run_in_executor(None, closing.join)
        return changes

    changes = run(client_side())
    assert distinct(changes.seen["Running"]) == [True, False]
    second = sink(url)  # the same port, at once
    assert second.wait_ready(WAIT_S) and second.problem is None

    async def read_second() -> dict[str, Any]:
        async with Client(url) as client:
            return await read_all(client)

    values = run(read_second())
    assert (values["Running"], values["Sequence"]) == (True, 0)  # a new station's counters


def _count_refused(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times an OPC UA sink's server could not start (each try to listen that raised), as it happens:
    [count]."""
    start = OpcUaSink._start

    async def counted(self: OpcUaSink) -> Any:
        try:
            return await start(self)
        except OSError:
            refused[0] += 1
            raise

    refused = [0]
    monkeypatch.setattr(OpcUaSink, "_start", counted)
    return refused


def test_a_port_in_use_is_a_problem_line_and_the_server_comes_up_once_it_is_free(sink, caplog, monkeypatch):
    refused = _count_refused(monkeypatch)
    port = free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        server = sink(endpoint(port), retry_max_s=1.0)
        until(lambda: server.problem, what="the problem said", within_s=WAIT_S)
        assert server.problem == f"opcua: cannot listen on 127.0.0.1:{port} (Address already in use); retrying"
        server.publish(verdict("OK", 0.1))  # taken, not raised, while nothing listens
        server.publish(verdict("NG", 0.99, frame="late.png"))
        until(lambda: refused[0] >= 3, what="three tries to listen, refused", within_s=WAIT_S)
        assert not server.wait_ready(0)
    finally:
        holder.close()
    assert server.wait_ready(WAIT_S)
    assert server.problem is None

    async def client_side() -> dict[str, Any]:
        async with Client(endpoint(port)) as client:
            return await read_all(client)

    values = run(client_side())
    assert (values["Verdict"], values["FrameId"], values["Sequence"], values["OkCount"], values["NgCount"]) == (
        "NG", "late.png", 2, 1, 1)  # what was published meanwhile
    assert not [record for record in caplog.records if record.exc_info]  # one line, never asyncua's traceback
    assert len([record for record in caplog.records if "cannot listen" in record.getMessage()]) == 1  # said once


def test_a_host_that_does_not_resolve_is_a_problem_line_in_words(sink):
    server = sink("opc.tcp://no-such-host.invalid:4840/seglens/", allow_insecure=True)
    until(lambda: server.problem, what="the problem said", within_s=WAIT_S)
    assert server.problem.startswith("opcua: cannot listen on no-such-host.invalid:4840 (")
    assert "Unknown error" not in server.problem and server.problem.endswith("); retrying")


def test_a_verdict_no_variable_can_hold_is_said_and_changes_nothing(sink, caplog):
    server = sink(endpoint())
    server.publish(verdict("OK", 0.1))
    server.publish(StationVerdict(station="line-3", frame_id="x.png", time=1e300, verdict="NG", score=0.9, reason="",
                                  latency_ms=1.0))  # no DateTime holds that time
    assert server.wait_ready(WAIT_S)

    async def client_side() -> dict[str, Any]:
        async with Client(server.endpoint) as client:
            return await read_all(client)

    values = run(client_side())
    assert (values["Verdict"], values["Sequence"], values["NgCount"], values["FrameCount"]) == ("OK", 1, 0, 1)
    assert any("a verdict not shown" in record.getMessage() for record in caplog.records)


def test_the_variables_are_read_only(sink):
    url = endpoint()
    server = sink(url)
    assert server.wait_ready(WAIT_S)

    async def client_side() -> None:
        async with Client(url) as client:
            with pytest.raises(ua.UaStatusCodeError, match="BadUserAccessDenied|BadNotWritable"):
                await client.get_node(node("Verdict")).write_value(ua.Variant("OK", ua.VariantType.String))
            assert await client.get_node(node("Verdict")).read_value() == ""

    run(client_side())


# --- security ---

@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> Path:
    """A self-signed server and client certificate (DER) with their keys (PEM), as asyncua's examples make them."""
    folder = tmp_path_factory.mktemp("opcua-certs")
    for name in ("server", "client", "other"):
        key = cert_gen.generate_private_key()
        names = [x509.UniformResourceIdentifier(f"urn:seglens:test-{name}"), x509.DNSName("localhost"),
                 x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = cert_gen.generate_self_signed_app_certificate(
            key, f"seglens-test-{name}", {}, names,
            [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
        (folder / f"{name}.der").write_bytes(cert.public_bytes(serialization.Encoding.DER))
        (folder / f"{name}-key.pem").write_bytes(cert_gen.dump_private_key_as_pem(key))
    return folder


async def secure_client(url: str, certificates: Path, *, user: str | None = None,
                        password: str | None = None) -> Client:
    client = Client(url, timeout=10)
    client.application_uri = "urn:seglens:test-client"  # the client certificate's URI
    await client.set_security_string(
        f"Basic256Sha256,SignAndEncrypt,{certificates / 'client.der'},{certificates / 'client-key.pem'}")
    if user is not None:
        client.set_user(user)
        client.set_password(password or "")
    return client


def test_an_encrypted_endpoint_serves_a_secure_client_and_refuses_one_without_security(sink, certificates):
    url = endpoint()
    server = sink(url, security=("Basic256Sha256_SignAndEncrypt",), certificate=certificates / "server.der",
                  private_key=certificates / "server-key.pem")
    assert server.wait_ready(WAIT_S) and server.problem is None
    server.publish(verdict("NG", 0.97))

    async def client_side() -> None:
        async with await secure_client(url, certificates) as client:
            assert await client.get_node(node("Verdict")).read_value() == "NG"
            assert await client.get_node(node("NgCount")).read_value() == 1
        with pytest.raises(ua.UaError, match="No matching endpoints"):  # a plain client finds no endpoint for it
            async with Client(url, timeout=10):
                pass
        await session_on_the_none_channel_is_refused(url)

    run(client_side())


async def session_on_the_none_channel_is_refused(url: str) -> None:
    """A client that skips the endpoint check opens the None channel asyncua keeps for discovery and asks for a
    session on it: the server refuses it (asyncua 2.1 alone let it read every variable)."""
    client = Client(url, timeout=10)
    await client.connect_socket()
    try:
        await client.send_hello()
        await client.open_secure_channel()
        params = ua.CreateSessionParameters(
            ClientDescription=ua.ApplicationDescription(ApplicationUri="urn:x",
                                                        ApplicationType=ua.ApplicationType.Client),
            EndpointUrl=url, SessionName="none", ClientNonce=b"\0" * 32, RequestedSessionTimeout=60000)
        await client.uaclient.create_session(params)
        token = ua.AnonymousIdentityToken(PolicyId="anonymous")
        with pytest.raises(ua.uaerrors.BadUserAccessDenied):
            await client.uaclient.activate_session(ua.ActivateSessionParameters(UserIdentityToken=token))
        with pytest.raises(ua.UaStatusCodeError):
            await client.get_node(node("Verdict")).read_value()
    finally:
        client.disconnect_socket()


def test_a_user_and_password_are_asked_for_over_the_encrypted_channel(sink, certificates):
    url = endpoint()
    server = sink(url, security=("Basic256Sha256_Sign", "Basic256Sha256_SignAndEncrypt"),
                  certificate=certificates / "server.der", private_key=certificates / "server-key.pem",
                  username="plc", password="s3cret")
    assert server.wait_ready(WAIT_S)

    async def client_side() -> None:
        async with await secure_client(url, certificates, user="plc", password="s3cret") as client:
            assert await client.get_node(node("Running")).read_value() is True
        with pytest.raises(ua.uaerrors.BadUserAccessDenied):
            async with await secure_client(url, certificates, user="plc", password="guess"):
                pass
        with pytest.raises(ua.uaerrors.BadIdentityTokenRejected):  # anonymous
            async with await secure_client(url, certificates):
                pass

    run(client_side())


def test_only_the_trusted_client_certificates_are_let_in(sink, certificates, tmp_path):
    trusted, others = tmp_path / "trusted", tmp_path / "others"
    for folder, name in ((trusted, "client"), (others, "other")):
        folder.mkdir()
        shutil.copyfile(certificates / f"{name}.der", folder / f"{name}.der")
    servers = [sink(endpoint(), security=("Basic256Sha256_SignAndEncrypt",), certificate=certificates / "server.der",
                    private_key=certificates / "server-key.pem", trusted_clients=folder)
               for folder in (trusted, others)]
    assert all(server.wait_ready(WAIT_S) for server in servers)

    async def client_side() -> None:
        async with await secure_client(servers[0].endpoint, certificates) as client:  # its certificate is trusted
            assert await client.get_node(node("Running")).read_value() is True
        with pytest.raises(ua.uaerrors.BadUserAccessDenied):  # the same client, not among the other's trusted
            async with await secure_client(servers[1].endpoint, certificates):
                pass

    run(client_side())


@pytest.mark.parametrize(("url", "options", "message"), [
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "missing.der",
                                  "private_key": "server-key.pem"},
     "certificate missing.der: cannot read it (No such file or directory)"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "server-key.pem",
                                  "private_key": "server-key.pem"},
     "certificate server-key.pem: not an X.509 certificate (PEM or DER)"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "server.der",
                                  "private_key": "server.der"},
     "private key server.der: not a private key (PEM or DER)"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "server.der",
                                  "private_key": "other-key.pem"},
     "private key other-key.pem is not the key of certificate server.der"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_SignAndEncrypt",)},
     "security Basic256Sha256_SignAndEncrypt needs certificate and private_key (the server's, PEM or DER)"),
    ("opc.tcp://0.0.0.0:4840/", {}, "security none on 0.0.0.0, which is not loopback: anyone on that network can "
                                    "read the verdicts; give security Basic256Sha256_SignAndEncrypt "
                                    "(or allow_insecure: true)"),
    ("opc.tcp://127.0.0.1:4840/", {"username": "plc", "password": "p"},
     "username needs a Basic256Sha256 security policy: with none alone the password would cross the network in clear"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic128",)},
     "security 'Basic128': expected one of none, Basic256Sha256_Sign, Basic256Sha256_SignAndEncrypt"),
    ("http://127.0.0.1:4840/", {}, "endpoint 'http://127.0.0.1:4840/': expected opc.tcp://HOST[:PORT][/PATH]"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "server.der",
                                  "private_key": "server-key.pem", "trusted_clients": "nowhere"},
     "trusted_clients nowhere: cannot read the folder (No such file or directory)"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("Basic256Sha256_Sign",), "certificate": "server.der",
                                  "private_key": "server-key.pem", "trusted_clients": "."},
     "trusted client certificate client-key.pem: not an X.509 certificate (PEM or DER)"),
    ("opc.tcp://127.0.0.1:4840/", {"security": ("none", "Basic256Sha256_Sign"), "certificate": "server.der",
                                  "private_key": "server-key.pem", "trusted_clients": "."},
     "trusted_clients needs every security policy to be a Basic256Sha256 one: a client on none has no certificate "
     "to check"),
])
def test_a_refused_configuration_is_one_line_and_nothing_listens(certificates, url, options, message):
    given = {key: certificates / value if key in ("certificate", "private_key", "trusted_clients") else value
             for key, value in options.items()}
    threads = threading.active_count()
    with pytest.raises(ValueError) as caught:
        OpcUaSink(OpcUaSinkOptions(endpoint=url, **given), station="line-3")
    assert str(caught.value) == message
    assert threading.active_count() == threads  # no server thread started


# --- the station file and the station ---

GOOD = "name: line-3\nmodel: m.onnx\nsource: {watch: in}\nout: out\n"


@pytest.mark.parametrize(("sinks", "message"), [
    ("{opcua: {security: none}}", "'sinks.opcua.endpoint' is missing (opc.tcp://HOST:PORT/PATH)"),
    ("{opcua: {endpoint: 'http://x:1'}}", "'sinks.opcua.endpoint' must be opc.tcp://HOST[:PORT][/PATH], got "
                                         "http://x:1"),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', security: Basic128}}", "'sinks.opcua.security' must be one or a list "
     "of none, Basic256Sha256_Sign, Basic256Sha256_SignAndEncrypt, got 'Basic128'"),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', security: []}}", "'sinks.opcua.security' must be one or a list of "),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', password: p}}", "unknown key 'sinks.opcua.password' (expected one of: "
     "endpoint, security, certificate, private_key, trusted_clients, username, password_env, allow_insecure)"),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', allow_insecure: maybe}}",
     "'sinks.opcua.allow_insecure' must be true or false, got 'maybe'"),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', certificate: 3}}",
     "'sinks.opcua.certificate' must be a non-empty text, got 3"),
    ("{opcua: {endpoint: 'opc.tcp://h:4840', password_env: ''}}",
     "'sinks.opcua.password_env' must be a non-empty text, got ''"),
    ("{opcua: opc.tcp://h:4840}", "'sinks.opcua' must be a mapping of keys (endpoint, "),
])
def test_a_station_file_opcua_key_that_is_wrong_is_one_line_naming_it(tmp_path, sinks, message):
    from app.runs.station.file import StationFileError, read_station_file

    path = tmp_path / "STATION.yaml"
    path.write_text(f"{GOOD}sinks: {sinks}\n")
    with pytest.raises(StationFileError) as caught:
        read_station_file(path)
    assert str(caught.value).startswith(f"{path}: {message}")
    assert "\n" not in str(caught.value)


def test_a_station_file_opcua_section_read_whole(tmp_path):
    from app.runs.station.file import read_station_file

    path = tmp_path / "STATION.yaml"
    path.write_text(f"{GOOD}sinks:\n  opcua: {{endpoint: 'opc.tcp://[::1]:4841/seglens/', security: "
                    "[Basic256Sha256_Sign, Basic256Sha256_SignAndEncrypt], certificate: certs/server.der, "
                    "private_key: certs/key.pem, trusted_clients: plcs, username: plc, password_env: OPCUA_PW}\n")
    assert read_station_file(path).sinks == (OpcUaSinkOptions(
        endpoint="opc.tcp://[::1]:4841/seglens/",
        security=("Basic256Sha256_Sign", "Basic256Sha256_SignAndEncrypt"),
        certificate=tmp_path / "certs" / "server.der", private_key=tmp_path / "certs" / "key.pem",
        trusted_clients=tmp_path / "plcs", username="plc", password_env="OPCUA_PW"),)


def _open_files(folder: Path) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(folder)):
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="open files are counted through /proc")
@pytest.mark.parametrize(("opcua", "environment", "message"), [
    ({"security": "Basic256Sha256_Sign", "certificate": "missing.der", "private_key": "k.pem"}, {},
     "'sinks.opcua': certificate missing.der: cannot read it (No such file or directory)"),
    ({"security": "Basic256Sha256_Sign", "username": "plc", "password_env": "SEGLENS_TEST_UNSET_PW"}, {},
     "'sinks.opcua.password_env' names SEGLENS_TEST_UNSET_PW, which is not set in the environment"),
])
def test_a_refused_opcua_sink_is_one_line_and_closes_the_sinks_opened_before_it(tmp_path, monkeypatch, opcua,
                                                                                environment, message):
    """Before, make_sinks left the log sink (its files open) and an MQTT sink (its threads) behind when a later
    sink was refused."""
    from app.runs.station.file import read_station_file
    from app.runs.station.run import StationRefused
    from app.runs.station.setup import make_sinks

    monkeypatch.delenv("SEGLENS_TEST_UNSET_PW", raising=False)
    path = tmp_path / "STATION.yaml"
    (tmp_path / "out").mkdir()
    sinks = {"log": {}, "mqtt": {"url": f"mqtt://127.0.0.1:{free_port()}"},
             "opcua": {"endpoint": endpoint(), **opcua}}
    path.write_text(yaml.safe_dump({"name": "line-3", "model": "m.onnx", "source": {"watch": "in"}, "out": "out",
                                    "sinks": sinks}))
    station = read_station_file(path)
    with pytest.raises(StationRefused) as caught:
        make_sinks(station, model=None)  # type: ignore[arg-type]  # no folder sink: the model is not needed
    assert str(caught.value) == f"{path}: {message}"
    assert _open_files(tmp_path / "out") == []  # the log's files and the MQTT buffer closed
    assert not [t for t in threading.enumerate() if t.name.startswith("mqtt-sink") and t.is_alive()]


def test_without_asyncua_the_sink_is_one_line(tmp_path, monkeypatch):
    from app.errors import SegLensError
    from app.runs.station.file import parse_station
    from app.runs.station.setup import make_sinks

    for name in ("app.runs.station.sinks.opcua", "app.runs.station.sinks.opcua_space"):
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "asyncua", None)  # as in a build without the opcua extra
    station = parse_station({"model": "m.onnx", "source": {"watch": "in"}, "out": "out",
                             "sinks": {"opcua": {"endpoint": endpoint()}}}, path=None, base=tmp_path)
    with pytest.raises(SegLensError, match=r"^the OPC UA sink needs the 'opcua' extra: pip install \"seglens\[opcua"):
        make_sinks(station, model=None)  # type: ignore[arg-type]


@pytest.fixture
def demo(tmp_path):
    """The anomaly demo model with a sidecar whose verdict has a REVIEW band (tests/runs/station/test_station.py's)."""
    shutil.copy(REPO / "models" / "surface_anomaly.onnx", tmp_path / "surface_anomaly.onnx")
    sidecar = yaml.safe_load((REPO / "models" / "surface_anomaly.yaml").read_text())
    sidecar["output"].pop("image_threshold")
    sidecar["verdict"] = {"fail_if": [{"score_above": 0.88}], "review_if": [{"score_above": 0.56}]}
    (tmp_path / "surface_anomaly.yaml").write_text(yaml.safe_dump(sidecar, sort_keys=False))
    return tmp_path / "surface_anomaly.onnx"


async def _connected(url: str, process: subprocess.Popen[str]) -> Client | None:
    """A client connected to `url`, or None while nothing answers there; a failure if the process ended."""
    assert process.poll() is None, "the station exited"
    client = Client(url, timeout=5)
    try:
        await client.connect()
    except (OSError, asyncio.TimeoutError, ua.UaError):
        return None
    return client


def test_watch_with_opcua_a_client_reads_the_ng_count_after_an_ng_part(demo, tmp_path):
    folder, out, url = tmp_path / "in", tmp_path / "out", endpoint()
    folder.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "watch", str(demo), str(folder), "--out", str(out), "--device", "cpu",
         "--settle", "0.2", "--name", "line-3", "--opcua", url],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    async def client_side() -> tuple[Changes, dict[str, Any]]:
        # the station starts its server once the model is warm
        client = await until_async(lambda: _connected(url, process), what="the station's server up",
                                   within_s=WAIT_S * 2, every_s=0.3)
        try:
            changes = await subscribe(client, ("NgCount", "Sequence"))
            for sequence, name in enumerate(("anomaly_clean_02_plastic.png", "anomaly_05_pits.png"), 1):
                partial = folder / (name + ".tmp")  # an OK part, then an NG one
                shutil.copyfile(SAMPLES / name, partial)
                partial.rename(folder / name)
                await sequence_at(changes, sequence)
            await until_async(lambda: changes.seen["NgCount"][-1] == 1, what="NgCount 1", within_s=WAIT_S)
            return changes, await read_all(client)
        finally:
            await client.disconnect()

    try:
        changes, values = run(client_side())
    finally:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 130, (stdout, stderr)
    assert (values["Verdict"], values["FrameId"], values["VerdictCode"]) == ("NG", "anomaly_05_pits.png", 3)
    assert (values["OkCount"], values["NgCount"], values["FrameCount"]) == (1, 1, 2) and values["Score"] > 0.88
    assert distinct(changes.seen["NgCount"]) == [0, 1]
    assert "watch line-3: stopped; 2 frames: 1 OK, 0 REVIEW, 1 NG, 0 ERROR; " in stdout
    assert "sink problem" not in stdout


def test_watch_with_opcua_on_a_port_in_use_says_the_sink_problem_and_exits_1(demo, tmp_path):
    folder, out, port = tmp_path / "in", tmp_path / "out", free_port()
    folder.mkdir()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "watch", str(demo), str(folder), "--out", str(out), "--device", "cpu",
             "--settle", "0.2", "--name", "line-3", "--opcua", endpoint(port)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            until(lambda: process.poll() is not None or (out / "station-journal.jsonl").exists(),
                  what="the station started", within_s=WAIT_S * 2)
            assert process.poll() is None, "the station exited"
            shutil.copyfile(SAMPLES / "anomaly_05_pits.png", folder / "part.png.tmp")
            (folder / "part.png.tmp").rename(folder / "part.png")
            logged = out / "verdicts.jsonl"
            until(lambda: process.poll() is not None or (logged.exists() and logged.read_text()),
                  what="a verdict logged", within_s=WAIT_S * 2)
        finally:
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=WAIT_S)
    finally:
        holder.close()
    assert process.returncode == 1, (stdout, stderr)  # a sink failing at the end: the line was left without it
    assert "watch line-3: stopped; 1 frame: 0 OK, 0 REVIEW, 1 NG, 0 ERROR; " in stdout
    assert f"sink problem: opcua: cannot listen on 127.0.0.1:{port} (Address already in use); retrying\n" in stdout
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("args", "message"), [
    (["STATION.yaml", "--opcua", "opc.tcp://127.0.0.1:4840/"], "--opcua: a station file says these itself"),
    (["surface_anomaly", "in", "--out", "o", "--opcua", "tcp://127.0.0.1:4840"],
     "'sinks.opcua.endpoint' must be opc.tcp://HOST[:PORT][/PATH], got tcp://127.0.0.1:4840"),
])
def test_watch_opcua_usage_errors_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, message):
    from app.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in").mkdir()
    assert main(["watch", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
