"""The surface_instances network: a small anchor-free instance-segmentation net whose exported graph has the
YOLOv8-seg output layout, so SegLens's YOLO path and Ultralytics' own predictor read it as they read a YOLOv8-seg
export (needs torch; the app never imports this).

- Backbone: strided 3x3 conv-BN-SiLU stages 16-32-48-64-96 (strides 2 to 32).
- Neck: top-down FPN-lite to 64 channels at strides 8, 16 and 32, then one bottom-up pass (PAN-lite).
- Head (shared by the three levels): two 3x3 convs, then 1x1 convs to 4 box distances (left, top, right,
  bottom in cells, softplus, times the level's stride and a learnt per-level scale), the class logits and
  32 mask coefficients.
- Prototypes: 32 channels at stride 4, from the stride-4 features and the stride-8 level.

``forward`` in training mode returns the raw per-level maps for the loss; in eval mode (what is exported) it
returns ``output0 [B, 4 + nc + 32, N]`` (centre x, centre y, w, h in input pixels, class probabilities after
sigmoid, mask coefficients; N = the cells of strides 8, 16, 32 in row-major order) and ``output1
[B, 32, H/4, W/4]`` (the prototypes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

MASK_DIM = 32


def cbs(cin: int, cout: int, k: int = 3, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.SiLU(inplace=True))


class InstanceNet(nn.Module):
    def __init__(self, nc: int = 3, width: int = 64, strides: tuple[int, ...] = (8, 16, 32)):
        super().__init__()
        self.nc, self.strides = nc, strides
        self.stem = nn.Sequential(cbs(3, 16, stride=2), cbs(16, 32, stride=2), cbs(32, 32))  # stride 4
        self.c3 = nn.Sequential(cbs(32, 48, stride=2), cbs(48, 48))
        self.c4 = nn.Sequential(cbs(48, 64, stride=2), cbs(64, 64))
        self.c5 = nn.Sequential(cbs(64, 96, stride=2), cbs(96, 96), cbs(96, 96))
        self.lat = nn.ModuleList([cbs(c, width, k=1) for c in (48, 64, 96)])
        self.smooth = nn.ModuleList([cbs(width, width) for _ in strides])
        self.down = nn.ModuleList([cbs(width, width, stride=2) for _ in strides[1:]])
        self.tower = nn.Sequential(cbs(width, width), cbs(width, width))
        self.box = nn.Conv2d(width, 4, 1)
        self.cls = nn.Conv2d(width, nc, 1)
        self.coef = nn.Conv2d(width, MASK_DIM, 1)
        self.scale = nn.Parameter(torch.ones(len(strides)))
        self.proto = nn.Sequential(cbs(32 + width, 48), cbs(48, 48), nn.Conv2d(48, MASK_DIM, 1))
        nn.init.constant_(self.cls.bias, -4.6)  # prior 0.01: training starts from "nothing here"

    def levels(self, x: torch.Tensor):
        """(per-level (box distances in pixels, class logits, coefficients), prototypes)."""
        s4 = self.stem(x)
        c3 = self.c3(s4)
        c4 = self.c4(c3)
        c5 = self.c5(c4)
        p5 = self.lat[2](c5)
        p4 = self.lat[1](c4) + F.interpolate(p5, scale_factor=2.0, mode="nearest")
        p3 = self.lat[0](c3) + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        p3 = self.smooth[0](p3)
        p4 = self.smooth[1](p4 + self.down[0](p3))
        p5 = self.smooth[2](p5 + self.down[1](p4))
        outs = []
        for i, (p, s) in enumerate(zip((p3, p4, p5), self.strides)):
            t = self.tower(p)
            dist = F.softplus(self.box(t) * self.scale[i]) * s
            outs.append((dist, self.cls(t), self.coef(t)))
        protos = self.proto(torch.cat([s4, F.interpolate(p3, scale_factor=2.0, mode="nearest")], 1))
        return outs, protos

    def forward(self, x: torch.Tensor):
        outs, protos = self.levels(x)
        if self.training:
            return outs, protos
        rows = []
        for (dist, logits, coef), s in zip(outs, self.strides):
            h, w = dist.shape[2:]
            gy, gx = torch.meshgrid(torch.arange(h, dtype=x.dtype), torch.arange(w, dtype=x.dtype), indexing="ij")
            cx, cy = (gx + 0.5) * s, (gy + 0.5) * s
            left, top, right, bottom = dist.unbind(1)
            x0, y0, x1, y1 = cx - left, cy - top, cx + right, cy + bottom
            xywh = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0], 1)
            rows.append(torch.cat([xywh, torch.sigmoid(logits), coef], 1).flatten(2))
        return torch.cat(rows, 2), protos


def cell_centres(h: int, w: int, stride: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y of the cell centres of a level (h x w cells), in input pixels, flattened row-major."""
    gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing="ij")
    return ((gx + 0.5) * stride).flatten(), ((gy + 0.5) * stride).flatten()
