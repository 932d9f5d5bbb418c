"""Prompts over many inputs: a detector's boxes into masks for a folder, and a prompt carried through a volume. Each
calls the prompt model of app.inference.prompt (one image, one prompt) once per input or slice."""
