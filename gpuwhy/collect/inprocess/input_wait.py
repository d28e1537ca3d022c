"""The input wait of Keras ``fit`` steps, from tf.data's own consumer timer.

Keras reads each batch inside its compiled train function (``next(iterator)`` in a
``tf.function``), so no Python call can be timed around the read. tf.data's iterator
model times its consumer instead: ``gap_times`` are the intervals between the end of one
``GetNext`` and the start of the next, i.e. what the model did with an element (the
latest 100 per iterator, gaps over 10 s dropped: tensorflow/core/framework/model.cc).
A Keras step lasts from one batch's begin to the next, so

    step = wait for the batch + gap,   wait = step - gap

Where TF keeps no model (autotune off: Keras turns it off for a ``PyDataset`` with
``workers``) a ``from_generator`` source with nothing running ahead of the consumer is
timed around its own calls instead, the same gaps by another clock
(tfapi/tfdata/generator_gaps.py): the wait's source then says "generator timing".

The share of time waiting comes from the means (what adds up: a shuffle buffer that
refills at every epoch start makes one long wait per epoch, which medians would hide);
the typical wait per step from the medians. Warm-up steps are already left out of the
step statistics, and ``steps_per_execution`` does not change the sums (both are per
element, one element per step).

A difference of two means is only as good as they are: one gap or step far from the
others (an epoch's new iterator filling, a thread that waited for a core) moves either
mean by its excess over the count, and in a short fit that is several percent of a step
either way. The share's uncertainty (three standard errors of the difference) is kept
beside it; a share not above it is not resolved from no wait, and no rule judges it
(CI once read a 60-step fine-tuning fit, whose steps never wait, as waiting).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from gpuwhy.derived.pipeline import NEXT_TIMING, steps_pipeline
from gpuwhy.facts import PipelineFacts, StepFacts, TfDataFacts
from gpuwhy.formatting import GAP_TIMER, GENERATOR_TIMING

SOURCE = GAP_TIMER

# Standard errors in a share's uncertainty: three, as a wait made by a handful of
# steps is no finding; at two, the CI's fine-tuning fit (no steady wait, its epochs'
# first steps 2 ms long) read 15.6 % against 15.0 % in 1 run of 6 here.
SPREAD = 3


def with_keras_input_wait(steps: StepFacts | None, tfdata: TfDataFacts | None) -> StepFacts | None:
    """``steps`` with its input wait filled from the fit pipeline's gap timer, where
    the wait was not already measured around ``next()``."""
    if steps is None or tfdata is None or steps.input_wait_fraction is not None:
        return steps
    if steps.source != "keras-fit" or not steps.median_s:
        return steps
    pipeline = fit_pipeline(tfdata)
    if pipeline is None or pipeline.gap_mean_s is None or steps.mean_s is None:
        return steps
    compared = _steps_timed_by_the_gaps(steps, tfdata)
    mean_step = statistics.fmean(compared) if compared else steps.mean_s
    gap_mean, gap_median = _fit_gaps(tfdata)
    wait_share = max(0.0, mean_step - gap_mean) / mean_step
    typical = max(0.0, steps.median_s - gap_median)
    error = _share_error(steps, tfdata, mean_step, compared)
    return dataclasses.replace(
        steps,
        input_wait_fraction=round(wait_share, 4),
        input_wait_median_s=round(typical, 6),
        input_wait_source=_gap_source(tfdata),
        input_wait_error=round(error, 4) if error is not None else None,
    )


def _steps_timed_by_the_gaps(steps: StepFacts, tfdata: TfDataFacts) -> list[float] | None:
    """The steps (seconds per step, warm-ups left out) over the iterators whose gaps are
    counted: from the first of them on (``gaps_since_s``). An epoch whose iterator's
    model no read caught (a short first epoch, freed before the poll came) has no gaps,
    so its steps are left out too: compared with every step, a first epoch slower than
    the rest read as a wait (2 epochs of 21 steps, 14 ms then 11 ms a step: 16 %, in a
    full suite run here). None where every step is compared (the steps were not all
    kept one by one, or a pipeline does not say where its gaps begin)."""
    since = [p.gaps_since_s for p in _timed_fit_pipelines(tfdata)]
    known = [s for s in since if s is not None]
    if not known or len(known) < len(since) or not steps.all_kept or not steps.durations:
        return None
    first = min(known)
    warm = steps.warmup_indices
    compared = [
        duration / n
        for i, (start, duration, n) in enumerate(
            zip(steps.starts, steps.durations, steps.kept_call_steps)
        )
        if i not in warm and start >= first
    ]
    return compared if len(compared) >= 2 else None


def _share_error(
    steps: StepFacts, tfdata: TfDataFacts, mean_step: float, compared: list[float] | None
) -> float | None:
    """Three standard errors of (mean step - mean gap), as a share of the mean step: the
    steps' spread from their durations kept one by one (warm-ups left out; ``compared``:
    those the gaps time), the gaps' from each fit pipeline's, weighted as
    :func:`_fit_gaps` weighs their means. None where either spread is unknown (a handful
    of steps or gaps)."""
    per_call = max(steps.steps_per_call, 1)
    warm = steps.warmup_indices
    sizes = steps.kept_call_steps
    kept = compared or [d / sizes[i] for i, d in enumerate(steps.durations) if i not in warm]
    counted = len(kept) if compared else max(len(kept), (steps.count - steps.warmup) // per_call)
    if len(kept) < 2 or counted < 2:
        return None
    steps_var = statistics.variance(kept) / counted
    timed = _timed_fit_pipelines(tfdata)
    if any(p.gap_stdev_s is None or p.gap_count < 2 for p in timed):
        return None
    weights = [max(p.elements, 1) for p in timed]
    total = sum(weights)
    gaps_var = sum(
        (w / total) ** 2 * (p.gap_stdev_s or 0.0) ** 2 / p.gap_count for p, w in zip(timed, weights)
    )
    return SPREAD * math.sqrt(steps_var + gaps_var) / mean_step


def _fit_gaps(tfdata: TfDataFacts) -> tuple[float, float]:
    """The gap per element (mean, median) over every fit's pipeline, weighted by the
    elements each gave (one pipeline: its own): the steps of all fits are one loop of
    Keras batches, and two fits (a frozen model, then fine-tuning it) may spend very
    different times per batch."""
    timed = _timed_fit_pipelines(tfdata)
    weights = [max(p.elements, 1) for p in timed]
    total = sum(weights)
    mean = sum((p.gap_mean_s or 0.0) * w for p, w in zip(timed, weights)) / total
    median = sum((p.gap_median_s or p.gap_mean_s or 0.0) * w for p, w in zip(timed, weights))
    return mean, median / total


def _gap_source(tfdata: TfDataFacts) -> str:
    """Who timed the gaps: tf.data's timer, or (where every fit pipeline's were timed
    around its generator, TF keeping none) the generator's calls."""
    sources = {p.gap_source for p in _timed_fit_pipelines(tfdata)}
    return GENERATOR_TIMING if sources == {GENERATOR_TIMING} else SOURCE


