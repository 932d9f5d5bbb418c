"""Model ▸ Device ▸ Remote server…: the dialog's intents to the probe worker (Test connection, the keyring) and to
the model loader (the server's model as the device), and the remote session's news to the status bar.

Made on first use (by actions.py): nothing of it, its thread or the client library exists before the reader asks.
What is remembered: the URL, model, version, kind of credentials, user and CA bundle in the settings; a token or
password only in the OS keyring (service "seglens-remote"), only when "Remember" is ticked — never in the settings,
never in a log. The servers the reader lets credentials reach in clear text (the dialog's "Send credentials without
TLS to this server", the CLI's --allow-insecure) are remembered by 'host:port', each on its own.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QObject, QSettings, Signal

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from app.inference.remote.session import RemoteTarget
    from app.ui.controllers.loader import ModelLoader
    from app.ui.state.remote_messages import RemoteTested, SecretFound
    from app.ui.widgets.remote_dialog import RemoteDialog, RemoteForm
    from app.ui.widgets.status import StatusBar
    from app.ui.workers.remote_probe import RemoteProbe
    from app.ui.workers.worker import InferenceWorker

log = logging.getLogger(__name__)
SETTINGS = ("url", "model", "version", "auth", "username", "ca_file", "sidecar")  # under remote/; never a secret
CLEAR_TEXT_SERVERS = "remote/clear_text_servers"  # 'host:port' of each server ticked for, space-separated
STATUS_MS = 15_000


class RemoteController(QObject):
    test_requested = Signal(object)  # RemoteTest, to the probe
    secret_asked = Signal(object)  # SecretAsk
    keep_requested = Signal(object)  # SecretKeep

    def __init__(self, *, loader: ModelLoader, worker: InferenceWorker, status: StatusBar, settings: QSettings,
                 writable: Callable[[], bool], dialog_parent: QWidget | None = None, probe: RemoteProbe | None = None,
                 parent: QObject | None = None) -> None:
        """`writable`: whether the settings may change (a self-test's may not); `probe`: for tests."""
        super().__init__(parent)
        from app.ui.workers.remote_probe import RemoteProbe
        from app.ui.workers.threads import start_worker_thread

        self._loader, self._status, self._settings, self._writable = loader, status, settings, writable
        self._cancel_remote = worker.cancel_remote  # the close: a silent server's request given up, not waited out
        self._dialog_parent = dialog_parent
        self._dialog: RemoteDialog | None = None
        self._ids = itertools.count(1)
        self._test_id = self._secret_id = 0
        self._keyring_problem = ""  # why the keyring cannot be used, said once the reader asks it to remember
        self.probe = probe or RemoteProbe()
        self.test_requested.connect(self.probe.test)
        self.secret_asked.connect(self.probe.find_secret)
        self.keep_requested.connect(self.probe.keep_secret)
        # bound methods only for what comes back: a lambda would run on the sending thread
        self.probe.tested.connect(self._on_tested)
        self.probe.secret_found.connect(self._on_secret)
        self.probe.keep_failed.connect(self._on_keep_failed)
        worker.remote_retrying.connect(status.show_retrying)
        worker.remote_timed.connect(status.show_remote_latency)
        # a picture given up on after the retries says so as every failure does ("Error: …", the presenter's)
        for went_on in (worker.failed, worker.batch_progress, worker.batch_finished):
            went_on.connect(status.answered)
        self.probe_thread = start_worker_thread(self.probe, name="remote", parent=self)
        self._closing = dialog_parent
        if dialog_parent is not None:  # the window's close joins the probe's thread (a test waits its timeout)
            dialog_parent.installEventFilter(self)

    # -- Model ▸ Device -------------------------------------------------------------------------------------

    def open_dialog(self) -> RemoteDialog | None:
        """Show the dialog with what was remembered (made once, kept while the window lives); None (and the remote
        extra's line in the status bar) where that extra is not installed."""
        if not self._installed():
            return None
        if self._dialog is None:
            from app.ui.widgets.remote_dialog import RemoteDialog

            self._dialog = dialog = RemoteDialog(self._dialog_parent)
            dialog.test_requested.connect(self.test)
            dialog.open_requested.connect(self.use)
            dialog.auth_changed.connect(self._ask_secret)
            dialog.remember.toggled.connect(self._say_keyring)
            dialog.fill(self._remembered(), insecure_servers=self._clear_text_servers())
            self._ask_secret()
        self._dialog.show()
        self._dialog.raise_()
        return self._dialog

    def reopen(self) -> None:
        """The last server's model again (Model ▸ Device ▸ Remote: host/model)."""
        if not self._installed():
            return
        if self._loader.last_remote is not None:
            self._loader.open_remote(self._loader.last_remote, sidecar=self._loader.remote_sidecar)
        else:
            self.open_dialog()

    def _installed(self) -> bool:
        """The remote extra's client is here; else its one line (app.errors.need_extra) in the status bar."""
        from app.errors import MissingExtra, need_extra

        try:
            need_extra("tritonclient", extra="remote", feature="remote inference")
        except MissingExtra as exc:
            self._status.showMessage(str(exc), STATUS_MS)
            return False
        return True

    def test(self) -> None:
        """Test connection, on the probe's thread; its line comes back into the dialog."""
        from app.ui.state.remote_messages import RemoteTest

        dialog = self._dialog
        assert dialog is not None
        target = self._target(dialog.form())
        if target is None:
            return
        self._test_id = next(self._ids)
        dialog.set_testing(True)
        self.test_requested.emit(RemoteTest(self._test_id, target))

    def use(self) -> None:
        """OK: remember the form (the secret in the keyring, if asked), close the dialog, open the remote session."""
        dialog = self._dialog
        assert dialog is not None
        form = dialog.form()
        target = self._target(form)
        if target is None:
            return
        self._remember(form, target)
        dialog.accept()
        self._loader.open_remote(target, sidecar=Path(form.sidecar).expanduser() if form.sidecar else None)

    # -- the form --------------------------------------------------------------------------------------------

    def _target(self, form: RemoteForm) -> RemoteTarget | None:
        """The form as a RemoteTarget, or None after saying in the dialog why it is not one."""
        from app.inference.remote.session import RemoteError, RemoteTarget
        from app.ui.state.remote_messages import INSECURE_SETTING

        dialog = self._dialog
        assert dialog is not None
        ca_file = Path(form.ca_file).expanduser() if form.ca_file else None
        for what, given in (("CA bundle", form.ca_file), ("sidecar", form.sidecar)):
            if given and not Path(given).expanduser().is_file():
                dialog.say(f"{what} {Path(given).name}: no such file", ok=False)
                return None
        if form.auth != "none" and not form.secret:
            dialog.say(f"no {'token' if form.auth == 'bearer' else 'password'} given (nor kept in the keyring)",
                       ok=False)
            return None
        try:
            return RemoteTarget(form.url, form.model, form.version,
                                token=form.secret if form.auth == "bearer" else None, username=form.username or None,
                                password=form.secret if form.auth == "basic" else None, ca_file=ca_file,
                                timeout_s=form.timeout_s, allow_insecure=form.allow_insecure,
                                insecure_setting=INSECURE_SETTING)
        except RemoteError as exc:  # "server URL 'x': expected grpc://…", "… credentials would travel in clear text…"
            dialog.say(str(exc), ok=False)
            return None

    def _remembered(self) -> RemoteForm:
        from app.ui.widgets.remote_dialog import RemoteForm

        values = {key: str(self._settings.value(f"remote/{key}", "", str)) for key in SETTINGS}
        remember = bool(self._settings.value("remote/remember", False, bool))
        timeout = float(self._settings.value("remote/timeout_s", 30.0, float))  # type: ignore[arg-type]
        return RemoteForm(values["url"], values["model"], values["version"], values["auth"] or "none",
                          values["username"], "", remember, values["ca_file"], values["sidecar"], timeout)

    def _clear_text_servers(self) -> frozenset[str]:
        return frozenset(str(self._settings.value(CLEAR_TEXT_SERVERS, "", str)).split())

    def _remember(self, form: RemoteForm, target: RemoteTarget) -> None:
        from app.ui.state.remote_messages import SecretKeep, clear_text_server, keyring_account

        if self._writable():
            for key in SETTINGS:
                self._settings.setValue(f"remote/{key}", getattr(form, key))
            self._settings.setValue("remote/remember", form.remember)
            self._settings.setValue("remote/timeout_s", form.timeout_s)
            server = clear_text_server(form.url) if form.auth != "none" else ""
            if server:  # ticked or not for this server: kept as the reader left it
                servers = self._clear_text_servers() - {server} | ({server} if form.allow_insecure else set())
                self._settings.setValue(CLEAR_TEXT_SERVERS, " ".join(sorted(servers)))
        if form.auth != "none":  # kept when asked; unticked, what the keyring had for it is forgotten
            account = keyring_account(host=target.host, username=target.username)
            self.keep_requested.emit(SecretKeep(account, form.secret if form.remember else ""))

    def _ask_secret(self) -> None:
        """The keyring's secret for the server and user now in the form (asked on the probe's thread)."""
        from app.inference.remote.session import RemoteError, RemoteTarget
        from app.ui.state.remote_messages import SecretAsk, keyring_account

        dialog = self._dialog
        if dialog is None:
            return
        form = dialog.form()
        if form.auth == "none" or not form.url:
            return
        try:
            host = RemoteTarget(form.url, form.model or "m").host
        except RemoteError:
            return  # said when the reader tests or opens it
        self._secret_id = next(self._ids)
        self._keyring_problem = ""
        self.secret_asked.emit(SecretAsk(self._secret_id, keyring_account(host=host, username=form.username or None)))

    # -- answers (on this thread) --------------------------------------------------------------------------------

    def _on_tested(self, tested: RemoteTested) -> None:
        if self._dialog is None or tested.request_id != self._test_id:
            return
        self._dialog.set_testing(False)
        self._dialog.say(tested.line, ok=tested.ok)

    def _on_secret(self, found: SecretFound) -> None:
        if self._dialog is None or found.request_id != self._secret_id:
            return
        if found.problem:  # a lookup the reader did not ask for: said when "Remember" is (or gets) ticked
            self._keyring_problem = found.problem
            self._say_keyring(self._dialog.form().remember)
        elif found.secret and not self._dialog.form().secret:  # never over what the reader typed
            self._dialog.set_secret(found.secret)

    def _say_keyring(self, remember: bool) -> None:
        if remember and self._keyring_problem and self._dialog is not None:
            self._dialog.say(self._keyring_problem, ok=False)

    def _on_keep_failed(self, line: str) -> None:
        log.warning("remote: %s", line)
        self._status.showMessage(line, STATUS_MS)

    # -- close -------------------------------------------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._closing and event.type() == QEvent.Type.Close:
            self.shutdown()
        return False

    def shutdown(self) -> None:
        """Close the dialog, give up the remote session's request in flight (the window then joins the inference
        thread at once, not after the server's timeouts) and join the probe's thread (the window is closing)."""
        from app.ui.workers.threads import stop_thread

        self._cancel_remote()
        self.probe.cancel()  # a Test connection waiting on it too
        if self._dialog is not None:
            self._dialog.close()
        stop_thread(self.probe_thread, timeout_ms=15_000)
