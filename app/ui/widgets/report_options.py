"""File ▸ Export review report: whether to de-identify the report (as `seglens-cli report --anonymize`), asked
once the file name is chosen. On by default when the list holds a DICOM or NIfTI volume: a privacy officer expects
a report of patients' series to be shareable as it comes, and a reader who wants the real names unticks it."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QLabel, QVBoxLayout

from app.spelling import counted


class ReportOptionsDialog(QDialog):
    def __init__(self, *, volumes: int, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export review report")
        layout = QVBoxLayout(self)
        self.anonymize = QCheckBox("De-identify the report (as seglens-cli report --anonymize)")
        self.anonymize.setChecked(volumes > 0)
        self.anonymize.setToolTip("Each input goes by its keyed pseudonym (<patient>/<study>/<series> of the "
                                  "de-identified series, images/img-… for an image): the names Run on all gives "
                                  "under De-identify (docs/SECURITY.md)")
        layout.addWidget(self.anonymize)
        self.said = QLabel("De-identified: no patient name or ID and no input folder or file name in the report; "
                           "each input goes by its pseudonym, and error lines leave its paths out.")
        self.said.setWordWrap(True)
        layout.addWidget(self.said)
        self.why = QLabel(f"On by default: the list holds {counted(volumes, 'DICOM or NIfTI volume')}, whose fields "
                          "and folders often name the patient." if volumes else
                          "Off by default: the list holds no DICOM or NIfTI volume.")
        self.why.setWordWrap(True)
        layout.addWidget(self.why)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def options(self) -> dict:
        """The choice as MainWindow.export_review_report's keyword arguments."""
        return {"anonymize": self.anonymize.isChecked()}
