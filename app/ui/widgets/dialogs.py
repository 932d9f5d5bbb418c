"""About / Diagnostics: versions, providers, the session's truth, CUDA and GPU facts; copyable."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPlainTextEdit, QPushButton, QVBoxLayout


def diagnostics_text(summary) -> str:
    from app.inference.runtime import diagnostics
    from app.logs import log_file

    lines = ["SegLens — diagnostics", ""]
    lines += [f"{key}: {value}" for key, value in diagnostics.versions().items()]
    lines.append("")
    if summary is not None:
        info = summary.info
        lines += [f"model: {summary.spec.name} ({summary.spec.path})",
                  f"requested device: {info.requested}",
                  f"provider in use: {info.provider_label} ({', '.join(info.providers)})",
                  f"GPU not used because: {info.fallback_reason or '-'}"]
        lines += [f"  onnxruntime log: {line}" for line in info.log_lines]
    else:
        lines.append("model: none loaded")
    lines.append("")
    lines += [f"{key}: {value}" for key, value in diagnostics.gpu_facts().items()]
    lines += ["", f"log file: {log_file()}"]
    return "\n".join(lines)


class DiagnosticsDialog(QDialog):
    def __init__(self, summary, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About / Diagnostics")  # the title bar adds " — SegLens"
        self.resize(760, 520)
        self.text = QPlainTextEdit(diagnostics_text(summary))
        self.text.setReadOnly(True)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        copy = QPushButton("Copy to clipboard")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.text.toPlainText()))
        buttons.addButton(copy, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
