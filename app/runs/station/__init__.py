"""Station mode: source → model → sinks → journal, frame by frame; the station file, its stages, statistics and
privacy."""
