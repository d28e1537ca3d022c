"""Keras fit's input wait from the gap timer: step = wait + gap; a Python loop's from
its next() calls."""

import dataclasses

from gpuwhy.collect.inprocess.input_wait import SOURCE, delivered_batch, with_keras_input_wait
from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.facts import PipelineFacts, StepFacts, TfDataFacts
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
