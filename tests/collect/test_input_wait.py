"""Keras fit's input wait from the gap timer: step = wait + gap; a Python loop's from
its next() calls."""

import dataclasses
import random
import statistics

from gpuwhy.collect.inprocess.input_wait import SOURCE, delivered_batch, with_keras_input_wait
from gpuwhy.derived.input_wait import steps_wait
from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.derived.steps_input import steps_wait_at
from gpuwhy.facts import Facts, PipelineFacts, StepFacts, TfDataFacts
from gpuwhy.formatting import wait_in_time
from gpuwhy.rules.input.bound import InputBound
from tests import builders_tfdata as t


def _steps(source="keras-fit", median=0.050, total=None, fraction=None):
    # 40 steps, the first left out as warm-up: 39 counted
    return StepFacts(
        source=source,
        marker="Model.fit at train.py:9",
        count=40,
        warmup=1,
        median_s=median,
        total_s=median * 39 if total is None else total,
        input_wait_fraction=fraction,
    )


def _fit(gap_median, gap_mean=None, **kw):
    return PipelineFacts(
        id=2,
        consumer="keras-fit",
        elements=40,
        gap_median_s=gap_median,
        gap_mean_s=gap_median if gap_mean is None else gap_mean,
        **kw,
    )


def _tfdata(*pipelines):
    return TfDataFacts(pipelines=pipelines, host_cores=2)


def test_wait_is_step_minus_gap_of_the_fit_pipeline():
    evaluate = PipelineFacts(
        id=1, consumer="keras-evaluate", elements=500, gap_median_s=0.001, gap_mean_s=0.001
    )
    steps = with_keras_input_wait(_steps(), _tfdata(evaluate, _fit(0.020)))
    assert steps.input_wait_median_s == 0.030
    assert steps.input_wait_fraction == 0.6
    assert steps.input_wait_source == SOURCE


def test_the_share_adds_up_long_waits_that_the_median_step_hides():
    # a shuffle buffer refilling at each epoch start: typical steps do not wait (median
    # step == median gap) but the few long first steps make the mean step twice the gap
    steps = with_keras_input_wait(
        _steps(median=0.010, total=0.020 * 39), _tfdata(_fit(0.010, gap_mean=0.010))
    )
    assert steps.input_wait_median_s == 0.0
    assert steps.input_wait_fraction == 0.5


def test_a_gap_longer_than_the_step_is_no_wait():
    steps = with_keras_input_wait(_steps(), _tfdata(_fit(0.060)))
    assert steps.input_wait_fraction == 0.0


def test_measured_waits_and_other_sources_are_kept():
    tfdata = _tfdata(_fit(0.010))
    measured = _steps(fraction=0.25)
    assert with_keras_input_wait(measured, tfdata) is measured
    loop = _steps(source="tf-data")
    assert with_keras_input_wait(loop, tfdata) is loop


def test_no_gap_timer_leaves_the_wait_unknown():
    no_timer = PipelineFacts(id=1, consumer="keras-fit", elements=40, model_error="autotune off")
    assert with_keras_input_wait(_steps(), _tfdata(no_timer)).input_wait_fraction is None
    assert with_keras_input_wait(_steps(), None).input_wait_fraction is None


def test_a_loop_s_pipelines_wait_what_their_next_calls_took():
    from gpuwhy.collect.inprocess.input_wait import NEXT_TIMING, with_loop_waits
    from gpuwhy.collect.inprocess.steps import StepCollector

    train = PipelineFacts(id=1, consumer="python-loop", elements=4, wait_per_element_s=0.161)
    test = PipelineFacts(id=2, consumer="python-loop", elements=2, wait_per_element_s=0.5)
    fit = dataclasses.replace(_fit(0.01, wait_per_element_s=0.02), id=3)
    tfdata = TfDataFacts(pipelines=(train, test, fit))
    # Python gave the second epoch's iterator of `train` the id its first one had,
    # and `test` one iterator; the last call of each epoch ran out (StopIteration).
    spans = {1: [(7, 0.0), (7, 10.0)], 2: [(9, 5.0)], 3: [(11, 0.0)]}
    calls = [
        (7, 1.0, 1.002, False),
        (7, 2.0, 2.004, False),
        (7, 3.0, 3.0001, True),
        (9, 6.0, 6.001, False),
        (9, 6.5, 7.0, True),  # not an element: its time still waited
        (7, 11.0, 11.002, False),
        (7, 12.0, 12.004, False),
        (13, 1.0, 2.0, False),  # an iterator of no pipeline watched
    ]
    collector = StepCollector()  # sums each iterator's calls as they come
    for key, start, end, exhausted in calls:
        collector._on_next(key, "train.py:9", start, end, exhausted)
    reads = collector.reads()
    assert len(reads) == 4  # three iterators read, one of whose ids was reused
    found = {p.id: p for p in with_loop_waits(tfdata, spans, reads).pipelines}
    assert found[1].wait_source == NEXT_TIMING
    assert found[1].wait_per_element_s == round((0.002 + 0.004) * 2 / 4 + 0.0001 / 4, 9)
    assert found[2].wait_per_element_s == round(0.001 + 0.5, 9)
    # Keras reads inside its step: its estimate stays
    assert found[3].wait_per_element_s == 0.02 and found[3].wait_source is None
    assert with_loop_waits(tfdata, spans, []) is tfdata


