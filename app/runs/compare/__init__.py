"""Model A against model B: per-image agreement, and the viewer's Compare on all."""
