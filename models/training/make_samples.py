"""Write the bundled sample images to resources/samples/ (seed common.SAMPLE_SEED, unseen in training).

    .venv/bin/python -m models.training.make_samples

Surfaces are 1920x1080 JPEG (quality 92), nuclei fields grayscale PNG (512 and 1024), classifier crops
224x224 PNG, anomaly frames 640x360 PNG (16:9 like 1080p, so the app's 288x512 stretch keeps the aspect).
Three of them have nothing to find (a clean surface, an empty field, an OK crop), and three anomaly frames are
clean.
"""

from __future__ import annotations

import cv2
import numpy as np

from . import common, synth

SEED = common.SAMPLE_SEED
NONE = {"scratch": 0, "pit": 0, "stain": 0}

SURFACES = [  # file name, material, defects
    ("surface/surface_01_scratches.jpg", "metal", {"scratch": 3, "pit": 0, "stain": 0}),
    ("surface/surface_02_pits.jpg", "metal", {"scratch": 0, "pit": 7, "stain": 0}),
    ("surface/surface_03_stain.jpg", "metal", {"scratch": 0, "pit": 0, "stain": 2}),
    ("surface/surface_04_mixed.jpg", "metal", {"scratch": 2, "pit": 4, "stain": 1}),
    ("surface/surface_05_plastic_mixed.jpg", "plastic", {"scratch": 2, "pit": 3, "stain": 1}),
    ("surface/surface_clean_01.jpg", "metal", NONE),
]
NUCLEI = [  # file name, size, nucleus scale, empty
    ("nuclei/nuclei_01.png", 512, 1.0, False),
    ("nuclei/nuclei_02_dense.png", 512, 0.9, False),
    ("nuclei/nuclei_03_1024.png", 1024, 2.0, False),
    ("nuclei/nuclei_empty_01.png", 512, 1.0, True),
]
CROPS = [("defect_crops/defect_crop_scratch.png", 1), ("defect_crops/defect_crop_pit.png", 2),
         ("defect_crops/defect_crop_stain.png", 3), ("defect_crops/defect_crop_ok.png", 0)]

ANOMALY = [  # file name, material, defects: for surface_anomaly (trained on clean surfaces only)
    ("anomaly/anomaly_clean_01_metal.png", "metal", NONE),
    ("anomaly/anomaly_clean_02_plastic.png", "plastic", NONE),
    ("anomaly/anomaly_clean_03_metal.png", "metal", NONE),
    ("anomaly/anomaly_04_scratch.png", "metal", {"scratch": 1, "pit": 0, "stain": 0}),
    ("anomaly/anomaly_05_pits.png", "metal", {"scratch": 0, "pit": 3, "stain": 0}),
    ("anomaly/anomaly_06_stain.png", "plastic", {"scratch": 0, "pit": 0, "stain": 1}),
    ("anomaly/anomaly_07_mixed.png", "metal", {"scratch": 1, "pit": 2, "stain": 1}),
    ("anomaly/anomaly_08_plastic_mixed.png", "plastic", {"scratch": 1, "pit": 2, "stain": 0}),
]
ANOMALY_HW = (360, 640)


def anomaly_sample(index: int):
    """(rgb uint8 360x640x3, defect mask uint8 0/1) of ANOMALY[index]; the tests regenerate the mask with it."""
    _, material, defects = ANOMALY[index]
    h, w = ANOMALY_HW
    img, label = synth.surface_image(synth.rng_for(SEED, index, "sample-anomaly"), h, w, px=w / 1920,
                                     defects=defects, material=material)
    return img, (label > 0).astype(np.uint8)


def surface_sample_instances(index: int):
    """(rgb uint8 1080x1920x3, [instances_data.Obj]) of SURFACES[index]: each scratch, pit and stain of the sample as
    its own object (the same draws as main's, so the same picture); the tests of surface_instances use them."""
    from . import instances_data

    _, material, defects = SURFACES[index]
    return instances_data.render(synth.rng_for(SEED, index, "sample-surface"), 1080, 1920, px=1.0,
                                 defects=defects, material=material)


def main() -> None:
    out = common.SAMPLES_DIR  # one sub-folder per model: the viewer opens surface/ with the default model
    for sub in ("surface", "nuclei", "defect_crops", "anomaly"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for i, (fn, material, defects) in enumerate(SURFACES):
        img, _ = synth.surface_image(synth.rng_for(SEED, i, "sample-surface"), 1080, 1920, px=1.0,
                                     defects=defects, material=material)
        cv2.imwrite(str(out / fn), cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 92])
    for i, (fn, size, scale, empty) in enumerate(NUCLEI):
        rng = synth.rng_for(SEED, i, "sample-nuclei")
        n = None if not fn.startswith("nuclei/nuclei_02") else 80
        img, _ = synth.nuclei_image(rng, size, scale=scale, n=n, empty=empty)
        cv2.imwrite(str(out / fn), img, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    for i, (fn, kind) in enumerate(CROPS):
        img = synth.defect_crop(synth.rng_for(SEED, i, "sample-crop"), kind)
        cv2.imwrite(str(out / fn), cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    for i, (fn, _, _) in enumerate(ANOMALY):
        img, _ = anomaly_sample(i)
        cv2.imwrite(str(out / fn), cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_PNG_COMPRESSION, 9])
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{len(SURFACES) + len(NUCLEI) + len(CROPS) + len(ANOMALY)} samples in {out}, {total / 1e6:.1f} MB")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
