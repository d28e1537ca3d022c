"""A Keras fit's input wait that sits in each epoch's first step: the epoch's new
iterator starting (its threads, its prefetch and shuffle buffers filling) while the
other steps find their batch ready.

Keras makes a new iterator per epoch over a finite dataset, and fit's wait is the mean
step less tf.data's mean gap (collect/inprocess/input_wait.py): the first step of each
epoch, which waits for the new iterator's first batch, holds the whole wait where the
typical step does not wait. In a run of short epochs that is a share of the steps'
time (10 steps an epoch: 5-13 % here) with nothing to parallelise; in a run with a
large shuffle buffer it is seconds an epoch. Either way the reader must be told where
the wait is and that it is paid once an epoch, not by every step.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from dataclasses import dataclass

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.derived.pipeline_stages import pass_elements, per_consumer_element, stage_index
from gpuwhy.facts import PipelineFacts, PipelineStage, StepFacts
from gpuwhy.formatting import GAP_SOURCES, duration

# The epochs' first steps hold the wait where their time over the typical step is at
# least this share of the measured wait (the rest is the two means' noise).
HOLDS_AT = 0.5


@dataclass(frozen=True)
class EpochStarts:
    """The first steps of ``epochs`` epochs (warm-ups left out), ``excess_s`` each on
    average over their own epoch's median step, holding ``share`` of the measured
    wait."""

    epochs: int
    excess_s: float
    share: float
    steps_per_epoch: int
    over: str = "step"  # what the excess is over: fit's median step, a loop's median wait

    @property
    def text(self) -> str:
        return (
            f"in each epoch's first step, which waits for the epoch's new iterator: "
            f"{duration(self.excess_s)} over the median {self.over} in {self.epochs} epochs "
            f"of {self.steps_per_epoch} steps"
        )

    def evidence(self) -> dict[str, object]:
        return {
            "epoch_start_wait_ms": round(self.excess_s * 1000, 3),
            "epochs_timed": self.epochs,
            "steps_per_epoch": self.steps_per_epoch,
            "epoch_starts_share_of_wait": round(self.share, 3),
        }


# A loop's epochs are told apart by its iterators only where each gives this many steps
# or more (with one or two, every read is some iterator's first)
MIN_LOOP_EPOCH_STEPS = 3


def epoch_starts(steps: StepFacts, pipeline: PipelineFacts | None = None) -> EpochStarts | None:
    """Where fit's measured wait (tf.data's gap timer) is in its epochs' first steps:
    their time over their epoch's median step at least ``HOLDS_AT`` of the wait (a fit
    whose every step waits has first steps little over their epoch's median). None
    otherwise, or where the epochs were not timed step by step. A loop whose reads were
    timed one by one: :func:`loop_epoch_starts`."""
    if steps.input_wait_source == NEXT_TIMING:
        return loop_epoch_starts(steps, pipeline) if pipeline is not None else None
    share, median = steps.input_wait_fraction, steps.median_s
    if steps.input_wait_source not in GAP_SOURCES or share is None or not share or not median:
        return None
    warm = steps.warmup_indices
    sizes = steps.kept_call_steps  # an epoch's last call may run fewer steps
    epochs = _epochs(steps)
    excess, held = [], 0.0
    for first, last in epochs:
        if first in warm or first >= len(steps.durations):
            continue
        # over the epoch's own median step: two fits (a frozen model, then fine-tuning
        # it) step at their own paces
        end = min(last, len(steps.durations))
        others = [steps.durations[i] / sizes[i] for i in range(first + 1, end)]
        typical = statistics.median(others) if others else median
        extra = max(0.0, steps.durations[first] - typical * sizes[first])
        excess.append(extra / sizes[first])
        held += extra
    if not excess:
        return None
    waited = share * steps.total_s
    if waited <= 0 or held < HOLDS_AT * waited:
        return None
    epoch_sizes = [sum(sizes[first:last]) for first, last in epochs]
    return EpochStarts(
        epochs=len(excess),
        excess_s=statistics.fmean(excess),
        share=min(1.0, held / waited),
        steps_per_epoch=round(statistics.median(epoch_sizes)) if epoch_sizes else 0,
    )


def loop_epoch_starts(steps: StepFacts, pipeline: PipelineFacts) -> EpochStarts | None:
    """A loop that makes a new iterator each epoch (``for x, y in dataset:`` inside
    ``for epoch in ...``): where its reads, timed one by one, wait mostly in one read per
    iterator (the iterator's first: its threads and its buffers, a shuffle's above all,
    starting), the ``iterators`` longest waits over the median wait hold ``HOLDS_AT`` of
    all of them. Each iterator's first read is not marked in the steps, so the longest
    waits stand for them: a loop whose every read waits has no few that hold most."""
    waits = [w for w in steps.input_waits if w is not None]
    epochs = min(pipeline.iterators, len(waits))
    if (
        epochs < 2
        or not steps.all_kept
        or len(waits) < len(steps.input_waits)
        or len(waits) < MIN_LOOP_EPOCH_STEPS * epochs
    ):
        return None
    typical = statistics.median(waits)
    longest = sorted(waits, reverse=True)[:epochs]
    excess = [w - typical for w in longest]
    waited = sum(waits)
    if waited <= 0 or sum(excess) < HOLDS_AT * waited:
        return None
    return EpochStarts(
        epochs=epochs,
        excess_s=statistics.fmean(excess),
        share=min(1.0, sum(excess) / waited),
        steps_per_epoch=round(len(waits) / epochs),
        over="wait",
    )


def _epochs(steps: StepFacts) -> list[tuple[int, int]]:
    """Each timed epoch's steps as a range of indices into ``starts`` (sorted)."""
    spans = []
    for name, begin, end in steps.phases:
        if name.startswith("epoch"):
            first, last = bisect_left(steps.starts, begin), bisect_left(steps.starts, end)
            if first < last:
                spans.append((first, last))
    return spans


