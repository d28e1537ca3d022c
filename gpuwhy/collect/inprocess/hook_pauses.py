"""Pausing the per-step hooks on a long steady loop of short steps, every step still counted.

Timing each ``next()`` and each ``tf.function`` call puts a Python frame between TF's C
calls on the program's thread: a few microseconds a step each, which on a loop of
0.2-0.5 ms steps is over the 2 % budget (docs/speed.md). Running the hooks less often is
the only way under it, so once a loop is steady (each loop seen since the last pause has
its first ``HEAD_STEPS`` steps kept one by one) and fast (``MIN_EVENTS_PER_S`` reads and
calls a second or more, counted from the drain's first tick that saw any: steps of a few
milliseconds or less), the hooks step aside for
``OFF_S`` after ``ON_S`` they were on, and from then on for ``OFF_S`` after every
``SHORT_ON_S`` back, as long as the loop ran as fast through the pause (its counts say
so): a twentieth of the steps are timed, in nearly every second of the loop, the rest
are *counted*. TensorFlow counts both anyway: tf.data's model of each iterator the
elements its reader got (:func:`~gpuwhy.tfapi.tfdata.iterator_models.root_elements`),
and tf.function's retracing detector each eager call
(:func:`~gpuwhy.tfapi.tracing.eager_calls`). So the reads and calls of a pause come
back exactly, as their number and the time they spanned (a :class:`Stretch`), which
the steps take as steps seen only as a count (``Step.counted``).

Where each count is read decides that it is exact: on the program's thread, between two
of its events. A pause begins in a hook, just after a read or a call returned (every
count then includes that event, and nothing after it); a hook is back in place for the
first event after the pause, and reads its source's count just before it. A source
still open from an earlier pause (not used in between) keeps its first count; one that
TF counts with others (Keras' train and test functions: one ``def``) is counted before
another of them traces or is first seen. A pause ends
after ``OFF_S`` (the steps' drain ticks), at once when a new iterator is built (a new
epoch, an evaluation: its first steps are timed), when a function traces (TF's count
of its calls restarts there), when the eager op counter opens a window (the steps
inside it are the ones it places ops in), and at the end of the run. A source freed
while paused is counted in its finaliser. A source whose count cannot be read (an
iterator with autotune off) stops the pausing for the run: its events stay timed.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.op_callbacks import unseen
from gpuwhy.tfapi.patching import Patch

__all__ = ["END", "FREED", "NEXT", "HookPauses", "Stretch", "call_stretch", "read_stretch"]

# Timed at least this long before the first pause and after any resume but a pause's
# end (a new iterator, a trace, the eager op counter's window: the drain's ticks, 0.25 s
# apart, decide it), each pause this long (ended by a tick: 1-1.25 s), and after each pause
# timed for ``SHORT_ON_S`` (the first event that ends after it begins the next pause,
# where the loop ran through the pause at ``MIN_EVENTS_PER_S`` or more): a twentieth of
# a steady loop's steps are timed (ten a second at 5 ms, two hundred at 0.25 ms),
# nearly every second of it: most windows of the steps' timeline (a second wide, wider
# in a long run) have timed steps to take their median from, and one that has none (or
# too few) says so (its median is None). With a fifth timed, as before the short
# periods, gpuwhy's threads took 8.9-9.6 ms of CPU a second beside a loop of 0.25 ms
# steps; with a twentieth, 4.1-4.5 (docs/speed.md)
ON_S = 0.25
OFF_S = 1.0
SHORT_ON_S = 0.05
EXPECT_S = 1.0  # an iterator the program made and read in no hook this long: not waited for
# Reads and calls a second from which the hooks pause: a loop reading its batch and
# calling its step makes two events a step, so steps of 5 ms or less (one event a step:
# 2.5 ms). Timing a step costs the program's thread 10-15 us on a quiet host (measured
# on steps of 0.2-0.5 ms, docs/speed.md), more on a slow one, whose steps are longer too:
# 0.2-1 % of steps of 1.5-5 ms, which the threshold before (1,500 events a second) timed
# one by one; this host's loop of 0.5 ms steps ran at 1.2-1.7 ms on a slow evening, on
# both sides of it
MIN_EVENTS_PER_S = 400.0


@dataclass(frozen=True)
class Stretch:
    """In a read's place (its ``exhausted`` field): ``reads`` elements read while the
    timing paused, making ``steps`` steps from the last timed read's start to this
    event's end. ``ended``: the iterator was freed (its loop ended) during the pause."""

    reads: int
    steps: int
    ended: bool = False


