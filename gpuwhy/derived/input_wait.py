"""How long the consumer of a tf.data pipeline waits for it: the steps' measured wait,
a pipeline's own timers, the few long waits (bursts) that can make most of it, and a
Python loop's wait that is the iterator call rather than the pipeline's work.

The derivation stage (stage.py) measures the steps' wait once per record; the readers
that take a pipeline and a record's facts are in steps_input.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from gpuwhy.derived.cache_filling import CacheFilling, cache_filling
from gpuwhy.derived.epoch_starts import EpochStarts, epoch_starts
from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.derived.pipeline_stages import (
    ends_buffered,
    pipeline_time_s,
    work_per_consumer_element_s,
)
from gpuwhy.facts import PipelineFacts, StepFacts
from gpuwhy.formatting import duration

# Fewer elements than this and a pipeline's wait, derived from the wall-clock window its
# iterators were read over (polled, so each end is known to a tenth of a second or
# worse), is mostly the iterators' start-up: no finding comes from it.
MIN_ELEMENTS_TO_JUDGE_WAIT = 20


# Fewer measured steps than this and the steps' wait share is a handful of samples.
MIN_STEPS_TO_JUDGE_WAIT = 10


# The window's wait per element is taken as TF's stage timers' bound when it exceeds it
# by more than this factor (plus a millisecond): the timers measure the work directly.
WAIT_BOUND_TOLERANCE = 2.0


@dataclass(frozen=True)
class InputWait:
    """How long the consumer of a pipeline waits for its elements."""

    fraction: float  # of the consumer's time (a step: wait + compute)
    per_element_s: float | None  # wait per step / element
    consumer_s: float | None  # the step, or tf.data's gap between GetNext calls
    measured_by: str  # for the evidence: how a person can check it


def production_bound_s(pipeline: PipelineFacts) -> float | None:
    """At most how long the pipeline takes to make one element: the stages' self times
    (TF's own timers, summed over threads) per element the consumer got. Parallel stages
    make the real time shorter, never longer, so a consumer cannot wait longer than this
    for an element the pipeline makes while it waits."""
    if not pipeline.elements or not pipeline.stages or pipeline.model_error:
        return None
    total = pipeline_time_s(pipeline)
    return total / pipeline.elements if total > 0 else None


def pipeline_wait(pipeline: PipelineFacts) -> InputWait | None:
    """The wait measured for this pipeline: wait / (wait + gap), from the wall-clock
    window its iterators were read over less tf.data's consumer timer (gap).

    None (not judged) below ``MIN_ELEMENTS_TO_JUDGE_WAIT`` elements. Where the window's
    wait per element is far above what TF's stage timers allow (an iterator read twice
    per pass, whose window is its own start-up), the two measurements disagree and the
    timers, which measure the work itself, are trusted: the wait is their bound, and
    ``measured_by`` says so.
    """
    wait, gap = pipeline.wait_per_element_s, pipeline.gap_median_s
    if wait is None or gap is None or pipeline.elements < MIN_ELEMENTS_TO_JUDGE_WAIT:
        return None
    if pipeline.wait_source == NEXT_TIMING:
        how = (
            "next() timed around each element the loop read (direct), against the "
            "consumer's time between two GetNext calls (gap)"
        )
    else:
        how = (
            "tf.data's timers: wait per element against the consumer's "
            "time between two GetNext calls (gap)"
        )
    bound = production_bound_s(pipeline)
    if (
        pipeline.wait_source != NEXT_TIMING  # a direct measurement needs no bound
        and bound is not None
        and wait > WAIT_BOUND_TOLERANCE * bound + 1e-3
    ):
        how = (
            f"TF's stage timers: at most {duration(bound)} of work per element, where the "
            f"wall-clock window of its iterators gave a wait of {duration(wait)}; the "
            "timers measure the work directly and are trusted"
        )
        wait = bound
    if wait + gap <= 0:
        return None
    return InputWait(
        fraction=wait / (wait + gap),
        per_element_s=wait,
        consumer_s=gap,
        measured_by=how,
    )


def steps_wait(steps: StepFacts) -> InputWait | None:
    """The steps' measured wait share; None below ``MIN_STEPS_TO_JUDGE_WAIT`` steps.
    A share within its uncertainty is kept (a rule weighing a stage by it reads the
    measured value); the readers that judge the wait itself ask
    :func:`steps_input.steps_wait_at`, which leaves it out."""
    if steps.input_wait_fraction is None or steps.count - steps.warmup < MIN_STEPS_TO_JUDGE_WAIT:
        return None
    how = f" by {steps.input_wait_source}" if steps.input_wait_source else ""
    return InputWait(
        fraction=steps.input_wait_fraction,
        per_element_s=steps.input_wait_median_s,
        consumer_s=steps.median_s,
        measured_by=f"{steps.marker}{how}",
    )


# A wait is a burst when it is this many times the median wait (and at least BURST_MIN_S);
# the waits are bursty when bursts, at most BURSTY_STEP_SHARE of the steps, hold at
# least half of the wait.
BURST_OVER_MEDIAN = 10.0


BURST_MIN_S = 0.001


BURSTY_STEP_SHARE = 0.20


@dataclass(frozen=True)
class Bursts:
    """The few long waits that make most of a wait share."""

    count: int
    shortest_s: float
    longest_s: float
    share: float  # of the recorded wait
    steps: int
    median_s: float
    kept: int | None = None  # a long run: read over its first ``kept`` calls only

    @property
    def text(self) -> str:
        if self.kept is not None:  # the title's share is the whole run's: these are not
            return (
                f"in the first {self.kept:,} steps, {self.count} of {self.steps} waits, of "
                f"{duration(self.shortest_s)}–{duration(self.longest_s)}, make "
                f"{self.share:.0%} of their wait (median wait {duration(self.median_s)})"
            )
        return (
            f"{self.count} of {self.steps} waits, of {duration(self.shortest_s)}–"
            f"{duration(self.longest_s)}, make {self.share:.0%} of it (median wait "
            f"{duration(self.median_s)})"
        )


def bursts(steps: StepFacts) -> Bursts | None:
    """The waits far above the median wait, where they are few and make most of the
    recorded wait: a share made of bursts reads very unlike the typical step, and a
    reader comparing it with the median must see why. Single waits are kept for a long
    run's first steps only: there they are read, and the text says so."""
    waits = [w for w in steps.input_waits[steps.warmup :] if w is not None]
    total = sum(waits)
    if len(waits) < 10 or total <= 0:
        return None
    median = statistics.median(waits)
    long = [w for w in waits if w >= max(BURST_OVER_MEDIAN * median, BURST_MIN_S)]
    if not long or len(long) > BURSTY_STEP_SHARE * len(waits) or sum(long) < total / 2:
        return None
    kept = None if steps.all_kept else len(steps.input_waits)
    return Bursts(len(long), min(long), max(long), sum(long) / total, len(waits), median, kept)


