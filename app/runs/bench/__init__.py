"""`seglens-cli bench`: the model's raw limit beside the full pipeline, for 2D and 3D models."""
