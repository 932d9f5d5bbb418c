"""The volume rule `fail_if: {min_component_ml: …}`: parsed from the sidecar (class optional, refused with the key
named), judged on a volume's 3D components (26-connected) with the class and the mL in its reason, never on one
slice, and NG on a plain 2D image (it has no voxel volume to judge)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.errors import SidecarError
from app.inference.decide.lesions import lesions
from app.inference.decide.verdict import Verdict, decide, verdict_of
from app.inference.decide.volume import slice_verdict, volume_verdict
from app.inference.describe.info import spec_dict, spec_text
from app.inference.image.pipeline import STAGES, Result
from app.inference.model.builder import load_spec
from app.inference.model.rules import AreaRule, ComponentRule


def seg_spec(models, rules: str):
    path = models("rgb_classes")
    path.with_suffix(".yaml").write_text(f"classes: [bg, scratch, stain]\nverdict:\n  fail_if:\n{rules}")
    return load_spec(path)


def seg_result(mask: np.ndarray) -> Result:
    return Result(Path("x.png"), "segmentation", mask.shape, mask, (), dict.fromkeys(STAGES, 1.0), "CPU")


LESION = ComponentRule("scratch", (1,), ("scratch",), 0.5)


def cube(side: int, *, at: int = 0, label: int = 1, size: int = 20) -> np.ndarray:
    volume = np.zeros((size, size, size), np.uint8)
    volume[at:at + side, at:at + side, at:at + side] = label
    return volume


# -- the sidecar -----------------------------------------------------------------------------------------

def test_the_rule_is_parsed_with_its_class_or_every_class_but_the_background(models):
    spec = seg_spec(models, "    - {class: stain, min_component_ml: 0.5}\n    - {min_component_ml: 2}\n")
    assert spec.verdict == (ComponentRule("stain", (2,), ("stain",), 0.5),
                            ComponentRule(None, (1, 2), ("scratch", "stain"), 2.0))
    text = spec_text(spec, None)
    assert "fail if a stain component of >= 0.5 mL (26-connected, in 3D)" in text
    assert "fail if a component of any class but the background of >= 2 mL (26-connected, in 3D)" in text
    assert spec_dict(spec, None)["verdict"] == {"fail_if": [{"class": "stain", "min_component_ml": 0.5},
                                                            {"min_component_ml": 2.0}]}


@pytest.mark.parametrize(("rule", "key", "says"), [
    ("{class: stain, min_component_ml: 0}", "verdict.fail_if[0].min_component_ml", "must be more than 0 (mL), got 0"),
    ("{class: stain, min_component_ml: -1}", "verdict.fail_if[0].min_component_ml", "must be more than 0"),
    ("{class: stain, min_component_ml: big}", "verdict.fail_if[0].min_component_ml", "must be a number"),
    ("{class: stain, min_component_ml: .inf}", "verdict.fail_if[0].min_component_ml", "finite"),
    ("{class: stian, min_component_ml: 1}", "verdict.fail_if[0].class", "classes: bg, scratch, stain"),
    ("{min_component_ml: 1, connectivity: 6}", "verdict.fail_if[0]", "unknown key 'connectivity'"),
    # the background's components are never counted: the rule would pass every volume (it did, silently)
    ("{class: bg, min_component_ml: 1}", "verdict.fail_if[0].class", "is 'bg', the background (label 0), whose "
     "components are not counted: name a class, or leave class out for any class but the background"),
])
def test_a_wrong_rule_is_refused_in_one_line_naming_the_key(models, rule, key, says):
    with pytest.raises(SidecarError) as caught:
        seg_spec(models, f"    - {rule}\n")
    message = str(caught.value)
    assert f"'{key}'" in message and says in message and "\n" not in message


def test_the_rule_does_not_fit_a_classifier(models):
    path = models("classifier")
    path.with_suffix(".yaml").write_text("classes: [red, green, blue]\nverdict:\n  fail_if:\n"
                                         "    - {class: red, min_component_ml: 1}\n")
    with pytest.raises(SidecarError, match=r"'verdict.fail_if\[0\].min_component_ml' applies to segmentation"):
        load_spec(path)


# -- on a volume's components ----------------------------------------------------------------------------

def test_it_fires_on_a_component_of_at_least_the_limit_naming_the_class_and_the_millilitres():
    found = lesions(cube(8), voxel_ml=0.001)  # 512 voxels of 1 mm³: 0.512 mL
    assert volume_verdict((LESION,), found) == Verdict(
        False, "scratch component 0.512 mL >= 0.5 mL (26-connected, 512 voxels)")


def test_it_does_not_fire_below_the_limit_or_on_another_class():
    assert volume_verdict((LESION,), lesions(cube(7), voxel_ml=0.001)) == Verdict(True)  # 0.343 mL
    assert volume_verdict((LESION,), lesions(cube(8, label=2), voxel_ml=0.001)) == Verdict(True)
    assert volume_verdict((LESION,), ()) == Verdict(True)


def test_pieces_touching_at_a_corner_are_one_component_of_their_summed_volume():
    volume = cube(6) | cube(6, at=6)  # 216 + 216 voxels meeting at one corner: 0.432 mL at 26, 0.216 at 6
    rule = ComponentRule("scratch", (1,), ("scratch",), 0.4)
    assert volume_verdict((rule,), lesions(volume, voxel_ml=0.001)).reason == \
        "scratch component 0.432 mL >= 0.4 mL (26-connected, 432 voxels)"


def test_any_class_names_the_class_of_the_component_that_fired():
    volume = cube(5) | cube(9, at=10, label=2)
    rule = ComponentRule(None, (1, 2), ("scratch", "stain"), 0.5)
    assert volume_verdict((rule,), lesions(volume, voxel_ml=0.001)).reason.startswith("stain component 0.729 mL")


def test_it_fails_closed_without_a_voxel_size_or_without_components():
    assert volume_verdict((LESION,), lesions(cube(2), voxel_ml=None)) == Verdict(
        False, "no voxel size to judge a scratch component of >= 0.5 mL (26-connected, in 3D) by "
               "(the files give no spacing)")
    assert volume_verdict((LESION,), lesions(cube(2, label=2), voxel_ml=None)) == Verdict(True)  # nothing to size
    assert volume_verdict((LESION,), None, why_not="a 4D NIfTI of 3 time points").reason == \
        "no volume to judge a scratch component of >= 0.5 mL (26-connected, in 3D) by (a 4D NIfTI of 3 time points)"


def test_no_volume_rules_no_volume_verdict():
    assert volume_verdict((AreaRule("scratch", (1,), 5),), ()) is None


# -- on one image or one slice -----------------------------------------------------------------------------

def test_a_plain_2d_image_is_ng_it_has_no_volume_to_judge(models):
    spec = seg_spec(models, "    - {class: scratch, min_component_ml: 0.5}\n")
    verdict = verdict_of(spec, seg_result(np.zeros((8, 8), np.uint8)))
    assert verdict == Verdict(False, "no volume to judge a scratch component of >= 0.5 mL (26-connected, in 3D) "
                                     "by (one 2D image or slice)")


def test_a_slice_of_a_volume_is_judged_by_the_other_rules_only(models):
    spec = seg_spec(models, "    - {class: scratch, min_component_ml: 0.5}\n    - {class: stain, min_area_px: 4}\n")
    clean, stained = np.zeros((8, 8), np.uint8), np.zeros((8, 8), np.uint8)
    stained[:2, :2] = 2
    assert slice_verdict(spec, seg_result(clean)) == Verdict(True)
    assert slice_verdict(spec, seg_result(stained)) == Verdict(False, "stain component 4 px >= 4")
    only = seg_spec(models, "    - {class: scratch, min_component_ml: 0.5}\n")
    assert slice_verdict(only, seg_result(clean)) is None  # no rule judges a slice: the volume's row says
    assert decide((), seg_result(clean), only) == Verdict(True)