# The pipeline makes a batch in less than this share of the measured wait: the wait is
# the iterator call, not the pipeline's work.
OVERHEAD_PRODUCTION_SHARE = 0.5
# ... or in less than this share of a step, with a batch kept ready: it keeps up with the
# steps many times over, and what the loop waits in next() is the call (an eager loop's
# next() waits for the GIL its own op dispatch holds: 0.3 ms beside a 0.18 ms batch)
OVERHEAD_STEP_SHARE = 0.1


def fetch_overhead(
    pipeline: PipelineFacts | None, steps: StepFacts, share: float, mean_step: float | None
) -> float | None:
    """The pipeline's work per batch (TF's stage timers, buffers left out) where it is
    far below what the loop waited per batch and a buffer keeps a batch ready; else None.

    The wait per batch is the pipeline's own, timed around its next() calls where the
    run has it, and the pipeline must hold most of the steps' wait: with several
    pipelines (one per loop) another one's waits are not this one's fetch overhead."""
    if pipeline is None or mean_step is None or steps.input_wait_source != NEXT_TIMING:
        return None
    if not ends_buffered(pipeline) or not pipeline.elements or pipeline.model_error:
        return None
    waited = share * mean_step
    if pipeline.wait_source == NEXT_TIMING and pipeline.wait_per_element_s is not None:
        waited = pipeline.wait_per_element_s
        steps_wait = share * steps.total_s
        if steps_wait > 0 and waited * pipeline.elements < 0.5 * steps_wait:
            return None  # most of the waiting was for other pipelines
    production = sum(
        work_per_consumer_element_s(pipeline, s)
        for s in pipeline.stages
        if s.kind != "prefetch" and s.kind != "cache"
    )
    if production <= 0:
        return None
    keeps_up = mean_step is not None and production < OVERHEAD_STEP_SHARE * mean_step
    if production >= OVERHEAD_PRODUCTION_SHARE * waited and not keeps_up:
        return None
    return production


@dataclass(frozen=True)
class StepsWait:
    """The steps' measured wait as input.bound reads it (the verdict states the same):
    the pipeline they read, their mean step, and what the wait is, where it is not
    simply the pipeline's: the first pass filling its cache, or (with no bursts) the
    Python call per step, beside a pipeline that makes a batch in ``fetch_overhead_s``.

    The derivation stage (stage.py) keeps it before any reader's threshold: there
    ``cache_filling`` is the first pass filling a cache whose later passes' wait is not
    yet compared with one, and ``fetch_overhead_s`` stands beside it; :meth:`judged`
    gives what a reader with its threshold reads."""

    wait: InputWait
    pipeline: PipelineFacts | None
    mean_step_s: float | None
    bursts: Bursts | None
    cache_filling: CacheFilling | None
    fetch_overhead_s: float | None
    # a fit's wait held by its epochs' first steps (each epoch's new iterator)
    epoch_starts: EpochStarts | None = None

    def judged(self, medium_at: float) -> StepsWait:
        """What the wait is for a reader whose threshold is ``medium_at``: the cache
        filling only where the passes after the first wait less than it, the fetch
        overhead only where the wait is not the cache filling."""
        filling = self.cache_filling
        if filling is not None and filling.later_wait is not None:
            if filling.later_wait >= medium_at:
                filling = None
        overhead = self.fetch_overhead_s if filling is None else None
        return replace(self, cache_filling=filling, fetch_overhead_s=overhead)


def measured_wait(steps: StepFacts | None, pipeline: PipelineFacts | None) -> StepsWait | None:
    """The steps' wait (:func:`steps_wait`) and what it may be, for the steps reading
    ``pipeline`` (the stage's ``steps_pipeline``); None where not measured."""
    wait = steps_wait(steps) if steps is not None else None
    if steps is None or wait is None:
        return None
    burst = bursts(steps)
    filling = cache_filling(steps, pipeline, None) if pipeline is not None else None
    overhead = None
    if pipeline is not None and burst is None:
        overhead = fetch_overhead(pipeline, steps, wait.fraction, steps.mean_s)
    starts = epoch_starts(steps, pipeline)
    return StepsWait(wait, pipeline, steps.mean_s, burst, filling, overhead, starts)
