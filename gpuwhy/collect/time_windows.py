"""Equal time windows over a run of any length, at most ``capacity`` of them.

A run's timeline must cover the job from its first second to its last, whatever its
length, in bounded memory. Windows start ``width`` seconds wide from ``t0``; when an
event falls beyond the last window there is room for, adjacent pairs merge and the
width doubles (a day at the defaults: 256 windows of 512 s). Widths are ``width *
2**k`` from the same ``t0``, so two such timelines merge window by window once the finer
is coarsened to the other's width.

What a window holds is the caller's: any object with ``merge(other)`` (it absorbs
``other``) and ``copy()``, made by ``make()`` the first time an event falls in that
window.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

CAPACITY = 256
WIDTH_S = 1.0


def width_for(span_s: float, capacity: int = CAPACITY, width: float = WIDTH_S) -> float:
    """The width windows from ``width`` reach after merging as a span of ``span_s``
    seconds fills them: the same for every timeline of the run."""
    while span_s >= capacity * width:
        width *= 2
    return width


class Mergeable(Protocol):
    def merge(self, other: Any) -> None: ...

    def copy(self) -> Any: ...


A = TypeVar("A", bound=Mergeable)


class TimeWindows(Generic[A]):
    """At most ``capacity`` windows of ``width`` seconds from ``t0``, each an ``A``."""

    def __init__(
        self, t0: float, make: Callable[[], A], capacity: int = CAPACITY, width: float = WIDTH_S
    ) -> None:
        if capacity < 2 or capacity % 2:
            raise ValueError(f"capacity must be even and at least 2, not {capacity}")
        self.t0, self.make, self.capacity, self.width = t0, make, capacity, width
        self.windows: list[A | None] = []

    def at(self, t: float) -> A:
        """The window holding time ``t`` (made if new); ``t`` before ``t0`` is in the first."""
        index = max(0, int((t - self.t0) // self.width))
        while index >= self.capacity:
            self._merge_pairs()
            index //= 2
        windows = self.windows
        if index >= len(windows):
            windows.extend([None] * (index + 1 - len(windows)))
        window = windows[index]
        if window is None:
            window = windows[index] = self.make()
        return window

    def over(self, since: float, until: float) -> Iterator[tuple[A, float]]:
        """(window, the share of ``since``-``until`` inside it) for each window the span
        crosses, in time order (made if new); a span of no length is all in the window
        of ``until``. What a span holds is put where it happened: a pause of half a
        second from 0.8 s is four tenths the first second's, six the next one's."""
        span = until - since
        if span <= 0:
            yield self.at(until), 1.0
            return
        t = since
        while t < until:
            window = self.at(t)  # may merge pairs: the width is read after it
            width = self.width
            edge = self.t0 + (math.floor((t - self.t0) / width) + 1) * width
            edge = min(until, edge if edge > t else t + width)
            yield window, (edge - t) / span
            t = edge

    def items(self) -> Iterator[tuple[float, A]]:
        """(start of the window, its contents) for every window something fell in."""
        for i, window in enumerate(self.windows):
            if window is not None:
                yield self.t0 + i * self.width, window

    def copy(self) -> TimeWindows[A]:
        """An independent copy (each window copied)."""
        twin: TimeWindows[A] = TimeWindows(self.t0, self.make, self.capacity, self.width)
        twin.windows = [None if w is None else w.copy() for w in self.windows]
        return twin

    def coarsen(self, width: float) -> None:
        """Merge pairs until the windows are ``width`` wide (a power-of-two multiple)."""
        while self.width < width * (1 - 1e-9):
            self._merge_pairs()

    def absorb(self, other: TimeWindows[A]) -> None:
        """Add ``other``'s windows (same ``t0`` and base width) into these."""
        self.coarsen(other.width)
        for start, window in other.items():
            self.at(start + other.width / 2).merge(window)  # aligned: the middle is inside

    def _merge_pairs(self) -> None:
        old = self.windows
        merged: list[A | None] = []
        for i in range(0, len(old), 2):
            first = old[i]
            second = old[i + 1] if i + 1 < len(old) else None
            if first is None:
                merged.append(second)
            else:
                if second is not None:
                    first.merge(second)
                merged.append(first)
        self.windows = merged
        self.width *= 2


class Total:
    """A window's total: a count (traces) or seconds (tracing, tf.function calls)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float = 0  # stays an int while only ints are added

    def merge(self, other: Total) -> None:
        self.value += other.value

    def copy(self) -> Total:
        twin = Total()
        twin.value = self.value
        return twin
