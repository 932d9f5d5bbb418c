"""`seglens-cli bench --images DIR` with volumes in DIR: a DICOM series is timed slice by slice (was: the series'
`<folder>/<SeriesInstanceUID>` handed to the image decoder, "file not found", and no benchmark at all); a NIfTI
volume, which has no file per slice, is left out with a note."""

from __future__ import annotations

import json

import dicom_factory

from app.cli import main


def test_bench_times_a_dicom_series_slice_by_slice(ct_model, tmp_path, capsys):
    dicom_factory.write_series(tmp_path / "images" / "ct", slices=4, suffix="")
    dicom_factory.write_nifti(tmp_path / "images" / "scan.nii.gz")
    assert main(["bench", str(ct_model), "--images", str(tmp_path / "images"), "--runs", "4", "--save", "none",
                 "--json", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["images"] == 4 and report["image_size"] == "32×32"
    assert captured.err.strip() == ("note: 1 NIfTI or multi-frame volume left out: bench times one picture at a "
                                    "time (run --per-slice times a volume's slices)")
