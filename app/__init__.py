"""SegLens: see what an ONNX image model says about an image.

The package is split so that the inference core (`app.inference`, `app.io`) and the CLI never import Qt;
only `app.ui` does. Importing `app` itself is cheap: nothing heavy is imported here.
"""

__version__ = "0.1.0"
