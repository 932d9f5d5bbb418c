"""The demo prompt model's networks (torch): a tiny image encoder and a prompt decoder with SAM2's interface.

Inside, both work on the 1024-pixel input frame shrunk 4x (256x256); the exported encoder starts with that 4x
average pooling, and its outputs have SAM2's shapes: ``high_res_feats_0`` [1,32,256,256], ``high_res_feats_1``
[1,64,128,128], ``image_embed`` [1,256,64,64]. The decoder rasterises the prompts in the graph: each point as a
Gaussian (narrow and wide) at the 64x64 embedding grid and a narrow one at 256x256, positive and negative
apart, the box (labels 2 and 3: its two corners) as a soft rectangle; ``mask_input`` (previous low-res logits)
enters at 64x64 when ``has_mask_input`` is 1. It returns 3 mask logits at 256x256 (SAM2's multimask output;
trained alike, so the three agree) and their predicted IoU. Coordinates are SAM2's: pixels of the 1024 frame,
the pixel's centre at +0.5 (samexporter's decoder adds the 0.5).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

STRIDE64 = 16.0  # 1024 frame pixels per cell of the 64x64 embedding grid
STRIDE256 = 4.0
CONNECT_STEPS = 128  # keep_connected's dilations: geodesic reach in 256-grid cells (the body ring is ~110)


def cbr(cin: int, cout: int, *, stride: int = 1, dil: int = 1) -> nn.Sequential:
    """3x3 conv, BatchNorm, ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, dil, dilation=dil, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Refine(nn.Module):
    """A residual block (depthwise 3x3 at ``dil``, pointwise, ReLU, pointwise) whose last conv starts at zero: added
    to a trained network it starts as the identity (a second schedule goes on from the first)."""

    def __init__(self, ch: int, cin: int | None = None, *, dil: int = 1) -> None:
        super().__init__()
        cin = cin or ch
        self.dw = nn.Conv2d(cin, cin, 3, 1, dil, dilation=dil, groups=cin)
        self.pw = nn.Conv2d(cin, 2 * ch, 1)
        self.out = nn.Conv2d(2 * ch, ch, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        y = x if extra is None else torch.cat([x, extra], 1)
        return x + self.out(F.relu(self.pw(self.dw(y))))


def sep(cin: int, cout: int) -> nn.Sequential:
    """Depthwise 3x3 + pointwise 1x1, no norm (cheap at 128 and 256 pixels)."""
    return nn.Sequential(nn.Conv2d(cin, cin, 3, 1, 1, groups=cin), nn.Conv2d(cin, cout, 1), nn.ReLU(inplace=True))


class Encoder(nn.Module):
    """256x256 image (the 1024 frame / 4) -> compact features (16@256, 32@128, 48@64, 96@32).

    The exported encoder writes them into SAM2's shapes zero-padded (``ExportEncoder``): every 1x1 map that
    would follow in SAM2 is linear, so the decoder's own 1x1 projections take its place exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.s0 = cbr(3, 16)
        self.s1 = nn.Sequential(cbr(16, 32, stride=2), sep(32, 32))
        self.s2 = nn.Sequential(cbr(32, 48, stride=2), cbr(48, 48))
        self.s3 = nn.Sequential(cbr(48, 96, stride=2), cbr(96, 96), cbr(96, 96, dil=2))
        # fine detail (rib pieces, scratches are 2-4 pixels wide at 256): deeper full-resolution stages
        self.r0 = nn.Sequential(Refine(16), Refine(16, dil=2))
        self.r1 = Refine(32, dil=2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        f0 = self.r0(self.s0(x))
        f1 = self.r1(self.s1(f0))
        f2 = self.s2(f1)
        return f0, f1, f2, self.s3(f2)


def up2(x: torch.Tensor) -> torch.Tensor:
    return F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)


def _gauss(c: torch.Tensor, grid: int, stride: float, sigma: float) -> torch.Tensor:
    """[B,N,2] continuous frame coordinates -> [B,N,grid,grid] Gaussians at the cell centres."""
    centres = torch.arange(grid, dtype=torch.float32) * stride + stride / 2
    dx = centres.view(1, 1, 1, grid) - c[..., 0, None, None]
    dy = centres.view(1, 1, grid, 1) - c[..., 1, None, None]
    return torch.exp(-(dx * dx + dy * dy) / (2 * sigma * sigma))


def point_maps(coords: torch.Tensor, labels: torch.Tensor, grid: int, stride: float, sigmas: tuple[float, ...]
               ) -> torch.Tensor:
    """Positive and negative click maps (max over the points) per sigma, then the box: [B, 2*len(sigmas)+1, g, g]."""
    c = coords + 0.5
    pos = (labels == 1).to(torch.float32)[..., None, None]
    neg = (labels == 0).to(torch.float32)[..., None, None]
    maps = []
    for s in sigmas:
        g = _gauss(c, grid, stride, s)
        maps += [(g * pos).amax(1), (g * neg).amax(1)]
    maps.append(box_map(c, labels, grid, stride))
    return torch.stack(maps, 1)


def box_map(c: torch.Tensor, labels: torch.Tensor, grid: int, stride: float) -> torch.Tensor:
    """Soft rectangle between the corner points labelled 2 and 3 (mean of each if repeated); 0 without a box."""
    is2 = (labels == 2).to(torch.float32)
    is3 = (labels == 3).to(torch.float32)
    n2, n3 = is2.sum(1), is3.sum(1)
    a = (c * is2[..., None]).sum(1) / n2.clamp(min=1.0)[:, None]
    b = (c * is3[..., None]).sum(1) / n3.clamp(min=1.0)[:, None]
    lo, hi = torch.minimum(a, b), torch.maximum(a, b)
    has = ((n2 > 0) & (n3 > 0)).to(torch.float32)
    centres = torch.arange(grid, dtype=torch.float32) * stride + stride / 2
    t = stride / 2
    ix = torch.sigmoid((centres[None] - lo[:, 0:1]) / t) * torch.sigmoid((hi[:, 0:1] - centres[None]) / t)
    iy = torch.sigmoid((centres[None] - lo[:, 1:2]) / t) * torch.sigmoid((hi[:, 1:2] - centres[None]) / t)
    return iy[:, :, None] * ix[:, None, :] * has[:, None, None]


def similarity(feat: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Cosine of each pixel's feature to the weighted mean feature under ``weight`` (the clicks' Gaussians);
    0 where there is no such click. An inductive bias that the object is what looks like its clicked pixels."""
    f = F.normalize(feat, dim=1, eps=1e-6)
    total = weight.sum((2, 3), keepdim=True)
    proto = F.normalize((f * weight).sum((2, 3), keepdim=True) / (total + 1e-6), dim=1, eps=1e-6)
    return (f * proto).sum(1, keepdim=True) * (total > 1e-3).to(torch.float32)


class Decoder(nn.Module):
    """(image features, prompts) -> (3 mask logits @256, 3 IoU predictions)."""

    def __init__(self, *, proto: bool = True, connect: int = CONNECT_STEPS) -> None:
        super().__init__()
        self.proto = proto  # the "like the clicked pixels" maps (cosine to the clicks' mean feature)
        self.connect = connect  # steps of keep_connected on the output (0: off)
        extra = 2 if proto else 0
        self.w2 = nn.Conv2d(48, 32, 1, bias=False)
        self.w3 = nn.Conv2d(96, 32, 1, bias=False)
        self.pbn = nn.Sequential(nn.BatchNorm2d(32), nn.ReLU(inplace=True))
        self.p1 = nn.Conv2d(32, 16, 1)
        self.p0 = nn.Conv2d(16, 8, 1)
        self.inp = cbr(32 + 7 + extra, 32)
        self.c64 = cbr(32, 32)
        self.d32 = nn.Sequential(cbr(32, 64, stride=2), cbr(64, 64, dil=2))
        self.d16 = nn.Sequential(cbr(64, 64, stride=2), cbr(64, 64, dil=2), cbr(64, 64, dil=4))
        self.u32 = cbr(128, 64)
        self.u64 = cbr(96, 32)
        self.u128 = sep(32 + 16, 16)
        self.u256 = sep(16 + 8 + 3 + extra // 2, 8)
        self.r128 = Refine(16, 16 + 3, dil=2)  # with the 256-grid click maps pooled to 128
        self.r256 = Refine(8, 8 + 3 + extra // 2, dil=2)
        self.head = nn.Conv2d(8, 3, 1)
        self.iou = nn.Linear(64 + 32, 3)

    def context(self, f0: torch.Tensor, f1: torch.Tensor, f2: torch.Tensor, f3up: torch.Tensor
                ) -> tuple[torch.Tensor, ...]:
        """The prompt-independent part (training reuses it across correction rounds); ``f3up``: the 32x32
        features upsampled to 64x64 (a 1x1 conv commutes with the bilinear upsampling)."""
        return self.pbn(self.w2(f2) + self.w3(f3up)), self.p1(f1), self.p0(f0)

    def prompted(self, ctx: tuple[torch.Tensor, ...], coords: torch.Tensor, labels: torch.Tensor,
                 mask_input: torch.Tensor, has_mask: torch.Tensor, *, raw: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """(3 mask logits, 3 predicted IoUs); ``raw``: before keep_connected (the training loss's logits)."""
        e, g1, g0 = ctx
        b = coords.shape[0]
        e, g1, g0 = e.expand(b, -1, -1, -1), g1.expand(b, -1, -1, -1), g0.expand(b, -1, -1, -1)
        n64, n256 = e.shape[-1], g0.shape[-1]  # 64 and 256 when exported; smaller on training crops
        hm = has_mask.reshape(-1, 1, 1, 1)
        m64 = torch.clamp(F.avg_pool2d(mask_input, 4), -20.0, 20.0) / 10.0 * hm
        p64 = point_maps(coords, labels, n64, STRIDE64, (12.0, 48.0))
        p256 = point_maps(coords, labels, n256, STRIDE256, (6.0,))
        parts64 = [e, p64, m64, hm.expand(-1, 1, n64, n64)]
        parts256 = [g0, p256]
        if self.proto:
            parts64 += [similarity(e, p64[:, 0:1]), similarity(e, p64[:, 1:2])]
            parts256.append(similarity(g0, p256[:, 0:1]))
        x64 = self.c64(self.inp(torch.cat(parts64, 1)))
        x32 = self.d32(x64)
        x16 = self.d16(x32)
        y32 = self.u32(torch.cat([x32, up2(x16)], 1))
        y64 = self.u64(torch.cat([x64, up2(y32)], 1))
        y128 = self.u128(torch.cat([up2(y64), g1], 1))
        y128 = self.r128(y128, F.avg_pool2d(p256, 2))
        y256 = self.u256(torch.cat([up2(y128), *parts256], 1))
        y256 = self.r256(y256, torch.cat(parts256[1:], 1))
        masks = torch.clamp(self.head(y256), -32.0, 32.0)
        iou = torch.sigmoid(self.iou(torch.cat([x16.mean((2, 3)), y64.mean((2, 3))], 1)))
        if self.connect and not raw:
            masks = keep_connected(masks, coords, labels, steps=self.connect)
        return masks, iou



def keep_connected(masks: torch.Tensor, coords: torch.Tensor, labels: torch.Tensor, *, steps: int) -> torch.Tensor:
    """Only what is connected to a positive click stays positive (an object here is one connected region; the
    network alone tends to add look-alikes elsewhere: the other rib pieces, a neighbouring pit). A geodesic
    reconstruction in the graph: from the positive pixels within ~2 cells of a positive click, ``steps`` 3x3
    dilations inside the union of the three masks; what is not reached gets logit <= -1. Without a positive click
    (a box alone) nothing is removed."""
    n = masks.shape[-1]
    fg = (masks.amax(1, keepdim=True) > 0).to(torch.float32)
    pos = (labels == 1).to(torch.float32)
    near = (_gauss(coords + 0.5, n, STRIDE256, 8.0) * pos[..., None, None]).amax(1, keepdim=True)
    none = (pos.sum(1) == 0).to(torch.float32).reshape(-1, 1, 1, 1)
    reach = torch.clamp((near > 0.3).to(torch.float32) + none, max=1.0) * fg
    for _ in range(steps):
        reach = F.max_pool2d(reach, 3, 1, 1) * fg
    return torch.where(reach > 0, masks, torch.clamp(masks, max=-1.0))


class ExportDecoder(nn.Module):
    """SAM2's decoder interface (samexporter's input order and names) over ``Decoder``."""

    def __init__(self, dec: Decoder) -> None:
        super().__init__()
        self.dec = dec

    def forward(self, image_embed: torch.Tensor, high_res_feats_0: torch.Tensor, high_res_feats_1: torch.Tensor,
                point_coords: torch.Tensor, point_labels: torch.Tensor, mask_input: torch.Tensor,
                has_mask_input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ctx = self.dec.context(high_res_feats_0[:, :16], high_res_feats_1[:, :32], image_embed[:, :48],
                               image_embed[:, 48:144])
        return self.dec.prompted(ctx, point_coords, point_labels, mask_input, has_mask_input)


class ExportEncoder(nn.Module):
    """SAM2's encoder interface: ``image`` [1,3,1024,1024] (normalised) -> ``high_res_feats_0`` [1,32,256,256],
    ``high_res_feats_1`` [1,64,128,128], ``image_embed`` [1,256,64,64] (compact features, zero-padded)."""

    def __init__(self, enc: Encoder) -> None:
        super().__init__()
        self.enc = enc

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        f0, f1, f2, f3 = self.enc(F.avg_pool2d(image, 4))
        b = image.shape[0]
        h0 = torch.cat([f0, torch.zeros(b, 16, 256, 256)], 1)
        h1 = torch.cat([f1, torch.zeros(b, 32, 128, 128)], 1)
        emb = torch.cat([f2, up2(f3), torch.zeros(b, 112, 64, 64)], 1)
        return h0, h1, emb
