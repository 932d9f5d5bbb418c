"""What a model's sidecar and labels file may make SegLens do (issue 24, §3 and §4): open only regular files
and never wait (a FIFO `classes_file` hung `info` and `run`), read labels only from beside the sidecar, keep
control characters out of class names (they reach CSV cells and output names), tell a `[unlabelled]` line from
JSON, and never cut an image into hundreds of thousands of tiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO

from app.errors import InferenceError, SidecarError
from app.guard.untrusted import NotRegularFile
from app.inference.image import pipeline, tiling
from app.inference.model.builder import load_spec
from app.inference.model.labels import read_labels
from app.inference.model.validators import read_at_most
from app.inference.runtime.session import open_session

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """The CLI in a child process: a hang is a failed test (TimeoutExpired), not a stuck suite."""
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def load_error(model) -> str:
    with pytest.raises(SidecarError) as caught:
        load_spec(model)
    message = str(caught.value)
    assert "\n" not in message
    return message


# -- FIFOs and devices -------------------------------------------------------------------------------------------

@needs_fifo
def test_a_fifo_classes_file_is_one_line_in_info_and_run(models, tmp_path):
    model = models("classifier")
    os.mkfifo(model.parent / "labels.txt")
    model.with_suffix(".yaml").write_text("classes_file: labels.txt\n")
    image = tmp_path / "x.png"
    image.write_bytes(b"")  # never reached: the model is refused first
    for args in (["info", str(model)], ["run", str(model), str(image), "--out", str(tmp_path / "out")]):
        done = cli(*args)  # before: open() waited for a writer for ever
        assert done.returncode != 0 and "Traceback" not in done.stderr
        line = next(line for line in done.stderr.splitlines() if "labels.txt" in line)
        assert "'classes_file'" in line and "not a regular file: a named pipe (FIFO)" in line


@needs_fifo
def test_a_fifo_sidecar_is_refused_not_skipped(models):
    model = models("classifier")
    os.mkfifo(model.with_suffix(".yaml"))
    message = load_error(model)  # before: skipped silently, the model ran without its sidecar
    assert message.startswith(str(model.with_suffix(".yaml"))) and "not a regular file: a named pipe" in message


@needs_fifo
def test_a_fifo_or_folder_given_as_the_sidecar_is_named_for_what_it_is(models, tmp_path):
    model = models("classifier")
    os.mkfifo(tmp_path / "side.yaml")
    (tmp_path / "dir.yaml").mkdir()
    for name, what in (("side.yaml", "a named pipe (FIFO)"), ("dir.yaml", "a folder")):
        with pytest.raises(SidecarError) as caught:  # before: "sidecar file not found"
            load_spec(model, tmp_path / name)
        assert str(caught.value) == f"{tmp_path / name}: cannot read sidecar (not a regular file: {what})"


def test_read_at_most_refuses_a_device_without_reading_it():
    with pytest.raises(NotRegularFile, match="a character device"):
        read_at_most("/dev/zero", 10)  # type: ignore[arg-type]


# -- where a classes_file may be ----------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["../outside.txt", "{abs}", "sub/../../outside.txt"])
def test_a_classes_file_outside_the_sidecars_folder_is_refused(models, tmp_path, where):
    model = models("classifier")
    outside = tmp_path / "outside.txt"
    outside.write_text("red\ngreen\nblue\n")
    model.with_suffix(".yaml").write_text(f"classes_file: {where.format(abs=outside)}\n")
    message = load_error(model)  # before: read from wherever it pointed
    assert "'classes_file'" in message and "beside the sidecar" in message


def test_a_classes_file_symlinked_out_of_the_folder_is_refused(models, tmp_path):
    model = models("classifier")
    outside = tmp_path / "outside.txt"
    outside.write_text("red\ngreen\nblue\n")
    (model.parent / "labels.txt").symlink_to(outside)
    model.with_suffix(".yaml").write_text("classes_file: labels.txt\n")
    message = load_error(model)
    assert "'classes_file'" in message and "leads outside the sidecar's folder" in message


def test_a_classes_file_in_a_subfolder_is_read(models):
    model = models("classifier")
    (model.parent / "meta").mkdir()
    (model.parent / "meta" / "labels.txt").write_text("red\ngreen\nblue\n")
    model.with_suffix(".yaml").write_text("classes_file: meta/labels.txt\n")
    assert load_spec(model).class_names == ("red", "green", "blue")


# -- what a name may hold ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line"), [
    ("red\ngr\x1b[2Jeen\nblue\n", 2), ("red\ngreen\nbl\x07ue\n", 3),
    (json.dumps(["red", "gre\nen", "blue"]), 2), ("0,red\n1,\"gre\ren\"\n2,blue\n", 2),
    ("red\ngreen\u202e\nblue\n", 2),  # a right-to-left override: `gnp.exe` shown for `exe.png`
])
def test_control_characters_in_a_labels_file_are_refused(tmp_path, text, line):
    path = tmp_path / "labels.txt"
    path.write_bytes(text.encode("utf-8"))
    with pytest.raises(ValueError) as caught:
        read_labels(path)  # before: the name went into CSV cells, column names and SEG labels as it was
    assert str(caught.value).startswith(str(path)) and f"label {line}" in str(caught.value)
    assert "control character" in str(caught.value) and "\n" not in str(caught.value)


def test_control_characters_in_sidecar_classes_are_refused(models):
    model = models("rgb_classes")
    model.with_suffix(".yaml").write_text('classes: [red, "gr\\x1b]0;owned\\x07een", blue]\n')
    message = load_error(model)
    assert "'classes'" in message and "[1].name" in message and "control character" in message


def test_control_characters_in_metadata_names_are_made_visible(models):
    from onnx_factory import class_metadata

    model = models("rgb_classes", metadata=class_metadata(["red", "gr\x1been", "blue"]))
    names = load_spec(model).class_names  # metadata is never trusted, but must not stop a model loading
    assert names == ("red", "gr\\x1been", "blue")


def test_control_characters_in_the_model_name_are_refused_or_spelt_out(models):
    model = models("rgb_classes", metadata={"name": "seg\x1b[31mmodel"})
    assert load_spec(model).name == "seg\\x1b[31mmodel"  # metadata: spelt out
    model.with_suffix(".yaml").write_text('name: "seg\\x07model"\n')
    message = load_error(model)  # the sidecar: refused, naming the key
    assert "'name'" in message and "control character" in message


def test_a_first_line_in_brackets_is_a_label_not_json(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("[unlabelled]\ncat\ndog\n")
    assert read_labels(path) == ("[unlabelled]", "cat", "dog")  # before: "not a JSON list of names"
    path.write_text('["cat", "dog"]\n')
    assert read_labels(path) == ("cat", "dog")
    path.write_text('["cat", 3]')
    with pytest.raises(ValueError, match="list of non-empty strings"):
        read_labels(path)


# -- tiles ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("overlap", [0.91, 0.99])
def test_an_overlap_over_the_cap_is_refused_naming_the_key(models, overlap):
    model = models("fixed_bright_spots")
    model.with_suffix(".yaml").write_text(f"input:\n  resize: tile\n  tile: {{overlap: {overlap}}}\n")
    message = load_error(model)  # before: 0.99 gave a stride of 1 px (288,369 tiles for 600²)
    assert "'input.tile.overlap'" in message and "at most 0.9" in message


def test_the_overlap_cap_itself_is_allowed(models):
    model = models("fixed_bright_spots")
    model.with_suffix(".yaml").write_text("input:\n  resize: tile\n  tile: {overlap: 0.9}\n")
    assert load_spec(model).input.tile.overlap == 0.9


def test_tile_count_is_counted_without_making_the_grid():
    assert tiling.tile_count((600, 600), (256, 256), 0.25) == len(tiling.grid((600, 600), (256, 256), 0.25))
    assert tiling.tile_count((600, 600), (8, 8), 0.9) == len(tiling.grid((600, 600), (8, 8), 0.9))
    assert tiling.tile_count((16384, 16384), (1, 1), 0.0) == 16384 ** 2


def test_an_image_needing_too_many_tiles_is_an_error_naming_the_keys(models):
    model = open_session(_tiny_tiles(models), "cpu")
    with pytest.raises(InferenceError) as caught:
        pipeline.run_image(model, np.zeros((2100, 2100), np.uint8))  # 263² tiles of 8×8: over the cap
    message = str(caught.value)
    assert "69169 tiles" in message and f"limit is {tiling.MAX_TILES}" in message
    assert "input.tile.size" in message and "input.tile.overlap" in message


def _tiny_tiles(models):
    model = models("blurred_binary")
    model.with_suffix(".yaml").write_text("input:\n  resize: tile\n  tile: {overlap: 0, size: [8, 8], max_pixels: 1}\n")
    return load_spec(model)
