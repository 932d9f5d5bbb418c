"""Folder runs on a Ray cluster: the actors and the driver (the only modules that import Ray)."""
