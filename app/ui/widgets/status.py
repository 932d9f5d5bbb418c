"""The status bar: the provider really in use (and why not the GPU), latency, GPU memory, image, model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QSize, QTimer, Signal
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QFrame, QLabel, QProgressBar, QPushButton, QStatusBar, QToolTip

from app.ui.widgets.fit import FitLabel
from app.ui.widgets.lazy_qt import Qt
from app.ui.widgets.notice import Notice

if TYPE_CHECKING:
    from app.inference.model.session import SessionInfo
    from app.ui.state.messages import BatchFinished, BatchProgress, ViewFailed

WARNING_STYLE = "QLabel { color: #1c1c1e; background: #ffcc00; padding: 1px 6px; border-radius: 3px; }"
GPU_STYLE = "QLabel { color: white; background: #248a3d; padding: 1px 6px; border-radius: 3px; }"
CPU_STYLE = "QLabel { padding: 1px 6px; }"
REMOTE_STYLE = "QLabel { color: white; background: #0a5bd3; padding: 1px 6px; border-radius: 3px; }"
FAILED_STYLE = "QLabel { color: white; background: #b00020; padding: 1px 6px; border-radius: 3px; }"
BADGE_WIDTHS = (90, 460)  # px: the least the badge asks of the window, and the most it takes for a long text


class Badge(QLabel):
    """The provider's badge: its whole text where there is room, elided at its end where there is not (the
    whole text then leads its tooltip) — a long server name never widens the window."""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        return QSize(min(hint.width(), BADGE_WIDTHS[0]), hint.height())

    def sizeHint(self) -> QSize:
        hint = super().sizeHint()
        return QSize(min(hint.width(), BADGE_WIDTHS[1]), hint.height())

    def elided(self) -> str:
        """The text as it fits now ('' when the whole text does)."""
        room = self.contentsRect().width()
        metrics = self.fontMetrics()
        if metrics.horizontalAdvance(self.text()) <= room:
            return ""
        return metrics.elidedText(self.text(), Qt.TextElideMode.ElideRight, max(0, room))

    def paintEvent(self, event) -> None:
        shown = self.elided()
        if not shown:
            super().paintEvent(event)
            return
        QFrame.paintEvent(self, event)  # the style sheet's background and border
        painter = QPainter(self)
        painter.setPen(self.palette().color(self.foregroundRole()))
        painter.drawText(self.contentsRect(), int(self.alignment()), shown)
        painter.end()

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip and self.elided():
            tip = "\n".join(part for part in (self.text(), self.toolTip()) if part)
            QToolTip.showText(event.globalPos(), tip, self)
            return True
        return super().event(event)


class StatusBar(QStatusBar):
    cancel_requested = Signal()  # the Cancel button of a running "Run on all"

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.provider = Badge("loading model…")
        self.latency = QLabel("")
        self.gpu_memory = QLabel("GPU mem n/a")
        self.image_size = QLabel("")
        self.model = FitLabel(hint_width=320)  # a long model name is elided (whole on hover): never widening
        self._progress = QProgressBar()
        self._progress.setMaximumWidth(220)
        self._progress.setTextVisible(True)
        self._cancel = QPushButton("Cancel")
        self._cancel.clicked.connect(self.cancel_requested.emit)
        for widget in (self._progress, self._cancel):
            widget.hide()
        for label in (self.provider, self.latency, self.gpu_memory, self.image_size, self.model):
            self.addPermanentWidget(label)
        self.notice = Notice()  # the messages: whole (elided, with a tooltip), never under the widgets above
        self.addWidget(self.notice, 1)
        self.addWidget(self._progress)
        self.addWidget(self._cancel)
        self._device_id: int | None = None
        self._session: tuple[SessionInfo, str] | None = None  # shown: come back to it after a retry line
        self._retrying = False
        self._failed = False  # a remote picture was given up on: the badge says so until a request is answered
        self._split = ""  # a remote session's last picture: network+queue and server compute (show_timings)
        self._timer = QTimer(self)
        self._timer.setInterval(2000)
        self._timer.timeout.connect(self.refresh_gpu_memory)

    def showMessage(self, text: str, timeout: int | None = 0, *, folder: str | Path | None = None) -> None:
        """QStatusBar's message, shown in the notice area instead; `folder`: offer "Open folder" for it."""
        self.notice.show_message(text, timeout or 0, folder=folder)  # None (QStatusBar's type allows it): 0
        self.messageChanged.emit(text)

    def currentMessage(self) -> str:
        return self.notice.text()

    def clearMessage(self) -> None:
        self.showMessage("")

    def start_run(self, total: int) -> None:
        """A "Run on all" of `total` images starts: progress bar and Cancel button."""
        self._progress.setRange(0, total)
        self._progress.setValue(0)
        self._progress.show()
        self._cancel.show()

    def run_progress(self, done: int) -> None:
        self._progress.setValue(done)

    def end_run(self) -> None:
        self._progress.hide()
        self._cancel.hide()

    @property
    def run_shown(self) -> bool:
        """Whether a Run on all's progress bar and Cancel button are showing."""
        return not self._progress.isHidden()

    def show_loading(self, model_name: str) -> None:
        self.latency.setText("")  # the old model's timings are not the new one's
        self._split, self._retrying, self._failed, self._session = "", False, False, None
        self.provider.setText("loading model…")
        self.provider.setStyleSheet(CPU_STYLE)
        self.provider.setToolTip("")
        self.model.setText(model_name)

    def show_session(self, info, model_name: str) -> None:
        """The provider actually running the model; a visible warning when a GPU was asked for but not got."""
        self.model.setText(model_name)
        self._session, self._retrying, self._failed = (info, model_name), False, False
        if info.remote is not None:  # on a server: said as plainly as a GPU, in its own colour
            from app.ui.state.remote_messages import server_label

            self.provider.setText(server_label(info.remote))  # "…, server: CPU": not this computer's CPU
            self.provider.setStyleSheet(REMOTE_STYLE)
            self.provider.setToolTip(_remote_tip(info.remote))
        elif info.on_gpu:
            self.provider.setText(info.provider_label)
            self.provider.setStyleSheet(GPU_STYLE)
            self.provider.setToolTip(f"Running on {info.provider_label}")
        elif info.fallback_reason and info.requested.startswith("cuda"):
            self.provider.setText(f"⚠ CPU — CUDA requested but unavailable: {_short(info.fallback_reason)}")
            self.provider.setStyleSheet(WARNING_STYLE)
            self.provider.setToolTip(f"CUDA was requested; the session runs on the CPU.\n{info.fallback_reason}")
        elif info.fallback_reason and not info.fallback_warns:  # `auto`, no NVIDIA GPU here: the CPU is expected
            self.provider.setText(info.provider_label)
            self.provider.setStyleSheet(CPU_STYLE)
            self.provider.setToolTip("No NVIDIA GPU was found on this machine: the model runs on the CPU.")
        elif info.fallback_reason:  # a GPU is there but CUDA cannot use it: say so, with the cause
            self.provider.setText(f"⚠ CPU — GPU unavailable: {_short(info.fallback_reason)}")
            self.provider.setStyleSheet(WARNING_STYLE)
            self.provider.setToolTip(f"An NVIDIA GPU is present but the session runs on the CPU.\n"
                                     f"{info.fallback_reason}")
        else:
            self.provider.setText("CPU")
            self.provider.setStyleSheet(CPU_STYLE)
            self.provider.setToolTip("Running on the CPU (requested)")
        self._device_id = info.device_id if info.on_gpu else None
        # after the current event: NVML's first call takes ~0.15 s (driver or not), and the first image's
        # request should reach the worker before that
        QTimer.singleShot(0, self, self.refresh_gpu_memory)  # with self as context: not after the bar is gone
        if self._device_id is not None:
            self._timer.start()
        else:
            self._timer.stop()

    def show_retrying(self, retrying) -> None:
        """A remote session waits before another try (RemoteRetrying): amber, until it answers (answered)."""
        what, _, retry = retrying.line.split(": ", 1)[-1].rpartition(" — ")
        self.provider.setText(f"⚠ {what.split(' (')[0]} — {retry}" if what else f"⚠ {retrying.line}")
        self.provider.setStyleSheet(WARNING_STYLE)
        # no "Stop waiting" of its own: a local device chosen gives the request up at once (loader, cancel)
        self.provider.setToolTip(f"{retrying.line}\nModel ▸ Device ▸ CPU stops waiting for the server at once.")
        self._retrying = True

    def answered(self, record: ViewFailed | BatchProgress | BatchFinished | None = None) -> None:
        """A request ended (a picture failed, a Run on all went on): a remote picture given up on turns the badge
        to its failed state, kept until a request is answered; else, after a retry line, the session's label."""
        from app.ui.state.messages import BatchProgress, ViewFailed

        remote = self._session[0].remote if self._session is not None else None
        outcome = record.outcome if isinstance(record, BatchProgress) else None  # a Run on all's input
        line = record.message if isinstance(record, ViewFailed) else None
        line = line or (outcome.error if outcome is not None else None)
        where = f"remote {remote.host}/{remote.model}: " if remote is not None else None
        if where is not None and isinstance(line, str) and where in line:
            self._show_remote_failed(line[line.index(where):])
            return
        ran = outcome is not None and not outcome.resumed and (outcome.result or outcome.volume) is not None
        if self._session is not None and ((self._retrying and not self._failed) or (self._failed and ran)):
            self.show_session(*self._session)

    def _show_remote_failed(self, line: str) -> None:
        """'⚠ remote: no result' in red, the whole line and what to do in its tooltip; the last answered
        picture's timings leave (they are not this picture's)."""
        self.provider.setText("⚠ remote: no result")  # the server is named in the status bar's line
        self.latency.setText("")
        self.latency.setToolTip("")
        self.provider.setStyleSheet(FAILED_STYLE)
        self.provider.setToolTip(f"{line}\nThe next picture tries the server again; Model ▸ Device ▸ CPU runs the "
                                 "model on this computer.")
        self._retrying, self._failed = False, True

    def show_remote_latency(self, latency) -> None:
        """A picture's requests to the server (RemoteLatency): the split joins the latency, and the label follows
        the session's info (the server's device is known from its first answer) — calm again after a retry or a
        failure."""
        self._split = latency.text()
        if self._session is None:
            return
        changed = latency.info.provider_label != self._session[0].provider_label
        self._session = (latency.info, self._session[1])
        if changed or self._retrying or self._failed:
            self.show_session(*self._session)

    def show_failure(self, message: str) -> None:
        self._retrying = self._failed = False
        self.provider.setText("⚠ no model")
        self.provider.setStyleSheet(WARNING_STYLE)
        self.provider.setToolTip(message)

    def show_timings(self, timings: dict) -> None:
        split = f" ({self._split})" if self._split else ""  # a remote session's inference: network vs server
        self.latency.setText(f"pre {timings['decode'] + timings['preprocess']:.0f} · "
                             f"inference {timings['inference']:.0f}{split} · post {timings['postprocess']:.0f} ms")
        self.latency.setToolTip("decode {decode:.1f} ms, preprocess {preprocess:.1f} ms, inference "
                                "{inference:.1f} ms, postprocess {postprocess:.1f} ms".format(**timings)
                                + (f"\nremote inference: {self._split}" if self._split else ""))

    def show_image_size(self, width: int, height: int, window: tuple | None = None) -> None:
        self.image_size.setText(f"{width}×{height}" + (f"  L {window[0]:.0f} W {window[1]:.0f}" if window else ""))

    def refresh_gpu_memory(self) -> None:
        from app.inference.runtime.telemetry import gpu_memory

        memory = gpu_memory(self._device_id or 0)
        self.gpu_memory.setText(memory.text() if memory else "GPU mem n/a")


def _remote_tip(remote) -> str:
    """Where a remote session's model runs, in words (RemoteInfo)."""
    lines = [f"The model runs on the server {remote.host} ({remote.protocol}), not on this computer: "
             f"model {remote.model}" + (f", version {remote.version}" if remote.version else "")]
    if remote.server_device:
        lines.append(f"Server device: {remote.server_device}")
    if remote.server_fallback:
        lines.append(f"Not on the server's GPU: {remote.server_fallback}")
    return "\n".join(lines)


def _short(reason: str, limit: int = 80) -> str:
    """The reason without its parenthetical advice (that is in the tooltip), cut to fit a status bar."""
    reason = reason.split(" (")[0].removeprefix("the ")
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"
