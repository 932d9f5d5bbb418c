"""app.guard.shared.remove_empty_under: a SegLens folder left empty (a volume's per-slice folder after its outputs
were removed) taken away by a root and single components, only when empty — never a folder another run is writing
into at that moment, never through a link planted under its name, never outside the root."""

from __future__ import annotations

import pytest

from app.guard.names import PathEscape
from app.guard.shared import remove_empty_under


def test_an_empty_folder_is_removed_and_a_folder_with_anything_in_it_is_kept(tmp_path):
    (tmp_path / "study" / "empty").mkdir(parents=True)
    (tmp_path / "study" / "busy").mkdir()
    (tmp_path / "study" / "busy" / "another_series_seg.dcm").write_bytes(b"theirs")
    assert remove_empty_under(tmp_path, "study", "empty") is True
    assert remove_empty_under(tmp_path, "study", "busy") is False
    assert (tmp_path / "study" / "busy" / "another_series_seg.dcm").read_bytes() == b"theirs"
    assert sorted(p.name for p in (tmp_path / "study").iterdir()) == ["busy"]
    assert remove_empty_under(tmp_path, "study", "gone") is False  # nothing there: nothing to do


def test_a_link_or_a_file_under_the_name_is_left_and_its_target_untouched(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "out"
    root.mkdir()
    (root / "linked").symlink_to(elsewhere)  # an empty folder's name, a link planted under it
    (root / "file").write_bytes(b"x")
    assert remove_empty_under(root, "linked") is False and remove_empty_under(root, "file") is False
    assert elsewhere.is_dir() and (root / "linked").is_symlink() and (root / "file").read_bytes() == b"x"


@pytest.mark.parametrize("parts", [("..", "x"), ("a/b",), ()])
def test_a_name_that_is_not_one_component_under_the_root_is_refused(tmp_path, parts):
    (tmp_path / "x").mkdir()
    with pytest.raises((PathEscape, ValueError)):
        remove_empty_under(tmp_path / "root", *parts)
    assert (tmp_path / "x").is_dir()
