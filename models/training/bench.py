"""CPU latency of the bundled models through the app pipeline (medians over repeated runs).

    .venv/bin/python -m models.training.bench               # all models; writes results.json + README.md

* surface_defects: a 1920x1080 RGB image at the sidecar's working size (input.size)  - target <= 200 ms
* nuclei / nuclei_fp16: a 512x512 grayscale field, resized to the fixed 256x256 input  - target <= 40 ms
* defect_type: a 224x224 crop                                                          - target <= 30 ms
* surface_anomaly: a 1920x1080 RGB image at the working size 288x512                   - target <= 100 ms

"inference" is the ONNX Runtime call; "total" adds preprocessing and postprocessing. ONNX Runtime uses the
CPU execution provider with 2 intra-op threads when the direct ONNX Runtime backend is used. The float16
model runs on CPU through casts ONNX Runtime inserts, so its CPU latency is only informative: float16 is
the GPU form.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np

from . import card, common, synth
from .pipeline import open_model

TARGETS_MS = {"surface_defects": 200, "nuclei": 40, "defect_type": 30, "surface_anomaly": 100}


def bench_image(name: str) -> np.ndarray:
    if name.startswith("surface"):
        return synth.surface_image(synth.rng_for(common.EVAL_SEED, 0, "bench"), 1080, 1920)[0]
    if name.startswith("nuclei"):
        return synth.nuclei_image(synth.rng_for(common.EVAL_SEED, 0, "bench"), 512)[0]
    return synth.defect_crop(synth.rng_for(common.EVAL_SEED, 0, "bench"), 1)


def bench(name: str, runs: int, backend: str) -> dict:
    r = open_model(name, backend)
    img = bench_image(name)
    for _ in range(3):
        r.run(img)
    inf, tot = [], []
    for _ in range(runs):
        _, _, ms = r.run(img)
        inf.append(ms["inference"])
        tot.append(sum(ms.values()))
    res = {
        "latency_ms_median": round(float(np.median(inf)), 1),
        "latency_total_ms_median": round(float(np.median(tot)), 1),
        "latency_ms_p90": round(float(np.percentile(inf, 90)), 1),
        "latency_image": "x".join(map(str, img.shape[:2][::-1])),
        "latency_runs": runs,
        "latency_backend": r.backend,
        "latency_cpu": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }
    print(f"{name}: inference median {res['latency_ms_median']} ms (p90 {res['latency_ms_p90']}), "
          f"total {res['latency_total_ms_median']} ms on {res['latency_image']} ({r.backend})")
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", default=["surface_defects", "nuclei", "nuclei_fp16", "defect_type",
                                                         "surface_anomaly"])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--backend", choices=["auto", "app", "ort"], default="auto")
    ap.add_argument("--no-card", action="store_true")
    args = ap.parse_args(argv)
    res = {n: bench(n, args.runs, args.backend) for n in args.names}
    if not args.no_card:
        common.save_results(res)
        card.update()
    fails = [f"{n}: {res[n]['latency_ms_median']} ms > {t} ms" for n, t in TARGETS_MS.items()
             if n in res and res[n]["latency_ms_median"] > t]
    for f in fails:
        print(f"TARGET MISSED: {f}", file=sys.stderr)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
