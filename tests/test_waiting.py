"""tests/waiting.py: `until` returns the condition's first truthy value, fails in one line naming what never came
and the last value seen, and lets a condition's own exception through; `until_async` the same in an event loop."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from waiting import until, until_async


def test_until_returns_the_first_truthy_value():
    counts = itertools.count()
    assert until(lambda: [n for n in [next(counts)] if n >= 3], what="a third poll") == [3]


def test_until_fails_naming_what_and_the_last_value_seen():
    with pytest.raises(pytest.fail.Exception) as failed:
        until(lambda: [], what="a verdict logged", within_s=0.1)
    assert str(failed.value) == "waited 0.1 s for a verdict logged; last seen: []"


class _Unfinished:
    """Falsy, with a long repr over many lines (a half-read log, say)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "line\n" * 500


def test_a_long_last_value_is_shown_on_one_shortened_line():
    with pytest.raises(pytest.fail.Exception) as failed:
        until(_Unfinished, what="the log complete", within_s=0.05)
    message = str(failed.value)
    assert "\n" not in message and message.startswith("waited 0.05 s for the log complete; last seen: line line")
    assert message.endswith("…") and len(message) < 400


def test_a_condition_that_raises_gives_up_at_once():
    def exited():
        raise RuntimeError("the server exited with 3")

    with pytest.raises(RuntimeError, match="exited with 3"):
        until(exited, what="the server ready")


def test_until_async_awaits_a_coroutine_condition_and_fails_the_same_way():
    counts = itertools.count()

    async def later():
        return next(counts) >= 2 and "ready"

    assert asyncio.run(until_async(later, what="ready")) == "ready"
    with pytest.raises(pytest.fail.Exception, match=r"^waited 0.05 s for a value; last seen: None$"):
        asyncio.run(until_async(lambda: None, what="a value", within_s=0.05))
