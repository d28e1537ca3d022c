"""The consumer's time between two elements of a ``from_generator`` pipeline, timed
around the generator itself where TF keeps no timer.

TF's gap timer (``gap_times`` of an iterator's model: the time from the end of one
``GetNext`` to the start of the next) is what a Keras ``fit``'s input wait is read from
(gpuwhy/collect/inprocess/input_wait.py). With autotune off TF keeps no model and so no
gap, and Keras turns autotune off itself for a ``PyDataset`` with ``workers`` (its
enqueuer's threads read ahead: ``py_dataset_adapter.get_tf_dataset``): the run said
"input wait not measured" for the very fix gpuwhy proposes. Such a pipeline has no
asynchronous stage, so every ``GetNext`` of the consumer calls the generator's
``__next__`` on the spot, and the time from one call's return to the next call is the
consumer's, as TF's timer would read it (plus TF's conversion of the element to tensors,
a little: the wait read from these gaps is, if anything, short).

``from_generator`` calls the generator once per pass (``_GeneratorState.get_iterator``)
and only ever calls ``next`` on what it returns; the wrapper hands every value and
exception through unchanged. Bounded: a running sum and count for the mean, the latest
``MAX_KEPT`` gaps for the median and spread.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MAX_KEPT = 20000  # gaps kept for the median and the spread


@dataclass(frozen=True)
class GapSummary:
    """The gaps so far: ``since`` is when the pass that gave the first of them began
    (perf_counter); the first pass's first gap (the consumer's warm-up: tracing, the
    first step's one-time work) is left out, as the first step is out of the steps."""

    count: int
    mean_s: float
    median_s: float
    stdev_s: float | None
    since: float
    reads: int  # elements the generator gave, every pass


class GeneratorGaps:
    """The gaps of every pass over one ``from_generator`` dataset."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: deque[float] = deque(maxlen=MAX_KEPT)
        self._total = 0.0
        self._count = 0
        self._reads = 0
        self._passes = 0
        self._since: float | None = None

    def wrap(self, generator: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
        """``generator`` as ``from_generator`` calls it, each pass's iterator timed."""

        def timed_generator(*args: Any) -> Iterator[Any]:
            return _TimedPass(iter(generator(*args)), self)

        return timed_generator

    def _begin(self) -> bool:
        """A new pass: whether it is the first (its first gap is a warm-up)."""
        with self._lock:
            self._passes += 1
            return self._passes == 1

    def _add(self, gap: float | None, started: float) -> None:
        with self._lock:
            self._reads += 1
            if gap is None:
                return
            if self._since is None:
                self._since = started
            self._kept.append(gap)
            self._total += gap
            self._count += 1

    def summary(self) -> GapSummary | None:
        """The gaps so far, or None before two elements of a pass were read."""
        with self._lock:
            kept = list(self._kept)
            count, total, since, reads = self._count, self._total, self._since, self._reads
        if not count or since is None:
            return None
        return GapSummary(
            count=count,
            mean_s=total / count,
            median_s=statistics.median(kept),
            stdev_s=statistics.stdev(kept) if len(kept) > 1 else None,
            since=since,
            reads=reads,
        )


class _TimedPass:
    """One pass's iterator: each ``__next__`` handed to the generator's, the time from
    the previous one's return to this one's call kept as a gap."""

    __slots__ = ("_inner", "_gaps", "_started", "_last_end", "_skip")

    def __init__(self, inner: Iterator[Any], gaps: GeneratorGaps) -> None:
        self._inner = inner
        self._gaps = gaps
        self._started = time.perf_counter()
        self._last_end: float | None = None
        self._skip = gaps._begin()  # the run's first gap: the consumer's warm-up

    def __iter__(self) -> _TimedPass:
        return self

    def __next__(self) -> Any:
        start = time.perf_counter()
        value = next(self._inner)  # StopIteration and the generator's errors pass through
        last, self._last_end = self._last_end, time.perf_counter()
        gap = None if last is None else start - last
        if gap is not None and self._skip:
            gap, self._skip = None, False
        self._gaps._add(gap, self._started)
        return value
