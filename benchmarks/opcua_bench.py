"""Station mode's OPC UA sink (issue 29): from `publish` to an OPC UA client's data-change notification.

    uv run python benchmarks/opcua_bench.py [--verdicts 500] [--interval-ms 1,10,100] [--security none]
        [--idle-s 20]

Every figure is measured, none asserted (this is not a test). The sink (app.runs.station.sinks.opcua: asyncua's server
on its own thread and loop) listens on loopback; an asyncua client in this process subscribes to its Sequence with
each `--interval-ms` publishing interval in turn (the subscription's own batching: a PLC asks for 10–100 ms) and a
monitored item sampling at 0 (every change). For each verdict in turn: wait a random part of the interval (a part
comes at any moment of the client's cycle), publish, then wait for the notification that carries its Sequence;
latency = the notification's arrival − publish (one clock: time.perf_counter). With
`--security Basic256Sha256_SignAndEncrypt` a self-signed server and client certificate are generated first.
`--idle-s S`: then, for each interval, a client in another process subscribed to five variables for S seconds with
no verdict coming, and the CPU this process (the server) spent meanwhile, in % of one core.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import random
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asyncua import Client, ua
from asyncua.crypto import cert_gen
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from app.runs.station.sinks import StationVerdict
from app.runs.station.sinks.opcua import OpcUaSink


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def certificates(folder: Path) -> None:
    """A server and a client certificate (DER) with their keys (PEM), self-signed."""
    for name in ("server", "client"):
        key = cert_gen.generate_private_key()
        names = [x509.UniformResourceIdentifier(f"urn:seglens:bench-{name}"), x509.DNSName("localhost"),
                 x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = cert_gen.generate_self_signed_app_certificate(
            key, f"seglens-bench-{name}", {}, names, [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
        (folder / f"{name}.der").write_bytes(cert.public_bytes(serialization.Encoding.DER))
        (folder / f"{name}-key.pem").write_bytes(cert_gen.dump_private_key_as_pem(key))


class _Arrivals:
    def __init__(self) -> None:
        self.at: dict[int, float] = {}
        self.event = asyncio.Event()

    def datachange_notification(self, node: Any, value: Any, data: Any) -> None:
        self.at.setdefault(int(value), time.perf_counter())
        self.event.set()


async def measure(sink: OpcUaSink, url: str, *, count: int, interval_ms: float, folder: Path | None) -> list[float]:
    client = Client(url, timeout=10)
    if folder is not None:
        client.application_uri = "urn:seglens:bench-client"
        await client.set_security_string(
            f"Basic256Sha256,SignAndEncrypt,{folder / 'client.der'},{folder / 'client-key.pem'}")
    latencies: list[float] = []
    async with client:
        arrivals = _Arrivals()
        subscription = await client.create_subscription(
            ua.CreateSubscriptionParameters(RequestedPublishingInterval=interval_ms, RequestedLifetimeCount=10000,
                                            RequestedMaxKeepAliveCount=3000, Priority=0), arrivals)
        sequence = client.get_node(f"ns=2;s={sink.station}.Sequence")
        await subscription.subscribe_data_change(sequence, sampling_interval=0)
        first = await sequence.read_value()
        while first not in arrivals.at:
            await asyncio.sleep(0.01)
        for i in range(1, count + 1):
            verdict = StationVerdict(station=sink.station, frame_id=f"part-{i:04d}.png", time=time.time(),
                                     verdict="NG" if i % 5 == 0 else "OK", score=i / count, reason="",
                                     latency_ms=60.0)
            # at a random moment of the subscription's cycle, as a part comes: right after a notification the next
            # publish would always wait a whole interval
            await asyncio.sleep(random.uniform(0, interval_ms / 1000))
            started = time.perf_counter()
            sink.publish(verdict)
            target = first + i
            deadline = started + 10.0
            while target not in arrivals.at and time.perf_counter() < deadline:
                arrivals.event.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(arrivals.event.wait(), timeout=1.0)
            if target in arrivals.at:
                latencies.append((arrivals.at[target] - started) * 1000)
        await subscription.delete()
    return latencies


_IDLE_CLIENT = """
import asyncio, sys
from asyncua import Client, ua
class H:
    def datachange_notification(self, node, value, data): pass
async def main(url, interval, seconds):
    async with Client(url) as client:
        sub = await client.create_subscription(interval, H())
        names = ("Verdict", "Sequence", "NgCount", "Heartbeat", "Running")
        await sub.subscribe_data_change([client.get_node(f"ns=2;s=bench.{n}") for n in names], sampling_interval=0)
        print("subscribed", flush=True)
        await asyncio.sleep(seconds)
asyncio.run(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3])))
"""


def idle_cost(url: str, *, interval_ms: float | None, seconds: float) -> dict[str, Any]:
    """The CPU this process (the sink's server) spends while a client in another process is subscribed to five
    variables at `interval_ms` (None: no client, the heartbeat alone) and no verdict comes: process CPU seconds ÷
    wall seconds."""
    import subprocess

    if interval_ms is None:
        cpu, wall = time.process_time(), time.perf_counter()
        time.sleep(seconds)
    else:
        client = subprocess.Popen([sys.executable, "-c", _IDLE_CLIENT, url, str(interval_ms), str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        assert client.stdout is not None and client.stdout.readline().strip() == "subscribed"
        cpu, wall = time.process_time(), time.perf_counter()
        client.wait()
    used, took = time.process_time() - cpu, time.perf_counter() - wall
    return {"idle_client_interval_ms": interval_ms, "seconds": round(took, 1),
            "server_cpu_percent_of_a_core": round(100 * used / took, 2)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=500)
    parser.add_argument("--interval-ms", default="1,10,100", help="the subscriptions' publishing intervals, in turn")
    parser.add_argument("--security", default="none", choices=("none", "Basic256Sha256_SignAndEncrypt"))
    parser.add_argument("--idle-s", type=float, default=0.0,
                        help="also: the server's CPU for S s with no client, then a client subscribed at each "
                             "interval; no verdict")
    args = parser.parse_args()
    url = f"opc.tcp://127.0.0.1:{free_port()}/seglens/"
    with tempfile.TemporaryDirectory(prefix="opcua-bench-") as temporary:
        folder: Path | None = None
        options: dict[str, Any] = {}
        if args.security != "none":
            folder = Path(temporary)
            certificates(folder)
            options = {"security": args.security, "certificate": folder / "server.der",
                       "private_key": folder / "server-key.pem"}
        sink = OpcUaSink(url, station="bench", **options)
        try:
            if not sink.wait_ready(30):
                print(f"the server did not start: {sink.problem}")
                return 1
            rows = []
            for interval in (float(text) for text in args.interval_ms.split(",")):
                latencies = asyncio.run(measure(sink, url, count=args.verdicts, interval_ms=interval, folder=folder))
                rows.append({"publishing_interval_ms": interval, "security": args.security,
                             "received": len(latencies), "of": args.verdicts,
                             "p50_ms": round(statistics.median(latencies), 2),
                             "p95_ms": round(percentile(latencies, 0.95), 2),
                             "max_ms": round(max(latencies), 2)})
                print(json.dumps(rows[-1]), flush=True)
            if args.idle_s and args.security == "none":
                for idle in (None, *(float(text) for text in args.interval_ms.split(","))):
                    print(json.dumps(idle_cost(url, interval_ms=idle, seconds=args.idle_s)), flush=True)
        finally:
            sink.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
