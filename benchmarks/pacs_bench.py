"""Retrieve + open of a series from a loopback PACS (issue 27): C-GET (DIMSE) and WADO-RS (DICOMweb), s and MB/s.

    uv run python benchmarks/pacs_bench.py [--slices 200] [--size 512] [--repeats 3] [--work DIR] [--nagle]

It starts Orthanc as the tests do (tests/io/pacs/orthanc.py: Debian's `orthanc` + `orthanc-dicomweb`, a generated
config, random loopback ports, basic auth), writes a synthetic CT series (tests/dicom_factory.write_series: 16-bit,
uncompressed, HU through RescaleSlope/Intercept), uploads it over REST (not timed), then per protocol and repeat
measures into a fresh SeriesCache:

  retrieve  client.retrieve(study, series, cache): the image-level query, the transfer, the files written, the
            cache's rename: seconds and MB/s of the files' bytes;
  open      what a dropped folder costs: discover([folder]) (headers, geometry, order) and every slice decoded
            (read_dicom_slice), seconds;

and prints a Markdown table of the medians and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "pacs"))

import dicom_factory  # noqa: E402
from orthanc import Orthanc, require  # noqa: E402

from app.io.discover import discover  # noqa: E402
from app.io.pacs.cache import SeriesCache  # noqa: E402
from app.io.pacs.connect import connect  # noqa: E402
from app.io.pacs.nodes import parse_node  # noqa: E402
from app.io.series import read_dicom_slice  # noqa: E402


def open_series(folder: Path) -> int:
    """Open the folder as the viewer does a drop: discover the volume, decode every slice; the slice count."""
    volume = discover([folder])[0].volume
    assert volume is not None, "the retrieved folder is not a volume"
    for index in range(volume.depth):
        read_dicom_slice(volume, index, max_pixels=1 << 30)
    return volume.depth


def measure(client, study: str, series: str, work: Path, repeats: int) -> dict[str, float]:
    rows = []
    for r in range(repeats):
        cache = SeriesCache(work / f"cache-{client.node.kind}-{r}")
        start = time.perf_counter()
        got = client.retrieve(study, series, cache)
        retrieved = time.perf_counter()
        depth = open_series(got.folder)
        opened = time.perf_counter()
        rows.append((retrieved - start, opened - retrieved, got.bytes, depth))
        cache.clear()
    retrieve_s = statistics.median(row[0] for row in rows)
    open_s = statistics.median(row[1] for row in rows)
    megabytes = rows[0][2] / 1e6
    return {"retrieve_s": retrieve_s, "retrieve_mb_s": megabytes / retrieve_s, "open_s": open_s,
            "total_s": retrieve_s + open_s, "total_mb_s": megabytes / (retrieve_s + open_s), "mb": megabytes,
            "slices": rows[0][3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slices", type=int, default=200)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--nagle", action="store_true", help="Orthanc's DCMTK with Nagle's algorithm on (TCP_NODELAY=0,"
                        " the Debian service's default): each C-GET sub-operation waits for a delayed ACK")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pacs-bench-"))
    server = Orthanc(folder=work / "orthanc", executable=require(), nodelay=not args.nagle)
    server.write_config()
    server.start()
    try:
        paths = dicom_factory.write_series(work / "series", slices=args.slices, rows=args.size, columns=args.size,
                                           patient=("Bench^Mark", "PID-BENCH"))
        server.upload(paths)
        import pydicom

        first = pydicom.dcmread(paths[0], stop_before_pixels=True)
        study, series = str(first.StudyInstanceUID), str(first.SeriesInstanceUID)
        clients = {
            "C-GET (DIMSE)": connect(parse_node(server.dimse_url)),
            "WADO-RS (DICOMweb)": connect(parse_node(f"dicomweb+http://127.0.0.1:{server.http_port}/dicom-web"
                                                     f"?user={server.user}"), secret=server.password),
        }
        results = {name: measure(client, study, series, work, args.repeats) for name, client in clients.items()}
    finally:
        server.stop(graceful=True)
    print(f"\n{args.slices} slices of {args.size}×{args.size} int16, {results['C-GET (DIMSE)']['mb']:.1f} MB, "
          f"medians of {args.repeats}, Orthanc TCP_NODELAY={0 if args.nagle else 1}\n")
    print("| protocol | retrieve s | retrieve MB/s | open s | retrieve + open s | MB/s overall |")
    print("|---|---|---|---|---|---|")
    for name, row in results.items():
        print(f"| {name} | {row['retrieve_s']:.2f} | {row['retrieve_mb_s']:.0f} | {row['open_s']:.2f} | "
              f"{row['total_s']:.2f} | {row['total_mb_s']:.0f} |")
    print(json.dumps({"slices": args.slices, "size": args.size, "nagle": args.nagle, "results": results}))


if __name__ == "__main__":
    main()
