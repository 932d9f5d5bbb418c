"""Natural order of names (img2 before img10): how inputs are listed and a series' files sorted alike.

No imports beyond the standard library: discovery runs on the viewer's GUI thread, and app.io.series sorts a
series' headers with the same key without importing the folder walk.
"""

from __future__ import annotations

import re


def natural_key(text: str) -> tuple[int | str, ...]:
    """A sort key that orders runs of digits by their value and the rest case-insensitively."""
    return tuple(int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text))
