"""Prompt models (SAM-family encoder/decoder pairs) and the grabCut fallback: a click or a box becomes a mask."""
