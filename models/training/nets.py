"""PyTorch networks of the demo models (needs torch; the app never imports this)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv_bn_relu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class UNet(nn.Module):
    """Plain UNet: two 3x3 conv-BN-ReLU per level, max-pool down, transposed-conv up, skip concat.

    With ``len(channels)`` levels the input H and W must be multiples of 2**(levels-1).
    ``sigmoid=True`` appends a Sigmoid (binary models that output probabilities).
    """

    def __init__(self, in_ch: int = 3, n_out: int = 4, channels=(8, 16, 32, 64, 128), sigmoid: bool = False):
        super().__init__()
        self.enc = nn.ModuleList()
        prev = in_ch
        for c in channels:
            self.enc.append(nn.Sequential(conv_bn_relu(prev, c), conv_bn_relu(c, c)))
            prev = c
        self.up = nn.ModuleList()
        self.dec = nn.ModuleList()
        for c in reversed(channels[:-1]):
            self.up.append(nn.ConvTranspose2d(prev, c, 2, stride=2))
            self.dec.append(nn.Sequential(conv_bn_relu(2 * c, c), conv_bn_relu(c, c)))
            prev = c
        self.head = nn.Conv2d(prev, n_out, 1)
        self.sigmoid = sigmoid
        self.divisor = 2 ** (len(channels) - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for i, enc in enumerate(self.enc):
            if i:
                x = F.max_pool2d(x, 2)
            x = enc(x)
            skips.append(x)
        for up, dec, skip in zip(self.up, self.dec, reversed(skips[:-1])):
            x = dec(torch.cat([up(x), skip], 1))
        x = self.head(x)
        return torch.sigmoid(x) if self.sigmoid else x


class SmallClassifier(nn.Module):
    """Compact CNN for 224x224 crops: strided conv stages, global average + max pool, linear head (logits).

    The max pool lets a small defect (a pit of a few pixels) decide the class instead of being averaged away.
    """

    def __init__(self, in_ch: int = 3, n_classes: int = 4, widths=(16, 32, 64, 96, 128)):
        super().__init__()
        layers = []
        prev = in_ch
        for i, w in enumerate(widths):
            layers.append(conv_bn_relu(prev, w, stride=2))
            if 0 < i < len(widths) - 1:
                layers.append(conv_bn_relu(w, w))
            prev = w
        self.features = nn.Sequential(*layers)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(2 * prev, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        k = (int(x.shape[2]), int(x.shape[3]))  # whole feature map (the input size is fixed): opset-17 pools
        avg = F.avg_pool2d(x, kernel_size=k).flatten(1)
        mx = F.max_pool2d(x, kernel_size=k).flatten(1)
        return self.fc(self.drop(torch.cat([avg, mx], 1)))


ARCHS = {
    "surface_defects": ("unet", {"in_ch": 3, "n_out": 4, "channels": (8, 16, 32, 64, 128)}),
    "nuclei": ("unet", {"in_ch": 1, "n_out": 1, "channels": (8, 16, 32, 64), "sigmoid": True}),
    "defect_type": ("classifier", {"in_ch": 3, "n_classes": 4, "widths": (16, 32, 64, 96, 128)}),
}


def build(kind: str, **kwargs) -> nn.Module:
    return UNet(**kwargs) if kind == "unet" else SmallClassifier(**kwargs)


def build_model(name: str) -> nn.Module:
    kind, kwargs = ARCHS[name]
    return build(kind, **kwargs)
