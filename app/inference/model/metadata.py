"""Class names as exporters store them in a model's metadata (free text: parsed defensively, never trusted)."""

from __future__ import annotations

import ast
import json
from typing import Any

from app.inference.model.validators import visible

MAX_NAMES_METADATA_CHARS = 1 << 20  # class names in metadata: 100000 names of ~10 characters


def parse_name_list(raw: str) -> list[str] | None:
    """Class names as exporters store them: a JSON list/dict, a Python dict literal, or comma-separated."""
    if len(raw) > MAX_NAMES_METADATA_CHARS:  # parsing builds objects per item (ast: an AST of GBs for a few MB)
        return None
    value: Any = None
    for parse in (json.loads, ast.literal_eval):
        try:
            value = parse(raw)
            break
        except Exception:  # metadata is free text: whatever it holds, it must never stop a model loading
            continue
    if value is None:
        value = [part.strip() for part in raw.split(",")] if "," in raw else None
    if isinstance(value, dict):
        try:
            value = [value[k] for k in sorted(value, key=int)]
        except Exception:
            return None
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return [visible(v.strip()) for v in value]  # a control character would reach CSV cells and names raw
    return None
