"""Train a demo model from scratch on synthetic data, then export it to ONNX (with the parity check).

    .venv/bin/python -m models.training.train surface_defects   # ~10 min on 2 CPU cores
    .venv/bin/python -m models.training.train nuclei             # also writes nuclei_fp16.onnx
    .venv/bin/python -m models.training.train defect_type
    .venv/bin/python -m models.training.train surface_anomaly    # clean frames only; ~4 min
    .venv/bin/python -m models.training.train surface_instances --threads 1           # instances; ~6 min
    .venv/bin/python -m models.training.train surface_instances --threads 1 --resume  # its second schedule

Everything is seeded (data: common.TRAIN_SEED, weights/batches: --seed), so a rerun on the same machine
gives the same model. The checkpoint goes to models/training/runs/<name>.pt (git-ignored), the ONNX file and
sidecar to models/, and the wall time (data generation + training + export) to models/training/results.json.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import common, export, instances_train, nets

# ------------------------------------------------------------------------------------------------ losses


def dice_loss(probs: torch.Tensor, onehot: torch.Tensor, eps: float = 1.0) -> torch.Tensor:
    """1 - soft Dice, per channel over the whole batch, averaged over channels."""
    dims = (0, 2, 3)
    inter = (probs * onehot).sum(dims)
    denom = probs.sum(dims) + onehot.sum(dims)
    return 1 - ((2 * inter + eps) / (denom + eps)).mean()


def seg_loss_multiclass(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Class-weighted cross-entropy + Dice over the defect classes (target: N x H x W int64)."""
    n = logits.shape[1]
    ce = F.cross_entropy(logits, target, weight=weight)
    onehot = F.one_hot(target, n).permute(0, 3, 1, 2).float()
    return ce + dice_loss(torch.softmax(logits, 1)[:, 1:], onehot[:, 1:])


