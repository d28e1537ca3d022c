"""A background thread that folds what the hooks recorded into bounded state.

A hook on the program's thread must cost as little as it does today: it appends a
tuple to a list and returns. Left alone those lists grow with the run; this thread
takes what they hold ``PERIOD_S`` apart and hands it to the collector's ``fold``, which
turns it into steps and statistics of fixed size. Between two drains a list holds at
most a quarter second of events. Taking is safe beside the hooks without a lock: the
drain reads the first ``n`` items, then deletes exactly those, so an item appended in
between stays for the next drain.

The collectors' drains of ``PERIOD_S`` share one thread (``gpuwhy-drain``): each of its
wake-ups takes the program's GIL once for all of them, not once per collector. On a loop
of short steps every hand-over of the GIL is a wait on the program's thread, and on a
busy host a thread that holds it may lose its core for a scheduler's quantum (ms) while
the program waits: three threads waking four times a second were twelve such chances a
second, one thread is four.
"""

from __future__ import annotations

import os
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
    """Calls ``fold()`` every ``period_s`` until :meth:`stop`: on the shared thread at
    ``PERIOD_S``, on a thread of its own at any other period. A fold that raises stops
    the drain, the reason in ``error``."""

    def __init__(self, fold: Callable[[], None], name: str, period_s: float = PERIOD_S) -> None:
        self.fold = fold
        self.period_s = period_s
        self.error: str | None = None
        self._stopping = threading.Event()
        self._thread = (
            None
            if period_s == PERIOD_S
            else threading.Thread(target=self._run, name=f"gpuwhy-{name}", daemon=True)
        )

    def start(self) -> Drain:
        if self._thread is None:
            _TICKER.add(self)
        else:
            self._thread.start()
        return self

    def fold_once(self) -> bool:
        """One fold; False once the drain stopped or its fold failed."""
        if self._stopping.is_set():
            return False
        try:
            self.fold()
        except Exception as exc:  # noqa: BLE001 - never into the program; said in the notes
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        return True

    def _run(self) -> None:
        while not self._stopping.wait(self.period_s):
            if not self.fold_once():
                return

    def stop(self) -> None:
        """No fold after this returns (a fold under way ends first, 5 s at most), except
        where called from a fold."""
        self._stopping.set()
        if self._thread is None:
            _TICKER.remove(self)
        elif self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


class _Ticker:
    """The one thread that runs every shared drain's fold, ``PERIOD_S`` apart, while any
    is registered (it ends with the last one, and a new one starts it again)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()  # the drains, the thread, the fold under way
        self._drains: list[Drain] = []
        self._thread: threading.Thread | None = None
        self._folding: Drain | None = None

    def add(self, drain: Drain) -> None:
        with self._changed:
            self._drains.append(drain)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gpuwhy-drain", daemon=True)
                self._thread.start()

    def remove(self, drain: Drain) -> None:
        """``drain`` folds no more once this returns: its fold under way ends first (5 s
        at most; another drain's is not waited for), unless this is that fold."""
        with self._changed:
            if drain in self._drains:
                self._drains.remove(drain)
            self._changed.notify_all()  # the last one gone: the thread ends now
            if threading.current_thread() is not self._thread:
                self._changed.wait_for(lambda: self._folding is not drain, timeout=5)

    def _run(self) -> None:
        while True:
            with self._changed:  # PERIOD_S, or until the last drain is removed
                self._changed.wait_for(lambda: not self._drains, timeout=PERIOD_S)
                if not self._drains:
                    self._thread = None  # decided under the lock: add() starts a new one
                    return
                drains = list(self._drains)
            for drain in drains:
                with self._changed:
                    if drain not in self._drains:
                        continue  # stopped meanwhile
                    self._folding = drain
                folded = False
                try:
                    folded = drain.fold_once()
                finally:
                    with self._changed:
                        self._folding = None
                        if not folded and drain in self._drains:
                            self._drains.remove(drain)
                        self._changed.notify_all()


_TICKER = _Ticker()


def _new_ticker() -> None:
    """In a forked child: the parent's thread and lock are not its own."""
    global _TICKER
    _TICKER = _Ticker()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_ticker)
