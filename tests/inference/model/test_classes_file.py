"""The sidecar's `classes_file:` (lines, JSON, CSV; ImageNet synsets) and a classifier's `uncertain` limits
(`output.min_confidence`, `output.min_margin`): in the spec, the report, the verdict and `info`."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from PIL import Image

from app.cli import main
from app.errors import SidecarError
from app.inference.decide.verdict import uncertainty
from app.inference.describe.info import spec_dict, spec_text
from app.inference.image.postprocess import Prediction
from app.inference.model.builder import load_spec
from app.inference.model.labels import display_name, read_labels

SYNSET = "".join(f"n{k:08d} name{k}, synonym\n" for k in range(1000))
EXACT = (0.625, 0.25, 0.125)  # binary fractions: top-1 0.625, margin 0.375, both exact in float32 and float64


def red_image(path, red: int):
    image = np.zeros((40, 40, 3), np.uint8)
    image[..., 0] = red
    Image.fromarray(image).save(path)
    return path


def report_rows(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def run_one(model, image, tmp_path) -> dict:
    report = tmp_path / "report.csv"
    assert main(["run", str(model), str(image), "--out", str(tmp_path / "out"), "--report", str(report)]) == 0
    return report_rows(report)[0]


@pytest.fixture
def wide(models):
    model = models("wide_classifier")
    (model.parent / "synset.txt").write_text(SYNSET)
    model.with_suffix(".yaml").write_text("classes_file: synset.txt\n")
    return model


def test_a_1000_class_report_gives_the_full_synset_line(wide, tmp_path):
    red = 128
    expected = round(999 * red / 255)
    row = run_one(wide, red_image(tmp_path / "red.png", red), tmp_path)
    assert row["top1"] == f"n{expected:08d} name{expected}, synonym"
    assert display_name(row["top1"]) == f"name{expected}"
    spec = load_spec(wide)
    assert spec.classes_file == wide.parent / "synset.txt" and len(spec.classes) == 1000


@pytest.mark.parametrize(("name", "short"), [
    ("n01440764 tench, Tinca tinca", "tench"), ("n02085620 Chihuahua", "Chihuahua"), ("tench, Tinca tinca", "tench"),
    ("plain", "plain"), ("n01440764", "n01440764"), (", odd", ", odd"), ("#hash tag", "#hash tag"),
])
def test_display_name_drops_the_wordnet_id_and_the_synonyms(name, short):
    assert display_name(name) == short


def test_json_and_csv_labels_files(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["cat", "dog, puppy", "n00000002 bird"]))
    assert read_labels(tmp_path / "a.json") == ("cat", "dog, puppy", "n00000002 bird")
    (tmp_path / "b.csv").write_text('index,name\n2,bird\n0,cat\n1,"dog, puppy"\n')
    assert read_labels(tmp_path / "b.csv") == ("cat", "dog, puppy", "bird")
    (tmp_path / "c.csv").write_text("1,dog, puppy\n0,cat\n")  # no header, an unquoted comma in a name
    assert read_labels(tmp_path / "c.csv") == ("cat", "dog, puppy")
    (tmp_path / "d.txt").write_text("#1 cat  \n n0 dog\n\n\n")  # lines as written: trailing blanks go
    assert read_labels(tmp_path / "d.txt") == ("#1 cat", " n0 dog")


@pytest.mark.parametrize(("name", "text", "says"), [
    ("gap.csv", "0,cat\n2,dog\n", "1 is missing"),
    ("twice.csv", "0,cat\n0,dog\n", "index 0 appears twice"),
    ("mixed.csv", "0,cat\ndog\n", "line 2 is not `index,name`"),
    ("hole.txt", "cat\n\ndog\n", "line 2 is empty"),
    ("bad.json", '["cat", 3]', "list of non-empty strings"),
    ("empty.txt", "\n\n", "holds no labels"),
])
def test_a_bad_labels_file_is_refused_naming_it(tmp_path, name, text, says):
    (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=says) as caught:
        read_labels(tmp_path / name)
    assert name in str(caught.value)


def sidecar_error(model, text: str, files: dict | None = None) -> str:
    for name, content in (files or {}).items():
        (model.parent / name).write_text(content)
    model.with_suffix(".yaml").write_text(text)
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(model.with_suffix(".yaml")))
    return message


def test_classes_file_errors_are_one_line_naming_the_sidecar_key_and_file(models):
    model = models("wide_classifier")
    short = sidecar_error(model, "classes_file: synset.txt\n", {"synset.txt": SYNSET.split("\n", 1)[1]})
    assert "'classes_file'" in short and "synset.txt" in short and "999 labels" in short and "1000 classes" in short
    missing = sidecar_error(model, "classes_file: nowhere.txt\n")
    assert "'classes_file'" in missing and "nowhere.txt: cannot read" in missing
    both = sidecar_error(model, "classes_file: synset.txt\nclasses: [a, b]\n", {"synset.txt": SYNSET})
    assert "'classes_file' and 'classes' both given" in both
    empty = sidecar_error(model, "classes_file: empty.txt\n", {"empty.txt": ""})
    assert "empty.txt: holds no labels" in empty
    big = model.parent / "big.txt"
    big.write_bytes(b"x\n" * (5 << 20) + b"y")
    assert "big.txt: too large" in sidecar_error(model, "classes_file: big.txt\n")


# -- uncertain ---------------------------------------------------------------------------------------------------

def exact_model(models, sidecar: str):
    model = models("constant_classifier", scores=EXACT)
    model.with_suffix(".yaml").write_text("output:\n  activation: none\n" + sidecar)
    return model


def predictions(*scores: float) -> tuple[Prediction, ...]:
    return tuple(Prediction(i, f"c{i}", s) for i, s in enumerate(scores))


@pytest.mark.parametrize(("limits", "reason"), [
    ("  min_confidence: 0.625\n", ""),  # equal: not uncertain
    ("  min_confidence: 0.626\n", "uncertain: top-1 0.625 < min_confidence 0.626"),
    ("  min_margin: 0.375\n", ""),
    ("  min_margin: 0.376\n", "uncertain: margin 0.375 < min_margin 0.376"),
    ("  min_confidence: 0.7\n  min_margin: 0.5\n", "uncertain: top-1 0.62 < min_confidence 0.70"),
])
def test_uncertain_at_its_boundaries_without_verdict_rules(models, tmp_path, limits, reason):
    model = exact_model(models, limits)
    row = run_one(model, red_image(tmp_path / "a.png", 10), tmp_path)
    assert float(row["top1_score"]) == 0.625
    assert (row["verdict"], row["verdict_reason"]) == ("", reason)


@pytest.mark.parametrize(("limits", "verdict", "reason"), [
    ("  min_confidence: 0.625\n", "ok", ""),
    ("  min_confidence: 0.626\n", "ng", "uncertain: top-1 0.625 < min_confidence 0.626"),
    ("  min_margin: 0.375\n", "ok", ""),
    ("  min_margin: 0.376\n", "ng", "uncertain: margin 0.375 < min_margin 0.376"),
])
def test_an_uncertain_result_is_never_passed_ok_by_verdict_rules(models, tmp_path, limits, verdict, reason):
    model = exact_model(models, limits + "verdict:\n  fail_if:\n    - {score_above: 0.9}\n")
    row = run_one(model, red_image(tmp_path / "a.png", 10), tmp_path)
    assert (row["verdict"], row["verdict_reason"]) == (verdict, reason)


def test_a_rule_that_fires_keeps_its_reason(models, tmp_path):
    model = exact_model(models, "  min_confidence: 0.9\nverdict:\n  fail_if:\n    - {score_above: 0.5}\n")
    row = run_one(model, red_image(tmp_path / "a.png", 10), tmp_path)
    assert (row["verdict"], row["verdict_reason"]) == ("ng", "score 0.625 > 0.5")


def test_uncertainty_is_a_pure_function_of_the_predictions(models):
    spec = load_spec(exact_model(models, "  min_confidence: 0.5\n  min_margin: 0.1\n"))
    assert uncertainty(predictions(0.5, 0.375), spec) is None
    low = uncertainty(predictions(0.4999, 0.3), spec)
    assert low.reason == "uncertain: top-1 0.4999 < min_confidence 0.5000" and low.short.startswith("Uncertain: top-1")
    close = uncertainty(predictions(0.55, 0.47), spec)
    assert close.reason == "uncertain: margin 0.08 < min_margin 0.10"
    assert uncertainty(predictions(0.9), spec) is None  # one prediction: no margin to measure
    assert uncertainty((), spec) is None


def test_limits_are_refused_for_segmentation_and_without_a_second_class(models):
    seg = models("rgb_classes")
    message = sidecar_error(seg, "output:\n  min_confidence: 0.5\n")
    assert "'output.min_confidence' applies to classification models" in message
    assert "'output.min_margin' must be between 0 and 1" in sidecar_error(seg, "output:\n  min_margin: 2\n")
    cls = models("constant_classifier", scores=EXACT)
    refused = sidecar_error(cls, "output:\n  min_margin: 0.1\npostprocess:\n  top_k: 1\n")
    assert "'output.min_margin' needs postprocess.top_k of at least 2" in refused


def test_info_shows_the_limits_with_their_source_and_short_names(wide, models):
    wide.with_suffix(".yaml").write_text("classes_file: synset.txt\noutput:\n  min_margin: 0.1\n")
    spec = load_spec(wide)
    text = spec_text(spec, None)
    assert "min_confidence 0 (uncertain where top-1 < it)  [default]" in text
    assert "min_margin    0.1 (uncertain where top-1 − top-2 < it)  [sidecar]" in text
    assert f"classes  [sidecar: {wide.parent / 'synset.txt'}]" in text
    assert "    7  name7                   n00000007 name7, synonym" in text
    data = spec_dict(spec, None)
    assert (data["output"]["min_confidence"], data["output"]["min_margin"]) == (0.0, 0.1)
    assert data["classes_file"] == str(wide.parent / "synset.txt")
    assert data["classes"][7]["name"] == "n00000007 name7, synonym"
