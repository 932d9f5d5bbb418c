"""OpenCV's and libjpeg's own messages never reach the terminal: a damaged file is the one SegLens line."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from conftest import REPO
from PIL import Image


def _jpeg(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def _png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format="PNG")
    return buffer.getvalue()


def _run(model: Path, *inputs: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", "run", str(model), *map(str, inputs), "--out", str(out),
                           "--device", "cpu"], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_a_damaged_png_is_one_line_on_stderr(models, tmp_path):
    rng = np.random.default_rng(3)
    png = _png(rng.integers(0, 255, (64, 64, 3), np.uint8))
    (tmp_path / "half.png").write_bytes(png[: len(png) // 2])  # OpenCV's PNG reader logs "[ WARN:0@…]" for it
    done = _run(models("rgb_classes"), tmp_path / "half.png", out=tmp_path / "out")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"error: {tmp_path / 'half.png'}: damaged or truncated image (image file is truncated)"]


def test_a_jpeg_libjpeg_warns_about_is_read_in_silence(models, tmp_path):
    rng = np.random.default_rng(4)
    pixels = rng.integers(0, 255, (64, 64, 3), np.uint8)
    data = bytearray(_jpeg(pixels))
    end = data.rfind(b"\xff\xd9")
    data[end:end] = b"\x12" * 64  # libjpeg: "Corrupt JPEG data: 6x extraneous bytes before marker 0xd9"
    (tmp_path / "extra.jpg").write_bytes(bytes(data))
    done = _run(models("rgb_classes"), tmp_path / "extra.jpg", out=tmp_path / "out")
    assert done.returncode == 0 and done.stderr.strip() == ""
    from app.io.images import read_image

    decoded = read_image(tmp_path / "extra.jpg").pixels
    with Image.open(tmp_path / "extra.jpg") as img:
        assert np.array_equal(decoded, np.asarray(img.convert("RGB")))  # the same pixels as Pillow's


def test_only_the_decoders_warnings_are_dropped_the_rest_comes_out(capfd):
    import threading

    from app.io.native import quiet_native_stderr

    inside, release = threading.Event(), threading.Event()

    def other_decoder():
        with quiet_native_stderr():  # a second decoder shares the redirection
            inside.set()
            release.wait(10)
            os.write(2, b"libpng warning: iCCP: known incorrect sRGB profile\n")

    worker = threading.Thread(target=other_decoder)
    with quiet_native_stderr():
        worker.start()
        inside.wait(10)
        os.write(2, b"Corrupt JPEG data: 3 extraneous bytes before marker 0xd9\n")
        os.write(2, b"progress: 3 of 9\n")  # another thread's own line, written meanwhile
    release.set()
    worker.join(10)
    assert capfd.readouterr().err == "progress: 3 of 9\n"


def test_ffmpegs_lines_are_dropped_whatever_its_component_is_called(capfd):
    from app.io.native import quiet_native_stderr

    with quiet_native_stderr():  # a demuxer's name has commas: the line came out on the terminal
        os.write(2, b"[mov,mp4,m4a,3gp,3g2,mj2 @ 0x5613f0c2a400] moov atom not found\n")
        os.write(2, b"[tcp @ 0x7f00] Connection refused\n[mjpeg @ 0x55ec8c805c40] bad vlc: 1\n")
        os.write(2, b"[a line of its own] @ 0x1 stays\n")
    assert capfd.readouterr().err == "[a line of its own] @ 0x1 stays\n"


def test_the_decoders_and_onnx_runtimes_capture_never_overlap(capfd):
    """Both point file descriptor 2 elsewhere: interleaved, the later restore put a closed capture back as stderr."""
    import threading

    from app.inference.runtime.providers import capture_native_stderr
    from app.io.native import quiet_native_stderr

    decoding, done = threading.Event(), threading.Event()

    def decoder():
        with quiet_native_stderr():
            decoding.set()
            done.wait(0.2)

    worker = threading.Thread(target=decoder)
    worker.start()
    decoding.wait(10)
    with capture_native_stderr() as captured:  # waits for the decoder to give fd 2 back
        os.write(2, b"ort: EP error\n")
    done.set()
    worker.join(10)
    os.write(2, b"after\n")
    assert captured.text == "ort: EP error\n" and capfd.readouterr().err == "after\n"