@dataclass(frozen=True)
class ShuffleRefill:
    """A shuffle's buffer refilled at a pass's start: about ``seconds``, its
    ``buffer`` elements at the rate ``slowest`` (the slowest stage under it) makes them."""

    seconds: float
    buffer: int
    slowest: PipelineStage


def shuffle_refill(pipeline: PipelineFacts, shuffle: PipelineStage) -> ShuffleRefill | None:
    """How long a refill of ``shuffle``'s buffer takes, estimated from TF's timers: the
    stages under it are pipelined, so the slowest of them sets the pace; each one's rate
    alone (``root_elements_per_s``, in the consumer's elements, its threads counted) times
    the shuffle's elements per consumer element (the ratios after it: a batch of 32, 32).
    None where the buffer or a stage's rate under it is unknown: an estimate from part
    of the stages would be too short."""
    index = stage_index(pipeline, shuffle)
    buffer = filled_elements(pipeline, shuffle)
    if not index or not buffer:
        return None  # not in the pipeline, nothing under it, or no buffer
    below = [s for s in pipeline.stages[:index] if s.kind != "prefetch"]
    if not below or any(not s.root_elements_per_s for s in below):
        return None
    slowest = min(below, key=lambda s: s.root_elements_per_s or 0.0)
    rate = (slowest.root_elements_per_s or 0.0) * (per_consumer_element(pipeline, shuffle) or 0.0)
    if rate <= 0:
        return None  # a ratio after the shuffle unknown
    return ShuffleRefill(buffer / rate, buffer, slowest)


def filled_elements(pipeline: PipelineFacts, shuffle: PipelineStage) -> int | None:
    """The elements a refill of ``shuffle``'s buffer reads: its buffer, or a whole pass
    where the pass is shorter (``shuffle(10000)`` over 3,000 texts reads 3,000, where
    the estimate said 10,000 and a refill more than three times as long). None where
    the buffer is unknown."""
    if not shuffle.buffer_size:
        return None
    per_pass, _ = pass_elements(pipeline)
    per_element = per_consumer_element(pipeline, shuffle)
    if per_pass and per_element:
        return min(shuffle.buffer_size, max(1, round(per_pass * per_element)))
    return shuffle.buffer_size
