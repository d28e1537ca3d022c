"""Section ``stalls``: what commonly stops a training loop for a while (Python's garbage
collector, checkpoint writes, summary flushes, evaluation, tf.function traces), timed
over the whole run, and per training loop the steps far longer than its typical step,
with what ran in them and how regularly they come.

A checkpoint every 200 steps, a full GC of a large heap, a validation pass inside the
loop: each stops the GPU for seconds at a regular beat, invisible in a median and
blurred in a mean. Stalls are found as the steps fold, so their count and period cover
the run at any length; the first and last few are kept one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts.steps import StepCode


@dataclass(frozen=True)
class Activity:
    """One kind of activity over the whole run (each timed start to end)."""

    kind: str  # gc | checkpoint | summary | evaluate | trace | gpuwhy | loop | teardown | fit
    count: int
    seconds: float
    max_s: float
    location: str | None = None  # the user's file:line that ran most of it
    detail: str | None = None  # what ran there: "tf.train.Checkpoint.write", "generation 2"
    # Of them, those that started once the training steps had begun (gc only; None: no
    # steps, or not told apart): the collections of TF's import and the model's build
    # are hundreds, and none of them the training's
    steps_count: int | None = None
    steps_seconds: float | None = None
    code: str | None = None  # evaluate: the line at ``location`` as written


@dataclass(frozen=True)
class StallCause:
    """What overlapped a loop's stalls, one kind of activity at one place."""

    kind: str
    seconds: float  # of the stalls' time it overlapped
    share: float  # of the stalls' time (kinds may nest: shares can add to more than 1)
    location: str | None = None
    detail: str | None = None
    code: str | None = None  # the line at ``location`` as written
    # kind "loop": the loop's body as a function of its own (what a fix traces)
    step_code: StepCode | None = None


@dataclass(frozen=True)
class Stall:
    """One stall: the loop's ``step``-th step (from 0), or the time just before it."""

    step: int
    start_s: float  # from the run's start
    seconds: float
    causes: tuple[tuple[str, float], ...] = ()  # (kind, seconds overlapped)


@dataclass(frozen=True)
class StallBeat:
    """The stalls of one group that one kind of activity dominated (``kind`` None: no
    timed activity did), and how regularly they came.

    ``every_steps``: the interval between consecutive ones, in the loop's steps, that
    most intervals are within 5 % of, and ``period_fit`` the share that are;
    ``every_s`` the median interval in seconds, ``regular_in_time`` whether the 20th
    and 80th percentiles of the intervals are within 10 % of it (a stall every T
    seconds whatever the steps do). ``lost_share``: the time they took beyond a typical
    step, of the loop's time (its steps and the gaps between)."""

    kind: str | None
    count: int
    stall_s: float
    lost_s: float
    lost_share: float
    typical_stall_s: float | None = None  # median
    every_steps: int | None = None
    period_fit: float | None = None
    every_s: float | None = None
    regular_in_time: bool = False

    def covered_by(self, cause: StallCause) -> float:
        """The share of these stalls' time ``cause`` overlapped (its seconds are over
        its loop's stalls: at most all of these): a ModelCheckpoint of 20 ms the
        largest timed part of stalls of 120 ms covers a sixth of them."""
        if self.stall_s <= 0:
            return cause.share
        return min(1.0, cause.seconds / self.stall_s)


@dataclass(frozen=True)
class LoopStalls:
    """The stalls of one loop of ``StepFacts.loops`` (``source``, ``name``).

    ``between_steps``: False for steps far longer than the typical one; True for time
    between two steps that the loop's step leaves out (a Keras epoch's end, where
    ModelCheckpoint and validation run; a tf.function loop's step cut at its call's
    end). ``lost_share``: the time the stalls took beyond a typical step, of the loop's
    time (its steps and the gaps between); ``beats`` the same per dominating activity,
    with their period."""

    source: str
    name: str
    between_steps: bool
    count: int
    loop_steps: int
    loop_s: float
    typical_step_s: float | None
    stall_s: float
    lost_s: float
    lost_share: float
    beats: tuple[StallBeat, ...] = ()  # most time lost first
    causes: tuple[StallCause, ...] = ()  # what overlapped them, most time first
    first: tuple[Stall, ...] = ()
    last: tuple[Stall, ...] = ()  # beyond the first ones


@dataclass(frozen=True)
class StallFacts:
    """Section ``stalls``."""

    activities: tuple[Activity, ...] = ()
    loops: tuple[LoopStalls, ...] = ()