def test_the_steps_batch_comes_from_the_pipeline_the_loop_waited_for_longest():
    """The steps' pipeline is derived.pipeline.steps_pipeline's, the one the findings
    judge: of two timed loops, the one waited for longest (2: 40 x 10 ms), not the one
    with the most elements (1), which the run's collectors took before."""

    def loop(pipeline_id, elements, wait_s, batch):
        return t.pipeline(
            t.batch(ratio=float(batch)),
            id=pipeline_id,
            consumer="python-loop",
            elements=elements,
            wait_per_element_s=wait_s,
            wait_source=NEXT_TIMING,
        )

    steps = _steps(source="tf-data")
    largest, waited = loop(1, 80, 0.001, batch=64), loop(2, 40, 0.010, batch=32)
    assert delivered_batch(_tfdata(largest, waited), steps) == 32
    untimed = dataclasses.replace(waited, wait_source=None)
    assert delivered_batch(_tfdata(largest, untimed), steps) == 64


def _fit_run(durations, gaps, epoch=None, gaps_from_step=None):
    """A fit's steps one by one (the first a warm-up; epochs of ``epoch`` steps, a
    millisecond apart) and its pipeline's gaps, with the spreads the collector keeps;
    ``gaps_from_step``: the gaps are those of the iterator made just before that step."""
    counted = durations[1:]
    starts, t = [], 0.0
    for d in durations:
        starts.append(t)
        t += d + 0.001
    phases = ()
    if epoch:
        phases = tuple(
            (f"epoch {n}", starts[i] - 0.0005, starts[min(i + epoch, len(starts) - 1)] - 0.0005)
            for n, i in enumerate(range(0, len(starts) - 1, epoch))
        )
    steps = StepFacts(
        source="keras-fit",
        marker="Model.fit at train.py:9",
        count=len(durations),
        warmup=1,
        median_s=statistics.median(counted),
        total_s=sum(counted),
        starts=tuple(starts),
        durations=tuple(durations),
        phases=phases,
    )
    pipeline = _fit(
        statistics.median(gaps),
        gap_mean=statistics.fmean(gaps),
        gap_count=len(gaps),
        gap_stdev_s=statistics.stdev(gaps),
        gaps_since_s=None if gaps_from_step is None else starts[gaps_from_step] - 0.0005,
    )
    return with_keras_input_wait(steps, _tfdata(pipeline))


def _input_bound(steps):
    facts = Facts(steps=steps, tfdata=_tfdata(_fit(0.0015, gap_count=54, gap_stdev_s=0.0)))
    return InputBound().check(facts, dict(InputBound.options))


def test_a_share_within_its_uncertainty_is_not_resolved_from_no_wait():
    # a fit of 60 steps of 1.5 ms whose gaps are as long: two steps held up 4 ms (a
    # thread that waited for a core) make 8 % of the steps' time, within its spread
    durations = [0.3] + [0.0015] * 29 + [0.0055] + [0.0015] * 29 + [0.0055]
    steps = _fit_run(durations, [0.0015] * 54)
    assert 0.05 <= steps.input_wait_fraction < steps.input_wait_error
    assert not steps.input_wait_resolved
    assert steps_wait(steps) is not None  # measured, as a stage's rule weighs it
    assert steps_wait_at(Facts(steps=steps, tfdata=_tfdata(_fit(0.0015))), 0.05) is None
    assert _input_bound(steps) == []  # before: medium, "Steps wait for input 8%"
    assert "not resolved from no wait" in wait_in_time(steps)
    # the same share from one gap of 40 ms among the gaps (after a fit's first step)
    # hides them: no wait, and no certainty either
    steps = _fit_run(durations, [0.040] + [0.0015] * 53)
    assert steps.input_wait_fraction == 0.0 and steps.input_wait_error > 0.5


