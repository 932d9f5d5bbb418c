"""Many inputs, reports and exports, in rooms: outputs (what a run writes and where) → privacy → exports → folder
(the one folder run) → the features on it (review, compare, prompts, calibrate, bench, pacs, cluster, station).
Qt-free; the CLI and the viewer both drive it (pyproject.toml, the runs-rooms contract)."""
