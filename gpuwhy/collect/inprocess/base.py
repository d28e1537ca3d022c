"""The life cycle every run collector follows, what it declares, and the snapshot of
facts the run mode asks it to fill.

A collector is one class: its hooks watch the program, its class attributes say which
section of :class:`~gpuwhy.facts.Facts` it fills, when it is asked (live updates too,
or at the end only) and when it is available (an option of the session, TensorFlow
imported), the options it takes (:class:`Option`: the command line, ``RunOptions`` and
the Python API get them from here), the collectors it reads (by name: the run order
follows from them, and a read not declared fails) and how its section shows in the
reports (its rows of the "Run" block). collect/registry.py lists the collectors; the run
mode (gpuwhy/modes/run/) makes, starts, stops and asks them in the order their reads give.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from gpuwhy.collect.inprocess.guard import Guard
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.facts import DriverFacts, Facts

C = TypeVar("C", bound="Collector")
T = TypeVar("T")


@dataclass(frozen=True)
class Option(Generic[T]):
    """One option of a watched run, declared by the collector it configures: ``name`` is
    its keyword in ``gpuwhy.session(...)``, ``RunOptions`` and the Keras callback, ``flag``
    its spelling on ``gpuwhy run``'s command line. ``switch``: a flag that turns a default
    True off (``--no-audit``). ``refuse``: why a value is not accepted, one sentence
    naming the flag (None: it is), checked wherever the option is given, before
    anything runs."""

    name: str
    flag: str
    default: T
    help: str
    type: Callable[[str], T] | None = None
    metavar: str | None = None
    switch: bool = False
    refuse: Callable[[T], str | None] | None = None

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        if self.switch:
            parser.add_argument(self.flag, dest=self.name, action="store_false", help=self.help)
        else:
            parser.add_argument(
                self.flag,
                dest=self.name,
                type=self.type,  # type: ignore[arg-type]  # None: a string, as argparse takes it
                default=self.default,
                metavar=self.metavar,
                help=self.help,
            )

    def given_in(self, parsed: argparse.Namespace) -> T:
        """Its value on a command line parsed with :meth:`add_to`."""
        return getattr(parsed, self.name)

    def check(self, value: T) -> T:
        """``value`` when accepted; else ValueError saying why."""
        why = self.refuse(value) if self.refuse is not None else None
        if why is not None:
            raise ValueError(why)
        return value


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
    # each interval's loop: its index in the step facts' ``loops`` (empty: not said)
    loops: tuple[int, ...] = ()


@dataclass(frozen=True)
class RunOptions:
    """What the session was asked for: ``command`` the program's argv, ``values`` the
    collectors' options by name (one not given has its default). A collector reads its
    own: ``options[SAMPLES_PER_S]``."""

    command: tuple[str, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, option: Option[T]) -> T:
        return self.values.get(option.name, option.default)

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
    """One snapshot being gathered, the collectors asked one by one in the run order.
    ``facts``: the sections filled so far; the collector being asked (``asking``) sees
    only those of the collectors it declares it ``reads_from`` (the others read as None), may
    ``peer`` only at those and ``fill`` only its own section and those it ``amends``.
    ``ending``: None while the program runs."""

    options: RunOptions
    collectors: Sequence[Collector]
    guard: Guard
    t0: float
    t_end: float
    all_facts: Facts
    live: bool = False
    ending: Ending | None = None
    driver: DriverFacts | None = None
    tensorflow_imported: bool = field(default_factory=lambda: "tensorflow" in sys.modules)
    asking: Collector | None = None
    # what ``asking`` sees, made once per collector asked
    _view: Facts | None = field(default=None, init=False, repr=False)

    def ask(self, collector: Collector | None) -> None:
        """The collector asked next (None: the session, which sees every section)."""
        self.asking, self._view = collector, None

    @property
    def facts(self) -> Facts:
        if self.asking is None:
            return self.all_facts
        if self._view is None:
            reads = type(self.asking).reads_from
            shown = {c.section for c in self.collectors if c.name in reads and c.section}
            self._view = Facts(
                devices=self.all_facts.devices,
                **{name: getattr(self.all_facts, name) for name in shown},
            )
        return self._view

    def fill(self, section: str, value: Any) -> None:
        if self.asking is not None:
            kind = type(self.asking)
            if section != kind.section and section not in kind.amends:
                raise LookupError(f"{kind.name} fills {section!r} without declaring it")
        self.all_facts = dataclasses.replace(self.all_facts, **{section: value})
        self._view = None  # an amended section shows at once

    def peer(self, kind: type[C]) -> C:
        """The session's collector of class ``kind``, one the collector being asked
        declares it reads (the function watcher's calls, the step collector's reads)."""
        if self.asking is not None:
            return type(self.asking).peer_of(self.collectors, kind)
        return peer(self.collectors, kind)

    def note(self, text: str) -> None:
        """A note for the program's notes, in the order the sections were gathered."""
        self.guard.note(text)


