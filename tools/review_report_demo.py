"""Make a review report from the bundled surface samples and model (what docs/review_report.png shows).

    uv run python tools/review_report_demo.py /tmp/review_demo    # → /tmp/review_demo/review_report.html

Runs the bundled model on resources/samples/surface/, records a few reviews in the sibling review folder (one of
them made with another model, which the report must not show), and writes the HTML report. Screenshot it with
`chromium --headless --no-sandbox --disable-gpu --screenshot=out.png --window-size=1400,1000 file://…/report.html`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app import __version__  # noqa: E402
from app.inference.image.pipeline import run_path  # noqa: E402
from app.inference.model.builder import load_spec  # noqa: E402
from app.inference.runtime.session import open_session  # noqa: E402
from app.io.files import encode_png, file_sha256  # noqa: E402
from app.io.images import read_image  # noqa: E402
from app.io.render import blend_overlay  # noqa: E402
from app.runs.review.html import ReportItem, write_review_report  # noqa: E402
from app.runs.review.log import ReviewLog, review_folder  # noqa: E402

REVIEWS = {  # rel → (state, note)
    "surface_01_scratches.jpg": ("accepted", "Both scratches found."),
    "surface_02_pits.jpg": ("rejected", "Missed the small pit at the lower left, <script>alert(1)</script> stays text"),
    "surface_03_stain.jpg": ("corrected", "Stain outline redrawn;\nmask saved as surface_03_stain_mask.png"),
    "surface_05_plastic_mixed.jpg": ("accepted", ""),
}


def main(work: Path) -> Path:
    inputs = work / "surface"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(REPO / "resources" / "samples" / "surface", inputs)
    model_path = REPO / "models" / "surface_defects.onnx"
    spec, sha = load_spec(model_path), file_sha256(model_path)
    ReviewLog.open(review_folder(inputs), "0" * 64).set("surface_04_mixed.jpg", "accepted", "old model")
    log = ReviewLog.open(review_folder(inputs), sha)
    for rel, (state, note) in REVIEWS.items():
        log.set(rel, state, note)
    session = open_session(spec, "cpu")
    items = [_item(session, spec, path, inputs, log) for path in sorted(inputs.iterdir())]
    return write_review_report(work / "review_report.html", items, model_name=model_path.name, model_sha256=sha,
                               seglens_version=__version__, title="SegLens review: surface samples")


def _item(session, spec, path: Path, inputs: Path, log: ReviewLog) -> ReportItem:
    result = run_path(session, path)
    image = read_image(path).pixels
    overlay = encode_png(blend_overlay(image, result.mask, spec.classes, alpha=0.55))
    pixels = result.class_pixels()
    found = {spec.classes[label].name: int(pixels[label]) for label in range(1, len(spec.classes)) if pixels[label]}
    rel = path.relative_to(inputs).as_posix()
    reason = ", ".join(f"{name} {count} px" for name, count in found.items())
    metrics = {"defect area %": 100 * sum(found.values()) / result.mask.size, "classes found": len(found)}
    return ReportItem(rel, overlay, "ng" if found else "ok", reason, metrics, log.get(rel))


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/review_demo")))
