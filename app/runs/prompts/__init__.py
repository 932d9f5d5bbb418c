"""Prompts over many inputs: a detector's boxes into masks for a folder, and a prompt carried through a volume."""
