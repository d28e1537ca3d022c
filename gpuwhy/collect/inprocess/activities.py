"""What commonly stalls training, timed while the program runs, and the stalls it made.

Six kinds of activity, each an interval on the run's clock with the user's line that
started it where that is cheap to know:

- ``gc``: Python's garbage collector (``gc.callbacks``: start and stop of every
  collection, with its generation; a full collection's line is where it was
  triggered);
- ``checkpoint``, ``summary``, ``evaluate``: TF's and Keras' saves, summary flushes,
  ``evaluate``/``predict`` (:mod:`gpuwhy.tfapi.stall_hooks`);
- ``trace``: tf.function traces, as the function watcher sees them;
- ``loop``: a run of ``next()`` calls on one tf.data iterator in a loop of the user's
  that no other iterator's read broke (the step collector's hook tells it as the
  program reads): a validation pass between training steps. It counts for a stall
  only where it lies wholly inside the stall (a training loop's own run of reads
  holds its stalls, and is not what stalled it), and is kept in the ring alone (a run
  of reads is not time lost: the activities' totals leave it out).

A hook appends a tuple and returns (the GC callback runs inside every collection, so
it takes no lock); a drain thread folds them, four times a second, into bounded state:
per kind a count, seconds and the longest, the top places, the timeline's windows
(GC seconds and collections, checkpoint seconds), and a ring of the latest intervals
(GC collections shorter than ``GC_RING_MIN_S`` are counted, not kept: a program makes
thousands a minute, and none of them stalls a step).

Every loop of steps gets a :class:`~gpuwhy.collect.inprocess.stall_tracker.StallTracker`
from this collector (the step collector and the function watcher make their loops'
records with it), which asks :meth:`ActivityCollector.overlapping` what ran in a stall
as soon as it finds one, while the rings still hold it.
"""

from __future__ import annotations

import gc
import linecache
import os
import statistics
import threading
import time
from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any

import gpuwhy.forked as forked
from gpuwhy.collect.inprocess.base import Collector, Gathering, RunOptions
from gpuwhy.collect.inprocess.drain import Drain, take
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.stall_tracker import Beat, StallGroup, StallTracker
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.time_windows import TimeWindows, Total
from gpuwhy.derived.stall_waits import PARTLY_COVERED, input_waits
from gpuwhy.facts import (
    Activity,
    Facts,
    LoopStalls,
    Stall,
    StallBeat,
    StallCause,
    StallFacts,
    StepCode,
    StepFacts,
)
from gpuwhy.formatting import duration
from gpuwhy.source_calls import loop_code
from gpuwhy.tfapi import stall_hooks
from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.tfdata.iterators import on_iterator_created

# "gpuwhy": gpuwhy's own pauses of the program (a heap census holds the GIL for a tenth
# of a second): a stall they cause is gpuwhy's, never the program's finding (the program's
# own activities in one are the program's: see ActivityCollector.overlapping)
VALIDATION = "fit's validation"  # the detail of an evaluate that fit runs itself
VALIDATIONS_KEPT = 8  # fit's latest validation passes, for in_validation
KINDS = ("gc", "checkpoint", "summary", "evaluate", "trace", "gpuwhy", "loop", "teardown", "fit")
# The run's totals: each kind's, and fit's validation passes apart from the program's own
# evaluate/predict calls (both kind "evaluate"). Counted together, 25 predict() calls
# after a fit with validation_data read "its 28 predict() calls" (the 3 validations'
# time in theirs), and where the validations took longest the activity was named after
# them and the calls' finding (steps.keras-call-per-step) was not made at all.
VALIDATION_TOTALS = "evaluate:validation"
TOTALS = (*KINDS[:4], VALIDATION_TOTALS, *KINDS[4:])
RING = {
    "loop": 1024,
    "teardown": 256,
    "gc": 2048,
    "checkpoint": 1024,
    "summary": 1024,
    "evaluate": 1024,
    "trace": 1024,
    "gpuwhy": 64,
    "fit": 1,  # never kept: fit's steps run inside it, it is no stall's cause
}
GC_RING_MIN_S = 0.001
LOOP_WHAT = "a loop over another tf.data dataset"
# a tf.data iterator freed (its loop ended): TF stops the pipeline's threads and waits for
# them, tf.data's autotune thread up to the rest of its period (docs/speed.md); shorter
# ends are not kept (a loop of many short-lived iterators frees one per read)
TEARDOWN_WHAT = "the end of a tf.data iterator (TF stopping its pipeline's threads)"
TEARDOWN_MIN_S = 0.001
FULL_COLLECTION = "generation 2"  # a gc activity's ``what``: gc.collect(), or the oldest
MAX_PLACES = 16  # places counted per kind
# stalls too few to make a beat (three) are said where they cost this much of the loop:
# a measured loss, one epoch's end that waited seconds, is no pattern but is the time
ALONE_SHARE_SAID = 0.05
# Collections kept one by one (start, seconds: 16 bytes each), so that those before the
# first step (TensorFlow's import, the model's build: hundreds in a few seconds) are told
# from those while the steps ran; the collections after these are all later than them
GC_HEAD = 8192


