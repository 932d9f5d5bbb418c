"""Train the 3D demo model (ct3d_demo) from scratch on synthetic chest-CT phantoms, then export it to ONNX.

    .venv/bin/python -m models.training.train3d                 # ~25 min on one CPU thread
    .venv/bin/python -m models.training.train3d --steps 20 --no-export   # a smoke run

Data: N_TRAIN phantom volumes of TRAIN_SEED (``phantom3d``: native 2.5-3 mm slices x 0.7-0.9 mm pixels), each
resampled linearly to the model's 1.5 mm grid as the app resamples it; the targets are the exact fraction of each
model voxel covered by each class, and for the lesions a distance ramp (``phantom3d.lesion_ramp``), so the network
learns partial volume and its probabilities, interpolated back to the native grid, put each boundary between
model voxels where it belongs. Random 48³ crops, a third centred
near a lesion; flips along every axis and H/W transposes (robustness: the sidecar says ``axes: SPL``, so SegLens
reorients every volume to the phantoms' order). Loss: soft-target cross-entropy + soft Dice over lung, bone and lesion.
The checkpoint goes to models/training/runs/ct3d_demo.pt (git-ignored, uncalibrated); then ``calibrate3d`` fits the
lesion logit's offset on held-out calibration phantoms and the calibrated ONNX file and sidecar go to models/.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import common, common3d, export3d, nets3d, train

CROP = 48
BATCH = 2
STEPS = 4000
LR = 5e-3


def load_data(n: int, seed: int = common.TRAIN_SEED):
    """The training volumes on the model grid: HU float32 and soft targets (uint8, 1/255), and each one's lesion
    voxels (crop centres)."""
    hus, covs, lesion_at = [], [], []
    for i in range(n):
        hu, cov, _ = common3d.model_item(seed, i)
        hus.append(hu)
        covs.append(cov)
        lesion_at.append(np.argwhere(cov[3] >= 128))
    return hus, covs, lesion_at


def _crop_start(rng, shape, centre=None):
    start = []
    for n, c in zip(shape, centre if centre is not None else [None] * 3):
        hi = max(n - CROP, 0)
        s = rng.integers(0, hi + 1) if c is None else int(c) - CROP // 2 + rng.integers(-CROP // 4, CROP // 4 + 1)
        start.append(int(np.clip(s, 0, hi)))
    return start


def _pad(a: np.ndarray, value: float) -> np.ndarray:
    pad = [(0, 0)] * (a.ndim - 3) + [(0, max(0, CROP - n)) for n in a.shape[-3:]]
    return np.pad(a, pad, constant_values=value) if any(p[1] for p in pad) else a


def batches(hus, covs, lesion_at, mean: float, std: float, seed: int):
    """``next_batch(step)`` for train.fit: (x [B,1,48,48,48], soft targets [B,4,48,48,48])."""
    rng = np.random.default_rng(seed)

    def next_batch(step):
        xs, ys = [], []
        for _ in range(BATCH):
            i = int(rng.integers(len(hus)))
            centre = None
            if rng.random() < 1 / 3 and len(lesion_at[i]):
                centre = lesion_at[i][rng.integers(len(lesion_at[i]))]
            d, h, w = _crop_start(rng, hus[i].shape, centre)
            win = (slice(d, d + CROP), slice(h, h + CROP), slice(w, w + CROP))
            x = _pad(common3d.normalize(hus[i][win], mean, std), (common3d.CLIP[0] - mean) / std)
            y = covs[i][(slice(None), *win)].astype(np.float32) / 255
            y = _pad(y, 0.0)
            y[0] += 1.0 - y.sum(0)  # padding is background (air)
            for axis in range(3):
                if rng.random() < 0.5:
                    x, y = np.flip(x, axis), np.flip(y, axis + 1)
            if rng.random() < 0.5:
                x, y = x.transpose(0, 2, 1), y.transpose(0, 1, 3, 2)
            xs.append(np.ascontiguousarray(x)[None])
            ys.append(np.ascontiguousarray(y))
        return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))

    return next_batch


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Soft-target cross-entropy + soft Dice over the foreground classes (per channel over the batch)."""
    probs = torch.softmax(logits, 1)
    dims = (0, 2, 3, 4)
    inter = (probs * target).sum(dims)[1:]
    denom = (probs.sum(dims) + target.sum(dims))[1:]
    dice = 1 - ((2 * inter + 1.0) / (denom + 1.0)).mean()
    return F.cross_entropy(logits, target) + dice


def train_ct3d(steps: int, seed: int, n_volumes: int = common3d.N_TRAIN):
    t = time.time()
    hus, covs, lesion_at = load_data(n_volumes)
    mean, std = common3d.dataset_stats(hus)
    common3d.SIDECAR["input"]["normalize"].update(mean=mean, std=std)
    frac = np.mean([c.reshape(4, -1).mean(1) / 255 for c in covs], axis=0)
    print(f"ct3d_demo: {len(hus)} training volumes in {time.time() - t:.0f} s; HU mean {mean}, std {std}; "
          f"class fractions {np.round(frac, 4)}", flush=True)
    model = nets3d.UNet3D()
    train.init_prior(model.head, frac)
    train.fit(model, batches(hus, covs, lesion_at, mean, std, seed), loss_fn, steps, lr=LR, tag="ct3d_demo",
              log_every=100)
    return model, mean, std


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--seed", type=int, default=0, help="seed of weights init and batch sampling")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--volumes", type=int, default=common3d.N_TRAIN)
    ap.add_argument("--out", type=Path, default=common.MODELS_DIR, help="where the ONNX file and sidecar go")
    ap.add_argument("--no-export", action="store_true")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal gradients make CPU convolutions several times slower
    torch.manual_seed(args.seed)
    t0 = time.time()
    model, mean, std = train_ct3d(args.steps, args.seed, args.volumes)
    common.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    torch.save({"state": model.state_dict(), "mean": mean, "std": std}, common.RUNS_DIR / "ct3d_demo.pt")
    if not args.no_export:
        try:
            from . import calibrate3d

            # the lesion logit's offset, then the export (a smoke run calibrates on 2 volumes)
            calibrate3d.calibrate_and_export(model, args.out, 8 if args.steps == STEPS else 2)
        except export3d.ParityError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
    wall = time.time() - t0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru.ru_utime + ru.ru_stime
    print(f"ct3d_demo: trained and exported in {wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU", flush=True)
    if args.out.resolve() == common.MODELS_DIR.resolve() and args.steps == STEPS:
        common.save_results({common3d.NAME: {
            "train_minutes": round(wall / 60, 1), "train_cpu_minutes": round(cpu / 60, 1), "train_steps": args.steps,
            "train_threads": args.threads, "train_volumes": args.volumes, "train_crop": [CROP] * 3,
            "train_batch": BATCH}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
