"""Whether the steps' wait is the first pass over a cached pipeline (the pass that runs
the preprocessing and fills the cache), measured against the passes that read the cache.
Asked by input.bound and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.facts import PipelineFacts, StepFacts
from gpuwhy.formatting import duration, milliseconds

# Steps recorded after the first pass over a cached pipeline, at least, to judge that
# the later passes keep up; and how many times slower the first pass's steps must be.
CACHE_LATER_STEPS = 20


CACHE_FIRST_PASS_SLOWER = 3.0


@dataclass(frozen=True)
class CacheFilling:
    """Where the steps' wait is the first pass over a pipeline that caches: the pass
    that runs the preprocessing and fills the cache, against the passes that read it."""

    pass_steps: int  # steps in one pass (the pipeline's cardinality, or read: steps_per_pass)
    first_steps: int  # the first pass's steps after warm-up
    first_s: float  # their time, in seconds
    first_step_s: float  # their mean
    later_steps: int  # steps recorded after the first pass
    later_step_s: float  # their mean
    later_wait: float | None  # their measured wait share, where each step's is recorded
    cache_location: str | None
    steps: int  # steps recorded after warm-up

    @property
    def text(self) -> str:
        later = (
            f", waiting {self.later_wait:.0%} of the time" if self.later_wait is not None else ""
        )
        return (
            f"its {self.first_steps:,} steps after warm-up took {duration(self.first_s)} "
            f"({duration(self.first_step_s)} each), the {self.later_steps:,} after it "
            f"{duration(self.later_step_s)} each{later}"
        )

    def evidence(self) -> dict[str, Any]:
        return {
            "first_pass_steps": self.pass_steps,
            "first_pass_s": round(self.first_s, 3),
            "first_pass_step_mean_ms": milliseconds(self.first_step_s, 2),
            "later_steps": self.later_steps,
            "later_step_mean_ms": milliseconds(self.later_step_s, 2),
            "later_input_wait_fraction": (
                None if self.later_wait is None else round(self.later_wait, 3)
            ),
            "cache_at": self.cache_location,
        }


def cache_filling(
    steps: StepFacts, pipeline: PipelineFacts | None, medium_at: float | None
) -> CacheFilling | None:
    """The steps' wait belongs to the first pass over a cached pipeline, measured: the
    steps after that pass (at least CACHE_LATER_STEPS of them) wait less than
    ``medium_at`` where each step's wait is recorded (None: not judged here; the
    derivation stage leaves the threshold to the rule that reads it), else their steps are at least
    CACHE_FIRST_PASS_SLOWER times faster than the first pass's and that difference
    covers the wait measured over the run. None otherwise, or where steps cannot be
    matched to passes (several loops, several steps per call, an unknown pass length, a
    first pass longer than the steps a long run keeps one by one). The steps after the
    first pass are the whole run's (:func:`_after_first_pass`)."""
    if pipeline is None or not pipeline.cache_written:
        return None
    if len(steps.loops) > 1 or steps.steps_per_call != 1 or pipeline.iterators < 2:
        return None
    per_pass = steps_per_pass(steps, pipeline)
    if per_pass is None:
        return None
    first = steps.durations[steps.warmup : per_pass]
    later = _after_first_pass(steps, per_pass)
    if later is None or later.steps < CACHE_LATER_STEPS or not first:
        return None
    if steps.input_wait_fraction is None:
        return None
    first_mean = sum(first) / len(first)
    later_mean = later.seconds / later.steps
    later_wait: float | None = None
    if later.waited is not None:
        later_wait = later.waited / max(later.seconds, 1e-12)
        if medium_at is not None and later_wait >= medium_at:
            return None
    else:
        waited = steps.input_wait_fraction * steps.total_s
        excess = sum(first) - len(first) * later_mean
        if first_mean < CACHE_FIRST_PASS_SLOWER * later_mean or excess < 0.8 * waited:
            return None
    cache = next((s for s in pipeline.stages if s.kind == "cache"), None)
    return CacheFilling(
        pass_steps=per_pass,
        first_steps=len(first),
        first_s=sum(first),
        first_step_s=first_mean,
        later_steps=later.steps,
        later_step_s=later_mean,
        later_wait=later_wait,
        cache_location=cache.location if cache is not None else None,
        steps=later.counted,
    )


# An unknown cardinality (a generator's, a filter's) is read from the steps and the
# passes only where the range of pass lengths they allow is at most this share wide.
PASS_LENGTH_SLACK = 0.1


def steps_per_pass(steps: StepFacts, pipeline: PipelineFacts) -> int | None:
    """The steps in one pass over ``pipeline``: its cardinality where TF knows it; else
    (a ``from_generator`` source, a ``filter``) from the run's steps and the passes, one
    iterator each (fit makes one an epoch, as a loop over the dataset does): every pass
    but the last is whole, the last may stop part-way (a bounded run), so a pass is
    between steps / passes and (steps - 1) / (passes - 1) long. Taken where that range
    is narrow (many passes), else None."""
    if pipeline.cardinality:
        return pipeline.cardinality
    passes = pipeline.iterators
    if passes < 3 or steps.count < passes:
        return None
    shortest = -(-steps.count // passes)
    longest = (steps.count - 1) // (passes - 1)
    if longest < shortest or longest - shortest > PASS_LENGTH_SLACK * shortest:
        return None
    return shortest


@dataclass(frozen=True)
class _Later:
    """The steps after a first pass: how many, their time, their wait (None: not
    timed step by step), and every step after warm-up."""

    steps: int
    seconds: float
    waited: float | None
    counted: int


def _after_first_pass(steps: StepFacts, per_pass: int) -> _Later | None:
    """The steps after the first ``per_pass``: one by one where the record keeps every
    step; in a longer run, the whole run's sums (every step after warm-up, its wait)
    less the first pass, which must be among the steps kept one by one. None where it
    is not."""
    durations = steps.durations
    if steps.all_kept:
        later = durations[per_pass:]
        waits = steps.input_waits[per_pass : len(durations)]
        timed = bool(waits) and all(w is not None for w in waits)
        return _Later(
            steps=len(later),
            seconds=sum(later),
            waited=sum(w or 0.0 for w in waits) if timed else None,
            counted=len(durations) - steps.warmup,
        )
    if per_pass > len(durations):
        return None
    first = durations[steps.warmup : per_pass]
    first_waits = steps.input_waits[steps.warmup : per_pass]
    timed = (  # every step's wait was timed: the run's wait less the first pass's
        steps.input_wait_source == NEXT_TIMING
        and steps.input_wait_fraction is not None
        and len(first_waits) == len(first)
        and all(w is not None for w in first_waits)
    )
    return _Later(
        steps=steps.count - per_pass,
        seconds=steps.total_s - sum(first),
        waited=(
            (steps.input_wait_fraction or 0.0) * steps.total_s - sum(w or 0.0 for w in first_waits)
            if timed
            else None
        ),
        counted=steps.count - steps.warmup,
    )
