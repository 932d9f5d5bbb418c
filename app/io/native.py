"""Native decoders' own messages kept off the terminal: a damaged file is the one line SegLens prints for it.

libjpeg (inside OpenCV) prints its warnings ("Corrupt JPEG data: 61 extraneous bytes before marker 0xd9") with
`fprintf(stderr, …)`, which no OpenCV log level reaches; OpenCV's own `[ WARN:0@…]` lines are silenced by
`OPENCV_LOG_LEVEL=ERROR`, set by the entry points (app.logs.quiet_libraries). `quiet_native_stderr` points file
descriptor 2 at a temporary file while a decoder runs and hands back everything written there meanwhile except
the decoders' known warning lines: another thread's output is delayed, never lost. Decoders on several threads
share one redirection (the first in opens it, the last out restores it), so decoding is never serialised.
Whoever else points file descriptor 2 elsewhere (ONNX Runtime's log capture, app.inference.runtime.providers) takes
`FD2_LOCK` too: two redirections that overlap would restore each other's temporary file as stderr for good.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress

# what libjpeg, libpng and FFmpeg (`[tcp @ 0x…] …`, `[mov,mp4,m4a,3gp,3g2,mj2 @ 0x…] …`: app.io.sources.video
# opening a stream or a file) write on their own:
# warnings about a file SegLens reports itself, or decodes as Pillow does
_NATIVE = re.compile(rb"^(Corrupt JPEG data|Premature end of JPEG file|Invalid SOS parameters|Unsupported marker|"
                     rb"Warning: unknown JFIF|libpng warning|\[ WARN:|\[[^\]\n]+ @ 0x[0-9a-f]+\] )")
FD2_LOCK = threading.Lock()  # held while fd 2 points elsewhere: by the decoders together, or by one other capture
_lock = threading.Lock()  # guards the count below
_users = 0
_saved: int | None = None
_capture = None


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Run the body with native writes to stderr captured; the decoders' warnings are dropped, the rest written
    out when the last decoder leaves. Where file descriptor 2 cannot be redirected (none open: a windowed app),
    the body runs as it is."""
    entered = _enter()
    try:
        yield
    finally:
        if entered:
            _leave()


def _enter() -> bool:
    global _users, _saved, _capture
    with _lock:
        if _users == 0:
            FD2_LOCK.acquire()  # released by the last decoder out, whichever thread that is
            try:
                with suppress(OSError, ValueError, AttributeError):
                    sys.stderr.flush()
                capture = tempfile.TemporaryFile()  # noqa: SIM115 (closed in _leave, by the last decoder out)
                saved = os.dup(2)
                os.dup2(capture.fileno(), 2)
            except OSError:
                FD2_LOCK.release()
                return False
            _saved, _capture = saved, capture
        _users += 1
        return True


def _leave() -> None:
    global _users, _saved, _capture
    with _lock:
        _users -= 1
        if _users:
            return
        with suppress(OSError, ValueError, AttributeError):
            sys.stderr.flush()  # Python's own buffered stderr, written meanwhile, goes out with the rest
        assert _saved is not None and _capture is not None  # set by the first _enter, cleared only here
        os.dup2(_saved, 2)
        os.close(_saved)
        _capture.seek(0)
        kept = b"".join(line for line in _capture.read().splitlines(keepends=True) if not _NATIVE.match(line))
        _capture.close()
        _saved = _capture = None
        FD2_LOCK.release()
    if kept:
        with suppress(OSError):
            os.write(2, kept)