# emit(events counted, the time the pause began, now, how it ended) for one source: how
# is NEXT (the source's next event follows, timed), FREED (the source was freed) or END
# (the run ended)
Emit = Callable[[int, float, float, str], None]
NEXT, FREED, END = "next", "freed", "end"


@dataclass
class _Source:
    """A timed iterator or tf.function: how to count its events, where its stretches go.
    ``group``: sources TF counts together (tf.functions of one ``def``: Keras' train and
    test functions), None for one counted alone."""

    ref: Any  # weak reference
    count: Callable[[Any], int]
    emit: Emit
    group: Any = None
    # its count may hold events no hook makes (an iterator read inside a tf.function):
    # counted only where a hook saw one of its events before the pause
    counted_elsewhere: bool = False


@dataclass
class _Open:
    """A source whose events paused: when, its count then, and whether a hook saw one
    of its events in the time before (an iterator that only a tf.function reads, its
    reads graph ops, has none: its count is no loop's)."""

    source: _Source
    since: float
    count: int
    recent: bool = True


class HookPauses:
    """The pauses of one run's per-step hooks (``patches``), and the counts that keep
    their events whole. Sources are told by the hooks (:meth:`track`) as they first see
    them; ``ready`` (the function watcher's) says whether its functions may pause now."""

    def __init__(
        self,
        on_s: float = ON_S,
        off_s: float = OFF_S,
        min_events_per_s: float = MIN_EVENTS_PER_S,
        short_on_s: float = SHORT_ON_S,
    ) -> None:
        self.on_s, self.off_s, self.min_events_per_s = on_s, off_s, min_events_per_s
        self.short_on_s = short_on_s
        self.patches: list[Patch] = []
        # read by the hooks on every event: plain attributes
        self.wanted = False  # the drain asks the program's thread to pause at its next event
        # ... that ends at or after this time (read by a hook only where ``wanted``): the
        # end of the short time on after a pause, 0.0 where any next event will do
        self.wanted_from = 0.0
        self.open: dict[int, _Open] = {}  # sources whose paused events are not counted yet
        self.sources: dict[int, _Source] = {}  # by id: the sources timed
        # iterators the program made (not a library), not read yet: no pause until they
        # are (their reads would begin unseen, uncounted)
        self.expected: dict[int, tuple[Any, float]] = {}  # (weak ref, made at)
        # the sources a hook saw an event of since the drain's last tick, and in the
        # tick's time before (a set's add: no Python frame)
        self.recent: set[int] = set()
        self._earlier: set[int] = set()
        self.paused = False
        self.pauses = 0
        self.paused_s = 0.0
        self.refused: str | None = None  # why the hooks are not paused again this run
        self.blocked: Callable[[], bool] = lambda: False  # the eager counter's window is on
        # the function watcher: (whether its functions may pause, calls timed since asked)
        self.ready: Callable[[], tuple[bool, int]] = lambda: (True, 0)
        self._lock = threading.RLock()
        self._on_since = time.perf_counter()
        self._paused_at = 0.0
        self._events = 0  # timed events folded since the hooks were last put back
        # the last pause: how long it lasted, the events its sources' counts gave back so
        # far (each source's first event after it): its loop's pace
        self._last_pause_s = 0.0
        self._paused_events = 0
        self._holds = 0  # held() blocks under way: no pause meanwhile
        self._resumes = 0  # resume() calls: a tick's short time on is for its own only
        self._finished = False  # the run ended: no pause again

    def add(self, patches: list[Patch]) -> None:
        """Hooks that pause together (each installer adds its own)."""
        with self._lock:
            self.patches.extend(patches)

    # -- the drain's side ---------------------------------------------------------------
    def tick(self, now: float, reads: int, steady: bool) -> None:
        """After each fold of the steps: ``reads`` timed reads were folded, ``steady``
        says every loop they belong to has its head of single steps. Ends a pause that
        lasted ``off_s`` and asks for the next one after ``short_on_s`` (:meth:`pause`
        checks the loop's pace through the pause); asks for one where the hooks were on
        ``on_s`` at ``min_events_per_s`` or more."""
        with self._lock:
            if not self.paused:
                after_pause = False
            elif now - self._paused_at >= self.off_s:
                self.resume()
                after_pause = True
            else:
                return
            resumes = self._resumes
        # asked outside the lock: the watcher takes its own, and its trace listener
        # takes this one inside its own (the two in one order only)
        functions_ready, calls = self.ready()
        with self._lock:
            if self.paused:
                return
            self._earlier, self.recent = self.recent, set()
            if after_pause:
                if self._resumes != resumes:
                    return  # put back again meanwhile (a new iterator, a trace): on_s on
                # back for ``short_on_s`` only: the loop was steady and fast before the
                # pause, and :meth:`pause` asks its pace through the pause of its counts
                self.wanted_from = now + self.short_on_s
                self.wanted = functions_ready and self._may_pause()
                return
            if not reads + calls:
                # the hooks saw nothing since the last tick (TensorFlow importing, a model
                # building, a loop of slow steps): a loop's pace counts from here, not
                # from when the hooks went in (a loop of 0.34 ms steps begun after 10 s of
                # loading was timed to its 16,310th step, its head the first 5,000)
                self._on_since, self._events = now, 0
            self._events += reads + calls
            on_for = now - self._on_since
            self.wanted_from = 0.0
            self.wanted = (
                steady
                and functions_ready
                and on_for >= self.on_s
                and self._events >= self.min_events_per_s * on_for
                and self._may_pause()
            )

    def _may_pause(self) -> bool:
        """Nothing stands in a pause's way (under the lock): no refusal, hooks to step
        aside, no eager op window, no held block, the run not over."""
        return (
            self.refused is None
            and bool(self.patches)
            and not self.blocked()
            and not self._holds
            and not self._finished
        )

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Every event timed while the block runs (the step profiler counts a few calls
        to stop TF's profiler after them): the hooks back now, no pause until it ends."""
        with self._lock:
            self._holds += 1
            self.resume()
        try:
            yield
        finally:
            with self._lock:
                self._holds -= 1

    # -- the program's thread ------------------------------------------------------------
    def pause(self) -> None:
        """Called by a hook just after its event returned, where ``wanted``: every timed
        source's count is read now, then the hooks step aside. The counts are read
        outside the lock (an eager op: a finaliser it runs may take a collector's lock,
        whose holder may be waiting for this one); only this thread pauses."""
        with self._lock:
            if not self.wanted or self.paused:
                return
            self.wanted = False
            now = time.perf_counter()
            if self.wanted_from:
                # the short time on after a pause: the loop must have run through that
                # pause as fast as a first pause needs it to (the drain's ticks decide
                # again where it did not: a loop that slowed has every step timed)
                self.wanted_from = 0.0
                if self._paused_events < self.min_events_per_s * self._last_pause_s:
                    return
            if any(
                ref() is not None and now - made < EXPECT_S
                for ref, made in list(self.expected.values())
            ):
                return  # an iterator the program made is not read yet: it would go uncounted
            sources = [(k, s) for k, s in list(self.sources.items()) if k not in self.open]
            recent = self.recent | self._earlier  # seen in the last tick or two
        counts: dict[int, _Open] = {}
        for key, source in sources:
            target = source.ref()
            if target is None:
                continue
            try:
                with unseen():
                    count = source.count(target)
            except Exception as error:  # noqa: BLE001 - autotune off, or a TF we do not know
                self.refused = f"a count could not be read ({error})"
                return
            finally:
                del target
            # a source still open from an earlier pause keeps its count from then
            counts[key] = _Open(source, 0.0, count, key in recent or not source.counted_elsewhere)
        with self._lock:
            if self.paused or self.refused is not None or self._finished:
                return
            aside: list[Patch] = []
            for patch in self.patches:
                if not patch.step_aside():
                    for done in aside:
                        done.step_back()
                    self.refused = f"another hook was installed over gpuwhy's on {patch.name}"
                    return
                aside.append(patch)
            now = time.perf_counter()
            for entry in counts.values():
                entry.since = now
            self.open.update(counts)
            self.paused, self._paused_at = True, now

    def close_group(self, group: Any, key: int, target: Any, extra: int) -> None:
        """Before TF's count of ``group`` changes under the open entries that share it
        (one of its functions traces, or a new one of them is seen): every open entry
        of the group is counted now, ``target`` (``key``) with ``extra`` events under
        way."""
        for other in [k for k, e in list(self.open.items()) if e.source.group == group]:
            entry = self.open.get(other)
            if entry is None:
                continue
            if other == key:
                self.close(target, key, extra)
                continue
            source_target = entry.source.ref()
            if source_target is not None:
                self.close(source_target, other)
            else:
                self.open.pop(other, None)
            del source_target

    def close(self, target: Any, key: int, extra: int = 0) -> None:
        """Called by a hook before the first timed event of a source whose events were
        paused (``extra``: events under way, not counted by TF yet): the events between
        come back as a stretch."""
        entry = self.open.pop(key, None)
        if entry is None:
            return
        try:
            with unseen():
                events = entry.source.count(target) - entry.count + extra
        except Exception as error:  # noqa: BLE001 - never into the program
            self.refused = f"a count could not be read again ({error})"
            return
        if events > 0:
            self._paused_events += events
            entry.source.emit(events, entry.since, time.perf_counter(), NEXT)

    def ended(self, target: Any) -> None:
        """``target`` is about to be freed: the events it had while paused."""
        self.freed(id(target), target)

    def freed(self, key: int, target: Any = None) -> None:
        """The source ``key`` is freed (``target``: still alive, or None where its count
        is read without it, as a tf.function's is: TF keeps it under the code of its
        ``def``): the events it had while paused."""
        self.sources.pop(key, None)
        self.expected.pop(key, None)
        entry = self.open.pop(key, None)
        if entry is not None and entry.recent:
            self._count_last(target, entry, FREED)

    def resume(self) -> None:
        """The hooks back in place (any thread): the drain after ``off_s``, a new
        iterator, a trace, the eager op counter's window, the end of the run."""
        with self._lock:
            self.wanted, self.wanted_from = False, 0.0
            self._resumes += 1
            if not self.paused:
                return
            # zeroed before the hooks are back: their first events' counts add to it
            self._paused_events = 0
            for patch in self.patches:
                patch.step_back()
            now = time.perf_counter()
            self.paused = False
            self.pauses += 1
            self._last_pause_s = now - self._paused_at
            self.paused_s += self._last_pause_s
            self._on_since, self._events = now, 0

    def finish(self) -> None:
        """At the end of the run: the hooks back for good, every source still paused
        counted."""
        with self._lock:
            self._finished = True
            self.resume()
        for key in list(self.open):
            entry = self.open.pop(key, None)
            target = entry.source.ref() if entry is not None else None
            if entry is not None and target is not None and entry.recent:
                self._count_last(target, entry, END)
            del target

    def _count_last(self, target: Any, entry: _Open, how: str) -> None:
        try:
            with unseen():
                events = entry.source.count(target) - entry.count
        except Exception:  # noqa: BLE001 - a finaliser at shutdown: nothing more to count
            return
        entry.source.emit(events, entry.since, time.perf_counter(), how)

    def expect(self, key: int, target: Any) -> None:
        """An iterator the program made: no pause until its first read is timed, or
        ``EXPECT_S`` went by without one (one only a tf.function reads, whose reads are
        graph ops)."""
        try:
            self.expected[key] = (weakref.ref(target), time.perf_counter())
        except TypeError:
            pass

    def track(
        self,
        key: int,
        target: Any,
        count: Callable[[Any], int],
        emit: Emit,
        group: Any = None,
        counted_elsewhere: bool = False,
    ) -> None:
        """A source's first timed event (by its hook): counted at each pause."""
        self.expected.pop(key, None)
        self.recent.add(key)
        try:
            self.sources[key] = _Source(weakref.ref(target), count, emit, group, counted_elsewhere)
        except TypeError:  # not weakly referenceable: the hooks are never paused
            self.refused = f"a {type(target).__name__} could not be followed"

    def refuse(self, why: str) -> None:
        """No pause again this run: a source that cannot be counted (an iterator whose
        model TF does not keep) would lose the events of a pause."""
        with self._lock:
            self.expected.clear()
            if self.refused is None:
                self.refused = why

    def forget(self, key: int) -> None:
        """A source whose events ended where a hook saw them (an exhausted iterator)."""
        self.sources.pop(key, None)


def read_stretch(emit: Callable[[tuple], None], key: int, site: object) -> Emit:
    """A tf.data iterator's stretches, as read tuples in the reads' list (its
    ``exhausted`` field a :class:`Stretch`), so that they fold in order with the timed
    reads. With the read that began the pause (its step still open), ``n`` reads make
    ``n + 1`` steps where the next read or the exhausting one ended the last of them,
    ``n`` where the run ended with it still open (left out, as an open step is)."""

    def stretch(n: int, since: float, now: float, how: str) -> None:
        steps = n if how == END else n + 1
        if steps > 0:
            emit((key, site, since, now, Stretch(n, steps, ended=how == FREED)))

    return stretch


def call_stretch(times: Any) -> Emit:
    """A tf.function's stretches, in its array of call times as the pair ``(-n, end)``
    (a call's start is never negative), so that they fold in order with its timed
    calls. With the call that began the pause (its step still open) ``n`` calls make
    ``n + 1`` steps however the pause ended (a function's last call's step is counted
    open, as a timed one's is)."""

    def stretch(n: int, since: float, now: float, how: str) -> None:
        if n > 0:
            times.extend((-float(n), now))

    return stretch
