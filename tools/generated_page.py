"""A generated page of the docs, written or checked: what tools/module_index.py and tools/cli_reference.py share."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(page: Path, text: str, *, repo: Path, check: bool, tool: str) -> int:
    """`check`: 1 with one line naming the stale page and `tool`, the command that makes it again (0 when it is
    current); else write it. The exit status."""
    shown = page.relative_to(repo)
    if check:
        current = page.read_text(encoding="utf-8") if page.is_file() else ""
        if current != text:
            print(f"{shown} is stale: run `uv run python tools/{tool}`", file=sys.stderr)
            return 1
        return 0
    page.write_text(text, encoding="utf-8")
    print(f"wrote {shown}")
    return 0
