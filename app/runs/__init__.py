"""Folder runs above the single-image pipeline: batch (prefetch → inference → writer), report rows and result
files, bench. Qt-free; the CLI and the viewer's Run on all both drive it."""
