"""The review log (app.runs.review.log): states, reopen, crash between writes, another model's rows, corrected masks."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import cv2
import numpy as np
import pytest

from app.errors import SegLensError
from app.runs.review import log as review_module
from app.runs.review.log import (
    REVIEW_FILE,
    STATES,
    ReviewLog,
    corrected_mask_path,
    find_corrected_mask,
    review_folder,
    save_corrected_mask,
)

SHA_A = "a" * 64
SHA_B = "b" * 64
REPO = Path(__file__).resolve().parents[3]


def rows_of(folder: Path) -> list[dict[str, str]]:
    with open(folder / REVIEW_FILE, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_review_folder_is_a_sibling_of_the_inputs(tmp_path: Path, monkeypatch):
    inputs = tmp_path / "batch 7"
    assert review_folder(inputs) == tmp_path / "batch 7_review"
    assert not review_folder(inputs).exists()  # not created here
    monkeypatch.chdir(tmp_path)
    assert review_folder(Path("batch 7")) == tmp_path / "batch 7_review"


def test_no_file_yet_is_an_empty_log_and_the_folder_comes_with_the_first_write(tmp_path: Path):
    folder = tmp_path / "in_review"
    log = ReviewLog.open(folder, SHA_A)
    assert log.get("a.png") is None and log.counts() == dict.fromkeys(STATES, 0) and log.foreign == 0
    assert not folder.exists()
    log.set("a.png", "accepted")
    assert (folder / REVIEW_FILE).is_file()
    assert log.folder == folder


def test_every_state_round_trips_through_a_reopen(tmp_path: Path):
    log = ReviewLog.open(tmp_path, SHA_A)
    for index, state in enumerate(STATES):
        log.set(f"sub/{index}.png", state, note=f"note {index}")
    again = ReviewLog.open(tmp_path, SHA_A)
    for index, state in enumerate(STATES):
        review = again.get(f"sub/{index}.png")
        assert (review.state, review.note, review.model_sha256) == (state, f"note {index}", SHA_A)
        assert review == log.get(f"sub/{index}.png")
    assert again.counts() == dict.fromkeys(STATES, 1)


def test_set_stamps_who_when_and_model_and_keeps_the_note_when_none(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(review_module.getpass, "getuser", lambda: "inspector7")
    log = ReviewLog.open(tmp_path, SHA_A.upper())
    first = log.set("x.png", "rejected", note="scratch missed")
    assert first.who == "inspector7" and first.model_sha256 == SHA_A
    assert len(first.when) == 20 and first.when.endswith("Z") and first.when[10] == "T"  # 2026-12-01T02:25:49Z
    assert log.set("x.png", "corrected").note == "scratch missed"  # None keeps the note
    assert log.set("x.png", "corrected", note="").note == ""  # "" clears it
    assert rows_of(tmp_path) == [{"file": "x.png", "state": "corrected", "note": "", "who": "inspector7",
                                  "when": log.get("x.png").when, "model_sha256": SHA_A}]


def test_who_is_empty_when_the_user_is_unknown(tmp_path: Path, monkeypatch):
    def no_user():
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(review_module.getpass, "getuser", no_user)
    assert ReviewLog.open(tmp_path, SHA_A).set("x.png", "accepted").who == ""


def test_a_bad_state_is_refused_and_nothing_is_written(tmp_path: Path):
    log = ReviewLog.open(tmp_path, SHA_A)
    with pytest.raises(ValueError, match="approved"):
        log.set("x.png", "approved")
    assert not (tmp_path / REVIEW_FILE).exists()


def test_notes_with_commas_newlines_quotes_and_formulas_round_trip(tmp_path: Path):
    notes = ['edge, left\nsecond line "quoted"', "=HYPERLINK(\"http://x\")", "'=already quoted", "''=two",
             "-1.5", "+ plus", "@SUM(A1)", "ünïcødé ✓", "'plain quote"]
    log = ReviewLog.open(tmp_path, SHA_A)
    for index, note in enumerate(notes):
        log.set(f"{index}.png", "rejected", note=note)
    log.set("=cmd|' /C calc'!A0.png", "accepted")
    written = rows_of(tmp_path)
    assert not any(row[key].startswith(("=", "+", "@")) for row in written for key in ("file", "note"))
    assert written[1]["note"] == "'=HYPERLINK(\"http://x\")"
    assert written[4]["note"] == "-1.5"  # a plain number is left as it is
    again = ReviewLog.open(tmp_path, SHA_A)
    assert [again.get(f"{index}.png").note for index in range(len(notes))] == notes
    assert again.get("=cmd|' /C calc'!A0.png").state == "accepted"


def test_a_crash_between_writes_keeps_the_previous_complete_file(tmp_path: Path, monkeypatch):
    log = ReviewLog.open(tmp_path, SHA_A)
    log.set("a.png", "accepted", note="first")
    real_replace, calls = os.replace, []

    def failing_replace(src, dst, **_dir_fds):
        calls.append(dst)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(SegLensError, match=REVIEW_FILE):
        log.set("b.png", "rejected", note="second")
    monkeypatch.setattr(os, "replace", real_replace)
    assert calls and log.get("b.png") is None  # the log shows what is on disk
    again = ReviewLog.open(tmp_path, SHA_A)
    assert again.get("a.png").note == "first" and again.get("b.png") is None
    assert [path.name for path in tmp_path.iterdir()] == [REVIEW_FILE]  # the temporary was removed


def test_a_process_killed_during_the_second_write_leaves_the_first_change_readable(tmp_path: Path):
    """A real crash: the process dies (os._exit) after writing the temporary, before the rename."""
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from app.runs.review.log import ReviewLog
        log = ReviewLog.open(Path(sys.argv[1]), {SHA_A!r})
        log.set("a.png", "accepted", note="made before the crash")
        os.replace = lambda src, dst, **_dir_fds: os._exit(3)
        log.set("b.png", "rejected", note="in flight")
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode == 3, done.stderr.decode()
    leftovers = [path.name for path in tmp_path.iterdir() if path.name != REVIEW_FILE]
    assert len(leftovers) == 1 and leftovers[0].startswith(".seglens-tmp-")  # the half-done write, never read
    again = ReviewLog.open(tmp_path, SHA_A)
    assert again.get("a.png").note == "made before the crash" and again.get("b.png") is None
    again.set("c.png", "accepted")  # and the log goes on
    assert [row["file"] for row in rows_of(tmp_path)] == ["a.png", "c.png"]


def test_another_models_rows_are_kept_but_not_applied(tmp_path: Path):
    old = ReviewLog.open(tmp_path, SHA_B)
    old.set("a.png", "rejected", note="old model missed it")
    old.set("b.png", "accepted")
    log = ReviewLog.open(tmp_path, SHA_A)
    assert log.get("a.png") is None and log.get("b.png") is None
    assert log.foreign == 2 and log.counts() == dict.fromkeys(STATES, 0)
    assert log.next_unreviewed(["a.png", "b.png"], None) == "a.png"
    log.set("a.png", "accepted")
    written = rows_of(tmp_path)
    assert [(row["file"], row["model_sha256"]) for row in written] == [
        ("a.png", SHA_B), ("b.png", SHA_B), ("a.png", SHA_A)]  # never lost on rewrite
    back = ReviewLog.open(tmp_path, SHA_B)
    assert back.get("a.png").note == "old model missed it" and back.foreign == 1


def test_counts_are_per_state_for_this_model(tmp_path: Path):
    log = ReviewLog.open(tmp_path, SHA_A)
    log.set("a.png", "accepted")
    log.set("b.png", "accepted")
    log.set("c.png", "rejected")
    log.set("c.png", "corrected")  # one row per image: the last state counts
    log.set("d.png", "unreviewed")
    assert log.counts() == {"unreviewed": 1, "accepted": 2, "rejected": 0, "corrected": 1}
    assert log.filter(["a.png", "c.png", "e.png"], {"unreviewed", "corrected"}) == ["c.png", "e.png"]


def test_next_unreviewed_goes_forward_and_wraps(tmp_path: Path):
    rels = ["1.png", "2.png", "3.png", "4.png"]
    log = ReviewLog.open(tmp_path, SHA_A)
    assert log.next_unreviewed(rels, None) == "1.png"
    assert log.next_unreviewed(rels, "1.png") == "2.png"
    log.set("2.png", "accepted")
    log.set("3.png", "rejected")
    assert log.next_unreviewed(rels, "1.png") == "4.png"
    assert log.next_unreviewed(rels, "4.png") == "1.png"  # wraps
    assert log.next_unreviewed(rels, "gone.png") == "1.png"  # not in the list: from the start
    log.set("1.png", "corrected")
    log.set("4.png", "unreviewed")  # set back to unreviewed counts as unreviewed
    assert log.next_unreviewed(rels, "4.png") == "4.png"  # the only one left is the current one
    log.set("4.png", "accepted")
    assert log.next_unreviewed(rels, "2.png") is None
    assert log.next_unreviewed([], None) is None


@pytest.mark.parametrize("content, problem", [
    (b"\xff\xfe\x00garbage", "not UTF-8"),
    (b"name,verdict\nx.png,ok\n", "header"),
    (b"file,state,note,who,when,model_sha256\nx.png,accepted,n\n", "row 2 has 3 values"),
    (b"file,state,note,who,when,model_sha256\nx.png,approved,,,," + SHA_A.encode() + b"\n", "unknown state"),
    (b'file,state,note,who,when,model_sha256\nx.png,accepted,"open quote,,,\n', "not a SegLens review log"),
])
def test_a_garbled_file_is_one_error_line_naming_it(tmp_path: Path, content: bytes, problem: str):
    (tmp_path / REVIEW_FILE).write_bytes(content)
    with pytest.raises(SegLensError, match=problem) as caught:
        ReviewLog.open(tmp_path, SHA_A)
    assert str(tmp_path / REVIEW_FILE) in str(caught.value) and "\n" not in str(caught.value)


def test_an_empty_file_is_an_empty_log(tmp_path: Path):
    (tmp_path / REVIEW_FILE).write_bytes(b"")
    assert ReviewLog.open(tmp_path, SHA_A).counts() == dict.fromkeys(STATES, 0)


def test_corrected_mask_path_mirrors_the_rel(tmp_path: Path):
    assert corrected_mask_path(tmp_path, "line 2/part.jpg") == tmp_path / "line 2" / "part.jpg_mask.png"
    assert corrected_mask_path(tmp_path, "a.b.png") == tmp_path / "a.b.png_mask.png"


def test_x_png_and_x_jpg_keep_their_own_corrected_masks(tmp_path: Path):
    folder = tmp_path / "in_review"
    png = save_corrected_mask(folder, "sub/x.png", np.full((4, 4), 1, np.uint8))
    jpg = save_corrected_mask(folder, "sub/x.jpg", np.full((4, 4), 2, np.uint8))
    assert png != jpg  # one name for both: saving one silently replaced the other's
    assert find_corrected_mask(folder, "sub/x.png") == png and find_corrected_mask(folder, "sub/x.jpg") == jpg
    assert cv2.imread(str(png), cv2.IMREAD_UNCHANGED).max() == 1
    assert cv2.imread(str(jpg), cv2.IMREAD_UNCHANGED).max() == 2
    assert find_corrected_mask(folder, "sub/y.png") is None


def _old_style_mask(folder: Path, rel: str, value: int) -> Path:
    """A corrected mask as SegLens wrote it before names kept the extension: `<stem>_mask.png`, marked with the
    rel it was saved for."""
    from app.io.files import encode_png, png_with_text

    path = folder / Path(rel).parent / f"{Path(rel).stem}_mask.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_with_text(encode_png(np.full((4, 4), value, np.uint8)), {review_module.MASK_MARK: rel}))
    return path


def test_an_old_review_folder_mask_belongs_only_to_the_image_it_was_saved_for(tmp_path: Path):
    folder = tmp_path / "in_review"
    old = _old_style_mask(folder, "sub/x.jpg", 3)
    assert find_corrected_mask(folder, "sub/x.jpg") == old  # an existing review folder keeps its corrections
    assert find_corrected_mask(folder, "sub/x.png") is None  # never x.png's reference
    new = save_corrected_mask(folder, "sub/x.png", np.full((4, 4), 1, np.uint8))
    assert old.is_file() and find_corrected_mask(folder, "sub/x.jpg") == old  # x.png's save leaves x.jpg's alone
    moved = save_corrected_mask(folder, "sub/x.jpg", np.full((4, 4), 2, np.uint8))
    assert moved == folder / "sub" / "x.jpg_mask.png" and not old.exists()  # migrated on its next save
    assert find_corrected_mask(folder, "sub/x.jpg") == moved and find_corrected_mask(folder, "sub/x.png") == new
    (folder / "sub" / "z_mask.png").write_bytes((folder / "sub" / "x.png_mask.png").read_bytes())  # marked x.png
    assert find_corrected_mask(folder, "sub/z.png") is None


def test_a_corrected_mask_is_saved_as_a_uint8_label_png_and_may_be_replaced(tmp_path: Path, monkeypatch):
    folder = tmp_path / "in_review"
    mask = np.zeros((40, 60), np.uint8)
    mask[5:20, 10:30] = 2
    path = save_corrected_mask(folder, "sub/part.jpg", mask)
    assert path == folder / "sub" / "part.jpg_mask.png"
    read = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert read.dtype == np.uint8 and np.array_equal(read, mask)
    written = []
    real_atomic_write = review_module.atomic_write
    monkeypatch.setattr(review_module, "atomic_write", lambda p, data: (written.append(p), real_atomic_write(p, data)))
    save_corrected_mask(folder, "sub/part.jpg", mask.astype(np.int64) * 0 + 1)  # ints 0..255 are accepted
    assert written == [path] and cv2.imread(str(path), cv2.IMREAD_UNCHANGED).max() == 1  # atomic, replaced


def test_a_corrected_mask_never_replaces_an_input_or_leaves_the_folder(tmp_path: Path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    cv2.imwrite(str(inputs / "part.png_mask.png"), np.full((8, 8), 200, np.uint8))  # a user's own file by that name
    mask = np.ones((8, 8), np.uint8)
    with pytest.raises(SegLensError, match="not a SegLens corrected mask"):
        save_corrected_mask(inputs, "part.png", mask)  # the review folder given by mistake as the inputs
    with pytest.raises(SegLensError, match="inside the input folder"):
        save_corrected_mask(inputs, "other.png", mask, input_root=inputs)
    with pytest.raises(SegLensError, match="outside the review folder"):
        save_corrected_mask(tmp_path / "inputs_review", "../inputs/x.png", mask)
    (tmp_path / "inputs_review").mkdir()
    (tmp_path / "inputs_review" / "y.png_mask.png").symlink_to(inputs / "part.png_mask.png")
    with pytest.raises(SegLensError):
        save_corrected_mask(tmp_path / "inputs_review", "y.png", mask)
    assert cv2.imread(str(inputs / "part.png_mask.png"), cv2.IMREAD_UNCHANGED).max() == 200  # untouched
    with pytest.raises(ValueError, match="2-D"):
        save_corrected_mask(tmp_path / "inputs_review", "z.png", np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="0..255"):
        save_corrected_mask(tmp_path / "inputs_review", "z.png", np.full((4, 4), 300))


def test_two_windows_on_one_folder_keep_each_others_reviews(tmp_path: Path):
    first, second = ReviewLog.open(tmp_path, SHA_A), ReviewLog.open(tmp_path, SHA_A)
    first.set("a.png", "accepted")
    second.set("b.png", "rejected", note="seen by the second")
    first.set("c.png", "corrected")
    assert first.get("b.png").note == "seen by the second"  # picked up at its next write
    assert [row["file"] for row in rows_of(tmp_path)] == ["a.png", "b.png", "c.png"]
    (tmp_path / REVIEW_FILE).unlink()  # the file deleted behind the log's back: what it had is written again
    first.set("d.png", "accepted")
    assert [row["file"] for row in rows_of(tmp_path)] == ["a.png", "b.png", "c.png", "d.png"]


def test_an_empty_rel_is_refused(tmp_path: Path):
    with pytest.raises(ValueError, match="relative path"):
        ReviewLog.open(tmp_path, SHA_A).set("", "accepted")


def test_the_bundled_samples_are_reviewed_into_the_user_data_folder(tmp_path: Path, monkeypatch):
    """Reviewing resources/samples/anomaly wrote resources/samples/anomaly_review/ into the install."""
    from app.paths import samples_dir

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    samples = samples_dir() / "anomaly"
    folder = review_folder(samples)
    assert folder.parent == tmp_path / "data" / "SegLens" / "reviews"
    assert folder.name.startswith("anomaly_") and folder.name.endswith("_review")
    assert review_folder(samples_dir() / "surface") != folder  # one per input folder
    assert review_folder(tmp_path / "parts") == tmp_path / "parts_review"  # elsewhere: beside the inputs


def test_a_read_only_parent_puts_the_review_folder_in_the_user_data_folder(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    if os.geteuid() == 0:  # root writes into a chmod'ed folder anyway: /proc/sys is read-only even for root
        if os.access("/proc/sys", os.W_OK) or not os.path.isdir("/proc/sys/kernel"):
            pytest.skip("no read-only folder for root here")
        assert review_folder(Path("/proc/sys/kernel")).parent == tmp_path / "data" / "SegLens" / "reviews"
        return
    shared = tmp_path / "share"
    (shared / "parts").mkdir(parents=True)
    shared.chmod(0o555)
    try:
        assert review_folder(shared / "parts").parent == tmp_path / "data" / "SegLens" / "reviews"
    finally:
        shared.chmod(0o755)


UNDECODABLE = os.fsdecode(b"sub/caf\xe9.png")  # Latin-1 bytes in a Linux file name: Python spells them \udce9


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")
def test_a_review_of_a_file_whose_name_is_not_utf8_survives_a_reopen(tmp_path: Path):
    ReviewLog.open(tmp_path, SHA_A).set(UNDECODABLE, "rejected", note="burr")
    text = (tmp_path / REVIEW_FILE).read_bytes().decode("utf-8")  # still UTF-8 text
    assert "sub/caf\\xe9.png,rejected,burr" in text
    again = ReviewLog.open(tmp_path, SHA_A)
    assert again.state_of(UNDECODABLE) == "rejected" and again.get(UNDECODABLE).note == "burr"  # was lost
    again.set(UNDECODABLE, "accepted")
    assert len(ReviewLog.open(tmp_path, SHA_A).reviews()) == 1  # the same row, not a second one


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux only")
def test_a_corrected_mask_of_a_file_whose_name_is_not_utf8(tmp_path: Path):
    path = save_corrected_mask(tmp_path, UNDECODABLE, np.ones((4, 4), np.uint8))
    assert os.fsencode(path.name) == b"caf\xe9.png_mask.png"  # beside its image's name, byte for byte
    assert find_corrected_mask(tmp_path, UNDECODABLE) == path
    save_corrected_mask(tmp_path, UNDECODABLE, np.zeros((4, 4), np.uint8))  # ours: may be replaced
