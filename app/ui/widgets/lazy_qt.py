"""`Qt`, PySide6's namespace of enums, made on first use rather than on import.

PySide6 makes a Python type with all its enums for each Qt class on first use: the `Qt` namespace alone is ~93 enum
types of ~1200 members, ~10 ms, and a bare PySide6 window never makes it. The modules the first paint needs import
`Qt` from here, and what they set before the window shows goes through `set_enum` (the meta-object reads the key
names: no Python enum is made) or is left at Qt's default; the first use of any `Qt.<Enum>` after it makes the type.
A call whose overloads include a `Qt` enum (`QPen(QColor)`: `QPen(Qt.PenStyle)` is tried first) makes it too:
tests/ui/test_startup_imports.py checks that the window shows without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from PySide6.QtCore import QObject, Qt
else:

    class _LazyQt:
        """Stands for PySide6.QtCore.Qt: every attribute is the real namespace's, looked up on use."""

        def __getattr__(self, name: str) -> Any:
            from PySide6.QtCore import Qt

            return getattr(Qt, name)

    Qt = _LazyQt()

__all__ = ["Qt", "set_enum"]


def set_enum(target: QObject, prop: str, keys: str) -> None:
    """Set `target`'s enum or flags Qt property `prop` by its key names (`"AlignRight|AlignVCenter"`), as Qt Designer
    files do, without making the Python enum type; a wrong property or key raises, rather than being ignored."""
    if not target.setProperty(prop, keys):
        raise ValueError(f"{type(target).__name__}.{prop} has no key {keys!r}")
