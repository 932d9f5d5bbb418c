"""Metrics on label maps (app.inference.decide.metrics) against values computed by hand on tiny masks."""

from __future__ import annotations

import numpy as np
import pytest

from app.inference.decide.metrics import (
    AGREE,
    BOTH_DIFFERENT,
    CONFUSED,
    FN,
    FP,
    ONLY_A,
    ONLY_B,
    TN,
    TP,
    confusion,
    difference_map,
    disagreement_map,
    image_metrics,
)


def m(rows) -> np.ndarray:
    return np.array(rows, np.uint8)


def test_one_class_tp_fp_fn_by_hand():
    pred, ref = m([[1, 1, 0, 0]]), m([[1, 0, 1, 0]])
    c = image_metrics(pred, ref, 2).of(1)
    assert (c.tp, c.fp, c.fn, c.present) == (1, 1, 1, True)
    assert c.iou == pytest.approx(1 / 3) and c.dice == pytest.approx(0.5)
    assert c.precision == pytest.approx(0.5) and c.recall == pytest.approx(0.5)


def test_empty_prediction():
    pred, ref = m([[0, 0], [0, 0]]), m([[1, 1], [0, 0]])
    result = image_metrics(pred, ref, 2)
    c = result.of(1)
    assert (c.tp, c.fp, c.fn) == (0, 0, 2)
    assert (c.iou, c.dice, c.recall) == (0.0, 0.0, 0.0) and c.precision is None  # nothing predicted
    assert result.iou == 0.0 and result.dice == 0.0


def test_empty_reference():
    pred, ref = m([[1, 1], [1, 0]]), m([[0, 0], [0, 0]])
    c = image_metrics(pred, ref, 2).of(1)
    assert (c.tp, c.fp, c.fn) == (0, 3, 0)
    assert (c.iou, c.dice, c.precision) == (0.0, 0.0, 0.0) and c.recall is None  # nothing to find


def test_both_empty_is_perfect_and_left_out():
    result = image_metrics(m([[0, 0]]), m([[0, 0]]), 3)
    assert all(not c.present and c.iou == c.dice == c.precision == c.recall == 1.0 for c in result.classes)
    assert result.iou == result.dice == 1.0


def test_a_class_absent_from_both_is_left_out_of_the_mean():
    # class 1: TP 2, FP 0, FN 2 → IoU 0.5, Dice 2/3; class 2: absent; class 3: TP 1 FP 1 → IoU 0.5, Dice 2/3
    pred, ref = m([[1, 1, 0, 0, 3, 3]]), m([[1, 1, 1, 1, 3, 0]])
    result = image_metrics(pred, ref, 4)
    assert [c.present for c in result.classes] == [True, False, True]
    assert result.of(1).iou == pytest.approx(0.5) and result.of(3).iou == pytest.approx(0.5)
    assert result.iou == pytest.approx(0.5) and result.dice == pytest.approx(2 / 3)


def test_confusion_rows_are_the_reference_and_many_classes_do_not_overflow():
    pred, ref = m([[0, 1, 2, 2]]), m([[0, 2, 2, 1]])
    expected = np.zeros((3, 3), np.int64)
    expected[0, 0], expected[2, 1], expected[2, 2], expected[1, 2] = 1, 1, 1, 1
    np.testing.assert_array_equal(confusion(pred, ref, 3), expected)
    big_pred, big_ref = m([[200, 5, 0]]), m([[200, 7, 255]])
    matrix = confusion(big_pred, big_ref, 40)  # grows to 256 classes: the uint16 path
    assert matrix.shape == (256, 256) and matrix[200, 200] == 1 and matrix[7, 5] == 1 and matrix[255, 0] == 1
    with pytest.raises(ValueError):
        confusion(m([[0]]), m([[0, 0]]), 2)


def test_difference_map_one_class_and_all_classes():
    pred, ref = m([[1, 1, 0, 0, 2, 2]]), m([[1, 0, 1, 0, 1, 2]])
    np.testing.assert_array_equal(difference_map(pred, ref, 1), m([[TP, FP, FN, TN, FN, TN]]))
    np.testing.assert_array_equal(difference_map(pred, ref), m([[TP, FP, FN, TN, CONFUSED, TP]]))


def test_disagreement_map_codes():
    a, b = m([[0, 1, 0, 1, 2, 2]]), m([[0, 1, 2, 0, 1, 2]])
    np.testing.assert_array_equal(disagreement_map(a, b), m([[AGREE, AGREE, ONLY_B, ONLY_A, BOTH_DIFFERENT, AGREE]]))


def test_summary_of_identical_masks_lists_no_worst():
    from app.runs.folder.metrics import MetricsSummary, Scored

    summary = MetricsSummary(["a"], against="model A")
    for name in ("f0.png", "f1.png"):
        summary.add(name, Scored("r", image_metrics(np.ones(4, np.uint8), np.ones(4, np.uint8), 2)))
    assert summary.lines()[-1] == "  all identical (IoU 1.000 for each image)"


def test_summary_mean_median_and_worst_files(tmp_path):
    from app.runs.folder.metrics import IMAGES_NAME, METRICS_NAME, MetricsSummary, Scored

    summary = MetricsSummary(["a"], against="ref")
    for i, iou_pixels in enumerate([4, 1, 3, 2, 0, 4]):  # class a: TP = iou_pixels of 4 reference pixels
        pred = np.zeros(4, np.uint8)
        pred[:iou_pixels] = 1
        summary.add(f"f{i}.png", Scored("r", image_metrics(pred, np.ones(4, np.uint8), 2)))
    summary.add("none.png", Scored("", None, "no reference"))
    head, per_class, worst = summary.lines()
    assert per_class == "  IoU per class: a 0.583 (6 images)"
    assert "6 images scored, 1 without metrics" in head and "IoU mean 0.583 median 0.625" in head
    assert worst == "  worst IoU: f4.png 0.000, f1.png 0.250, f3.png 0.500, f2.png 0.750"  # f0, f5: perfect
    summary.write(tmp_path)
    lines = (tmp_path / METRICS_NAME).read_text().splitlines()
    # Dice = 2k/(k+4): 1, 0.4, 6/7, 2/3, 0, 1 → mean 0.653968, median (2/3 + 6/7)/2 = 0.761905; pooled recall 14/24
    assert lines[2] == "a,6,0.583333,0.625000,0.653968,0.761905,1.000000,0.583333,14,0,10"
    assert len((tmp_path / IMAGES_NAME).read_text().splitlines()) == 7  # header + 6 (f4: the class is present)
