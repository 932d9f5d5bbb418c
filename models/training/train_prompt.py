"""Train the demo prompt model (prompt_demo): ``python -m models.training.train_prompt [--steps N]``.

Scenes from the surface, nuclei and CT generators (``prompt_data.pool``, seed TRAIN_SEED), one object per batch
item, prompted by one positive click (at the farthest interior point or anywhere inside) or by a jittered box,
then corrected as the interactive protocol does: 1-3 rounds, each adding a click at the largest error region of
the previous round's own prediction (previous logits fed as ``mask_input`` half of the time); only the last
round carries the gradient. Loss: BCE + Dice on each of the 3 mask heads (the network's logits, before the
decoder's keep_connected), MSE of the IoU head against the IoU its output reached. One CPU thread, AdamW,
one-cycle schedule. Then ``export_prompt`` writes the ONNX pair and sidecar.

The bundled pair: ``--steps 2400`` from scratch, then a second schedule ``--resume --steps 4000 --max-lr 2e-3``
(the first schedule of the bundled pair ran before the Refine blocks, the kind weights and keep_connected existed:
its checkpoint resumed with the Refine blocks starting as the identity).
"""

from __future__ import annotations

import argparse
import os
import time

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from . import common, prompt_data
from .prompt_data import GRID
from .prompt_nets import STRIDE256, Decoder, Encoder, _gauss, up2

CKPT = common.RUNS_DIR / os.environ.get("PROMPT_DEMO_CKPT", "prompt_demo.pt")
MEAN = np.array(common.IMAGENET_MEAN_01, np.float32)
STD = np.array(common.IMAGENET_STD_01, np.float32)
BATCH = 8


def normalise(img: np.ndarray) -> np.ndarray:
    """uint8 HxWx3 -> float32 3xHxW, ImageNet mean/std on 0..1 (the sidecar's)."""
    return ((img.astype(np.float32) / 255.0 - MEAN) / STD).transpose(2, 0, 1)