class _Window:
    """One timeline window's GC, checkpoint and gpuwhy's own pause time, and the
    program's own Keras evaluate/predict calls (not fit's validation)."""

    __slots__ = ("gc_s", "gc_n", "checkpoint_s", "own_s", "keras_s", "keras_n", "fit_s", "fit_n")

    def __init__(self) -> None:
        self.gc_s, self.gc_n, self.checkpoint_s, self.own_s = 0.0, 0, 0.0, 0.0
        self.keras_s, self.keras_n, self.fit_s, self.fit_n = 0.0, 0, 0.0, 0

    def merge(self, other: _Window) -> None:
        self.gc_s += other.gc_s
        self.gc_n += other.gc_n
        self.checkpoint_s += other.checkpoint_s
        self.own_s += other.own_s
        self.keras_s += other.keras_s
        self.keras_n += other.keras_n
        self.fit_s += other.fit_s
        self.fit_n += other.fit_n

    def copy(self) -> _Window:
        twin = _Window()
        twin.merge(self)
        return twin


class ActivityCollector(Collector):
    """Section ``stalls``: the activities, and per training loop its stalls."""

    name = section = "stalls"
    reads_from = ("steps", "tracing")  # tracks their loops and traces
    what = "stalls"
    shown = 60

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        line = stalls_line(facts.stalls, facts.steps) if facts.stalls is not None else None
        return [("Stalls", line)] if line else []

    @classmethod
    def create(cls, options: RunOptions, made: Sequence[Collector]) -> ActivityCollector:
        collector = cls()
        for peer in made:
            if isinstance(peer, StepCollector | FunctionWatcher):
                peer.stall_tracking = collector.tracker
            if isinstance(peer, StepCollector):
                peer.loop_listener = collector.on_loop
            if isinstance(peer, FunctionWatcher):
                peer.trace_listener = collector.on_trace
                peer.between_steps = collector.in_validation
        return collector

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.notes: list[str] = []
        self._events: list = []  # (kind, start, end, where, what), until drained
        self._gc_started: list[float] = [0.0]
        self._gc_where: list[str | None] = [None]
        self._lock = threading.RLock()
        self._busy = False  # folding or walking the rings (fold)
        self._own_since: float | None = None  # gpuwhy's own pause running since
        self._validation_since: float | None = None  # fit's validation running since
        self._validations: deque[tuple[float, float]] = deque(maxlen=VALIDATIONS_KEPT)
        self._patches: list = []
        self._drain: Drain | None = None
        self._forget_gc_in_child: Any = None
        self.totals: dict[str, list] = {}  # kind -> [count, seconds, longest]
        self._gc_head = array("d")  # start, seconds of the first GC_HEAD collections
        self.places: dict[str, dict[tuple, float]] = {}  # kind -> (where, what) -> seconds
        self.rings: dict[str, deque] = {kind: deque(maxlen=RING[kind]) for kind in KINDS}
        self.windows: TimeWindows[_Window] = TimeWindows(self.t0, _Window)
        self.stall_windows: TimeWindows[Total] | None = None  # of the loops in the facts

    # -- life cycle ----------------------------------------------------------------
    def start(self, t0: float) -> None:
        self.t0 = t0
        self.windows = TimeWindows(t0, _Window)
        gc.callbacks.append(self._on_gc)
        self._forget_gc_in_child = forked.undo_in_child(self._remove_gc)
        self._drain = Drain(self.fold, "activities")  # kept before it starts: a Ctrl-C meanwhile
        self._drain.start()  # still finds it to stop

    def on_tensorflow(self) -> None:
        self._install(stall_hooks.install_tensorflow, "checkpoint and summary writes")
        self._install(
            lambda _record: [on_iterator_created(teardown=self._on_teardown)],
            "tf.data iterators' ends",
        )

    def on_keras(self) -> None:
        self._install(
            lambda record: stall_hooks.install_keras(record, self._begin)
            + stall_hooks.install_keras_fit(record),
            "Keras saves and evaluate",
        )

    def _install(self, install: Any, what: str) -> None:
        try:
            self._patches.extend(install(self._record))
        except Exception as e:  # noqa: BLE001 - a TF/Keras version we do not know
            self.notes.append(f"could not watch {what}: {type(e).__name__}: {e}")

    def stop(self) -> None:
        self._remove_gc()
        if self._forget_gc_in_child is not None:
            self._forget_gc_in_child()
        for patch in reversed(self._patches):
            patch.undo()
        self._patches.clear()
        if self._drain is not None:
            self._drain.stop()
            if self._drain.error:
                self.notes.append(f"activities not followed to the end: {self._drain.error}")
        self.fold()

    def _remove_gc(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def program_notes(self) -> list[str]:
        return list(self.notes)

    # -- hooks (the program's threads) -------------------------------------------------
    def _on_gc(self, phase: str, info: dict) -> None:
        """Inside the collection: a clock read and, at its stop, one append. A full
        collection (generation 2, a few a minute at most) also says where it was
        triggered: the ``gc.collect()`` line, or the allocation that crossed the
        threshold."""
        now = time.perf_counter()
        generation = info.get("generation")
        if phase == "start":
            self._gc_started[0] = now
            self._gc_where[0] = user_location() if generation == 2 else None
        else:
            where = self._gc_where[0]
            self._events.append(("gc", self._gc_started[0], now, where, generation))

    def _on_teardown(self, start: float, end: float) -> None:
        """A tf.data iterator freed (the iterator hook's listener, on the thread that let
        it go): where the program's code let it go, the loop's own line at its end."""
        if end - start >= TEARDOWN_MIN_S:
            self._events.append(("teardown", start, end, user_location(), TEARDOWN_WHAT))

    def _record(self, kind: str, start: float, end: float, where: str | None, what: str) -> None:
        self._events.append((kind, start, end, where, what))
        if what == VALIDATION:
            self._validations.append((start, end))
            self._validation_since = None

    def _begin(self, kind: str, start: float, what: str) -> None:
        if what == VALIDATION:
            self._validation_since = start

    def in_validation(self, t: float) -> bool:
        """Whether time ``t`` fell in one of fit's validation passes, the one under way
        or the latest few (the function watcher asks of each call it folds, a quarter of
        a second after it ran: validation's calls and traces are not the training
        steps'). Read on the drain's thread, written on the program's: a float and a
        deque's items, no lock."""
        since = self._validation_since
        if since is not None and t >= since:
            return True
        return any(start <= t <= end for start, end in list(self._validations))

    def own_pause_begins(self, start: float) -> None:
        """gpuwhy's own work that holds the program (a heap census) began: a stall found
        while it runs is matched with it already."""
        self._own_since = start

    def own_pause_running(self) -> bool:
        return self._own_since is not None

    def own_pause(self, start: float, end: float, what: str) -> None:
        """gpuwhy's own work that held the program (a heap census) ended."""
        self._events.append(("gpuwhy", start, end, None, what))
        self._own_since = None

    def on_trace(self, start: float, end: float, caller: str | None) -> None:
        """A tf.function trace (the function watcher's listener)."""
        self._events.append(("trace", start, end, caller, "tf.function trace"))

    def on_loop(self, start: float, end: float, site: object) -> None:
        """A run of reads of one iterator by the loop at ``site`` (the step collector's
        listener, in the program's thread)."""
        where = site if isinstance(site, str) and site != "?" else None
        self._events.append(("loop", start, end, where, LOOP_WHAT))

    # -- folding -------------------------------------------------------------------
    def fold(self) -> None:
        """The events recorded since the last fold into the stores. Not again from
        inside itself or :meth:`overlapping` (a collection there may run a finalizer
        that folds a function's steps, and so asks what overlapped a stall): the rings
        must not change under a walk; the events wait for the next fold."""
        with self._lock:
            if self._busy:
                return
            self._busy = True
            try:
                self._fold()
            finally:
                self._busy = False

    def _fold(self) -> None:
        for kind, start, end, where, what in take(self._events):
            if kind == "loop":
                self.rings[kind].append((start, end, where, what))
                continue
            seconds = end - start
            if kind == "gc":
                what = f"generation {what}"
            # fit's validation passes apart from the program's own evaluate/predict calls
            counted = VALIDATION_TOTALS if kind == "evaluate" and what == VALIDATION else kind
            total = self.totals.setdefault(counted, [0, 0.0, 0.0])
            total[0] += 1
            total[1] += seconds
            total[2] = max(total[2], seconds)
            places = self.places.setdefault(counted, {})
            key = (where, what)
            if key in places or len(places) < MAX_PLACES:
                places[key] = places.get(key, 0.0) + seconds
            window = self.windows.at(start)
            if kind == "gc":
                window.gc_s += seconds
                window.gc_n += 1
                if len(self._gc_head) < 2 * GC_HEAD:
                    self._gc_head.extend((start, seconds))
                if seconds < GC_RING_MIN_S:
                    continue
            elif kind == "checkpoint":
                window.checkpoint_s += seconds
            elif kind == "evaluate" and what != VALIDATION:
                window.keras_s += seconds
                window.keras_n += 1
            elif kind == "fit":  # counted, never a stall's cause
                window.fit_s += seconds
                window.fit_n += 1
                continue
            elif kind == "gpuwhy":  # in the windows it held the program in, each its part
                for held, share in self.windows.over(start, end):
                    held.own_s += seconds * share
            self.rings[kind].append((start, end, where, what))

    def overlapping(self, start: float, end: float) -> list[tuple[str, float, Any, str]]:
        """(kind, seconds inside [start, end], where, what) of every kept activity that
        overlaps it. The rings are in order of their ends: the walk from the newest stops
        at the first that ended before ``start``.

        gpuwhy's own pause (a heap census, in a thread of its own) counts only the time
        outside the program's own activities: a step that waited on a checkpoint write,
        an evaluation or a full collection stalled on it whether or not a census ran
        beside it (on a loaded host a census of a large heap lasts seconds, and, from
        before such a stall to after it, took every one as gpuwhy's); through a full
        collection the census did not even run (the collector holds the GIL while it
        walks the heap). A young collection is no such activity: in a census it walks
        the census's fresh list of every object (a heap of 600k objects: a
        generation-0 collection takes 10 ms of CPU, 70 ms on a loaded 2-core host,
        against 0.01 ms without that list), the census's own doing."""
        self.fold()
        out = []
        ours = []  # gpuwhy's own pauses: (start, end, where, what) inside [start, end]
        theirs = []  # the program's own activities inside [start, end] (see above)
        with self._lock:
            busy, self._busy = self._busy, True
            try:
                for kind, ring in self.rings.items():
                    for a, b, where, what in reversed(ring):
                        if b < start:
                            break
                        overlap = min(b, end) - max(a, start)
                        if overlap <= 0 or (kind == "loop" and (a < start or b > end)):
                            continue
                        if kind == "gpuwhy":
                            ours.append((max(a, start), min(b, end), where, what))
                            continue
                        out.append((kind, overlap, where, what))
                        if kind != "gc" or what == FULL_COLLECTION:
                            theirs.append((max(a, start), min(b, end)))
                own = self._own_since
                if own is not None and end > own:  # still running: up to now
                    ours.append((max(own, start), end, None, "gpuwhy's heap census"))
            finally:
                self._busy = busy
        for a, b, where, what in ours:
            held = (b - a) - _covered(a, b, theirs)
            if held > 0:
                out.append(("gpuwhy", held, where, what))
        return out

    def tracker(self) -> StallTracker:
        """A new loop's stall tracker, attributing its stalls to these activities."""
        return StallTracker(self.t0, self.overlapping)

    # -- facts ---------------------------------------------------------------------
    def fill(self, gathering: Gathering) -> StallFacts:
        self.fold()
        none: tuple[LoopStalls, ...] = ()
        loops = gathering.guard("stalls", lambda: self._loops(gathering), none)
        steps = gathering.facts.steps
        began = min((loop.first_s for loop in steps.loops), default=None) if steps else None
        return StallFacts(activities=self._activities(began), loops=loops)

    def _activities(self, steps_began_s: float | None = None) -> tuple[Activity, ...]:
        """Each kind's totals over the run; the collector's, also from ``steps_began_s``
        (the first step's start, from the run's start) on."""
        out = []
        with self._lock:
            for counted in TOTALS:
                if counted not in self.totals:
                    continue
                kind = "evaluate" if counted == VALIDATION_TOTALS else counted
                count, seconds, longest = self.totals[counted]
                where, what = _top(self.places.get(counted, {}))
                in_steps = self._gc_in_steps(steps_began_s) if kind == "gc" else None
                out.append(
                    Activity(
                        kind=kind,
                        count=count,
                        seconds=round(seconds, 6),
                        max_s=round(longest, 6),
                        location=where,
                        detail=what,
                        code=_code(where) if kind in ("evaluate", "fit") else None,
                        steps_count=None if in_steps is None else in_steps[0],
                        steps_seconds=None if in_steps is None else round(in_steps[1], 6),
                    )
                )
        return tuple(out)

    def _gc_in_steps(self, began_s: float | None) -> tuple[int, float] | None:
        """(count, seconds) of the collections that started once the steps had begun:
        exact where the first step came within the collections kept one by one (else
        None: not told apart)."""
        if began_s is None:
            return None
        head, began = self._gc_head, self.t0 + began_s
        if len(head) >= 2 * GC_HEAD and head[-2] < began:
            return None  # the steps began after the collections kept one by one
        starts, seconds = head[0::2], head[1::2]
        before = [s for t, s in zip(starts, seconds) if t < began]
        count, total, _ = self.totals["gc"]  # the later ones all came after the head's
        return count - len(before), total - sum(before)

    def _loops(self, gathering: Gathering) -> tuple[LoopStalls, ...]:
        steps: StepFacts | None = gathering.facts.steps
        if steps is None:
            return ()
        views: dict[tuple[str, str], Any] = {
            (s, n): v for s, n, v in gathering.peer(StepCollector).candidates()
        }
        for name, watched in gathering.peer(FunctionWatcher).loops().items():
            views[("tf-function", name)] = watched
        merged: TimeWindows[Total] = TimeWindows(self.t0, Total)
        out = []
        for loop in steps.loops:
            view = views.get((loop.source, loop.name))
            if view is None:
                continue
            tracker = view.stalls
            if tracker is None:  # steps held back (a function's first calls): judged now
                tracker = self.tracker()
                for step in view.steps + view.extra:
                    tracker.add(step)
            merged.absorb(tracker.inside.windows)
            for group, between in ((tracker.inside, False), (tracker.between, True)):
                if group.count:
                    out.append(
                        _loop_stalls(loop.source, loop.name, tracker, group, between, self.t0)
                    )
        self.stall_windows = merged
        return tuple(out)

    def rows(self, width: float) -> dict[int, dict]:
        """Per window of ``width`` seconds: GC seconds and collections, checkpoint
        seconds, gpuwhy's own pauses, stalled steps (the run timeline's rows)."""
        self.fold()
        rows: dict[int, dict] = {}
        with self._lock:
            windows = self.windows.copy()
        windows.coarsen(width)
        for start, window in windows.items():
            row = rows.setdefault(_index(start - self.t0, width), {})
            row["gc_pause_s"] = round(window.gc_s, 6)
            row["gc_collections"] = window.gc_n
            row["checkpoint_s"] = round(window.checkpoint_s, 6)
            if window.own_s:
                row["own_pause_s"] = round(window.own_s, 6)
            if window.keras_n:
                row["keras_calls"] = window.keras_n
                row["keras_call_s"] = round(window.keras_s, 6)
            if window.fit_n:
                row["keras_fits"] = window.fit_n
                row["keras_fit_s"] = round(window.fit_s, 6)
        if self.stall_windows is not None:
            stalls = self.stall_windows.copy()
            stalls.coarsen(width)
            for start, count in stalls.items():
                rows.setdefault(_index(start - self.t0, width), {})["stalls"] = count.value
        return rows


def _index(seconds: float, width: float) -> int:
    return max(0, int(seconds // width + 1e-9))


def _top(places: dict[tuple, float]) -> tuple[str | None, str | None]:
    if not places:
        return None, None
    where, what = max(places.items(), key=lambda kv: kv[1])[0]
    return where, what


def _file_line(location: str | None) -> tuple[str, int] | None:
    """(file, line) of ``file:line``; None where it is not one."""
    path, _, line = (location or "").rpartition(":")
    return (path, int(line)) if path and line.isdigit() else None


def _code(location: str | None) -> str | None:
    """The line at ``file:line`` as written (None: not readable from here)."""
    where = _file_line(location)
    if where is None:
        return None
    text = linecache.getline(*where).strip()
    return text[:200] or None


def _loop_code(location: str | None) -> StepCode | None:
    """The body of the loop at ``file:line`` as a function (None: not readable)."""
    where = _file_line(location)
    if where is None:
        return None
    try:
        return loop_code(os.path.abspath(where[0]), where[0], where[1])
    except (RecursionError, ValueError):  # a source too deep or odd to read
        return None


def _loop_stalls(
    source: str, name: str, tracker: StallTracker, group: StallGroup, between: bool, t0: float
) -> LoopStalls:
    loop_s = tracker.step_s + tracker.gap_s
    causes = []
    for kind, seconds in sorted(group.kinds.items(), key=lambda kv: -kv[1]):
        where, what = _top(group.places.get(kind, {}))
        causes.append(
            StallCause(
                kind=kind,
                seconds=round(seconds, 6),
                share=round(min(1.0, seconds / group.seconds), 4) if group.seconds else 0.0,
                location=where,
                detail=what,
                code=_code(where),
                step_code=_loop_code(where) if kind == "loop" else None,
            )
        )
    beats = sorted(_with_alike(group).items(), key=lambda kv: -kv[1].lost_s)
    typical = tracker.typical()
    return LoopStalls(
        source=source,
        name=name,
        between_steps=between,
        count=group.count,
        loop_steps=tracker.steps,
        loop_s=round(loop_s, 6),
        typical_step_s=round(typical, 6) if typical is not None else None,
        stall_s=round(group.seconds, 6),
        lost_s=round(group.lost_s, 6),
        lost_share=round(group.lost_s / loop_s, 4) if loop_s > 0 else 0.0,
        beats=tuple(_beat(kind, beat, loop_s) for kind, beat in beats),
        causes=tuple(causes),
        first=tuple(_stall(entry, t0) for entry in group.first),
        last=tuple(_stall(entry, t0) for entry in group.last),
    )


def _with_alike(group: StallGroup) -> dict[str | None, Beat]:
    """The group's beats, the one of stalls no activity dominated replaced by the
    stalls of one length class among them (stall_tracker.size_classes) where those keep
    a period the whole set does not and cost at least half of its time: a slow save
    every 200 steps among a loaded host's hiccups."""
    beats = dict(group.beats)
    pooled = beats.get(None)
    if pooled is None:
        return beats
    _, pooled_fit = pooled.period()
    best = None
    for alike in group.alike.values():
        every, fit = alike.period()
        if (
            every is not None
            and fit is not None
            and fit > (pooled_fit or 0.0)
            and alike.count >= 3
            and alike.lost_s >= 0.5 * pooled.lost_s
            and (best is None or alike.lost_s > best.lost_s)
        ):
            best = alike
    if best is not None:
        beats[None] = best
    return beats


def _beat(kind: str | None, beat: Beat, loop_s: float) -> StallBeat:
    every, fit = beat.period()
    median_stall = beat.durations.quantile(0.5)
    median_gap = beat.time_intervals.quantile(0.5)
    return StallBeat(
        kind=kind,
        count=beat.count,
        stall_s=round(beat.seconds, 6),
        lost_s=round(beat.lost_s, 6),
        lost_share=round(beat.lost_s / loop_s, 4) if loop_s > 0 else 0.0,
        typical_stall_s=round(median_stall, 6) if median_stall is not None else None,
        every_steps=every,
        period_fit=round(fit, 4) if fit is not None else None,
        every_s=round(median_gap, 6) if median_gap is not None else None,
        regular_in_time=beat.regular_in_time(),
    )


def _stall(entry: tuple, t0: float) -> Stall:
    index, start, seconds, causes = entry
    return Stall(
        step=index,
        start_s=round(start - t0, 6),
        seconds=round(seconds, 6),
        causes=tuple((kind, round(s, 6)) for kind, s in causes),
    )


# -- its rows in the reports ------------------------------------------------------
OWN_PAUSE_SAID_S = 0.5  # gpuwhy's own census time over the run said from this
_ACTIVITY_WORDS = {"gc": "GC", "checkpoint": "checkpoint writes", "summary": "summary flushes",
                   "evaluate": "evaluate/predict", "teardown": "tf.data iterators' ends"}  # fmt: skip
# (one, several) of each activity's units
_ACTIVITY_UNITS = {"gc": ("collection", "collections"), "checkpoint": ("write", "writes"),
                   "summary": ("flush", "flushes"), "evaluate": ("call", "calls"),
                   "teardown": ("end", "ends")}  # fmt: skip
# An iterator's end that held the program this long is said for what it is, first on the
# line: TensorFlow's race at an iterator's end (docs/speed.md), which made a run of the
# issue's loop take 41 s against 22 (a loop of 22 s ended at 40.95 s of its iterator's
# life) and which the line said as "tf.data iterators' ends 4.23 s in 1 ends"
TEARDOWN_WAIT_SAID_S = 0.5
TEARDOWN_WAIT_WHY = (
    "tf.data's autotune thread can miss its wake-up as an iterator ends and sleep out the "
    "rest of its period, up to the iterator's age (TensorFlow's own race, under plain "
    "python as well)"
)


def _covered(a: float, b: float, intervals: list[tuple[float, float]]) -> float:
    """The seconds of [a, b] that the union of ``intervals`` covers (a full collection
    inside a checkpoint write counts once)."""
    total, reach = 0.0, a
    for c, d in sorted(intervals):
        c, d = max(c, reach), min(d, b)
        if d > c:
            total += d - c
            reach = d
    return total


# The median stall stands for each where the mean is within this share of it.
STALL_MEAN_NEAR = 0.25


def _stall_size(beat: StallBeat) -> str:
    """``1,800.0 ms each`` where the stalls are alike; where a few long ones pull the
    mean far from the median, the median and the total (``50.3 ms median, 2.59 s in
    all``): "each" would multiply to a total the line's share does not make."""
    mean = beat.stall_s / beat.count
    typical = beat.typical_stall_s
    if typical is None or abs(mean - typical) <= STALL_MEAN_NEAR * typical:
        return f"{duration(typical if typical is not None else mean)} each"
    return f"{duration(typical)} median, {duration(beat.stall_s)} in all"


# consecutive stalls this close to their median distance make a period
PERIOD_TOLERANCE = 0.1
NEGLIGIBLE_SHARE = 0.005  # of the loop: a beat of stalls that cost less is not said


def _between_steps_text(loop: LoopStalls) -> str:
    """A loop's stalls between steps as one series (``4 stalls between steps every
    1,563 steps, 281.7-1,793.1 ms each: a loop over another tf.data dataset at
    train.py:108 (2.05 s) and the end of a tf.data iterator ... (1.91 s), 23% of the
    loop``): the period and the lengths where the stalls kept cover them all."""
    kept = sorted({s.step: s for s in (*loop.first, *loop.last)}.values(), key=lambda s: s.step)
    every = ""
    if len(kept) == loop.count and len(kept) >= 3:
        gaps = [b.step - a.step for a, b in zip(kept, kept[1:])]
        middle = statistics.median(gaps)
        if middle > 1 and all(abs(g - middle) <= PERIOD_TOLERANCE * middle for g in gaps):
            every = f" every {round(middle):,} steps"
    size = f"{duration(loop.stall_s)} in all"
    if len(kept) == loop.count and kept:
        low, high = min(s.seconds for s in kept), max(s.seconds for s in kept)
        each = (
            f"{duration(statistics.median(s.seconds for s in kept))} each"
            if high <= (1 + STALL_MEAN_NEAR) * low
            else f"{duration(low)}-{duration(high)} each"
        )
        size = f"{each}, {size}"
    said = [c for c in loop.causes if c.share >= 0.1] or list(loop.causes[:1])
    causes = " and ".join(
        (f"GC ({c.detail})" if c.kind == "gc" else c.detail or c.kind)
        + (f" at {c.location}" if c.location else "")
        + f" ({c.seconds:,.2f} s)"
        for c in said
    )
    what = causes or "nothing timed in them"
    return (
        f"{loop.count:,} stalls between steps{every}, {size}: {what}, "
        f"{loop.lost_share:.0%} of the loop"
    )


def _unit(units: tuple[str, str], count: int) -> str:
    """An activity's unit as said of ``count`` of them: "1 end", "2 ends", "1 flush"."""
    return units[0] if count == 1 else units[1]


def _teardown_wait_text(activity: Activity) -> str:
    """The iterators' ends that held the program's thread (a loop's end, an epoch's):
    the program's line that let them go (the one with most of their time, where several
    did) and why they took seconds."""
    where = f" at {activity.location}" if activity.location else ""
    if activity.count == 1:
        held = f"the end of a tf.data iterator{where} held the program {activity.seconds:,.2f} s"
    else:
        held = (
            f"the ends of {activity.count:,} tf.data iterators held the program "
            f"{activity.seconds:,.2f} s (the longest {activity.max_s:,.2f} s)"
        )
        held += f", most of it{where}" if where else ""
    return f"{held}: {TEARDOWN_WAIT_WHY}"


def stalls_line(stalls: StallFacts, steps: StepFacts | None = None) -> str | None:
    """The loops' worst beats of stalls (``9 every 50 steps, 46.4 ms each: checkpoint at
    train.py:21, 9% of the loop``) and the time the activities took over the run; None
    where there is nothing to say. Stalls gpuwhy's own heap census made are said as its
    own, apart."""
    parts = []
    beats = [
        (loop, beat)
        for loop in stalls.loops
        for beat in loop.beats
        if beat.count >= 3 or beat.lost_share >= ALONE_SHARE_SAID
    ]
    ours = [beat for _, beat in beats if beat.kind == "gpuwhy"]
    beats = [(loop, beat) for loop, beat in beats if beat.kind != "gpuwhy"]
    # the stalls between a loop's steps (its epochs' ends) are one series whatever each
    # one's largest cause: said once, with every cause in them, not split by that cause
    merged = {
        id(loop): loop
        for loop, _ in beats
        if loop.between_steps and sum(1 for other, _ in beats if other is loop) > 1
    }
    entries: list[tuple[float, str | tuple[LoopStalls, StallBeat]]] = [
        (loop.lost_share, _between_steps_text(loop)) for loop in merged.values()
    ]
    entries += [(beat.lost_share, (loop, beat)) for loop, beat in beats if id(loop) not in merged]
    # a beat that cost the loop under half a percent is said as 0%: not worth the words
    said = [e for e in entries if e[0] >= NEGLIGIBLE_SHARE]
    for _, entry in sorted(said, key=lambda e: -e[0])[:2]:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        loop, beat = entry
        # every step in a row is no period ("4 stalls every 1 steps"): a run of them
        regular = (
            (beat.every_steps or 0) > 1 and beat.period_fit is not None and beat.period_fit >= 0.6
        )
        between = " between steps" if loop.between_steps else ""
        cause = next((c for c in loop.causes if c.kind == beat.kind), None)
        what = "nothing timed in them"
        if input_waits(steps, loop, beat):
            what = "the steps' waits for input (fit's measured wait covers them)"
        if cause is not None:
            what = f"GC ({cause.detail})" if cause.kind == "gc" else cause.detail or cause.kind
            what += f" at {cause.location}" if cause.location else ""
            covered = beat.covered_by(cause)
            if covered < PARTLY_COVERED:  # the largest timed part, not the stalls
                what += f" ({covered:.0%} of their time; nothing timed in the rest)"
        if beat.count == 1:  # one stall, said for what it cost (ALONE_SHARE_SAID)
            what = "nothing timed in it" if cause is None else what
            text = f"1 stall{between} of {duration(beat.stall_s)}: {what}"
            parts.append(f"{text}, {beat.lost_share:.0%} of the loop")
            continue
        text = f"{beat.count:,} stalls" + (f" every {beat.every_steps:,} steps" if regular else "")
        text += ", " + _stall_size(beat) + f": {what}"
        parts.append(f"{text}{between}, {beat.lost_share:.0%} of the loop")
    census = next((a for a in stalls.activities if a.kind == "gpuwhy"), None)
    if ours:  # gpuwhy held the program: said as its own, never as the program's stalls
        held = sum(beat.stall_s for beat in ours)
        parts.append(f"gpuwhy's own heap census held the loop {duration(held)} (not the program's)")
    elif census is not None and census.seconds >= OWN_PAUSE_SAID_S:
        # its cost, said wherever it is felt: it holds the program while it walks the heap
        parts.append(
            f"gpuwhy's own heap census {census.seconds:,.2f} s in {census.count:,} "
            f"(the longest {census.max_s:,.2f} s; it holds the program while it runs)"
        )
    for activity in stalls.activities:
        if activity.kind not in _ACTIVITY_WORDS:
            continue
        if activity.kind == "teardown" and activity.max_s >= TEARDOWN_WAIT_SAID_S:
            parts.insert(0, _teardown_wait_text(activity))
            continue
        words, units = _ACTIVITY_WORDS[activity.kind], _ACTIVITY_UNITS[activity.kind]
        if activity.kind == "evaluate" and activity.detail == VALIDATION:
            words, units = VALIDATION, ("pass", "passes")
        if activity.steps_seconds is not None and activity.steps_count != activity.count:
            # the collections of TensorFlow's import and the model's build are not the
            # training's: said apart, and the line only where the steps' own add up
            if activity.steps_seconds >= 0.05:
                parts.append(
                    f"{words} {activity.steps_seconds:,.2f} s in {activity.steps_count:,} "
                    f"{_unit(units, activity.steps_count or 0)} while the steps ran "
                    f"({activity.seconds:,.2f} s in {activity.count:,} over the whole run)"
                )
        elif activity.seconds >= 0.05:
            parts.append(
                f"{words} {activity.seconds:,.2f} s in {activity.count:,} "
                f"{_unit(units, activity.count)}"
            )
    return "; ".join(parts) or None
