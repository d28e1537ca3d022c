"""A background thread that folds what the hooks recorded into bounded state.

A hook on the program's thread must cost as little as it does today: it appends a
tuple to a list and returns. Left alone those lists grow with the run; this thread
takes what they hold ``PERIOD_S`` apart and hands it to the collector's ``fold``, which
turns it into steps and statistics of fixed size. Between two drains a list holds at
most a quarter second of events. Taking is safe beside the hooks without a lock: the
drain reads the first ``n`` items, then deletes exactly those, so an item appended in
between stays for the next drain.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

PERIOD_S = 0.25


def take(events: Any) -> Any:
    """The items of ``events`` (a list or an array) appended so far, removed from it."""
    n = len(events)
    if not n:
        return events[:0]
    taken = events[:n]
    del events[:n]
    return taken


class Drain:
    """Calls ``fold()`` every ``period_s`` on a daemon thread until :meth:`stop`."""

    def __init__(self, fold: Callable[[], None], name: str, period_s: float = PERIOD_S) -> None:
        self.fold = fold
        self.period_s = period_s
        self.error: str | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gpuwhy-{name}", daemon=True)

    def start(self) -> Drain:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.wait(self.period_s):
            try:
                self.fold()
            except Exception as exc:  # noqa: BLE001 - never into the program; said in the notes
                self.error = f"{type(exc).__name__}: {exc}"
                return

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
