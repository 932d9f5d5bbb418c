"""The 3D network of the ct3d_demo model (needs torch; the app never imports this)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

CHANNELS = (8, 16, 32, 64)  # 4 levels: D, H and W must be multiples of 8


def conv_bn_relu3d(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm3d(cout), nn.ReLU(inplace=True))


class UNet3D(nn.Module):
    """Plain 3D UNet: two 3x3x3 conv-BN-ReLU per level, max-pool down, transposed-conv up, skip concat; logits.

    BatchNorm, not InstanceNorm: a patch that is mostly air must be normalised like one that is mostly body, or
    overlapping sliding-window patches disagree. With ``len(channels)`` levels D, H and W must be multiples of
    2**(levels-1).
    """

    def __init__(self, in_ch: int = 1, n_out: int = 4, channels=CHANNELS):
        super().__init__()
        self.enc = nn.ModuleList()
        prev = in_ch
        for c in channels:
            self.enc.append(nn.Sequential(conv_bn_relu3d(prev, c), conv_bn_relu3d(c, c)))
            prev = c
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for c in reversed(channels[:-1]):
            self.up.append(nn.ConvTranspose3d(prev, c, 2, stride=2))
            self.dec.append(nn.Sequential(conv_bn_relu3d(2 * c, c), conv_bn_relu3d(c, c)))
            prev = c
        self.head = nn.Conv3d(prev, n_out, 1)
        self.divisor = 2 ** (len(channels) - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, enc in enumerate(self.enc):
            if i:
                x = F.max_pool3d(x, 2)
            x = enc(x)
            skips.append(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), skip], 1))
        return self.head(x)
