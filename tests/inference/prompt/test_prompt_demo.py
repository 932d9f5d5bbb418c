"""The bundled demo prompt pair (models/prompt_demo.yaml, SAM2 layout) through the adapter, as a user's real export
would go: recognised from its graphs, the 20 held-out synthetic objects of models.training.evaluate_prompt
segmented by one click and by three (the same click protocol), the encoder run once per image, and the masks equal
to the recipe's own ORT pre/post-processing (an independent implementation of SAM's transform)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from app.inference.prompt.model import Box, Point, PromptSession, load_prompt_spec, open_prompt_session
from models.training import common, prompt_data

REPO = Path(__file__).resolve().parents[3]
# SEGLENS_PROMPT_DEMO: another export of the pair (a recipe's fresh one) checked the same way
SIDECAR = Path(os.environ.get("SEGLENS_PROMPT_DEMO", REPO / "models" / "prompt_demo.yaml"))
pytestmark = pytest.mark.skipif(not SIDECAR.exists(), reason=f"the demo prompt pair is not there ({SIDECAR})")


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum()) / max(float((a | b).sum()), 1.0)


@pytest.fixture(scope="module")
def session() -> PromptSession:
    return open_prompt_session(load_prompt_spec(SIDECAR), "cpu")


@pytest.fixture(scope="module")
def objects() -> list[tuple[prompt_data.Scene, int]]:
    return prompt_data.eval_objects(common.EVAL_SEED, 20)


def test_the_demo_pair_is_read_as_sam2_from_its_sidecar() -> None:
    spec = load_prompt_spec(SIDECAR)
    assert (spec.layout, spec.input_size, spec.resize) == ("sam2", 1024, "longest")
    assert spec.embed_outputs == ("high_res_feats_0", "high_res_feats_1", "image_embed")
    assert spec.sources["input_size"] == "sidecar" and spec.mean == (123.675, 116.28, 103.53)


def test_held_out_objects_as_the_recipes_evaluation_with_one_encoder_run_per_image(
        session: PromptSession, objects: list[tuple[prompt_data.Scene, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The click protocol of evaluate_prompt (click 1 at the farthest interior point, then one correction click
    per round, all clicks given together) through the adapter: every object's IoU after 1, 2 and 3 clicks and
    with its box equals the recipe's own evaluation of the same files, the encoder run once per image, and the
    medians reach the issue's targets (0.85 with one click, 0.92 with three) through the adapter too."""
    from models.training import evaluate_prompt

    monkeypatch.setattr(evaluate_prompt, "ENCODER", session.spec.encoder)  # the files the sidecar names
    monkeypatch.setattr(evaluate_prompt, "DECODER", session.spec.decoder)
    pair = evaluate_prompt.PromptPair()
    before = session.encoder_runs
    reached = []
    for scene, k in objects:
        truth = scene.objects[k]
        x, y = prompt_data.farthest_point(truth)
        points = [Point(float(x), float(y), 1)]
        ious = []
        for _ in range(3):
            mask = session.decode(session.embed(scene.image), points).mask
            ious.append(_iou(mask, truth))
            click = prompt_data.correction_click(mask, truth)
            if click is None:
                ious += [ious[-1]] * (3 - len(ious))
                break
            points.append(Point(float(click[0]), float(click[1]), int(click[2])))
        ys, xs = np.nonzero(truth)  # the recipe's box: the object's first and last pixels as its corners
        box = session.decode(session.embed(scene.image),
                             box=Box(float(xs.min()), float(ys.min()), float(xs.max()), float(ys.max()))).mask
        theirs = evaluate_prompt.run_object(pair, scene, k)
        np.testing.assert_allclose([*ious, _iou(box, truth)], [*theirs["iou"], theirs["iou_box"]], atol=0.01)
        reached.append(ious)
    assert session.encoder_runs - before == len(objects)  # 20 images, up to 60 prompts
    if SIDECAR == REPO / "models" / "prompt_demo.yaml":  # the bundled pair's card says it meets them
        one, _, three = np.median(reached, axis=0)
        assert one >= 0.85 and three >= 0.92, f"median IoU {one:.3f} with one click, {three:.3f} with three"
def test_masks_equal_the_recipes_own_pre_and_post_processing(
        session: PromptSession, objects: list[tuple[prompt_data.Scene, int]], monkeypatch: pytest.MonkeyPatch) -> None:
    from models.training import evaluate_prompt

    monkeypatch.setattr(evaluate_prompt, "ENCODER", session.spec.encoder)  # the files the sidecar names
    monkeypatch.setattr(evaluate_prompt, "DECODER", session.spec.decoder)
    pair = evaluate_prompt.PromptPair()
    for scene, k in objects[:6]:
        x, y = prompt_data.farthest_point(scene.objects[k])
        pair.set_image(scene.image)
        theirs, their_iou = pair.predict([(float(x), float(y), 1)])
        proposal = session.decode(session.embed(scene.image), [Point(float(x), float(y), 1)])
        assert proposal.iou == pytest.approx(their_iou, abs=1e-4)
        assert (proposal.mask != theirs).mean() <= 1e-3  # float rounding at the threshold only


@pytest.mark.skipif(SIDECAR != REPO / "models" / "prompt_demo.yaml", reason="a bundled name finds models/ only")
def test_the_cli_takes_the_bundled_pair_by_name(tmp_path: Path, objects: list[tuple[prompt_data.Scene, int]],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    import cv2

    from app.cli import main

    scene, k = objects[1]
    image = tmp_path / "scene.png"
    cv2.imwrite(str(image), cv2.cvtColor(scene.image, cv2.COLOR_RGB2BGR))
    x, y = prompt_data.farthest_point(scene.objects[k])
    out = tmp_path / "mask.png"
    assert main(["prompt", "prompt_demo", str(image), "--point", f"{x},{y}", "--out", str(out), "--device", "cpu"]) == 0
    mask = cv2.imread(str(out), cv2.IMREAD_UNCHANGED).astype(bool)
    assert mask.shape == scene.objects[k].shape and mask[y, x]
    assert capsys.readouterr().out.startswith(f"{out}: {int(mask.sum())} pixels")
