"""What a run writes and where: the output lock, the never-over-an-input rule, result images, the CSV report,
provenance and the segments an export names."""
