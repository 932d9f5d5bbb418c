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


class AnomalyAE(nn.Module):
    """Convolutional autoencoder for anomaly detection, trained on clean images only; the graph also computes
    the normalised outputs, so the exported file is self-contained (anomalib's output names and ranges).

    Input: RGB in 0..1 (sidecar scale 1/255, mean 0, std 1). The autoencoder works on log intensity minus its
    per-image, per-channel mean, ``(log(x + eps) - mean_hw) / LOG_STD``: its error is a *relative* one (a
    scratch on black plastic counts about as much as one on bright steel), and the surface's colour and overall
    brightness need not go through the bottleneck.

    * ``anomaly_map`` [N,1,H,W] in 0..1: the difference input - reconstruction, averaged over 3x3 (sensor noise
      and the finest grain cancel, a defect's coherent error does not), squared, averaged over channels and over
      a ``smooth`` x ``smooth`` window, then ``e / (e + scale)`` (monotone, 0.5 where e equals ``scale``, a
      buffer calibrated on held-out clean frames);
    * ``pred_score`` [N,1]: the maximum of the map.

    Strided 3x3 conv-BN-ReLU encoder (zero padding: reflect padding exports as an opset-18 Pad, or, written
    with slices, stalls the exporter's shape reasoning on dynamic H/W), a 1x1 bottleneck of ``latent``
    channels at 1/2**len(widths) of the input size, and a nearest-upsampling decoder: H and W must be multiples
    of 2**len(widths). The bottleneck is too narrow to copy scratches, pits or stains through, so they come back
    as the surface around them and their pixels carry the error.
    """

    EPS, LOG_STD = 0.06, 0.3

    def __init__(self, in_ch: int = 3, widths=(16, 32, 48, 64), latent: int = 8, smooth: int = 7):
        super().__init__()

        def block(cin, cout, stride=1):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
                                 nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

        enc, prev = [], in_ch
        for w in widths:
            enc += [block(prev, w, 2), block(w, w)]
            prev = w
        self.encoder = nn.Sequential(*enc, nn.Conv2d(prev, latent, 1))
        dec, prev = [block(latent, widths[-1])], widths[-1]
        for w in reversed(widths):
            dec += [nn.Upsample(scale_factor=2, mode="nearest"), block(prev, w)]
            prev = w
        self.decoder = nn.Sequential(*dec, nn.Conv2d(prev, in_ch, 3, 1, 1))
        self.smooth = smooth
        self.divisor = 2 ** len(widths)
        self.register_buffer("scale", torch.tensor(1.0))

    def to_log(self, x: torch.Tensor) -> torch.Tensor:
        """0..1 input -> centred, scaled log intensity (what the autoencoder reconstructs)."""
        lg = torch.log(x.clamp_min(0) + self.EPS)
        # a sum over axes, not mean(): the exporter's opset-18 ReduceMean does not convert back to opset 17
        mean = lg.sum(dim=(2, 3), keepdim=True) / (lg.shape[2] * lg.shape[3])
        return (lg - mean) / self.LOG_STD

    def reconstruct(self, z: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(z))

    def error(self, x: torch.Tensor) -> torch.Tensor:
        """Smoothed squared reconstruction error [N,1,H,W] of a 0..1 input (before normalisation)."""
        z = self.to_log(x)
        d = F.avg_pool2d(z - self.reconstruct(z), 3, stride=1, padding=1, count_include_pad=False)
        k = self.smooth
        e = d.pow(2).sum(1, keepdim=True) / d.shape[1]
        return F.avg_pool2d(e, k, stride=1, padding=k // 2, count_include_pad=False)

    def forward(self, x: torch.Tensor):
        e = self.error(x)
        amap = e / (e + self.scale)
        score = torch.topk(amap.flatten(1), 1, dim=1).values  # the max (TopK: ReduceMax does not convert to 17)
        return amap, score


ARCHS = {
    "surface_defects": ("unet", {"in_ch": 3, "n_out": 4, "channels": (8, 16, 32, 64, 128)}),
    "nuclei": ("unet", {"in_ch": 1, "n_out": 1, "channels": (8, 16, 32, 64), "sigmoid": True}),
    "defect_type": ("classifier", {"in_ch": 3, "n_classes": 4, "widths": (16, 32, 64, 96, 128)}),
    "ct_demo": ("unet", {"in_ch": 1, "n_out": 3, "channels": (8, 16, 32, 64)}),
    "surface_anomaly": ("autoencoder", {"in_ch": 3, "widths": (16, 32, 48, 64), "latent": 8, "smooth": 7}),
}


def build(kind: str, **kwargs) -> nn.Module:
    if kind == "autoencoder":
        return AnomalyAE(**kwargs)
    return UNet(**kwargs) if kind == "unet" else SmallClassifier(**kwargs)


def build_model(name: str) -> nn.Module:
    kind, kwargs = ARCHS[name]
    return build(kind, **kwargs)
