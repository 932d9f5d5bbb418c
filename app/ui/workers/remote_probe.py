"""The remote dialog's worker: Test connection and the OS keyring, on a thread of their own.

Both may block (a server that does not answer waits out its timeout; a keyring backend talks D-Bus and may wait
for an unlock prompt), so neither runs on the GUI thread, nor on the inference thread (a Run on all must not hold
a connection test back). Made with the remote controller, on first use: nothing of it exists at start-up.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal, Slot

from app.ui.state.remote_messages import KEYRING_SERVICE

if TYPE_CHECKING:
    from collections.abc import Callable

    from app.inference.remote.session import RemoteSession, RemoteTarget
    from app.ui.state.remote_messages import RemoteTest, SecretAsk, SecretKeep

log = logging.getLogger(__name__)
TEST_TIMEOUT_S = 10.0  # a test says what is now: one try, and not the half-minute a model's request may take


class RemoteProbe(QObject):
    tested = Signal(object)  # RemoteTested
    secret_found = Signal(object)  # SecretFound
    keep_failed = Signal(str)  # the keyring refused to keep (or forget) a secret: one line

    def __init__(self) -> None:
        super().__init__()
        self._testing: RemoteSession | None = None  # the session a test is waiting on (cancel)

    def cancel(self) -> None:
        """From the GUI thread (the window closes): a test waiting on a silent server gives up now, so the
        probe's thread is joined at once (RemoteSession.cancel is thread-safe)."""
        testing = self._testing
        if testing is not None:
            testing.cancel()

    @Slot(object)
    def test(self, request: RemoteTest) -> None:
        """Open the target's session (metadata and one warm-up request, one try: a test says what is now), close it."""
        from app.ui.state.remote_messages import RemoteTested

        try:
            line = test_line(request.target, opened=self._opened)
        finally:
            self._testing = None
        self.tested.emit(RemoteTested(request.request_id, *line))

    def _opened(self, session: RemoteSession) -> None:
        self._testing = session

    @Slot(object)
    def find_secret(self, request: SecretAsk) -> None:
        from app.ui.state.remote_messages import SecretFound

        try:
            import keyring

            secret = keyring.get_password(KEYRING_SERVICE, request.account) or ""
        except Exception as exc:  # ImportError, keyring.errors.KeyringError, a backend's own failure (D-Bus gone)
            self.secret_found.emit(SecretFound(request.request_id, request.account, problem=keyring_problem(exc)))
            return
        self.secret_found.emit(SecretFound(request.request_id, request.account, secret))

    @Slot(object)
    def keep_secret(self, request: SecretKeep) -> None:
        """Keep the secret in the keyring, or forget the one kept ("Remember" unticked)."""
        try:
            import keyring
            import keyring.errors

            if request.secret:
                keyring.set_password(KEYRING_SERVICE, request.account, request.secret)
            else:
                with contextlib.suppress(keyring.errors.PasswordDeleteError):  # none kept: nothing to forget
                    keyring.delete_password(KEYRING_SERVICE, request.account)
        except Exception as exc:
            self.keep_failed.emit(keyring_problem(exc))


def test_line(target: RemoteTarget, *, opened: Callable[[RemoteSession], None] | None = None) -> tuple[str, bool]:
    """("ready: nuclei (onnxruntime_onnx, server: CPU)", True), or (the one-line error, False). `opened` hears
    the session before its warm-up request (so that it can be cancelled)."""
    from app.errors import SegLensError
    from app.inference.remote.session import open_remote_session

    session = None
    try:
        session = open_remote_session(replace(target, retries=0, timeout_s=min(target.timeout_s, TEST_TIMEOUT_S)),
                                      warm_up=False)
        if opened is not None:
            opened(session)
        session.warm_up()
        from app.ui.state.remote_messages import server_about

        remote = session.info.remote  # read after the warm-up: the server's device is known from its answer
        about = server_about(remote) if remote else ""
        return f"ready: {target.model}" + (f" ({about})" if about else ""), True
    except SegLensError as exc:
        return str(exc), False
    except Exception as exc:  # a failure the client does not know: still one line, never a traceback
        from app.errors import one_line

        log.warning("testing %s failed", target.where, exc_info=True)
        return f"{target.where}: {one_line(exc, most=200, typed=True)}", False
    finally:
        if session is not None:
            session.close()


def keyring_problem(exc: BaseException) -> str:
    """The keyring's failure in one line (never the secret: keyring's messages do not carry it)."""
    if isinstance(exc, ImportError):
        from app.errors import extra_line

        return f"{extra_line(feature='the OS keyring', extra='remote')}; the secret is not remembered"
    return f"no usable keyring ({type(exc).__name__}): the secret is not remembered; install a keyring backend"
