"""Calibrating the verdict band from labelled OK and NG examples: the scores, the plot and the limits written into the
sidecar."""
