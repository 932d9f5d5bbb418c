"""Calibration's maths (app.runs.calibrate.band) and its sidecar writing (app.runs.calibrate.sidecar) on exact
numbers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from app.runs.calibrate.band import CalibrationRefused, Limits, clopper_pearson, measure, pick_limits, split
from app.runs.calibrate.sidecar import with_verdict


@pytest.mark.parametrize(("count", "total"), [(0, 3), (1, 3), (3, 3), (0, 20), (1, 20), (7, 40), (12, 500)])
def test_the_interval_is_clopper_pearson(count, total):
    low, high = clopper_pearson(count, total)
    want_low = 0.0 if count == 0 else stats.beta.ppf(0.025, count, total - count + 1)
    want_high = 1.0 if count == total else stats.beta.ppf(0.975, count + 1, total - count)
    assert low == pytest.approx(want_low, abs=1e-9) and high == pytest.approx(want_high, abs=1e-9)


def test_max_fnr_puts_the_review_limit_below_the_lowest_ng_and_the_fail_limit_above_the_highest_ok():
    ok = np.array([0.1, 0.2, 0.3, 0.6])
    ng = np.array([0.5, 0.7, 0.8, 0.9])
    limits = pick_limits(ok, ng, max_fnr=0.01, max_fpr=0.01)
    assert limits.fail == pytest.approx(0.65) and limits.review == pytest.approx(0.4)  # midway: 0.6|0.7, 0.3|0.5
    at = (limits.review, np.nextafter(limits.review, 1), limits.fail, np.nextafter(limits.fail, 1))
    assert [limits.state(float(s)) for s in at] == ["OK", "REVIEW", "REVIEW", "NG"]  # equal is not above


def test_a_target_that_allows_misses_moves_the_review_limit_up():
    ng = np.linspace(0.5, 0.99, 100)  # FNR <= 2 % of 100: two NG images may pass as OK
    limits = pick_limits(np.array([0.1, 0.2, 0.95]), ng, max_fnr=0.02, max_fpr=0.01)
    assert limits.review == pytest.approx((ng[1] + ng[2]) / 2)
    assert measure(limits, np.array([0.1]), ng).fnr.count == 2


def test_separated_sets_have_no_band():
    limits = pick_limits(np.array([0.1, 0.2]), np.array([0.8, 0.9]), max_fnr=0.01, max_fpr=0.01)
    assert limits.review is None and limits.fail == pytest.approx(0.5)


def test_best_f1_is_one_limit():
    limits = pick_limits(np.array([0.1, 0.2, 0.55]), np.array([0.5, 0.8, 0.9]), best_f1=True)
    assert limits.review is None and limits.fail == pytest.approx(0.35)  # all NG caught, one OK called NG: F1 6/7


def test_measure_counts_each_state():
    got = measure(Limits(fail=0.7, review=0.4), np.array([0.1, 0.5, 0.9]), np.array([0.3, 0.6, 0.8, 0.95]))
    assert (got.fnr.count, got.fnr.total, got.fpr.count, got.fpr.total) == (1, 4, 1, 3)
    assert (got.review.count, got.review.total) == (2, 7)
    assert got.fnr.text().startswith("1/4 = 25.0 % [")


def test_the_split_is_stratified_and_seeded():
    ok, ng = list(np.arange(10) / 10), list(np.arange(4) / 10 + 0.5)
    a, b = split(ok, ng, fraction=0.5, seed=3), split(ok, ng, fraction=0.5, seed=3)
    assert (len(a.ok_pick), len(a.ok_test), len(a.ng_pick), len(a.ng_test)) == (5, 5, 2, 2)
    assert np.array_equal(a.ok_pick, b.ok_pick) and sorted([*a.ok_pick, *a.ok_test]) == ok
    three = split([0.1, 0.2, 0.3], [0.7, 0.8, 0.9], fraction=0.5, seed=0)
    assert len(three.ok_test) >= 1 and len(three.ng_pick) >= 1
    with pytest.raises(CalibrationRefused, match=r"^--ng: 1 image scored; at least 2 are needed"):
        split(ok, [0.9], fraction=0.5, seed=0)


def test_the_verdict_section_is_replaced_and_the_rest_kept():
    text = ("# my comment\nname: x  # inline\noutput:\n  threshold: 0.5\n  image_threshold: 0.7\n"
            "verdict:\n  # old\n  fail_if: [{score_above: 0.9}]\npostprocess:\n  min_area: 3\n")
    new = with_verdict(text, {"fail_if": [{"score_above": 0.6}], "review_if": [{"score_above": 0.3}]},
                       drop_image_threshold=True)
    assert new.startswith("# my comment\nname: x  # inline\noutput:\n  threshold: 0.5\npostprocess:\n  min_area: 3\n")
    assert "0.9" not in new and "# old" not in new and "image_threshold" not in new
    assert new.endswith("verdict:\n  fail_if:\n  - {score_above: 0.6}\n  review_if:\n  - {score_above: 0.3}\n")


def test_a_comment_that_opens_the_next_section_is_kept_and_a_second_write_adds_no_second_mark():
    # the comment above `classes:` went with the old verdict block; each write added one more mark line
    text = ("name: x\nverdict:\n  fail_if: [{score_above: 0.5}]\n# a stray one, the block's\n  review_if: []\n\n"
            "# --- the classes: keep in step with the training set ---\nclasses:\n- {name: ok}\n# the end\n")
    once = with_verdict(text, {"fail_if": [{"score_above": 0.7}]}, drop_image_threshold=False)
    assert once.startswith("name: x\n\n# --- the classes: keep in step with the training set ---\nclasses:\n"
                           "- {name: ok}\n# the end\n")
    assert "stray" not in once and "0.5" not in once
    twice = with_verdict(once, {"fail_if": [{"score_above": 0.8}]}, drop_image_threshold=False)
    assert twice.count("# verdict limits written by seglens-cli calibrate") == 1
    assert twice == once.replace("0.7", "0.8")


def test_scores_all_the_same_are_said_to_tell_nothing():
    # limits were chosen and reported (every part REVIEW) without a word that the model separates nothing
    from app.runs.calibrate.band import wide_notes

    same = split([0.5] * 40, [0.5] * 40, fraction=0.5, seed=0)
    assert wide_notes(same)[-1] == "note: every image scored 0.5: the model cannot tell OK from NG, and no limit can"
    assert not any("every image" in note for note in wide_notes(split([0.1] * 40, [0.5] * 40, fraction=0.5, seed=0)))
