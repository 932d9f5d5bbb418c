"""Training of the surface_instances demo model (instances_net.InstanceNet): target assignment, losses and the
batch sampler. Run it as ``python -m models.training.train surface_instances``.

- **Assignment** (anchor-free, one level per object): an object goes to stride 8, 16 or 32 by the longer side of
  its box (< 64, < 160, else); of the cells of that level that the object's mask touches (a thin scratch: the
  cells along it, not the empty corners of its box) the TOP_K nearest its centre pixel are its positives; a cell
  two objects claim goes to the smaller one. Every other cell is a negative for every class.
- **Losses**: classification = varifocal-style BCE whose positive target is the IoU of the cell's predicted box
  with its object's box (so the score says how well the cell localises: the best-placed of an object's cells wins
  NMS), negatives weighted 0.75 p^2; box = 1 - GIoU; mask = BCE of sigmoid(coefficients . prototypes) upsampled
  to the input's pixels (as the predictors do) against the object's mask, inside its box and normalised by the
  box's area (YOLACT's, Ultralytics'), plus Dice inside the box, for at most MASKS_PER_IMAGE positives per image.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from . import common
from . import instances_data as data
from .instances_net import InstanceNet, cell_centres

LEVEL_EDGES = (64.0, 160.0)  # longer box side (input pixels) below which an object goes to stride 8, 16
MASKS_PER_IMAGE = 24
TOP_K = 9  # positives per object: its cells nearest its centre
CROP = 256
CENTRED = 0.8  # fraction of crops centred near an object


def level_of(box: tuple[float, float, float, float]) -> int:
    side = max(box[2] - box[0], box[3] - box[1])
    return sum(side >= e for e in LEVEL_EDGES)


def assign(objs: list[data.Obj], shapes: list[tuple[int, int]], strides) -> np.ndarray:
    """Object index per cell (all levels, row-major each, concatenated); -1 for a negative."""
    offsets = np.cumsum([0] + [h * w for h, w in shapes])
    idx = np.full(offsets[-1], -1, np.int64)
    area = np.full(offsets[-1], np.inf)
    for g, o in enumerate(objs):
        lvl = level_of(o.box())
        s, (h, w) = strides[lvl], shapes[lvl]
        ys, xs = np.nonzero(o.mask)
        cells = np.unique(np.minimum((o.y0 + ys) // s, h - 1) * w + np.minimum((o.x0 + xs) // s, w - 1))
        cells = central(cells, w, s, o.y0 + ys, o.x0 + xs) + offsets[lvl]
        a = float(len(ys))
        take = cells[a < area[cells]]
        idx[take], area[take] = g, a
    return idx


def central(cells: np.ndarray, w: int, s: int, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """The TOP_K of an object's cells nearest its centre pixel (its mask pixel nearest its centroid): the cells
    far along a long scratch stay negatives, or each would claim its own piece of the scratch."""
    c = int(np.argmin((ys - ys.mean()) ** 2 + (xs - xs.mean()) ** 2))
    d = ((cells // w + 0.5) * s - ys[c] - 0.5) ** 2 + ((cells % w + 0.5) * s - xs[c] - 0.5) ** 2
    return cells[np.argsort(d, kind="stable")[:TOP_K]]


def box_iou_giou(p: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """IoU and GIoU of matching rows of x0, y0, x1, y1 boxes."""
    iw = (torch.minimum(p[:, 2], g[:, 2]) - torch.maximum(p[:, 0], g[:, 0])).clamp_min(0)
    ih = (torch.minimum(p[:, 3], g[:, 3]) - torch.maximum(p[:, 1], g[:, 1])).clamp_min(0)
    inter = iw * ih
    union = (p[:, 2] - p[:, 0]) * (p[:, 3] - p[:, 1]) + (g[:, 2] - g[:, 0]) * (g[:, 3] - g[:, 1]) - inter
    iou = inter / union.clamp_min(1e-6)
    cw = torch.maximum(p[:, 2], g[:, 2]) - torch.minimum(p[:, 0], g[:, 0])
    ch = torch.maximum(p[:, 3], g[:, 3]) - torch.minimum(p[:, 1], g[:, 1])
    hull = (cw * ch).clamp_min(1e-6)
    return iou, iou - (hull - union) / hull


class InstanceLoss:
    """The three losses of one batch; ``last`` keeps their values for the log."""

    def __init__(self, strides, nc: int):
        self.strides, self.nc = strides, nc
        self.last: dict[str, float] = {}

    def __call__(self, output, targets: list[list[data.Obj]]) -> torch.Tensor:
        outs, protos = output
        shapes = [tuple(d.shape[2:]) for d, _, _ in outs]
        dist = torch.cat([d.flatten(2) for d, _, _ in outs], 2)  # B, 4, N
        logits = torch.cat([c.flatten(2) for _, c, _ in outs], 2)  # B, nc, N
        coef = torch.cat([k.flatten(2) for _, _, k in outs], 2)  # B, 32, N
        cx, cy = (torch.cat(v) for v in zip(*(cell_centres(h, w, s) for (h, w), s in zip(shapes, self.strides))))
        target = torch.zeros_like(logits)
        box_terms, mask_terms, npos = [], [], 0
        for b, objs in enumerate(targets):
            if not objs:
                continue
            idx = torch.from_numpy(assign(objs, shapes, self.strides))
            pos = torch.nonzero(idx >= 0).squeeze(1)
            g = idx[pos]
            gt = torch.tensor([o.box() for o in objs], dtype=torch.float32)[g]
            d = dist[b, :, pos]
            pred = torch.stack([cx[pos] - d[0], cy[pos] - d[1], cx[pos] + d[2], cy[pos] + d[3]], 1)
            iou, giou = box_iou_giou(pred, gt)
            cls = torch.tensor([o.cls for o in objs])[g]
            target[b, cls, pos] = iou.detach().clamp_min(0.0)
            box_terms.append((1 - giou).sum())
            npos += len(pos)
            mask_terms.append(self.mask_loss(coef[b, :, pos], protos[b], objs, g, gt))
        p = torch.sigmoid(logits)
        weight = torch.where(target > 0, torch.ones_like(p), 0.75 * p.detach() ** 2)
        cls_loss = (F.binary_cross_entropy_with_logits(logits, target, reduction="none") * weight).sum()
        n = max(npos, 1)
        box_loss = torch.stack(box_terms).sum() / n if box_terms else logits.sum() * 0
        mask_loss = torch.stack(mask_terms).mean() if mask_terms else logits.sum() * 0
        self.last = {"cls": cls_loss.item() / n, "box": box_loss.item(), "mask": mask_loss.item()}
        return cls_loss / n + 2.0 * box_loss + mask_loss

    def mask_loss(self, coef: torch.Tensor, protos: torch.Tensor, objs, g: torch.Tensor, gt: torch.Tensor):
        """BCE + Dice of at most MASKS_PER_IMAGE positives' masks at the input's pixels, inside their boxes."""
        keep = torch.randperm(len(g))[:MASKS_PER_IMAGE]
        coef, g, gt = coef[:, keep], g[keep], gt[keep]
        size = (protos.shape[1] * 4, protos.shape[2] * 4)
        m = (coef.T @ protos.flatten(1)).view(len(g), *protos.shape[1:])
        m = F.interpolate(m[None], size=size, mode="bilinear", align_corners=False)[0]
        truth = torch.zeros(len(objs), *size)
        for i, o in enumerate(objs):
            truth[i, o.y0:o.y0 + o.mask.shape[0], o.x0:o.x0 + o.mask.shape[1]] = torch.from_numpy(o.mask)
        truth = truth[g]
        ys = torch.arange(size[0], dtype=torch.float32)[None, :, None] + 0.5
        xs = torch.arange(size[1], dtype=torch.float32)[None, None, :] + 0.5
        inside = ((xs >= gt[:, 0, None, None]) & (xs < gt[:, 2, None, None]) & (ys >= gt[:, 1, None, None])
                  & (ys < gt[:, 3, None, None])).float()
        bce = (F.binary_cross_entropy_with_logits(m, truth, reduction="none") * inside).sum((1, 2))
        bce = bce / inside.sum((1, 2)).clamp_min(1)
        prob = torch.sigmoid(m) * inside
        dice = 1 - (2 * (prob * truth).sum((1, 2)) + 1) / (prob.sum((1, 2)) + truth.sum((1, 2)) + 1)
        return (bce + dice).mean()


def frames(n_full: int, n_direct: int, seed: int, procs: int = 2):
    from .train import _pmap

    return _pmap(data.train_item, [(seed, i, i < n_full) for i in range(n_full + n_direct)], procs)


def sampler(items, rng: np.random.Generator, batch: int, size: int = CROP):
    """``next_batch(step)``: `batch` random crops (most centred near an object), flipped and rotated."""
    H, W = data.IMGSZ
    with_objs = [i for i, (_, objs) in enumerate(items) if objs]

    def next_batch(step):
        xs, ys = [], []
        for _ in range(batch):
            if rng.random() < CENTRED and with_objs:
                i = with_objs[rng.integers(len(with_objs))]
                o = items[i][1][rng.integers(len(items[i][1]))]
                cy, cx = o.y0 + o.mask.shape[0] // 2, o.x0 + o.mask.shape[1] // 2
                y = int(np.clip(cy - size // 2 + rng.integers(-size // 3, size // 3 + 1), 0, H - size))
                x = int(np.clip(cx - size // 2 + rng.integers(-size // 3, size // 3 + 1), 0, W - size))
            else:
                i = int(rng.integers(len(items)))
                y, x = int(rng.integers(H - size + 1)), int(rng.integers(W - size + 1))
            img, objs = data.augment(rng, *data.crop(*items[i], y, x, size))
            xs.append(img)
            ys.append(objs)
        x = torch.from_numpy(np.stack(xs)).permute(0, 3, 1, 2).float() / 255.0
        return x, ys

    return next_batch


def train_instances(steps: int, seed: int, n_full: int = 160, n_direct: int = 240, batch: int = 8,
                    lr: float = 4e-3, resume: Path | None = None) -> InstanceNet:
    """Schedule 1 from scratch (lr 4e-3); with `resume` (a checkpoint) schedule 2 from it at half the rate."""
    from .train import fit

    t = time.time()
    items = frames(n_full, n_direct, seed=common.TRAIN_SEED)
    counts = np.bincount([o.cls for _, objs in items for o in objs], minlength=len(data.NAMES))
    print(f"surface_instances: {len(items)} training frames in {time.time() - t:.0f} s; objects per class "
          f"{dict(zip(data.NAMES, counts.tolist()))}", flush=True)
    model = InstanceNet(nc=len(data.NAMES), strides=data.STRIDES)
    if resume is not None:
        model.load_state_dict(torch.load(resume, map_location="cpu", weights_only=True))
        lr /= 2
    loss = InstanceLoss(data.STRIDES, len(data.NAMES))
    fit(model, sampler(items, np.random.default_rng(seed), batch), loss, steps, lr=lr, tag="surface_instances",
        log_every=50)
    print(f"  last batch: {loss.last}", flush=True)
    return model
