"""The OPC UA sink: SegLens as an OPC UA server (asyncua) from which a PLC or a SCADA reads the last verdict, its
score, the counters and a heartbeat, the usual way a line reads a vision sensor.

Address space. Namespace `urn:seglens:station` (index 2 on this server; a client should resolve it by its URI);
under Objects one object per station, NodeId `ns=2;s=<station>`, and its variables, each `ns=2;s=<station>.<Name>`
(string NodeIds, so a PLC program is configured once), read-only for every client:

    Verdict       String   "OK" | "REVIEW" | "NG" | "ERROR" ("" before the first verdict)
    VerdictCode   Int32    0 none yet, 1 OK, 2 REVIEW, 3 NG, 4 ERROR (a PLC compares a number)
    Score         Double   the image score; NaN when the frame has none (an ERROR, a model without a score)
    Reason        String   the rule that fired, or the error line ("" for OK)
    FrameId       String   the frame's id (a watched file's path relative to the folder, a camera frame's number)
    Counts        String   an instance model's objects per class as JSON (`{"pit": 2, "scratch": 0}`, every class
                           of the model); "" for another model and for an ERROR
    VerdictTime   DateTime when the verdict was made (UTC)
    LatencyMs     Double   from the frame complete / captured to its verdict
    Sequence      UInt32   one more per verdict: a PLC sees a new part even when the verdict repeats
    OkCount, ReviewCount, NgCount, ErrorCount, FrameCount   UInt32, since the station started
    Heartbeat     UInt32   one more every second while the server runs, frames or none: a PLC that sees it stop
                           knows the station's process is dead (a source that stalls is the station's own alarm,
                           stall_after_s, not this)
    Running       Boolean  True while the station runs; False is written on close, before the server stops
    Stalled       Boolean  True while the source is stalled: no frame for longer than the station's
                           stall_after_s (or a camera's own stall ended it); False again when frames come (the
                           viewer's red SOURCE STALLED bar, app.runs.station.sinks.StallSink)

The variables of one verdict are written together, Sequence last, between two client requests (one asyncio
loop serves both), so a read of several of them sees one verdict. Verdicts that come faster than the server
writes (a burst) are coalesced: the newest is shown, every counter and Sequence still counts each one.

Security (`security:` one or a list of `none`, `Basic256Sha256_Sign`, `Basic256Sha256_SignAndEncrypt`): `none`
is allowed only on a loopback endpoint (127.0.0.1, localhost, ::1) unless `allow_insecure: true` says so, since
anyone on the network could then read the verdicts. The Basic256Sha256 policies need the server's `certificate`
and `private_key` (PEM or DER, by path; the certificate's URI becomes the server's ApplicationUri); any client's
certificate is accepted unless `trusted_clients` names a folder of the ones let in (each .der/.pem/.crt/.cer file
one certificate, pinned: exactly those, no CA chain). A `username` (its password from the environment, never the
file) refuses anonymous clients; it needs a Basic256Sha256 policy, so the password never crosses the network in
clear. A missing or unreadable certificate or key is one line naming the file, and nothing listens.

Threads: the server runs on its own thread with its own asyncio loop; `publish` takes a lock for a few dict
writes and wakes that loop, so it never waits for the network. A port that cannot be bound (in use, an address
not this machine's) is the sink's `problem` and the server retries (1 s doubling to `retry_max_s`); the values
are kept meanwhile, so a PLC that connects later reads the current ones. `close` waits at most `close_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from datetime import timezone
from typing import Any

from asyncua import ua
from asyncua.server.server import Server

from app.errors import one_line
from app.runs.station.sinks import StallAlarm, StationVerdict
from app.runs.station.sinks.opcua_space import (
    NAMESPACE,
    NOT_OF_A_VERDICT,
    POLICIES,
    VARIABLES,
    Gate,
    Security,
    Tally,
    check_security,
    endpoint_host_port,
    node_id,
)
from app.runs.station.sinks.options import OpcUaSinkOptions

log = logging.getLogger(__name__)

__all__ = ["NAMESPACE", "OpcUaSink"]


class _Quiet(logging.Filter):
    """asyncua's server logs a traceback for a port in use and a warning per endpoint it leaves out: the sink
    says those itself, in its one-line problem."""

    _SAID = ("error starting server", "No signing policy", "No encrypting policy", "Endpoints other than open")

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(said in str(record.msg) for said in self._SAID)


def _quiet_asyncua() -> None:
    library = logging.getLogger("asyncua")
    if library.level == logging.NOTSET:  # its INFO lines (every client's connect) are not the station's news
        library.setLevel(logging.WARNING)
    server_log = logging.getLogger("asyncua.server.server")
    if not any(isinstance(known, _Quiet) for known in server_log.filters):
        server_log.addFilter(_Quiet())


class OpcUaSink:
    """Verdicts as an OPC UA server's variables (module docstring). `options.endpoint`: `opc.tcp://HOST:PORT/PATH`,
    the address the server listens on and tells its clients. ValueError in one line for a refused configuration."""

    name = "opcua"

    def __init__(self, options: OpcUaSinkOptions, *, station: str) -> None:
        """`options`: the station file's `sinks.opcua`, its password resolved; `station`: the object's name."""
        self._host, self._port = endpoint_host_port(options.endpoint)
        self._security: Security = check_security(options)
        self.endpoint, self.station = options.endpoint, station
        self._retry_max_s, self._close_grace_s, self._close_s = (options.retry_max_s, options.close_grace_s,
                                                                 options.close_s)
        self._lock = threading.Lock()
        self._tally = Tally()
        self._version = 0  # one more per verdict taken: the server writes when it is ahead of what it wrote
        self._stalled = False  # the stall alarm (written when it differs from what the server wrote)
        self._problem: str | None = None
        self._closing = threading.Event()
        self._ready = threading.Event()  # set while the server listens
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._nodes: dict[str, ua.NodeId] = {}  # each variable's NodeId, once the server registered the namespace
        _quiet_asyncua()
        self._thread = threading.Thread(target=self._thread_main, name="opcua-sink-server", daemon=True)
        self._thread.start()

    def publish(self, verdict: StationVerdict) -> bool:
        """Count the verdict and hand it to the server's thread; never waits for the network, never raises. Always
        True: the server shows the last verdict and the counters, state a later verdict replaces (one that no
        variable can hold is said once, and would be refused again)."""
        try:
            with self._lock:
                self._tally.take(verdict)
                self._version += 1
        except (ValueError, TypeError, OverflowError, OSError) as exc:  # no variable holds it: said, not raised
            log.warning("OPC UA sink: a verdict not shown: %s", one_line(exc))
            return True
        self._poke()
        return True

    def stall(self, alarm: StallAlarm) -> None:
        """The stall alarm's new state, for the server to write to `Stalled`; never waits, never raises."""
        with self._lock:
            self._stalled = alarm.stalled
        self._poke()

    def close(self) -> None:
        """Write Running False (clients subscribed to it see it), stop the server and free its port; waits at
        most `close_s`."""
        self._closing.set()
        self._poke()
        self._thread.join(timeout=self._close_s)
        if self._thread.is_alive():
            log.warning("OPC UA sink: the server did not stop within %.0f s", self._close_s)

    @property
    def problem(self) -> str | None:
        """One line while the server cannot listen (or failed), else None."""
        with self._lock:
            return self._problem

    @property
    def lost(self) -> int:
        """0: the server shows the last verdict and the counters, which a later verdict replaces; none is owed."""
        return 0

    def wait_ready(self, timeout: float) -> bool:
        """Whether the server listens, waiting at most `timeout` s for it (its first start takes about a second)."""
        return self._ready.wait(timeout)

    def _poke(self) -> None:
        """Wake the server's loop (from any thread); nothing to do before it runs or after it ended."""
        with self._lock:
            loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            # RuntimeError: the loop closed since it was read; the server is gone, nothing to wake
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _set_problem(self, problem: str | None) -> None:
        with self._lock:
            changed, self._problem = problem != self._problem, problem
        if changed and problem is not None:
            log.warning("%s", problem)
        elif changed:
            log.info("OPC UA sink: listening on %s:%d", self._host, self._port)

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._serve())
        except Exception as exc:  # nothing planned reaches here; the station goes on without this sink
            self._set_problem(f"opcua: the server stopped: {one_line(exc, typed=True)}")
            log.debug("OPC UA sink: the server's thread ended", exc_info=True)
        finally:
            self._ready.clear()
            with self._lock:
                self._loop = self._wake = None

    async def _serve(self) -> None:
        """Start the server, retrying while the port cannot be bound; serve until closed."""
        wake = asyncio.Event()
        with self._lock:
            self._loop, self._wake = asyncio.get_running_loop(), wake
        delay = 1.0
        while not self._closing.is_set():
            try:
                server = await self._start()
            except OSError as exc:  # the port in use, an address not this machine's
                # asyncio's strerror repeats the address: the errno's words say it shorter (a name that does
                # not resolve is a gaierror: a negative errno, its own words in strerror)
                reason = os.strerror(exc.errno) if exc.errno and exc.errno > 0 else exc.strerror or one_line(exc)
                # the same line at every try: said (and logged) once, not once per retry
                self._set_problem(f"opcua: cannot listen on {self._host}:{self._port} ({reason}); retrying")
                await self._nap(wake, delay)
                delay = min(delay * 2, self._retry_max_s)
                continue
            try:
                self._set_problem(None)
                self._ready.set()
                await self._run(server, wake)
            finally:
                self._ready.clear()
                await server.stop()
            return

    async def _start(self) -> Server:
        """A server with the station's address space, listening (OSError when the port cannot be bound)."""
        security = self._security
        server = Server(user_manager=Gate(security))
        await server.init()
        server.set_endpoint(self.endpoint)
        server.set_server_name(f"SegLens station {self.station}")
        server.set_security_policy([POLICIES[policy] for policy in security.policies])
        # one kind of identity: a user's name and password, or anonymous (never an X509 user token, whose
        # certificate would stand in for the channel's in Gate's check)
        server.set_identity_tokens([ua.UserNameIdentityToken if security.username else ua.AnonymousIdentityToken])
        if security.certificate is not None and security.private_key is not None:
            server.iserver.certificate, server.iserver.private_key = security.certificate, security.private_key
        await server.set_application_uri(security.application_uri or f"urn:seglens:station:{self.station}")
        index = await server.register_namespace(NAMESPACE)
        self._nodes = {name: _node(index, node_id(self.station, name)) for name in VARIABLES}
        folder = await server.nodes.objects.add_object(_node(index, self.station),
                                                       ua.QualifiedName(self.station, index))
        for name, (kind, initial) in VARIABLES.items():
            await folder.add_variable(self._nodes[name], ua.QualifiedName(name, index), ua.Variant(initial, kind))
        await self._write(server, {**self._values()[1], "Running": True})
        await server.start()  # on failure it has stopped what it started
        return server

    def _values(self) -> tuple[int, dict[str, Any]]:
        with self._lock:
            return self._version, {**self._tally.snapshot(), "Stalled": self._stalled}

    async def _run(self, server: Server, wake: asyncio.Event) -> None:
        """Write each new verdict's variables, and the heartbeat every second, until closed."""
        written, heartbeat = -1, 0
        stalled = None  # what Stalled says (the server's first write was the value then: written again here)
        next_beat = time.monotonic() + 1.0
        while not self._closing.is_set():
            version, values = self._values()
            if version != written:
                await self._write(server, {name: value for name, value in values.items()
                                           if name not in NOT_OF_A_VERDICT})
                written = version
            if values["Stalled"] != stalled:
                stalled = values["Stalled"]
                await self._write(server, {"Stalled": stalled})
            now = time.monotonic()
            if now >= next_beat:
                heartbeat = (heartbeat + 1) % (1 << 32)
                await self._write(server, {"Heartbeat": heartbeat})
                next_beat = max(next_beat + 1.0, now + 0.5)  # a late beat is not followed by a burst of them
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=max(0.0, next_beat - time.monotonic()))
            wake.clear()
        await self._write(server, {"Running": False})
        await asyncio.sleep(self._close_grace_s)  # a subscriber's next publish carries Running False

    async def _write(self, server: Server, values: dict[str, Any]) -> None:
        """Write `values` by variable name, Sequence last (a client that sees it change sees the rest too)."""
        now = ua.DateTime.now(timezone.utc)
        for name in sorted(values, key=lambda name: name == "Sequence"):
            kind = VARIABLES[name][0]
            value = ua.DataValue(ua.Variant(values[name], kind), SourceTimestamp=now, ServerTimestamp=now)
            await server.write_attribute_value(self._nodes[name], value)

    async def _nap(self, wake: asyncio.Event, seconds: float) -> None:
        """Sleep `seconds`, or less when closed."""
        deadline = time.monotonic() + seconds
        while not self._closing.is_set() and time.monotonic() < deadline:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=deadline - time.monotonic())
            wake.clear()


def _node(index: int, text: str) -> ua.NodeId:
    """The string NodeId `ns=<index>;s=<text>`."""
    return ua.NodeId(ua.String(text), ua.Int16(index))

