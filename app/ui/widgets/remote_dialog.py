"""Model ▸ Device ▸ Remote server…: where the model runs when it is not on this machine.

A widget only: the server's URL (its scheme says the protocol and TLS), the model's name and version on the server,
the credentials, a CA bundle, and "Test connection". It says what the reader wants through its signals; the remote
controller (app/ui/controllers/remote.py) tests, remembers and opens. Made on first use, never at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.ui.widgets.fit import FitLabel

AUTH_KINDS = (("none", "None"), ("bearer", "Bearer token"), ("basic", "User and password"))
ERROR_STYLE = "color: #b00020;"
WARNING_STYLE = "color: #a15c00;"
INSECURE_WARNING = ("Anyone on the network between here and the server can read the token or password: use https or "
                    "grpcs where you can")
OK_STYLE = "color: #248a3d;"


@dataclass(frozen=True)
class RemoteForm:
    """What the dialog's fields say, as typed (the controller turns it into an
    app.inference.remote.session.RemoteTarget)."""

    url: str
    model: str
    version: str
    auth: str  # "none" | "bearer" | "basic"
    username: str
    secret: str = field(repr=False)  # the token (bearer) or the password (basic)
    remember: bool
    ca_file: str
    sidecar: str = ""  # a local sidecar (YAML): classes, colours, thresholds the server's metadata cannot say
    timeout_s: float = 30.0  # each request's; a server that does not answer is tried again after it
    allow_insecure: bool = False  # the credentials may go in clear text to this server (ticked where it applies)


class RemoteDialog(QDialog):
    test_requested = Signal()  # Test connection: the controller reads form()
    open_requested = Signal()  # OK: the controller checks form(), opens the session and closes the dialog
    auth_changed = Signal()  # the server, user or kind of credentials changed: the keyring's secret may differ

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Remote inference server")
        self.setMinimumWidth(560)
        layout = QVBoxLayout(self)
        intro = QLabel("The model runs on an inference server (Triton, KServe, MLServer, seglens-cli serve) over the "
                       "Open Inference Protocol; images are prepared here and only tensors are sent.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        layout.addLayout(self._form())
        # Test connection's answer, or why OK cannot go on: a long URL or UID wraps inside the dialog's width
        self.answer = FitLabel(lines=6, hint_width=560)
        layout.addWidget(self.answer)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.test_button = buttons.addButton("Test connection", QDialogButtonBox.ButtonRole.ActionRole)
        self.test_button.clicked.connect(self.test_requested)
        buttons.accepted.connect(self.open_requested)
        buttons.rejected.connect(self.reject)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setText("Use this server")
        layout.addWidget(buttons)
        self._show_auth()

    def _form(self) -> QFormLayout:
        form = QFormLayout()
        self.url = QLineEdit()
        self.url.setPlaceholderText("grpc://host:8001, grpcs://host:8001, http://host:8000 or https://host:8443")
        self.model = QLineEdit()
        self.model.setPlaceholderText("the model's name on the server, e.g. nuclei")
        self.version = QLineEdit()
        self.version.setPlaceholderText("empty: the server's default")
        self.auth = QComboBox()
        for kind, text in AUTH_KINDS:
            self.auth.addItem(text, kind)
        self.token, self.username, self.password = QLineEdit(), QLineEdit(), QLineEdit()
        for secret in (self.token, self.password):
            secret.setEchoMode(QLineEdit.EchoMode.Password)
        self.remember = QCheckBox("Remember in the system keyring (never in the settings file)")
        self.ca_file = QLineEdit()
        self.ca_file.setPlaceholderText("https / grpcs: the CA bundle that signed the server's certificate")
        self.sidecar = QLineEdit()
        self.sidecar.setPlaceholderText("the classes, colours, thresholds (.yaml); empty: a bundled model's own")
        self.timeout = QDoubleSpinBox()
        self.timeout.setRange(1.0, 600.0)
        self.timeout.setDecimals(0)
        self.timeout.setSuffix(" s")
        self.timeout.setValue(30.0)
        self.timeout.setToolTip("How long one request may take; a server that does not answer within it is tried "
                                "again (3 times, after 1, 2, 4 s) before the picture is given up on")
        for label, widget in (("Server URL", self.url), ("Model", self.model), ("Version", self.version),
                              ("Credentials", self.auth), ("Token", self.token), ("User", self.username),
                              ("Password", self.password), ("", self.remember)):
            form.addRow(label, widget)
        form.addRow("CA bundle", _with_browse(self.ca_file, "CA bundle", "Certificates (*.pem *.crt *.cer)"))
        form.addRow("Sidecar", _with_browse(self.sidecar, "Sidecar", "Sidecars (*.yaml *.yml)"))
        form.addRow("Timeout", self.timeout)
        form.addRow("", self._insecure_row())
        self._rows = form
        self.auth.currentIndexChanged.connect(self._show_auth)
        for widget in (self.url, self.username):
            widget.editingFinished.connect(self.auth_changed)
        self.auth.currentIndexChanged.connect(lambda _index: self.auth_changed.emit())
        self.url.textChanged.connect(self._show_insecure)
        return form

    def _insecure_row(self) -> QWidget:
        """The opt-in to credentials in clear text (the CLI's --allow-insecure), off, with its warning under it;
        enabled only where it applies: http:// or grpc:// to a host that is not this machine."""
        from app.ui.state.remote_messages import INSECURE_CHECKBOX

        self._opted: set[str] = set()  # the servers ticked for ('host:port'): the remembered ones, then the reader's
        self._server_shown = ""  # the server the box now speaks of ('': none it applies to)
        self.insecure = QCheckBox(INSECURE_CHECKBOX)
        self.insecure.setEnabled(False)
        self.insecure.toggled.connect(self._on_insecure)
        self.insecure_warning = QLabel(INSECURE_WARNING)
        self.insecure_warning.setStyleSheet(WARNING_STYLE)
        self.insecure_warning.setVisible(False)
        row = QWidget()
        column = QVBoxLayout(row)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.insecure)
        column.addWidget(self.insecure_warning)
        self._insecure_box = row
        return row

    def _show_insecure(self) -> None:
        """The box for the server the URL now names: enabled where it applies, ticked where it was for it."""
        from app.ui.state.remote_messages import clear_text_server

        server = clear_text_server(self.url.text().strip())
        if server != self._server_shown:
            self._server_shown = server
            self.insecure.setChecked(server in self._opted)
        self.insecure.setEnabled(bool(server))
        self.insecure_warning.setVisible(bool(server))

    def _on_insecure(self, on: bool) -> None:
        if self._server_shown:
            (self._opted.add if on else self._opted.discard)(self._server_shown)

    def _show_auth(self) -> None:
        kind = self.auth.currentData()
        for widget, shown in ((self.token, kind == "bearer"), (self.username, kind == "basic"),
                              (self.password, kind == "basic"), (self.remember, kind != "none"),
                              (self._insecure_box, kind != "none")):
            self._rows.setRowVisible(widget, shown)

    # -- what the controller reads and sets -------------------------------------------------------------

    def form(self) -> RemoteForm:
        kind = str(self.auth.currentData())
        secret = {"bearer": self.token.text(), "basic": self.password.text()}.get(kind, "")
        return RemoteForm(self.url.text().strip(), self.model.text().strip(), self.version.text().strip(), kind,
                          self.username.text().strip() if kind == "basic" else "", secret,
                          self.remember.isChecked() and kind != "none", self.ca_file.text().strip(),
                          self.sidecar.text().strip(), self.timeout.value(),
                          allow_insecure=self.insecure.isChecked() and self.insecure.isEnabled() and kind != "none")

    def fill(self, form: RemoteForm, *, insecure_servers: frozenset[str] = frozenset()) -> None:
        """The fields as remembered (the secret: set_secret, once the keyring has answered); `insecure_servers`:
        those the reader let credentials reach in clear text ('host:port')."""
        self._opted = set(insecure_servers)
        self._server_shown = ""
        self.url.setText(form.url)
        self._show_insecure()  # also when the URL is the one shown already
        self.model.setText(form.model)
        self.version.setText(form.version)
        self.auth.setCurrentIndex(max(self.auth.findData(form.auth), 0))
        self.username.setText(form.username)
        self.remember.setChecked(form.remember)
        self.ca_file.setText(form.ca_file)
        self.sidecar.setText(form.sidecar)
        self.timeout.setValue(form.timeout_s)

    def set_secret(self, secret: str) -> None:
        """The keyring's secret for the server and user shown, into the field the credentials' kind uses."""
        field_ = self.password if self.auth.currentData() == "basic" else self.token
        field_.setText(secret)

    def say(self, line: str, *, ok: bool | None = None) -> None:
        """One line under the form: green when `ok`, red when not, plain while waiting (None)."""
        self.answer.setText(line)
        self.answer.setToolTip(line)
        self.answer.setStyleSheet(OK_STYLE if ok else ERROR_STYLE if ok is False else "")

    def set_testing(self, testing: bool) -> None:
        self.test_button.setEnabled(not testing)
        if testing:
            self.say("Testing the connection…")


def _with_browse(line: QLineEdit, title: str, kinds: str) -> QHBoxLayout:
    """`line` with a "Browse…" button that puts a chosen file's path into it."""
    def browse() -> None:
        path, _ = QFileDialog.getOpenFileName(line.window(), title, line.text(), f"{kinds};;All files (*)")
        if path:
            line.setText(path)

    button = QPushButton("Browse…")
    button.clicked.connect(browse)
    row = QHBoxLayout()
    row.addWidget(line, 1)
    row.addWidget(button)
    return row