class Collector:
    """Base class: all hooks are no-ops until overridden, and it fills no section.

    ``start`` runs before the program; ``on_tensorflow`` right after ``tensorflow`` is
    imported (possibly never, possibly at once when it already was); ``on_keras`` after
    ``keras`` is; ``stop`` after the program ended however it ended (under ``gpuwhy run``,
    once its non-daemon threads ended too), and must undo every hook. None of them may
    raise into the program: a collector that fails records why and stays quiet. Then
    :meth:`fill` is asked for its section. A ``live`` collector is also asked while the
    program runs, from the live metrics' thread (only with --metrics-*): its state is
    shared with the program's threads, so it takes a lock.
    """

    # Its name: what other collectors' ``reads_from`` and ``uses`` say (unique; its section's where it has one).
    name: ClassVar[str] = ""
    # The field of Facts it fills (None: none; it serves other collectors).
    section: ClassVar[str | None] = None
    # The collectors, by name, whose sections or objects it reads: it is made, started
    # and asked after them and stopped before them (collect/registry.py orders the run).
    reads_from: ClassVar[tuple[str, ...]] = ()
    # Collectors, by name, whose objects it asks while the program runs or when it is
    # asked, in whatever order they come (the step collector, first to start, asks the
    # function watcher for its calls).
    uses: ClassVar[tuple[str, ...]] = ()
    # Sections of those it reads that it completes (the step collector's Keras input
    # wait, known once the pipelines are): filled again by it.
    amends: ClassVar[tuple[str, ...]] = ()
    # The options it takes; ``wanted`` and ``create`` read them from RunOptions.
    options: ClassVar[tuple[Option[Any], ...]] = ()
    # Its name in the note a failure leaves: "{what} failed: ...".
    what: ClassVar[str] = ""
    # Asked for every live metrics update too (else only when the program ended).
    live: ClassVar[bool] = False
    # Asked only where the program imported TensorFlow.
    needs_tensorflow: ClassVar[bool] = False
    # Its place among the rows of the reports' "Run" block (None: it has none): program
    # 10, steps 20, input 30, eager ops 40, tf.functions 50, stalls 60, distribute 70,
    # GPU samples 80.
    shown: ClassVar[int | None] = None

    @classmethod
    def peer_of(cls, made: Sequence[Collector], kind: type[C]) -> C:
        """The collector of class ``kind`` among ``made``: one this class reads."""
        if kind.name not in cls.reads_from + cls.uses:
            raise LookupError(f"{cls.name} reads {kind.name!r} without declaring it")
        return peer(made, kind)

    @classmethod
    def wanted(cls, options: RunOptions) -> bool:
        """Whether a session with ``options`` makes it at all: not where one of its
        switches is off (--no-audit); override for more (--target given)."""
        return all(options[o] for o in cls.options if o.switch)

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> Collector:
        """This collector for a session; ``made``: the collectors before it."""
        return cls()

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> Sequence[tuple[str, str]]:
        """Its rows in the reports' "Run" block, (key, text), from the record's facts:
        the terminal's and (``html``) the page's. Called where ``shown`` is set."""
        return ()

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
