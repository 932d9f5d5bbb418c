"""SegLens: see what an ONNX image model says about an image.

Layers go one way — errors, paths and spelling → guard → logs → io → inference → runs / serve → cli / ui — and only
`app.ui` imports Qt (docs/architecture.md).
Importing `app` itself is cheap and changes nothing: nothing heavy is imported here, and what a process sets up
for SegLens (OpenCV's log level, the bytecode cache) the entry points set, `seglens-cli` (app.cli.main) and
`seglens` (app.ui.app.main), through app.logs.quiet_libraries and app.paths.cache_own_bytecode.
"""

__version__ = "0.1.0"
