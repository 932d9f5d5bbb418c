"""Run on all with volumes: which exports to write per volume (the CLI's --export, --per-slice, --opacity and
--anonymize), asked once the output folder is chosen."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QDialog, QDialogButtonBox, QLabel, QVBoxLayout

from app.spelling import counted

CHOICES = (("dicom-seg", "DICOM SEG (referencing the series; for PACS and viewers that read SEG)", False),
           ("nifti", "NIfTI label volume (.nii.gz, the source's geometry; for research pipelines)", True),
           ("sc", "Secondary Capture series (overlay burned in, \"not for diagnosis\")", False),
           ("rtstruct", "RT Structure Set (a contoured ROI per class; for radiotherapy planning systems)", False),
           ("source", "The source series, de-identified, beside them (with De-identify only)", False))


class VolumeExportDialog(QDialog):
    def __init__(self, volumes: int, opacity: float, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export volumes")
        self.opacity = opacity
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{counted(volumes, 'volume')} in the list. Write for each:"))
        self.boxes = {}
        for kind, text, checked in CHOICES:
            box = QCheckBox(text)
            box.setChecked(checked)
            layout.addWidget(box)
            self.boxes[kind] = box
        self.per_slice = QCheckBox("A report row and the mask PNGs for every slice")
        self.anonymize = QCheckBox("De-identify every output (as seglens-cli run --anonymize)")
        self.anonymize.setToolTip("DICOM PS3.15 Basic Profile in the SEG, Secondary Capture and source copy; a keyed "
                                  "pseudonym for the patient; pseudonymous folders and report paths; a volume whose "
                                  "files still hold a patient value becomes an error (docs/SECURITY.md)")
        layout.addWidget(self.per_slice)
        layout.addWidget(self.anonymize)
        said = QLabel("De-identify: PS3.15 profile in every DICOM, keyed patient pseudonym, pseudonymous folders and "
                      "report paths, and a last check of each volume's files.")
        said.setWordWrap(True)
        layout.addWidget(said)
        note = QLabel(f"Secondary Capture uses the overlay's opacity now set ({opacity:.0%}). DICOM SEG, "
                      "Secondary Capture and RTSTRUCT need a DICOM source: NIfTI volumes get a NIfTI mask only.")
        note.setWordWrap(True)
        layout.addWidget(note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)

    def options(self) -> dict:
        """The choices as app.runs.folder.volumes.VolumeOptions' fields."""
        return {"exports": tuple(kind for kind, box in self.boxes.items() if box.isChecked()),
                "per_slice": self.per_slice.isChecked(), "opacity": self.opacity,
                "anonymize": self.anonymize.isChecked()}
