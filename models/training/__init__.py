"""Training, export and evaluation recipe of the bundled demo models (see models/README.md).

Only ``synth``, ``common``, ``pipeline``, ``evaluate``, ``bench``, ``make_samples`` and ``render`` run without
PyTorch; ``nets``, ``train`` and ``export`` need the ``train`` extra (torch==2.13.0, onnxscript).
"""