def seg_loss_binary(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BCE + Dice (target: N x 1 x H x W float 0/1)."""
    return F.binary_cross_entropy_with_logits(logits, target) + dice_loss(torch.sigmoid(logits), target)


# ------------------------------------------------------------------------------------------------ loop


def fit(model, next_batch, loss_fn, steps: int, lr: float, log_every: int = 100, tag: str = "") -> float:
    """Adam + one-cycle schedule; ``next_batch(step)`` returns (input tensor, target tensor)."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.15)
    model.train()
    t0, run = time.time(), None
    for step in range(steps):
        x, y = next_batch(step)
        loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        run = loss.item() if run is None else 0.95 * run + 0.05 * loss.item()
        if log_every and ((step + 1) % log_every == 0 or step == steps - 1) and tag:
            print(f"  {tag} step {step + 1}/{steps} loss {run:.4f} ({time.time() - t0:.0f} s)", flush=True)
    model.eval()
    return run if run is not None else math.nan


def _augment(rng: np.random.Generator, *arrays):
    """Same random flip / 90-degree rotation for all arrays (H x W [x C])."""
    k = int(rng.integers(4))
    fl = rng.random() < 0.5
    out = []
    for a in arrays:
        a = np.rot90(a, k, axes=(0, 1))
        out.append(np.ascontiguousarray(a[:, ::-1] if fl else a))
    return out


def _to_input(batch_u8: np.ndarray, name: str) -> torch.Tensor:
    """uint8 N x H x W x C at working size -> normalized float32 NCHW (sidecar scale/mean/std)."""
    inp = common.SIDECARS[name]["input"]
    x = torch.from_numpy(batch_u8).float() * float(inp["scale"])
    mean = torch.tensor(inp["mean"], dtype=torch.float32)
    std = torch.tensor(inp["std"], dtype=torch.float32)
    return ((x - mean) / std).permute(0, 3, 1, 2).contiguous()


# ------------------------------------------------------------------------------------------------ models


def _pmap(fn, args, procs: int = 2):
    """Generate data items in ``procs`` processes (each item depends only on its index: same result)."""
    if procs <= 1:
        return [fn(*a) for a in args]
    ctx = mp.get_context("fork")
    with ctx.Pool(procs) as pool:
        return pool.starmap(fn, args, chunksize=4)


def _surface_train_item(seed, i, full):
    """One frame at the working size, with the zero rows/columns the app adds for the size divisor (540 -> 544
    rows): the network must learn that a black border is background, not a scratch."""
    inp = common.SIDECARS["surface_defects"]["input"]
    img, lab = common.surface_item(seed, i, full_res=full)
    img, lab = common.resize_image(img, inp["size"]), common.resize_labels(lab, inp["size"], 4)
    ph, pw = -img.shape[0] % inp["size_divisor"], -img.shape[1] % inp["size_divisor"]
    return np.pad(img, ((0, ph), (0, pw), (0, 0))), np.pad(lab, ((0, ph), (0, pw)))


def data_surface(n_full: int, n_direct: int, seed: int = common.TRAIN_SEED, procs: int = 2):
    """Pool of (image, label) at the working size: full-resolution renders resized exactly as the app does,
    plus renders made directly at the working size."""
    items = _pmap(_surface_train_item, [(seed, i, i < n_full) for i in range(n_full + n_direct)], procs)
    return np.stack([a for a, _ in items]), np.stack([b for _, b in items])


def init_prior(head: torch.nn.Conv2d, fractions) -> None:
    """Start the output layer at the class prior (log-frequencies): training then spends its few hundred
    steps on the features instead of on learning that most pixels are background."""
    f = torch.tensor(fractions, dtype=torch.float32).clamp_min(1e-4)
    with torch.no_grad():
        head.bias.copy_(torch.log(f) - torch.log(f).mean() if len(f) > 1 else torch.log(f / (1 - f)))


# Defect pixels are ~1 % of a frame: small crops centred on defects (90 % of them) keep a few tens of percent
# of every batch on defects, which is what gets a from-scratch UNet past "all background" within the CPU budget
# (160 px crops at 60 % centring learned nothing in 1400 steps), and the class weights keep thin scratches from
# being traded for background. The last part of training (FINE_TUNE) shows larger crops, half of them anywhere,
# so that clean texture, plastic grain and the padded border stop producing specks of "scratch".
SURFACE_CLASS_WEIGHTS = (1.0, 4.0, 3.0, 2.0)
FINE_TUNE = 0.35  # fraction of the steps: 128 px crops, batch 8, 50 % centred


def train_surface(steps: int, seed: int, n_full: int = 240, n_direct: int = 120, crop=(80, 80), batch=16,
                  centred=0.9, lr=5e-3):
    t = time.time()
    imgs, labs = data_surface(n_full, n_direct)
    print(f"surface_defects: {len(imgs)} training images in {time.time() - t:.0f} s; class pixel fractions "
          f"{np.bincount(labs.ravel(), minlength=4) / labs.size}", flush=True)
    rng = np.random.default_rng(seed)
    H, W = imgs.shape[1:3]
    # pixels of each defect class (on a 2x2 grid), to centre crops on defects of a class chosen uniformly
    where = {k: [np.flatnonzero(lab[::2, ::2] == k) for lab in labs] for k in (1, 2, 3)}
    with_k = {k: [i for i in range(len(labs)) if len(where[k][i])] for k in (1, 2, 3)}
    wq = (W + 1) // 2

    def next_batch(step):
        xs, ys = [], []
        fine = step >= steps * (1 - FINE_TUNE)
        ch, cw = (128, 128) if fine else crop
        for _ in range(8 if fine else batch):
            i = int(rng.integers(len(imgs)))
            k = int(rng.integers(1, 4))
            if rng.random() < (0.5 if fine else centred) and with_k[k]:  # centre on a defect of class k
                i = with_k[k][rng.integers(len(with_k[k]))]
                p = where[k][i][rng.integers(len(where[k][i]))]
                cy, cx = (p // wq) * 2, (p % wq) * 2
                y0 = int(np.clip(cy - ch // 2 + rng.integers(-ch // 3, ch // 3 + 1), 0, H - ch))
                x0 = int(np.clip(cx - cw // 2 + rng.integers(-cw // 3, cw // 3 + 1), 0, W - cw))
            else:
                y0, x0 = int(rng.integers(H - ch + 1)), int(rng.integers(W - cw + 1))
            x, y = _augment(rng, imgs[i, y0 : y0 + ch, x0 : x0 + cw], labs[i, y0 : y0 + ch, x0 : x0 + cw])
            xs.append(x)
            ys.append(y)
        return _to_input(np.stack(xs), "surface_defects"), torch.from_numpy(np.stack(ys).astype(np.int64))

    model = nets.build_model("surface_defects")
    init_prior(model.head, np.bincount(labs.ravel(), minlength=4) / labs.size)
    weight = torch.tensor(SURFACE_CLASS_WEIGHTS)
    fit(model, next_batch, lambda o, y: seg_loss_multiclass(o, y, weight), steps, lr=lr, tag="surface_defects",
        log_every=200)
    return model


def _nuclei_train_item(seed, i):
    size = common.SIDECARS["nuclei"]["input"]["size"]
    img, m = common.nuclei_item(seed, i)
    return common.resize_image(img, size), common.resize_labels(m, size, 2)


def data_nuclei(n: int, seed: int = common.TRAIN_SEED, procs: int = 2):
    items = _pmap(_nuclei_train_item, [(seed, i) for i in range(n)], procs)
    return np.stack([a for a, _ in items]), np.stack([b for _, b in items])


def train_nuclei(steps: int, seed: int, n_images: int = 500, batch=12, crop=128):
    t = time.time()
    imgs, masks = data_nuclei(n_images)
    print(f"nuclei: {len(imgs)} training images in {time.time() - t:.0f} s; foreground {masks.mean():.3f}",
          flush=True)
    rng = np.random.default_rng(seed)

    def next_batch(step):
        idx = rng.integers(len(imgs), size=batch)
        ys, xs = rng.integers(0, imgs.shape[1] - crop + 1, batch), rng.integers(0, imgs.shape[2] - crop + 1, batch)
        pairs = [_augment(rng, imgs[i, y : y + crop, x : x + crop], masks[i, y : y + crop, x : x + crop])
                 for i, y, x in zip(idx, ys, xs)]
        x = _to_input(np.stack([p[0] for p in pairs])[..., None], "nuclei")
        y = torch.from_numpy(np.stack([p[1] for p in pairs])[:, None].astype(np.float32))
        return x, y

    model = nets.build_model("nuclei")
    init_prior(model.head, [float(masks.mean())])
    model.sigmoid = False  # train on logits (BCE-with-logits); the exported graph ends in Sigmoid
    fit(model, next_batch, seg_loss_binary, steps, lr=1e-2, tag="nuclei")
    model.sigmoid = True
    return model


def data_crops(n: int, seed: int = common.TRAIN_SEED, procs: int = 2):
    xs, ys = zip(*_pmap(common.crop_item, [(seed, i) for i in range(n)], procs))
    return np.stack(xs), np.asarray(ys, np.int64)


def train_defect_type(steps: int, seed: int, n_crops: int = 1200, batch=24):
    t = time.time()
    imgs, labels = data_crops(n_crops)
    print(f"defect_type: {len(imgs)} training crops in {time.time() - t:.0f} s", flush=True)
    rng = np.random.default_rng(seed)

    def next_batch(step):
        idx = rng.integers(len(imgs), size=batch)
        xs = [_augment(rng, imgs[i])[0] for i in idx]
        return _to_input(np.stack(xs), "defect_type"), torch.from_numpy(labels[idx])

    model = nets.build_model("defect_type")
    fit(model, next_batch, lambda o, y: F.cross_entropy(o, y, label_smoothing=0.05), steps, lr=5e-3,
        tag="defect_type")
    return model


def _anomaly_item(seed, i, full, defective=False):
    """One frame at the anomaly model's working size (stretched as the app does) and its defect mask."""
    size = common.SIDECARS["surface_anomaly"]["input"]["size"]
    img, m = common.anomaly_item(seed, i, defective, full_res=full)
    return common.resize_image(img, size), common.resize_labels(m, size, 2)


def data_anomaly(n_full: int, n_direct: int, seed: int = common.TRAIN_SEED, defective: bool = False,
                 procs: int = 2):
    """Clean frames (defective=False) at the working size: full-resolution renders resized exactly as the app
    does, plus renders made directly at the working size."""
    items = _pmap(_anomaly_item, [(seed, i, i < n_full, defective) for i in range(n_full + n_direct)], procs)
    return np.stack([a for a, _ in items]), np.stack([b for _, b in items])


def train_anomaly(steps: int, seed: int, n_full: int = 60, n_direct: int = 300, crop=128, batch=12, lr=3e-3):
    """Autoencoder on CLEAN frames only (no defect is ever shown): MSE reconstruction of random crops."""
    t = time.time()
    imgs, _ = data_anomaly(n_full, n_direct)
    print(f"surface_anomaly: {len(imgs)} clean training images in {time.time() - t:.0f} s", flush=True)
    rng = np.random.default_rng(seed)
    H, W = imgs.shape[1:3]

    def next_batch(step):
        xs = []
        for _ in range(batch):
            i = int(rng.integers(len(imgs)))
            y0, x0 = int(rng.integers(H - crop + 1)), int(rng.integers(W - crop + 1))
            xs.append(_augment(rng, imgs[i, y0 : y0 + crop, x0 : x0 + crop])[0])
        z = model.to_log(_to_input(np.stack(xs), "surface_anomaly"))
        return z, z

    model = nets.build_model("surface_anomaly")
    fit(_Recon(model), next_batch, F.mse_loss, steps, lr=lr, tag="surface_anomaly", log_every=200)
    model.eval()
    return model  # export.py calibrates the map scale and the thresholds on held-out clean frames


class _Recon(torch.nn.Module):
    """The autoencoder's reconstruction of log intensity alone (what training fits)."""

    def __init__(self, ae):
        super().__init__()
        self.ae = ae

    def forward(self, x):
        return self.ae.reconstruct(x)


def data_ct(n_volumes: int, per_volume: int, seed: int = common.TRAIN_SEED, procs: int = 2):
    """Windowed uint8 slices (what the app feeds the model) and labels of ``n_volumes`` phantom volumes."""
    from . import phantom

    items = _pmap(phantom.random_slices, [(seed, i, per_volume) for i in range(n_volumes)], procs)
    hu = np.concatenate([a for a, _ in items])
    return phantom.windowed(hu), np.concatenate([b for _, b in items])


CT_CLASS_WEIGHTS = (1.0, 1.0, 2.0)  # bone is thin (ribs): ~3 % of the pixels


def train_ct(steps: int, seed: int, n_volumes: int = 80, per_volume: int = 16, batch: int = 8, crop: int = 128,
             lr: float = 1e-2):
    """Random 128x128 crops of the 256x256 slices (4x cheaper than whole slices on CPU; the classes are told
    apart by local grey level and texture), left-right flips only (the spine must stay posterior)."""
    t = time.time()
    imgs, labs = data_ct(n_volumes, per_volume)
    frac = np.bincount(labs.ravel(), minlength=3) / labs.size
    print(f"ct_demo: {len(imgs)} training slices in {time.time() - t:.0f} s; class pixel fractions {frac}",
          flush=True)
    rng = np.random.default_rng(seed)

    def next_batch(step):
        idx = rng.integers(len(imgs), size=batch)
        flip = rng.random(batch) < 0.5
        y0, x0 = rng.integers(0, imgs.shape[1] - crop + 1, batch), rng.integers(0, imgs.shape[2] - crop + 1, batch)
        win = [(slice(a, a + crop), slice(b, b + crop)) for a, b in zip(y0, x0)]
        xs = np.stack([imgs[i][w][:, ::-1] if f else imgs[i][w] for i, f, w in zip(idx, flip, win)])
        ys = np.stack([labs[i][w][:, ::-1] if f else labs[i][w] for i, f, w in zip(idx, flip, win)])
        return _to_input(np.ascontiguousarray(xs)[..., None], "ct_demo"), torch.from_numpy(ys.astype(np.int64))

    model = nets.build_model("ct_demo")
    init_prior(model.head, frac)
    weight = torch.tensor(CT_CLASS_WEIGHTS)
    fit(model, next_batch, lambda o, y: seg_loss_multiclass(o, y, weight), steps, lr=lr, tag="ct_demo", log_every=50)
    return model


TRAINERS = {
    "ct_demo": (train_ct, 600),
    "surface_defects": (train_surface, 2600),
    "nuclei": (train_nuclei, 1000),
    "defect_type": (train_defect_type, 600),
    "surface_anomaly": (train_anomaly, 1000),
    "surface_instances": (instances_train.train_instances, 1200),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", choices=sorted(TRAINERS))
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the recipe's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of weights init and batch sampling")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=common.MODELS_DIR, help="where the ONNX files go")
    ap.add_argument("--no-export", action="store_true")
    ap.add_argument("--resume", action="store_true",
                    help="surface_instances: start from models/training/runs/<name>.pt (its second schedule)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal gradients make CPU convolutions several times slower
    torch.manual_seed(args.seed)
    trainer, default_steps = TRAINERS[args.name]
    steps = args.steps or default_steps
    t0 = time.time()
    model = trainer(steps, args.seed, **({"resume": common.RUNS_DIR / f"{args.name}.pt"} if args.resume else {}))
    common.RUNS_DIR.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), common.RUNS_DIR / f"{args.name}.pt")
    if not args.no_export:
        try:
            export.export_named(args.name, model, args.out)
        except export.ParityError as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
    wall = time.time() - t0
    ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(r.ru_utime + r.ru_stime for r in ru)
    print(f"{args.name}: trained and exported in {wall / 60:.1f} min wall, {cpu / 60:.1f} min CPU", flush=True)
    if args.out.resolve() == common.MODELS_DIR.resolve() and args.steps is None:
        load = os.getloadavg()[0]  # > ~2.5 on 2 cores: something else shared the machine during the run
        common.save_results({args.name: {
            "train_minutes": round(wall / 60, 1), "train_cpu_minutes": round(cpu / 60, 1), "train_steps": steps,
            "train_threads": args.threads,
            "train_note": f"load average {load:.1f} at the end" if load > 2.5 else None}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
