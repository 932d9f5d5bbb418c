"""A labelled OK / NG set for `seglens-cli calibrate surface_anomaly`: the anomaly demo model's own synthetic surfaces
(clean ones in DIR/ok, defective ones in DIR/ng) at its working size, numpy and OpenCV only (no torch).

    python -m models.training.calibration_set calib        # calib/ok: 60 clean, calib/ng: 200 defective
    seglens-cli calibrate surface_anomaly --ok calib/ok --ng calib/ng --max-fnr 0.01 --seed 7

The defaults (60 clean, 200 defective, seed 29, unseen in training) are the set docs/cli.md shows calibrated; the
tests calibrate the same surfaces (tests/calibrate_fixtures.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import cv2

from . import common

SEED = 29  # not a training seed: the model never saw these surfaces


def write_surfaces(folder: Path, count: int, *, defective: bool, seed: int = SEED) -> Path:
    """`count` clean (or defective) surfaces as ok_000.png … (ng_000.png …) in a new `folder`."""
    folder.mkdir(parents=True)
    for i in range(count):
        image, _ = common.anomaly_item(seed, i, defective, full_res=False)
        name = f"{'ng' if defective else 'ok'}_{i:03d}.png"
        cv2.imwrite(str(folder / name), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.training.calibration_set", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="a new folder: OUT/ok and OUT/ng are written")
    parser.add_argument("--ok-count", type=int, default=60, help="clean surfaces (default 60)")
    parser.add_argument("--ng-count", type=int, default=200, help="defective surfaces (default 200)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"the surfaces' seed (default {SEED})")
    args = parser.parse_args(argv)
    if (args.out / "ok").exists() or (args.out / "ng").exists():
        print(f"error: {args.out}/ok or {args.out}/ng exists already: give a new folder", file=sys.stderr)
        return 2
    write_surfaces(args.out / "ok", args.ok_count, defective=False, seed=args.seed)
    write_surfaces(args.out / "ng", args.ng_count, defective=True, seed=args.seed)
    print(f"{args.ok_count} clean surfaces in {args.out / 'ok'}, {args.ng_count} defective in {args.out / 'ng'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