def test_a_wait_in_the_epochs_first_steps_is_said_to_be_each_epoch_s_new_iterator():
    # 12 epochs of 10 steps of 1.5 ms whose first steps take 3.5 ms: the new iterator
    durations = [0.3] + [0.0015] * 9 + ([0.0035] + [0.0015] * 9) * 11 + [0.0015]
    steps = _fit_run(durations, [0.0015] * 108, epoch=10)
    assert steps.input_wait_resolved and 0.05 < steps.input_wait_fraction < 0.2
    (finding,) = _input_bound(steps)
    assert finding.severity == "low"
    assert "in each epoch's first step, which waits for the epoch's new iterator" in finding.title
    assert "2.0 ms over the median step in 11 epochs of 10 steps" in finding.title
    assert finding.evidence["epoch_start_wait_ms"] == 2.0
    assert "steps_per_epoch" in finding.fix and "once an epoch" in finding.estimated_gain


def test_a_steady_wait_and_a_large_one_made_of_a_few_steps_are_resolved():
    # every step waits 0.5 ms of its 1.5 ms: 33 %, the spread a few percent of it
    rng = random.Random(0)
    durations = [0.3] + [0.0015 + rng.uniform(-1e-4, 1e-4) for _ in range(60)]
    steps = _fit_run(durations, [0.0010 + rng.uniform(-1e-4, 1e-4) for _ in range(60)], 10)
    assert steps.input_wait_fraction > 0.3 > 10 * steps.input_wait_error
    assert steps.input_wait_resolved
    (finding,) = _input_bound(steps)  # every step's wait: no epoch start's
    assert finding.severity == "high" and "epoch_start_wait_ms" not in finding.evidence
    # a shuffle buffer refilled at each of 3 epochs (2 s beside 100 steps of 10 ms):
    # two thirds of the time, though 3 steps make it and its uncertainty is larger
    durations = [0.3] + ([2.0] + [0.010] * 99) * 3
    steps = _fit_run(durations, [0.010] * 297)
    assert steps.input_wait_fraction > 0.6 and steps.input_wait_error > 0.6
    assert steps.input_wait_resolved
    assert steps_wait_at(Facts(steps=steps, tfdata=_tfdata(_fit(0.010))), 0.05) is not None


def test_a_large_wait_in_the_epochs_first_steps_names_the_shuffle_that_refills():
    # the corpus's fit_shuffle_refill: 5 epochs of 59 steps of 1.3 ms whose first steps
    # wait 45 ms more, the shuffle buffer (60,000 rows) filling at each new iterator
    durations = [0.3] + [0.0013] * 58 + ([0.046] + [0.0013] * 58) * 5 + [0.0013]
    steps = _fit_run(durations, [0.0013] * 290, epoch=59)
    assert steps.input_wait_fraction >= 0.2
    refilled = t.pipeline(
        t.stage(name="TensorSlice", kind="source", written_as=("from_tensor_slices",)),
        t.shuffle(written_calls=("ds.shuffle(60000)",), buffer_size=60000),
        t.batch(ratio=1024.0),  # 59 batches of 1,024 a pass: the buffer fills with 60,000
        cardinality=59,
        gap_median_s=0.0013,
        gap_mean_s=0.0013,
        gap_count=290,
        gap_stdev_s=0.0,
    )
    facts = Facts(steps=steps, tfdata=t.tfdata(refilled))
    (finding,) = InputBound().check(facts, dict(InputBound.options))
    assert finding.severity == "high" and finding.location == "train.py:63"
    assert "44.7 ms over the median step in 5 epochs of 59 steps" in finding.title
    assert "the buffer of ds.shuffle(60000) (train.py:63), 60,000 elements" in finding.fix
    assert "steps_per_epoch=59" in finding.fix and "parallel" not in finding.fix
    # a shuffle after a repeat fills its buffer once: the iterator's start is all it says
    once = dataclasses.replace(refilled, stages=(t.repeat(), *refilled.stages))
    (finding,) = InputBound().check(
        dataclasses.replace(facts, tfdata=t.tfdata(once)), dict(InputBound.options)
    )
    assert "shuffle" not in finding.fix and "its threads and its buffers filling" in finding.fix


def test_the_gaps_are_weighed_against_the_steps_of_the_iterators_they_come_from():
    """A fit's first iterator is left out of the gaps, so its epoch is left out of the
    steps: 2 epochs of 21 steps, 14 ms then 11 ms a step, with gaps as long as the
    second epoch's steps, read 12 % of waiting against every step (CI: 16 %)."""
    durations = [0.6] + [0.014] * 20 + [0.011] * 21
    gaps = [0.0109, 0.0111] * 10
    steps = _fit_run(durations, gaps, epoch=21, gaps_from_step=21)
    assert steps.input_wait_fraction == 0.0
    every_step = _fit_run(durations, gaps, epoch=21)
    assert every_step.input_wait_fraction > 0.1 and every_step.input_wait_resolved
