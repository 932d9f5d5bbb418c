"""seglens-cli run does not warm a 3D model's session up: the warm-up is a whole patch through the network (for an
imported nnU-Net network on a CPU, as long as one window's pass), spent before a run whose first window warms it."""

from __future__ import annotations

import nibabel as nib
import numpy as np
from volume3d_models import box_sigmoid

from app.cli import main
from app.inference.runtime.session import LocalSession
from tests.dicom_factory import disc_slice

CT = ("input:\n  patch: [4, 16, 16]\n  normalize: {kind: ct, clip: [-1000, 200], mean: -470, std: 265}\n"
      "classes:\n  - background\n  - {name: disc, color: '#ff0000'}\n")


def test_a_3d_run_spends_no_warm_up_patch(tmp_path, capsys, monkeypatch):
    warmed: list[str] = []
    original = LocalSession.warm_up

    def counted(self: LocalSession, *, measure_warm: bool = False):  # type: ignore[no-untyped-def]
        warmed.append(self.spec.path.name)
        return original(self, measure_warm=measure_warm)

    monkeypatch.setattr(LocalSession, "warm_up", counted)
    model = tmp_path / "m.onnx"
    box_sigmoid(model)
    model.with_suffix(".yaml").write_text(CT)
    inputs = tmp_path / "in"
    inputs.mkdir()
    hu = np.stack([disc_slice(k, 32, 32) for k in range(6)])
    nib.save(nib.Nifti1Image(hu.transpose(2, 1, 0), np.diag([0.8, 0.7, 2.5, 1.0])), str(inputs / "ct.nii.gz"))
    out = tmp_path / "out"
    assert main(["run", str(model), str(inputs), "--out", str(out), "--export", "nifti", "--device", "cpu"]) == 0, \
        capsys.readouterr().err
    assert [p.name for p in out.rglob("*.nii.gz") if "score" not in p.name]
    assert warmed == []
