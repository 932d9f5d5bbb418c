"""What SegLens understands of a model, for people and tools (`seglens-cli info`), and the bundled models."""