def _augment(img: np.ndarray, m: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    k = int(rng.integers(4))
    img, m = np.rot90(img, k), np.rot90(m, k)
    if rng.random() < 0.5:
        img, m = img[:, ::-1], m[:, ::-1]
    if img.shape[0] == img.shape[1] and rng.random() < 0.25:  # a letterboxed (non-square) frame
        h = int(rng.integers(128, GRID))
        ys = np.nonzero(m.any(1))[0]
        lo = int(np.clip((ys[0] + ys[-1]) // 2 - h // 2, 0, GRID - h))
        img, m = img[lo:lo + h], m[lo:lo + h]
    img = np.clip(img.astype(np.float32) * rng.uniform(0.8, 1.2) + rng.uniform(-20, 20), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(img), np.ascontiguousarray(m)


def _frame(x: float, rng: np.random.Generator | None = None) -> float:
    """Internal pixel -> a 1024-frame pixel inside it (random, or its centre pixel)."""
    return 4 * x + (int(rng.integers(4)) if rng is not None else 1)


def _first_prompt(m: np.ndarray, rng: np.random.Generator) -> list[tuple[float, float, int]]:
    if rng.random() < 0.3:  # a box, corners jittered by ~5 % of its size
        ys, xs = np.nonzero(m)
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        j = 0.05 * np.array([x1 - x0, y1 - y0, x1 - x0, y1 - y0]) * rng.standard_normal(4)
        b = np.clip(np.array([x0, y0, x1, y1]) + j, 0, GRID) * 4
        pts = [(float(b[0]), float(b[1]), 2), (float(b[2]) - 1, float(b[3]) - 1, 3)]
    elif rng.random() < 0.5:
        x, y = prompt_data.farthest_point(m)
        pts = [(_frame(x, rng), _frame(y, rng), 1)]
    else:
        ys, xs = np.nonzero(m)
        i = int(rng.integers(len(xs)))
        pts = [(_frame(xs[i], rng), _frame(ys[i], rng), 1)]
    if rng.random() < 0.15:  # a stray negative click outside the object
        ys, xs = np.nonzero(~m)
        i = int(rng.integers(len(xs)))
        pts.append((_frame(xs[i], rng), _frame(ys[i], rng), 0))
    return pts


def _crop(x: np.ndarray, t: np.ndarray, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A size x size window of the frame holding the object's box (which must fit)."""
    ys, xs = np.nonzero(t)
    lo_y = int(rng.integers(max(0, ys.max() + 1 - size), min(ys.min(), GRID - size) + 1))
    lo_x = int(rng.integers(max(0, xs.max() + 1 - size), min(xs.min(), GRID - size) + 1))
    return x[:, lo_y:lo_y + size, lo_x:lo_x + size], t[lo_y:lo_y + size, lo_x:lo_x + size]


# how often each domain and kind is drawn (relative): the small, thin and faint objects that failed the first
# schedule (rib pieces, scratches, stains, pits) more, the nuclei (already good) and the lungs (easy) less
DOMAIN_WEIGHT = {"surface": 0.4, "ct": 0.35, "nuclei": 0.25}
KIND_WEIGHT = {"scratch": 2.0, "pit": 1.5, "stain": 1.5, "bone": 2.0, "body": 1.5, "lung": 0.5, "nucleus": 1.0}


def _pick(pool: list, rng: np.random.Generator, size: int) -> tuple:
    """A random (scene, object) whose box fits a size-pixel window (rejection sampling); the domain, then the kind
    of object first (a CT slice has a body, two lungs and a dozen rib pieces: drawn alike, the body would hardly
    ever come), by DOMAIN_WEIGHT and KIND_WEIGHT."""
    by_domain = {d: [sc for sc in pool if sc.domain == d] for d in DOMAIN_WEIGHT}
    domains = [d for d in DOMAIN_WEIGHT if by_domain[d]]
    dw = np.array([DOMAIN_WEIGHT[d] for d in domains])
    while True:
        scenes = by_domain[domains[int(rng.choice(len(domains), p=dw / dw.sum()))]]
        sc = scenes[int(rng.integers(len(scenes)))]
        kinds = sorted(set(sc.kinds))
        kw = np.array([KIND_WEIGHT.get(k, 1.0) for k in kinds])
        kind = kinds[int(rng.choice(len(kinds), p=kw / kw.sum()))]
        ks = [k for k, name in enumerate(sc.kinds) if name == kind]
        m = sc.objects[ks[int(rng.integers(len(ks)))]]
        ys, xs = np.nonzero(m)
        if size >= GRID or max(np.ptp(ys), np.ptp(xs)) < size - 8:
            return sc, m


def batch(pool: list, rng: np.random.Generator, size: int, n: int):
    """(images [n,3,size,size], truths bool [n,size,size], prompts per item): whole 256 frames, or crops of
    them holding the object (most objects are small: the crops make a step 4x cheaper)."""
    xs, ts, prompts = [], [], []
    for _ in range(n):
        sc, m = _pick(pool, rng, size)
        img, m = _augment(sc.image, m, rng)
        x = np.zeros((3, GRID, GRID), np.float32)
        if rng.random() < 0.5:  # the padding is pixel 0 before normalisation (else 0 after it, as SAM's)
            x[:] = (-MEAN / STD)[:, None, None]
        x[:, : img.shape[0], : img.shape[1]] = normalise(img)
        t = np.zeros((GRID, GRID), bool)
        t[: m.shape[0], : m.shape[1]] = m
        if size < GRID:
            x, t = _crop(x, t, size, rng)
        xs.append(x)
        ts.append(t)
        prompts.append(_first_prompt(t, rng))
    return torch.from_numpy(np.stack(xs)), np.stack(ts), prompts


def pack(prompts: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompts per item -> (coords [B,N,2], labels [B,N]) padded with label -1."""
    n = max(len(p) for p in prompts)
    c = np.zeros((len(prompts), n, 2), np.float32)
    lab = -np.ones((len(prompts), n), np.float32)
    for i, p in enumerate(prompts):
        for j, (x, y, lb) in enumerate(p):
            c[i, j], lab[i, j] = (x, y), lb
    return torch.from_numpy(c), torch.from_numpy(lab)


def losses(masks: torch.Tensor, iou: torch.Tensor, t: torch.Tensor, *, out: torch.Tensor | None = None
           ) -> torch.Tensor:
    """BCE + Dice on the logits ``masks``, MSE of the IoU head against the IoU that ``out`` (the output logits,
    after keep_connected; ``masks`` when None) reaches."""
    tt = t[:, None].expand_as(masks)
    bce = F.binary_cross_entropy_with_logits(masks, tt)
    p = torch.sigmoid(masks)
    dice = 1 - (2 * (p * tt).sum((2, 3)) + 1) / (p.sum((2, 3)) + tt.sum((2, 3)) + 1)
    hard = ((masks if out is None else out) > 0).float()
    inter = (hard * tt).sum((2, 3))
    real = inter / ((hard + tt).clamp(max=1).sum((2, 3))).clamp(min=1)
    return bce + dice.mean() + F.mse_loss(iou, real.detach())


def _connected(raw: torch.Tensor, coords: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """keep_connected run to the end (OpenCV's connected components, 8-neighbours as its 3x3 dilations): the
    same output at a fraction of the cost of its in-graph dilations on a training batch."""
    fg = (raw.amax(1) > 0).numpy().astype(np.uint8)
    pos = (labels == 1).to(torch.float32)
    near = (_gauss(coords + 0.5, raw.shape[-1], STRIDE256, 8.0) * pos[..., None, None]).amax(1).numpy() > 0.3
    keep = np.ones(fg.shape, bool)
    for i in range(len(fg)):
        if pos[i].sum() > 0:
            _, lab = cv2.connectedComponents(fg[i], connectivity=8)
            keep[i] = np.isin(lab, np.unique(lab[near[i] & (fg[i] > 0)]))
            keep[i] &= fg[i] > 0
    k = torch.from_numpy(keep)[:, None]
    return torch.where(k, raw, torch.clamp(raw, max=-1.0))


def step_loss(enc, dec, pool, rng) -> tuple[torch.Tensor, float]:
    size, n = (GRID, BATCH // 2) if rng.random() < 0.4 else (GRID // 2, BATCH)
    x, truth, prompts = batch(pool, rng, size, n)
    f0, f1, f2, f3 = enc(x)
    ctx = dec.context(f0, f1, f2, up2(f3))
    rounds = int(rng.integers(1, 4))
    mask_in = torch.zeros(n, 1, size, size)
    has = torch.zeros(n)
    for r in range(rounds):
        coords, labels = pack(prompts)
        last = r == rounds - 1
        with torch.set_grad_enabled(last):
            raw, iou = dec.prompted(ctx, coords, labels, mask_in, has, raw=True)
        # the loss on the network's own logits; the clicks, mask_input and IoU target from what it outputs
        with torch.no_grad():
            masks = _connected(raw, coords, labels) if dec.connect else raw
        if last:
            break
        pred = (masks[:, 0] > 0).numpy()
        for i in range(n):
            c = prompt_data.correction_click(pred[i], truth[i])
            if c is not None:
                prompts[i] = prompts[i] + [(_frame(c[0]), _frame(c[1]), c[2])]
        use = rng.random() < 0.5
        mask_in = masks[:, :1].detach() if use else torch.zeros(n, 1, size, size)
        has = torch.full((n,), 1.0 if use else 0.0)
    t = torch.from_numpy(truth.astype(np.float32))
    with torch.no_grad():
        iou_now = float(((masks[:, 0] > 0) & (t > 0)).sum() / ((masks[:, 0] > 0) | (t > 0)).sum().clamp(min=1))
    return losses(raw, iou, t, out=masks), iou_now


def train(steps: int, n_scenes: int, *, max_lr: float = 3e-3, resume: bool = False) -> dict:
    """Train from scratch (or go on from the checkpoint: ``resume``); save the checkpoint; return the training
    facts for results.json."""
    torch.set_num_threads(1)
    torch.manual_seed(common.TRAIN_SEED)
    t0 = time.time()
    pool = prompt_data.pool(common.TRAIN_SEED, n_scenes)
    print(f"pool: {len(pool)} scenes, {sum(len(s.objects) for s in pool)} objects, {time.time() - t0:.0f} s",
          flush=True)
    enc, dec = Encoder(), Decoder()
    if resume:
        ck = torch.load(CKPT, map_location="cpu")
        # strict=False: blocks added since (Refine, zero-started) are missing from an older checkpoint
        missing = enc.load_state_dict(ck["encoder"], strict=False).missing_keys
        missing += dec.load_state_dict(ck["decoder"], strict=False).missing_keys
        print(f"resumed from {CKPT.name}; new: {sorted({k.split('.')[0] for k in missing})}", flush=True)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.AdamW(params, lr=max_lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=steps, pct_start=0.1)
    rng = np.random.default_rng(common.TRAIN_SEED + (1000 if resume else 0))
    run_loss, run_iou = 0.0, 0.0
    for s in range(1, steps + 1):
        loss, iou_now = step_loss(enc, dec, pool, rng)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        run_loss, run_iou = 0.98 * run_loss + 0.02 * float(loss.detach()), 0.98 * run_iou + 0.02 * iou_now
        if s % 50 == 0:
            print(f"step {s}/{steps} loss {run_loss:.3f} iou {run_iou:.3f} {time.time() - t0:.0f} s", flush=True)
        if s % 250 == 0 or s == steps:
            save(enc, dec)
    return {"train_steps": steps, "train_scenes": len(pool), "train_minutes": round((time.time() - t0) / 60, 1),
            "train_threads": 1, "batch": BATCH}


def save(enc: Encoder, dec: Decoder) -> None:
    CKPT.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"encoder": enc.state_dict(), "decoder": dec.state_dict(), "proto": dec.proto,
                "connect": dec.connect}, CKPT)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2400)
    ap.add_argument("--scenes", type=int, default=300, help="scenes per domain")
    ap.add_argument("--resume", action="store_true", help="go on from the checkpoint (a second schedule)")
    ap.add_argument("--max-lr", type=float, default=3e-3)
    args = ap.parse_args()
    facts = train(args.steps, args.scenes, max_lr=args.max_lr, resume=args.resume)
    if args.resume:  # the facts of the whole recipe: the schedules before this one and this one
        before = common.load_results().get("prompt_demo", {})
        schedules = [*before.get("train_schedules", [before.get("train_steps", 0)]), args.steps]
        facts |= {"train_steps": sum(schedules), "train_schedules": schedules,
                  "train_minutes": round(before.get("train_minutes", 0.0) + facts["train_minutes"], 1)}
    common.save_results({"prompt_demo": facts})
    from . import export_prompt

    export_prompt.main()


if __name__ == "__main__":
    main()