def _timed_fit_pipelines(tfdata: TfDataFacts) -> list[PipelineFacts]:
    """The fit pipelines whose gaps tf.data timed."""
    return [p for p in tfdata.pipelines if p.consumer == "keras-fit" and p.gap_mean_s is not None]


def fit_pipeline(tfdata: TfDataFacts) -> PipelineFacts | None:
    """The pipeline ``fit`` trained on: the keras-fit one that gave the most elements."""
    fit = [p for p in tfdata.pipelines if p.consumer == "keras-fit"]
    return max(fit, key=lambda p: p.elements, default=None)


def with_loop_waits(
    tfdata: TfDataFacts | None,
    spans: dict[int, list[tuple[int, float]]],
    reads: list[tuple[int, float, float, int]],
) -> TfDataFacts | None:
    """``tfdata`` with each Python loop's pipeline waiting what its ``next()`` calls
    took: the direct measurement of the wait, one timing per element read.

    ``reads`` are the timed calls summed per iterator (iterator id, its first read's
    start, seconds waited, elements returned) and ``spans`` each pipeline's iterators
    (id, creation time). Python reuses the id of a freed iterator for a new one (the
    next epoch's, often), so reads belong to the iterator of that id created last
    before the first of them. The windows the iterators were read over stay the
    estimate where no call was timed (Keras, a distribution strategy's iterators).
    """
    if tfdata is None or not reads:
        return tfdata
    created: dict[int, list[tuple[float, int]]] = {}
    for pipeline_id, iterators in spans.items():
        for key, at in iterators:
            created.setdefault(key, []).append((at, pipeline_id))
    for rows in created.values():
        rows.sort()
    waited: dict[int, float] = {}
    elements: dict[int, int] = {}
    for key, first, seconds, count in reads:
        owner = None
        for at, pipeline_id in created.get(key, ()):
            if at <= first:
                owner = pipeline_id
        if owner is None:
            continue
        waited[owner] = waited.get(owner, 0.0) + seconds
        elements[owner] = elements.get(owner, 0) + count
    pipelines = tuple(
        dataclasses.replace(
            p,
            wait_per_element_s=round(waited[p.id] / elements[p.id], 9),
            wait_source=NEXT_TIMING,
        )
        if elements.get(p.id) and p.consumer == "python-loop"
        else p
        for p in tfdata.pipelines
    )
    return dataclasses.replace(tfdata, pipelines=pipelines)


def delivered_batch(tfdata: TfDataFacts | None, steps: StepFacts | None) -> int | None:
    """The batch size the training steps were given, as tf.data's model measured it: the
    input elements per output element of the last batch stage of the pipeline the steps
    read (gpuwhy.derived.pipeline.steps_pipeline). None where no batch was seen."""
    pipeline = steps_pipeline(tfdata, steps)
    if pipeline is None:
        return None
    batches = [s for s in pipeline.stages if "batch" in s.written_as and s.elements]
    if batches and batches[-1].ratio >= 2:
        return round(batches[-1].ratio)
    return _batch_from_bytes(pipeline)


def _batch_from_bytes(pipeline: PipelineFacts) -> int | None:
    """A pipeline that yields whole batches of unknown size (a Python generator's, as
    Keras feeds fit from a generator or a PyDataset): the bytes TF counted per element
    the model got over the bytes of one example."""
    if not (pipeline.delivered_bytes and pipeline.example_bytes and pipeline.elements):
        return None
    batch = pipeline.delivered_bytes / pipeline.elements / pipeline.example_bytes
    return round(batch) if batch >= 2 else None
