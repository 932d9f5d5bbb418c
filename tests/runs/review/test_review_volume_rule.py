"""The review report's row of a volume under a volume rule (`min_component_ml`): judged on the volume's 3D
components like the CLI's report, never one slice at a time (which would make every volume NG: "slice 1: no volume
to judge …")."""

from __future__ import annotations

from app.inference.model.builder import load_spec
from app.inference.runtime.session import open_session
from app.io.discover import discover
from app.runs.review.items import volume_item
from tests.dicom_factory import disc_slice, write_series


def series_row(ct_model, tmp_path, limit: float):
    rule = f"verdict:\n  fail_if:\n    - {{class: disc, min_component_ml: {limit}}}\n"
    ct_model.with_suffix(".yaml").write_text(ct_model.with_suffix(".yaml").read_text() + rule)
    write_series(tmp_path / "ct", slices=6)
    spec = load_spec(ct_model)
    (item,) = [i for i in discover([tmp_path / "ct"]) if i.volume is not None]
    return volume_item(open_session(spec, "cpu"), item.volume, spec=spec, name="ct", review=None)


def test_the_volume_rule_judges_the_volume_not_each_slice(ct_model, tmp_path):
    cone = int(sum((disc_slice(k, 32, 32) > 0).sum() for k in range(6)))
    ml = cone * 2.5 * 0.7 * 0.8 / 1000
    row = series_row(ct_model, tmp_path, 0.5)
    assert (row.verdict, row.verdict_reason) == (
        "ng", f"disc component {ml:.3g} mL >= 0.5 mL (26-connected, {cone} voxels)")


def test_under_the_limit_the_volume_is_ok(ct_model, tmp_path):
    row = series_row(ct_model, tmp_path, 50)
    assert (row.verdict, row.verdict_reason) == ("ok", "")
