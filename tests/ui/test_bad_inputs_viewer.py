"""The bad-input corpus (tools/make_bad_corpus.py) mixed with good images, through the viewer (the CLI's half is
tests/cli/test_bad_inputs.py, which needs no Qt)."""

from __future__ import annotations

TIMEOUT = 20_000


def test_viewer_on_the_corpus(qtbot, make_main_window, models, bad_corpus, tmp_path):
    folder, expected = bad_corpus
    window = make_main_window(models("rgb_classes"))
    window.add_paths([folder])
    assert len(window.files.paths()) == len(expected)
    with qtbot.waitSignal(window.run_all_finished, timeout=120_000):
        window.run_all(tmp_path / "export")
    for name, problem in expected.items():
        status = window.files.status(str(folder / name))
        assert status == ("done" if problem is None else "error"), name
    bad = next(n for n, p in expected.items() if p == "empty file")
    with qtbot.waitSignal(window.image_failed, timeout=TIMEOUT):
        window.files.setCurrentRow(window.files.paths().index(str(folder / bad)))
    good = next(n for n, p in expected.items() if p is None)
    with qtbot.waitSignal(window.overlay_shown, timeout=TIMEOUT):  # still responsive, still working
        window.files.setCurrentRow(window.files.paths().index(str(folder / good)))
