"""serve's own boundaries beyond the token (issue 36), in process (no kserve): its TLS files read through the
untrusted-file gate (a FIFO named by mistake is refused at once, not waited on), and a token served without TLS
beyond loopback said in a warning line."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from app.errors import SegLensError
from app.serve.auth import Auth, check_exposure
from app.serve.server import check_tls


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes")
def test_a_fifo_named_as_the_tls_key_is_refused_in_one_line_at_once(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    os.mkfifo(key)  # a plain open() would wait for a writer for ever
    started = time.monotonic()
    with pytest.raises(SegLensError) as caught:
        check_tls(cert, key)
    assert time.monotonic() - started < 2.0
    assert str(caught.value) == f"{key}: cannot read the TLS key: not a regular file: a named pipe (FIFO)"


@pytest.mark.skipif(sys.platform == "win32", reason="/dev/zero")
def test_a_device_named_as_the_certificate_is_refused_not_read(tmp_path):
    with pytest.raises(SegLensError, match=r"^/dev/zero: cannot read the TLS certificate: not a regular file"):
        check_tls(Path("/dev/zero"), tmp_path / "key.pem")


def test_a_token_served_in_clear_text_beyond_loopback_is_warned():
    token = Auth("t" * 16)
    assert check_exposure("0.0.0.0", token, no_auth=False, tls=True) is None
    assert check_exposure("127.0.0.1", token, no_auth=False, tls=False) is None  # this machine only
    assert check_exposure("0.0.0.0", token, no_auth=False, tls=False) == (
        "warning: serving on 0.0.0.0 without TLS: clients send the token in clear text, readable on the way "
        "(seglens clients refuse unless --allow-insecure); give --tls-cert and --tls-key")
