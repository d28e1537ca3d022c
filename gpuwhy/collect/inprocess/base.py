"""The life cycle every run collector follows, what it declares, and the snapshot of
facts the run mode asks it to fill.

A collector is one class: its hooks watch the program, its class attributes say which
section of :class:`~gpuwhy.facts.Facts` it fills, when it is asked (live updates too,
or at the end only) and when it is available (an option of the session, TensorFlow
imported). The run mode (gpuwhy/modes/run/) makes, starts, stops and asks them in the
order it declares: gpuwhy/modes/run/collectors.py finds every collector class of the
collect and projection packages, as pytest finds its plugins, so no collector is named
anywhere else.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from gpuwhy.collect.inprocess.guard import Guard
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.facts import DriverFacts, Facts

C = TypeVar("C", bound="Collector")


@dataclass(frozen=True)
class StepWindow:
    """The steps of a run on the ``time.perf_counter()`` axis.

    ``t0`` is when the run started (facts give times relative to it); ``intervals`` are
    the (start, end) of each step after warm-up, in order (beyond each loop's first
    steps, only those the eager op counter wants). ``histograms``: per loop counted (a
    name that stays the loop's from one snapshot to the next), all its steps after
    warm-up so far, in the live step histogram's buckets.
    """

    t0: float
    intervals: tuple[tuple[float, float], ...] = ()
    histograms: tuple[tuple[str, StepHistogram], ...] = ()


@dataclass(frozen=True)
class RunOptions:
    """What the session was asked for: ``hz`` GPU samples per second, ``audit`` the
    placement audit, ``eager`` the eager op counter (``eager_duty`` of the time),
    ``target`` a GPU to project the step onto, ``command`` the program's argv."""

    hz: float = 10.0
    audit: bool = True
    eager: bool = True
    eager_duty: float | None = None
    target: str | None = None
    command: tuple[str, ...] = ()

    @property
    def script(self) -> str | None:
        """The script the program runs, where it is a .py file (its code is read for
        fixes that use the program's own names)."""
        return self.command[0] if self.command and self.command[0].endswith(".py") else None


@dataclass(frozen=True)
class Ending:
    """How the program ended: ``ended`` completed | exception | interrupted | terminated | exit."""

    ended: str = "completed"
    exit_code: int = 0
    error: str | None = None


@dataclass
class Gathering:
    """One snapshot being gathered: ``facts`` holds the sections filled so far, in the
    registry's order, so a collector reads those of the collectors before it (the
    projection reads the placement audit's). ``window``: the steps after warm-up, once
    the step collector filled its section. ``ending``: None while the program runs."""

    options: RunOptions
    collectors: Sequence[Collector]
    guard: Guard
    t0: float
    t_end: float
    facts: Facts
    live: bool = False
    ending: Ending | None = None
    driver: DriverFacts | None = None
    tensorflow_imported: bool = field(default_factory=lambda: "tensorflow" in sys.modules)
    window: StepWindow = field(init=False)

    def __post_init__(self) -> None:
        self.window = StepWindow(self.t0)

    def fill(self, section: str, value: Any) -> None:
        self.facts = dataclasses.replace(self.facts, **{section: value})

    def peer(self, kind: type[C]) -> C:
        """The session's collector of class ``kind`` (one a collector reads beyond the
        sections: the function watcher's calls, the step collector's ``next()`` reads)."""
        return peer(self.collectors, kind)

    def note(self, text: str) -> None:
        """A note for the program's notes, in the order the sections were gathered."""
        self.guard.note(text)


class Collector:
    """Base class: all hooks are no-ops until overridden, and it fills no section.

    ``start`` runs before the program; ``on_tensorflow`` right after ``tensorflow`` is
    imported (possibly never, possibly at once when it already was); ``on_keras`` after
    ``keras`` is; ``stop`` after the program ended however it ended, and must undo every
    hook. None of them may raise into the program: a collector that fails records why
    and stays quiet. Then :meth:`fill` is asked for its section.
    """

    # The field of Facts it fills (None: none; it serves other collectors).
    section: ClassVar[str | None] = None
    # Its place in a watched run (None: not one of a run's collectors): started and asked
    # for its section after every collector of a lower order (those whose sections or
    # objects it reads), stopped before them. gpuwhy/modes/run/collectors.py finds it.
    order: ClassVar[int | None] = None
    # Its name in the note a failure leaves: "{what} failed: ...".
    what: ClassVar[str] = ""
    # Asked for every live metrics update too (else only when the program ended).
    live: ClassVar[bool] = False
    # Asked only where the program imported TensorFlow.
    needs_tensorflow: ClassVar[bool] = False

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        """Whether a session with ``options`` makes it at all (--no-audit, --target)."""
        return True

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> Collector:
        """This collector for a session; ``made``: the collectors before it."""
        return cls()

    def start(self, t0: float) -> None:
        self.t0 = t0

    def on_tensorflow(self) -> None:
        pass

    def on_keras(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def fill(self, gathering: Gathering) -> Any:
        """Its section of ``gathering`` (the sections before it are filled)."""
        return None

    def program_notes(self) -> Sequence[str]:
        """What it could not watch, for the notes of section ``program``."""
        return ()


def peer(collectors: Sequence[Collector], kind: type[C]) -> C:
    """The collector of class ``kind`` among ``collectors``."""
    for collector in collectors:
        if isinstance(collector, kind):
            return collector
    raise LookupError(f"this session has no {kind.__name__}")
