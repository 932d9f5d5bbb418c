"""nnU-Net v2's own prediction of a 3D (or 2D-per-slice) model, step by step as its `nnUNetPredictor` does it: crop to
the non-zero region, normalise each channel by its scheme, resample with its spline rules, slide its window with its
Gaussian over logits, resample the logits back, decide, un-crop. A model's sidecar section `nnunet:` (written by
`seglens-cli import nnunet`) selects it (app.inference.volume3d.nnunet.predict)."""
