"""serve's token check and exposure rule, in process (app.serve.auth imports no kserve)."""

from __future__ import annotations

import pytest

from app.errors import SegLensError
from app.serve.auth import Auth, check_exposure, is_loopback


def test_the_token_is_checked_whole_and_never_shown():
    auth = Auth("s3cret")
    assert auth.allows("Bearer s3cret") and auth.allows("  Bearer s3cret ")
    for header in (None, "", "s3cret", "Bearer s3cre", "Bearer s3cret2", "bearer s3cret", "Basic s3cret", "Bearer é"):
        assert not auth.allows(header), header
    assert "s3cret" not in repr(auth)
    assert Auth().allows(None) and not Auth().required


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("10.0.0.1", False),
    ("no-such-host.invalid", False),
])
def test_loopback_is_this_machine_only(host: str, loopback: bool):
    assert is_loopback(host) is loopback


def test_an_open_server_beyond_loopback_is_refused_unless_no_auth_which_warns():
    assert check_exposure("127.0.0.1", Auth(), no_auth=False) is None
    assert check_exposure("0.0.0.0", Auth("t" * 16), no_auth=False) is None
    with pytest.raises(SegLensError) as caught:
        check_exposure("192.168.1.20", Auth(), no_auth=False)
    assert str(caught.value).startswith("serve on 192.168.1.20 would be reachable from other machines without a token")
    assert check_exposure("0.0.0.0", Auth(), no_auth=True) == (
        "warning: serving on 0.0.0.0 with no token (--no-auth): anyone who reaches this port can run the models")


def test_a_short_token_is_refused_beyond_loopback_in_one_line():
    from app.serve.auth import MIN_PUBLIC_TOKEN

    assert MIN_PUBLIC_TOKEN == 16
    assert check_exposure("127.0.0.1", Auth("x"), no_auth=False) is None  # this machine only: the user's call
    assert check_exposure("0.0.0.0", Auth("x" * 16), no_auth=False) is None
    for host in ("0.0.0.0", "192.168.1.20", "::"):
        with pytest.raises(SegLensError) as caught:
            check_exposure(host, Auth("x"), no_auth=False)
        line = str(caught.value)
        assert line.startswith(f"serve on {host} would be reachable from other machines with a token of 1 "
                               "characters: give one of at least 16")
        assert "\n" not in line


def test_serve_with_a_short_token_on_a_public_bind_exits_2_before_loading_anything(capsys, monkeypatch):
    from app.cli import main

    monkeypatch.setenv("SEGLENS_SERVE_TOKEN", "9")
    assert main(["serve", "nuclei", "--host", "0.0.0.0", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "with a token of 1 characters: give one of at least 16" in err[0]
    assert "9" not in err[0]  # the token is never echoed
