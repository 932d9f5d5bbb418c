"""Many inputs, reports and exports, in rooms: outputs (what a run writes and where) → privacy → exports and labels
(COCO and YOLO instance labels) → folder (the one folder run) → the features on it (review, compare, prompts,
calibrate, bench, pacs, cluster, station, and view: what the viewer asks of the core for a volume). Qt-free; the CLI
and the viewer both drive it (pyproject.toml, the runs-rooms contract)."""
