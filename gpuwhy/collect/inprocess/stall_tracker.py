"""Stalls of one loop, found as its steps are folded, in fixed-size state.

A stall is a step far longer than its loop's typical step: with the typical step the
median of the latest ``RECENT`` steps (recomputed every ``RECOMPUTE`` steps, so a run
that drifts slowly is judged against its own pace, not its first minute's), a step is a
stall when it lasts at least ``FACTOR`` times the typical step *and* at least
``FLOOR_S`` longer than it. Why these:

- ``FACTOR`` 3: steps of a healthy loop spread by tens of percent (input jitter, the OS
  scheduler, a small GC); 3x is beyond that spread on every loop measured here, yet a
  checkpoint, a validation pass or a full GC of a big heap is many times a step;
- ``FLOOR_S`` 5 ms lost: a 3x excursion of a 1 ms step costs 2 ms, within a loaded
  host's scheduling noise and below what any fix here recovers; the smallest checkpoint
  write measured here (a two-layer Keras model, ``tf.train.Checkpoint.write``,
  ``Model.save``) takes 10 to 30 ms, so every one of them is kept. Noise above the floor
  is irregular and dominated by no activity: the rule asks more of such stalls;
- the first ``WARMUP_CALLS`` calls are never judged (tracing, autotune, cuDNN
  search), and no step is judged before ``MIN_BASELINE`` steps make the median. A later
  Keras fit of the loop (a step that ``opens``: a new model, or fine-tuning after a new
  compile, with steps of its own length) starts a new baseline and a new warm-up.

The first step after time between steps (an epoch's first step: a new iterator, a
shuffle buffer refilled) is never a stall: every loop has one per epoch, and the
input rules judge them. Time *between* two steps counts instead: where the step definition leaves it out (a Keras
epoch's end, where ``ModelCheckpoint`` and validation run; a tf.function loop whose
step was cut at its call's end because the gap was ``GAP_LIMIT`` typical steps), a
gap at least ``FACTOR`` typical steps and ``FLOOR_S`` long is a stall between steps,
kept in its own group.

Each group keeps the first and last ``KEEP`` stalls one by one, counts and sums, the
seconds each kind of activity overlapped them (and its top places), the stalls per
timeline window, and per *beat* (the stalls one kind of activity dominated: overlapped
for at least ``DOMINANT`` of the stall, more than any other kind, the program's own
before the time beside it, ``BESIDE_THE_PROGRAM``) the intervals between
consecutive ones (in steps: a bounded count of each value; in seconds: a quantile
sketch): a million stalls cost what a thousand do. The activities are attributed when the stall is found, while the activity
collector's rings still hold them.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Callable
from typing import Any

from gpuwhy.collect.quantiles import Sketch
from gpuwhy.collect.time_windows import TimeWindows, Total

FACTOR = 3.0
FLOOR_S = 0.005
COUNTED_SHARE = 0.1  # a counted stretch (the timing paused) this much slower holds a stall
WARMUP_CALLS = 10
MIN_BASELINE = 20
RECENT = 256
RECOMPUTE = 32
KEEP = 16  # stalls kept one by one at each end, per group
MAX_INTERVALS = 256  # different step intervals counted; others add to one count
MAX_PLACES = 8  # places kept per kind of activity
DOMINANT = 0.1  # an activity dominates a stall it overlapped for this share, the most
# Time in a stall that is not the program's own work: TensorFlow's race at a tf.data
# iterator's end (tf.data's autotune thread sleeping out its period, up to seconds, at
# random epoch ends). A stall is its only where none of the program's activities took
# ``DOMINANT`` of it: a ModelCheckpoint at every epoch's end, two of five of them beside
# an iterator's end that waited 0.6 s, was two beats of three and two stalls, its period
# lost and its finding with it (the suite's run on a loaded CI host: "Training stalled
# between steps 3 times" for "every 40 steps"). gpuwhy's own pauses are not here: their
# time is counted outside the program's activities already (ActivityCollector.overlapping)
# and a young collection in a census is the census's doing.
BESIDE_THE_PROGRAM = frozenset({"teardown"})

# attribute(start, end) -> [(kind, seconds overlapped, file:line or None, what ran)]
Attribute = Callable[[float, float], list[tuple[str, float, Any, str]]]


SLACK_FROM = 10  # step intervals this long or longer may be a step off


class Beat:
    """The stalls of one group that one kind of activity dominated (``None``: none did),
    and the intervals between consecutive ones: a checkpoint every 50 steps keeps its
    period however many other stalls (a GC, the host's noise) fall between two of them."""

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.lost_s = 0.0
        self.durations = Sketch()
        self.step_intervals: dict[int, int] = {}
        self.other_intervals = 0
        self.time_intervals = Sketch()
        self.previous: tuple[int, float] | None = None  # the last stall's index, start

    def add(self, index: int, start: float, seconds: float, lost: float) -> None:
        self.count += 1
        self.seconds += seconds
        self.lost_s += lost
        self.durations.add(seconds)
        if self.previous is not None:
            steps = index - self.previous[0]
            if steps in self.step_intervals or len(self.step_intervals) < MAX_INTERVALS:
                self.step_intervals[steps] = self.step_intervals.get(steps, 0) + 1
            else:
                self.other_intervals += 1
            self.time_intervals.add(start - self.previous[1])
        self.previous = (index, start)

    def copy(self) -> Beat:
        twin = Beat()
        for name in ("count", "seconds", "lost_s", "other_intervals", "previous"):
            setattr(twin, name, getattr(self, name))
        twin.durations = self.durations.copy()
        twin.time_intervals = self.time_intervals.copy()
        twin.step_intervals = dict(self.step_intervals)
        return twin

    def period(self) -> tuple[int | None, float | None]:
        """The step interval between consecutive stalls that most intervals are within
        5 % of (at least one step from 10 steps on: a ``steps_per_execution`` call may end
        a step late; under 10, exactly: one step either side of 2 is 1 to 3, which a
        loaded host's stalls with no cause fall into as often as not), the most common
        one among equals, and the share of intervals that fit it."""
        total = sum(self.step_intervals.values()) + self.other_intervals
        if not total:
            return None, None
        best, rank = None, (0, 0)
        for value, exact in sorted(self.step_intervals.items()):
            tolerance = max(1, round(0.05 * value)) if value >= SLACK_FROM else 0
            near = sum(n for k, n in self.step_intervals.items() if abs(k - value) <= tolerance)
            if (near, exact) > rank:  # the most intervals near it, then the most exactly it
                best, rank = value, (near, exact)
        return best, rank[0] / total

    def regular_in_time(self) -> bool:
        """Whether most intervals between stalls (the 20th to the 80th percentile) are
        within 10 % of the median: a stall every T seconds."""
        if self.time_intervals.count < 3:  # two intervals alike are no rhythm yet
            return False
        low, mid, high = (self.time_intervals.quantile(q) for q in (0.2, 0.5, 0.8))
        if low is None or mid is None or high is None or mid <= 0:
            return False
        return low >= 0.9 * mid and high <= 1.1 * mid


def size_classes(seconds: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """The two classes of stall length a stall with no dominant activity belongs to:
    lengths within a factor of two, on two grids half a class apart, so that stalls
    whose lengths spread by up to a factor of sqrt(2) share a class on one of them.

    Why: a program's own periodic work (a slow save every 200 steps that gpuwhy does
    not time) and a loaded host's hiccups are both stalls no activity dominated. Pooled,
    the hiccups falling between two saves break the saves' period (200 becomes 73 + 127)
    and the finding comes and goes with the machine's load; the saves last 150 ms, the
    hiccups 5-20 ms, so by length they part."""
    octaves = math.log2(max(seconds, 1e-6))
    return (0, math.floor(octaves)), (1, math.floor(octaves + 0.5))


def _dominant(overlaps: dict[str, float], seconds: float) -> str | None:
    """The kind of activity a stall of ``seconds`` is counted under: the program's own
    that overlapped it most, where that was at least ``DOMINANT`` of it; else the same of
    the time beside the program (``BESIDE_THE_PROGRAM``); else None."""
    ranked = sorted(overlaps.items(), key=lambda kv: (kv[0] in BESIDE_THE_PROGRAM, -kv[1]))
    for kind, overlap in ranked:
        if overlap >= DOMINANT * seconds:
            return kind
    return None


class StallGroup:
    """The stalls of one kind (steps, or time between steps) of one loop."""

    def __init__(self, t0: float) -> None:
        self.count = 0
        self.seconds = 0.0  # the stalls' own time
        self.lost_s = 0.0  # beyond a typical step (a gap: all of it)
        self.first: list[tuple] = []  # (step index, start, seconds, ((kind, s), ...))
        self.last: deque[tuple] = deque(maxlen=KEEP)
        self.kinds: dict[str, float] = {}  # kind -> seconds overlapped
        self.places: dict[str, dict[tuple, float]] = {}  # kind -> (where, what) -> seconds
        self.beats: dict[str | None, Beat] = {}  # by the kind that dominated each stall
        # the stalls no activity dominated, again by their length: see size_classes
        self.alike: dict[tuple[int, int], Beat] = {}
        self.windows: TimeWindows[Total] = TimeWindows(t0, Total)  # stalls a window

    def add(self, index: int, start: float, seconds: float, lost: float, causes: list) -> None:
        self.count += 1
        self.seconds += seconds
        self.lost_s += lost
        self.windows.at(start).value += 1
        summed: dict[str, float] = {}
        for kind, overlap, where, what in causes:
            summed[kind] = summed.get(kind, 0.0) + overlap
            places = self.places.setdefault(kind, {})
            key = (where, what)
            if key in places or len(places) < MAX_PLACES:
                places[key] = places.get(key, 0.0) + overlap
        for kind, overlap in summed.items():
            self.kinds[kind] = self.kinds.get(kind, 0.0) + overlap
        dominant = _dominant(summed, seconds)
        beat = self.beats.get(dominant)
        if beat is None:
            beat = self.beats[dominant] = Beat()
        if dominant is None or dominant in BESIDE_THE_PROGRAM:
            beat.add(index, start, seconds, lost)
        else:  # the program's activity's beat is charged its part, not TF's race's
            beside = sum(s for kind, s in summed.items() if kind in BESIDE_THE_PROGRAM)
            charged = min(seconds, max(summed[dominant], seconds - beside))
            beat.add(index, start, charged, lost * charged / seconds)
        if dominant is None:
            for size in size_classes(seconds):
                alike = self.alike.get(size)
                if alike is None:
                    alike = self.alike[size] = Beat()
                alike.add(index, start, seconds, lost)
        entry = (index, start, seconds, tuple(sorted(summed.items())))
        if len(self.first) < KEEP:
            self.first.append(entry)
        else:
            self.last.append(entry)

    def copy(self) -> StallGroup:
        twin = StallGroup(self.windows.t0)
        for name in ("count", "seconds", "lost_s"):
            setattr(twin, name, getattr(self, name))
        twin.first = list(self.first)
        twin.last = deque(self.last, maxlen=KEEP)
        twin.kinds = dict(self.kinds)
        twin.places = {kind: dict(places) for kind, places in self.places.items()}
        twin.beats = {kind: beat.copy() for kind, beat in self.beats.items()}
        twin.alike = {size: beat.copy() for size, beat in self.alike.items()}
        twin.windows = self.windows.copy()
        return twin


class StallTracker:
    """Feeds on one loop's steps (``add``, in order) and keeps its stalls."""

    def __init__(self, t0: float, attribute: Attribute | None = None) -> None:
        self.attribute = attribute
        self.steps = 0  # steps seen (a Keras call of N steps counts N)
        self.calls = 0
        self.step_s = 0.0  # the steps' own time
        self.gap_s = 0.0  # time between consecutive steps
        self.inside = StallGroup(t0)
        self.between = StallGroup(t0)
        self._recent: deque[float] = deque(maxlen=RECENT)
        self._typical: float | None = None
        self._since = 0  # steps since the typical step was computed
        self._last_end: float | None = None
        self._judged_from = WARMUP_CALLS  # calls before this one are never judged

    def add(self, step: Any) -> None:
        """One step (``start``, ``end``, ``steps``), after those before it.

        Called for every timed step on the drain's thread, which holds the program's
        GIL meanwhile: on a loop of 0.2 ms steps its few microseconds are part of the
        time the program waits, so each of the step's fields is read once."""
        start, end = step.start, step.end
        duration = end - start
        index = self.steps
        self.steps = index + step.steps
        self.calls += 1
        self.step_s += duration
        previous_end, self._last_end = self._last_end, end
        gap = start - previous_end if previous_end is not None else 0.0
        if gap > 0.0:
            self.gap_s += gap
        if step.opens:
            # a later Keras fit (a new model, or fine-tuning after a new compile): its
            # own pace, judged against itself once it has warmed up; the time before
            # it (building, compiling) is no stall between steps
            self._recent.clear()
            self._typical = None
            self._judged_from = self.calls + WARMUP_CALLS - 1
        if self.calls <= self._judged_from:
            return
        typical = self.typical()
        if typical is not None:
            if previous_end is not None and gap >= max(FACTOR * typical, FLOOR_S):
                self._stall(self.between, index, previous_end, start, gap)
            boundary = gap > 0  # steps follow one another but at a loop's epoch end
            if not boundary and duration >= FACTOR * typical and duration - typical >= FLOOR_S:
                self._stall(self.inside, index, start, end, duration - typical)
        self._recent.append(duration)
        self._since += 1

    def add_counted(self, step: Any) -> None:
        """A stretch of steps seen only as a count (the timing paused): in the totals,
        and the next step follows it; no gap before the next one. Where it took far
        longer than its steps at the typical pace, the time beyond is a stall inside
        it (a checkpoint): where, among its steps, is not known. "Far" is beyond the
        latest timed steps' mean pace by a tenth of the stretch, as well as a stall's
        floor: a stretch's own spread hides shorter ones."""
        index = self.steps
        duration = step.end - step.start
        self.steps += step.steps
        self.step_s += duration
        self._last_end = step.end
        typical = self.typical() if self.calls > self._judged_from else None
        if typical is not None and self._recent:
            expected = step.steps * statistics.fmean(self._recent)
            lost = duration - expected
            if lost >= max(FACTOR * typical, FLOOR_S, COUNTED_SHARE * expected):
                self._stall(self.inside, index, step.start, step.end, lost)

    def typical(self) -> float | None:
        """The median of the latest steps (None before ``MIN_BASELINE`` of them)."""
        typical = self._typical
        # set only from MIN_BASELINE steps on, and unset where ``_recent`` is cleared
        if typical is not None and self._since < RECOMPUTE:
            return typical
        if len(self._recent) < MIN_BASELINE:
            return None
        self._typical = statistics.median(self._recent)
        self._since = 0
        return self._typical

    def _stall(self, group: StallGroup, index: int, start: float, end: float, lost: float) -> None:
        causes = self.attribute(start, end) if self.attribute is not None else []
        group.add(index, start, end - start, lost, causes)

    def copy(self) -> StallTracker:
        twin = StallTracker(self.inside.windows.t0, self.attribute)
        for name in (
            "steps",
            "calls",
            "step_s",
            "gap_s",
            "_typical",
            "_since",
            "_last_end",
            "_judged_from",
        ):
            setattr(twin, name, getattr(self, name))
        twin.inside, twin.between = self.inside.copy(), self.between.copy()
        twin._recent = deque(self._recent, maxlen=RECENT)
        return twin
