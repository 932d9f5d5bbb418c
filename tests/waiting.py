"""The one way tests wait: poll a condition until it holds, and fail in one line naming what never came.

    from waiting import until
    lines = until(lambda: log.read_text().splitlines()[2:], what="a third verdict logged")

`until` returns the condition's first truthy value; `until_async` is its twin for coroutines (asyncua), whose
condition may be a plain function or a coroutine function. A condition may raise to give up early (a server that
exited, a thread that died): the exception passes through unchanged. On timeout the test fails with
`waited N s for WHAT; last seen: VALUE`. `round_trip` (Qt) waits until a call posted now to a worker's thread has
run there, then one posted back to the GUI thread: what was queued before on either side is done.

A test that must show something did NOT happen waits here for a later event that proves the system went past the
point where it would have happened (a later frame judged, the journal flushed), then asserts the absence: never a
fixed sleep.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

WITHIN_S = 30.0
EVERY_S = 0.02
SHOWN_CHARS = 300


def until(condition: Callable[[], T], *, what: str, within_s: float = WITHIN_S, every_s: float = EVERY_S) -> T:
    """Call `condition` every `every_s` until it returns something truthy, and return that; fail after `within_s`."""
    deadline = time.monotonic() + within_s
    while True:
        seen = condition()
        if seen:
            return seen
        if time.monotonic() >= deadline:
            _fail(what, within_s, seen)
        time.sleep(every_s)


async def until_async(condition: Callable[[], T | Awaitable[T]], *, what: str, within_s: float = WITHIN_S,
                      every_s: float = EVERY_S) -> T:
    """`until` inside an event loop: awaits between polls (and awaits the condition when it is a coroutine)."""
    deadline = time.monotonic() + within_s
    while True:
        seen = condition()
        if inspect.isawaitable(seen):
            seen = await seen
        if seen:
            return seen  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            _fail(what, within_s, seen)
        await asyncio.sleep(every_s)


def _fail(what: str, within_s: float, seen: object) -> None:
    shown = " ".join(repr(seen).split())
    if len(shown) > SHOWN_CHARS:
        shown = shown[:SHOWN_CHARS] + "…"
    pytest.fail(f"waited {within_s:g} s for {what}; last seen: {shown}")


def round_trip(qtbot: object, *, through: object | None = None, within_ms: int = 20_000) -> None:
    """Qt's posted events run in order: a call posted now to `through`'s thread (a worker QObject) has run once
    everything posted there before it has (a request queued behind a run), and a call then posted to this (the
    GUI) thread once what the worker sent back before it has been handled. Without `through`, this thread only."""
    from PySide6.QtCore import QTimer

    if through is not None:
        there: list[bool] = []
        QTimer.singleShot(0, through, lambda: there.append(True))
        qtbot.waitUntil(lambda: bool(there), timeout=within_ms)  # type: ignore[attr-defined]
    back: list[bool] = []
    QTimer.singleShot(0, lambda: back.append(True))
    qtbot.waitUntil(lambda: bool(back), timeout=within_ms)  # type: ignore[attr-defined]
