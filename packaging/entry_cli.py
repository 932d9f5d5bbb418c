"""Frozen entry point of the console CLI (seglens-cli / seglens-cli.exe)."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main())
