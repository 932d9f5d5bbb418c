"""What the benchmark scripts share: a median of timed calls, and waiting for a Qt signal with a timeout."""

from __future__ import annotations

import statistics
import time


def median_ms(fn, runs: int) -> float:
    """Median wall milliseconds of `runs` calls of `fn`."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def wait_signal(signal, timeout_ms: int = 60_000) -> None:
    """Run the Qt event loop until `signal` is emitted or `timeout_ms` passes."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)
