"""What keeping the scores costs per 1080p image: `postprocess.probabilities` (activation + float16 copy at the
working size) next to the mask it accompanies, and the bytes kept.

    uv run python benchmarks/scores_cost.py [--runs 21]

Synthetic model outputs at the working size of a 1920×1080 image on a dynamic-size model (1088×1920: padded to
a multiple of 32), random logits; binary (1 plane) and multi-class (3 and 8 classes). Prints median wall ms.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.inference.image import labelmap, postprocess
from app.inference.image.preprocess import Geometry
from app.inference.model.spec import ModelSpec, OutputSpec, PostprocessSpec
from benchmarks.timing import median_ms

GEOMETRY = Geometry(image_hw=(1080, 1920), content_hw=(1080, 1920), tensor_hw=(1088, 1920))


def spec_for(kind: str, activation: str) -> ModelSpec:
    output = OutputSpec("out", kind, 1, activation, 0.5)
    return ModelSpec(Path("synthetic.onnx"), None, "synthetic", "segmentation", None, output, (), PostprocessSpec(),
                     (), ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    runs = parser.parse_args().runs
    rng = np.random.default_rng(0)
    cases = [("binary", "sigmoid", 1), ("scores", "softmax", 3), ("scores", "softmax", 8)]
    for kind, activation, classes in cases:
        spec = spec_for(kind, activation)
        output = rng.normal(0, 3, (1, classes, *GEOMETRY.tensor_hw)).astype(np.float32)
        mask_ms = median_ms(lambda: labelmap.segmentation_mask(spec, output, GEOMETRY), runs)  # noqa: B023
        kept_ms = median_ms(lambda: postprocess.probabilities(spec, output, GEOMETRY), runs)  # noqa: B023
        scores, _ = postprocess.probabilities(spec, output, GEOMETRY)
        print(f"{classes} class(es) {activation}: mask {mask_ms:.1f} ms, keeping scores +{kept_ms:.1f} ms, "
              f"{scores.nbytes / 1e6:.1f} MB kept ({scores.nbytes} bytes)")


if __name__ == "__main__":
    main()
