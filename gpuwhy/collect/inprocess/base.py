"""The life cycle every run collector follows, and the step intervals they share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StepWindow:
    """The steps of a run on the ``time.perf_counter()`` axis.

    ``t0`` is when the run started (facts give times relative to it); ``intervals`` are
    the (start, end) of each step after warm-up, in order.
    """

    t0: float
    intervals: tuple[tuple[float, float], ...] = ()


class Collector:
    """Base class: all hooks are no-ops until overridden.

    ``start`` runs before the program; ``on_tensorflow`` right after ``tensorflow`` is
    imported (possibly never, possibly at once when it already was); ``stop`` after the
    program ended however it ended, and must undo every hook. None of them may raise
    into the program: a collector that fails records why and stays quiet.
    """

    def start(self, t0: float) -> None:
        self.t0 = t0

    def on_tensorflow(self) -> None:
        pass

    def stop(self) -> None:
        pass
