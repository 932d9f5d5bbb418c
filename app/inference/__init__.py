"""Arrays into predictions, in rooms: model (what a model is) → runtime (how it runs here) → remote (served
elsewhere) and yolo (Ultralytics exports read as they are) → image (the 2D pipeline) → decide (what a result means)
→ volume3d and prompt → describe. Each room imports only the rooms below it (pyproject.toml, the inference-rooms
contract)."""
