"""app.guard.shared.rename_under: a SegLens file in a shared folder renamed (a log's rotation, a copy moved aside)
only by a root and single components, and never through a link planted under either name."""

from __future__ import annotations

import pytest

from app.guard.names import PathEscape
from app.guard.shared import rename_under


def test_a_file_is_renamed_over_the_new_name(tmp_path):
    (tmp_path / "log.jsonl").write_text("new")
    (tmp_path / "log.1.jsonl").write_text("old")
    rename_under(tmp_path, "log.jsonl", "log.1.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.1.jsonl"]
    assert (tmp_path / "log.1.jsonl").read_text() == "new"


def test_a_link_under_either_name_is_moved_or_replaced_itself_never_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("someone else's")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "log.1.jsonl").symlink_to(victim)  # planted under the new name: replaced, the target untouched
    (shared / "log.jsonl").write_text("ours")
    rename_under(shared, "log.jsonl", "log.1.jsonl")
    assert not (shared / "log.1.jsonl").is_symlink() and (shared / "log.1.jsonl").read_text() == "ours"
    (shared / "log.2.jsonl").symlink_to(victim)  # planted under the old name: the link itself moves
    rename_under(shared, "log.2.jsonl", "log.3.jsonl")
    assert (shared / "log.3.jsonl").is_symlink() and victim.read_text() == "someone else's"


@pytest.mark.parametrize(("old", "new"), [("../x", "y"), ("x", "../y"), ("x", "/etc/y"), ("..", "y"), ("x", ""),
                                          ("x", "a\x00b")])
def test_a_name_that_is_not_one_component_is_refused(tmp_path, old, new):
    (tmp_path / "x").write_text("x")
    with pytest.raises(PathEscape):
        rename_under(tmp_path / "x" if old == ".." else tmp_path, old, new)
    assert (tmp_path / "x").read_text() == "x"
