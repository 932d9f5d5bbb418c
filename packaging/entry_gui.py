"""Frozen entry point of the windowed viewer (SegLens / SegLens.exe)."""

import sys

from app.ui.app import main

if __name__ == "__main__":
    sys.exit(main())
