"""Prompt models (SAM-family encoder/decoder pairs) and the grabCut fallback: on one image, a click or a box becomes
a mask. The model and one prompt only; carrying prompts over many inputs (a folder's boxes, a volume's slices) is
app.runs.prompts."""
