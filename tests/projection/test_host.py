"""The host's own work in a projected step, from small facts: the time between calls of
the step's function, each call's own cost, and how they join the GPU's work."""

from dataclasses import replace

import pytest

from gpuwhy.facts import EagerFacts, Facts, StepFacts, TracedFunction, TracingFacts
from gpuwhy.facts.step_profile import StepProfile
from gpuwhy.finding import Finding
from gpuwhy.projection.host import between_calls, host_work
from gpuwhy.projection.step import projection_facts
from gpuwhy.report.run.summary import projection_lines
from gpuwhy.verdict import projection_clause
from tests import builders as b
from tests.projection.test_cost import TRAIN, placement


def fit_steps(**changes) -> StepFacts:
    """Keras' fit: 1,001 steps, the first a warm-up, the typical one 1 ms (their mean
    is longer: a step that retraced, a collection); its wait for input is inside the
    call (the tf.data gap timer)."""
    base = dict(
        source="keras-fit",
        marker="Model.fit at train.py:30",
        count=1001,
        warmup=1,
        median_s=0.001,
        total_s=1.6,
        input_wait_fraction=0.2,
        input_wait_median_s=0.0002,
        input_wait_source="tf.data gap timer",
    )
    return StepFacts(**{**base, **changes})


def train_step(**changes) -> TracedFunction:
    """1,001 calls: the one that traced took 2 s, the others 0.7 ms each."""
    base = dict(
        name="train_step",
        location="train.py:12",
        calls=1001,
        call_s=2.0 + 1000 * 0.0007,
        traces=1,
        traced_call_s=2.0,
    )
    return TracedFunction(**{**base, **changes})


def test_between_calls_is_the_typical_step_less_its_steady_calls_and_an_outside_wait():
    # Keras' fit: 1 ms the typical step, 0.7 ms in the call (its wait is inside it):
    # 0.3 ms outside; the steps' mean (1.6 ms: a retrace, a collection) is not used
    assert between_calls(fit_steps(), train_step()) == pytest.approx(0.0003)
    # a Python loop's next(): the wait (0.2 ms) is outside the call, not host work
    loop = fit_steps(input_wait_source="next() timing")
    assert between_calls(loop, train_step()) == pytest.approx(0.0001)
    # steps_per_execution=4: one call every 4 steps (1 ms a step, 2.8 ms the call)
    spe = fit_steps(count=4004, warmup=4, total_s=6.4)
    assert between_calls(spe, train_step(call_s=2.0 + 1000 * 0.0028)) == pytest.approx(0.0003)
    # nothing to measure with: no steady call, no typical step
    assert between_calls(fit_steps(), train_step(calls=1)) is None
    assert between_calls(fit_steps(median_s=None), train_step()) is None
    assert between_calls(None, train_step()) is None
    # Keras' validation calls a function of the same name and place: 1,300 calls for
    # 1,001 training steps cannot be told apart, so nothing between them is measured
    assert between_calls(fit_steps(), train_step(calls=1300, instances=2)) is None
    # with steps_per_execution the calls are fewer than the steps: Keras' step function
    # standing for two (training and validation) is enough to tell
    keras = train_step(name="multi_step_on_iterator", calls=400, instances=2)
    assert between_calls(fit_steps(), keras) is None
    assert between_calls(fit_steps(), train_step(calls=1001, instances=2)) is not None


def test_an_input_that_holds_up_every_other_step_is_not_host_work():
    # Keras' fit fed by a pipeline that makes a batch in 240 ms: half the calls wait
    # 240 ms for it (the wait is inside the call), half find one ready (2 ms). The median
    # step is a waiting one, the calls' mean is of both kinds: 121 ms apart, none of it
    # the host's own work (the steps' mean, the calls' own steps, says so)
    waits = fit_steps(median_s=0.2405, total_s=1000 * 0.1215, input_wait_fraction=0.98)
    calls = train_step(call_s=2.0 + 1000 * 0.121)
    assert between_calls(waits, calls) == pytest.approx(0.0005)
    # a Python loop's next() waiting on every other step: each step less its own wait
    durations = tuple([0.050] + [0.2425, 0.0025] * 500)
    loop_waits = tuple([None] + [0.240, 0.0001] * 500)
    loop = fit_steps(
        count=1001,
        median_s=0.2425,
        total_s=500 * 0.245,
        input_wait_fraction=500 * 0.2401 / (500 * 0.245),
        input_wait_median_s=0.0001,
        input_wait_source="next() timing",
        durations=durations,
        input_waits=loop_waits,
    )
    assert between_calls(loop, train_step(call_s=2.0 + 1000 * 0.002)) == pytest.approx(
        0.0004, abs=1e-4
    )


def test_the_time_between_calls_timed_in_a_row_is_read_directly():
    # Keras' fit of 0.5 ms steps whose hooks paused: the calls timed (the first ones, a
    # fifth of each second after) average 0.49 ms, the median step is 0.48 ms, and their
    # difference says the fit loop costs nothing; the spans between two timed calls in a
    # row measure it: 20 µs
    steps = fit_steps(median_s=0.00048, total_s=1000 * 0.0005)
    timed = dict(call_s=2.0 + 1000 * 0.00049)
    assert between_calls(steps, train_step(**timed)) == 0.0
    direct = train_step(**timed, gap_median_s=0.00002, gaps=600)
    assert between_calls(steps, direct) == pytest.approx(0.00002)
    # too few spans to take a median from: the difference stands
    assert between_calls(steps, train_step(**timed, gap_median_s=0.00002, gaps=5)) == 0.0
    # steps_per_execution=4: one span every 4 steps
    spe = fit_steps(count=4004, warmup=4, total_s=6.4)
    calls = train_step(call_s=2.0 + 1000 * 0.0028, gap_median_s=0.0012, gaps=900)
    assert between_calls(spe, calls) == pytest.approx(0.0003)
    # Keras' fit fed by a pipeline that holds up every other call (inside it): the
    # spans between calls are the loop's own, whatever the calls waited
    waits = fit_steps(median_s=0.2405, total_s=1000 * 0.1215, input_wait_fraction=0.98)
    slow = train_step(call_s=2.0 + 1000 * 0.121, gap_median_s=0.0005, gaps=999)
    assert between_calls(waits, slow) == pytest.approx(0.0005)
    # a Python loop's next() waits outside the calls, inside the spans: the step less
    # the calls and the wait, as before
    loop = fit_steps(input_wait_source="next() timing")
    assert between_calls(loop, train_step(gap_median_s=0.0003, gaps=999)) == pytest.approx(0.0001)
    # Keras' validation's calls of the same function: nothing measured, spans or not
    keras = train_step(calls=1300, instances=2, gap_median_s=0.0003, gaps=1200)
    assert between_calls(fit_steps(), keras) is None


def _profile(overhead: float | None, function: str = "train_step", spread=None) -> StepProfile:
    return StepProfile(
        function, 4, 0.001, (), 0, (), call_overhead_s=overhead, call_overhead_range_s=spread
    )


def test_a_calls_own_cost_comes_from_the_profile_and_never_exceeds_the_call():
    tracing = TracingFacts(functions=(train_step(),))
    host = host_work(fit_steps(), tracing, TRAIN, _profile(0.0004))
    assert host is not None
    assert (host.between_s, host.call_overhead_s) == pytest.approx((0.0003, 0.0004))
    assert host.band.mid == pytest.approx(0.0007)
    assert (host.band.low, host.band.high) == pytest.approx((0.00035, 0.00105))
    assert "0.4 ms per call of train_step outside its ops" in host.note
    # the profiled calls ran slower: their own cost is capped at the untraced whole call
    capped = host_work(fit_steps(), tracing, TRAIN, _profile(0.005))
    assert capped is not None and capped.call_overhead_s == pytest.approx(0.0007)
    # the calls ranged 0.3-0.6 ms: the band keeps the range
    spread = host_work(fit_steps(), tracing, TRAIN, _profile(0.0004, spread=(0.0003, 0.0006)))
    assert spread is not None
    assert (spread.band.low, spread.band.high) == pytest.approx((0.0003, 0.00135))
    assert "0.3 ms–0.6 ms over most calls" in spread.note
    # validation merged in: the call's own cost once a step, nothing between measured
    merged = TracingFacts(functions=(train_step(calls=1300, instances=2),))
    once = host_work(fit_steps(), merged, TRAIN, _profile(0.0004))
    assert once is not None and once.between_s is None and once.calls_per_step == 1.0
    assert once.band.mid == pytest.approx(0.0004)
    assert "as a validation does" in once.note
    # another function's profile, or none: the call's cost is said not measured
    other = host_work(fit_steps(), tracing, TRAIN, _profile(0.0004, "eval_step"))
    assert other is not None and other.call_overhead_s is None
    assert "not measured: the call's own cost" in other.note
    assert host_work(None, tracing, TRAIN, None) is None


def test_the_host_bounds_a_small_step_and_overlaps_a_large_one():
    tracing = TracingFacts(functions=(train_step(),))
    steps, profile = fit_steps(), _profile(0.0004)
    small = Facts(placement=placement(), tracing=tracing)  # a GPU step well under 0.7 ms
    found = projection_facts(small, "A100", None, steps, None, profile=profile)
    assert found.host_s == pytest.approx(0.0007)
    assert found.step_s == pytest.approx(0.0007)  # the host sets the pace
    assert found.host_between_s == pytest.approx(0.0003)
    assert found.call_overhead_s == pytest.approx(0.0004)
    assert any(note.startswith("the host's own work, measured here") for note in found.notes)
    assert "most of it the host's own work" in projection_clause(found)
    assert (
        "the host's own work 700.0 µs (350.0 µs–1.1 ms, measured here)"
        in (projection_lines(found)[0])
    )
    ops = [b.tensor_op(flops=2e11, function=TRAIN, gradient=True)]  # ~6.4 ms on an A100
    large = Facts(placement=placement(tensor_ops=ops), tracing=tracing)
    alone = projection_facts(Facts(placement=placement(tensor_ops=ops)), "A100")
    hidden = projection_facts(large, "A100", None, steps, None, profile=profile)
    assert hidden.step_s == pytest.approx(alone.step_s)  # the GPU's work hides it
    assert hidden.step_high_s == pytest.approx(alone.step_high_s + 0.00105)  # or adds
    # the host does not set that step's pace: the verdict does not say it does
    assert "host's own work" not in projection_clause(hidden)
    # a step that waits for its input is said to wait, not what its compute is made of
    waiting = Finding("input.projected-bound", "high", "waits")
    assert "host's own work" not in projection_clause(found, [waiting])


def test_eager_ops_between_the_calls_are_counted_once():
    """Keras' fit issues two eager ops after each call: their time is in the time
    between the calls, not added again at ops x their gap."""
    tracing = TracingFacts(functions=(train_step(),))
    eager = EagerFacts(sampled_steps=40, ops=80, per_step=2.0, median_gap_us=100.0)
    facts = Facts(placement=placement(), tracing=tracing)
    found = projection_facts(facts, "A100", None, fit_steps(), eager)
    assert found.host_s == pytest.approx(0.0003)  # between the calls only
    assert found.eager_s == pytest.approx(0.0002)  # said, not added
    assert not any("Python issues 2 eager ops" in note for note in found.notes)
    # without a measure between the calls, Python issuing them is the host's part
    bare = projection_facts(Facts(placement=placement()), "A100", None, fit_steps(), eager)
    assert bare.host_s == 0.0 and any("Python issues 2 eager ops" in n for n in bare.notes)


def test_a_step_whose_host_work_was_not_measured_says_why():
    merged = TracingFacts(functions=(train_step(calls=1300, instances=2),))
    facts = Facts(placement=placement(), tracing=merged)
    found = projection_facts(facts, "A100", None, fit_steps(), unprofiled="the run ended")
    assert found.host_s == 0.0
    (note,) = [n for n in found.notes if n.startswith("the host's own work per step")]
    assert "train_step also ran outside the training steps (1,300 calls for" in note
    assert "a validation, or calls beside the loop)" in note
    assert "the call: the run ended" in note
    other = projection_facts(facts, "A100", None, fit_steps(), profile=_profile(0.001, "eval"))
    assert any("the profiled calls were of eval" in n for n in other.notes)


def test_an_epoch_s_last_call_that_finds_no_data_is_not_work_beside_the_steps():
    """fit calls its step once more each epoch and finds no data: 3 calls more than
    the steps over 3 epochs; the time between the calls is still measured."""
    from gpuwhy.projection.host import called_outside_steps

    steps = fit_steps()
    epoch_ends = train_step(calls=steps.count + 3)
    assert not called_outside_steps(steps, epoch_ends)
    assert called_outside_steps(steps, train_step(calls=steps.count * 2))
    host = host_work(steps, TracingFacts(functions=(epoch_ends,)), TRAIN, _profile(0.0004))
    assert host is not None and host.between_s is not None


def test_a_call_its_ops_span_whole_costs_nothing_of_its_own_and_is_said_measured():
    """Keras fit's calls: the iterator's ops start as the call does, so the profile
    measures no cost of the call's own (0, not unmeasured), and no note says the steps
    were not profiled or that no op ran on the host."""
    tracing = TracingFacts(functions=(train_step(),))
    host = host_work(fit_steps(), tracing, TRAIN, _profile(0.0, spread=(0.0, 0.0)))
    assert host is not None and host.call_overhead_s == 0.0
    assert "per call of train_step outside its ops" in host.note
    assert "over most calls" not in host.note  # no range where there is none
    assert "not measured" not in host.note
    # a profile whose calls ran no op on the host: the call's own cost is said why
    none = host_work(fit_steps(), tracing, TRAIN, _profile(None))
    assert none is not None and "the profiled calls measured none" in none.note
    unprofiled = host_work(fit_steps(), tracing, TRAIN, None, "the run ended before")
    assert unprofiled is not None and "(the run ended before)" in unprofiled.note


def several_loops() -> tuple[StepFacts, TracedFunction]:
    """keras-io's custom-loop guide: two tf.data loops of 400 eager steps (18 ms each,
    0.2 ms of it waiting for the batch), then the same step traced as ``train_step``
    (1.3 ms a step: 0.9 ms in the call, 0.2 ms waiting, 0.2 ms of loop between calls),
    all kept one by one; the traced loop's first step traced (60 ms)."""
    from gpuwhy.facts import StepLoop, TraceSignature

    eager, traced = 0.018, 0.0013
    starts, durations, waits = [], [], []
    t = 3.0
    for k in range(3):
        for i in range(400):
            d = traced if k == 2 else eager
            if i == 0:
                d = 0.06 if k == 2 else 0.03
            starts.append(t)
            durations.append(d)
            waits.append(0.0002)
            t += d
        t += 0.5  # the epoch's report between loops
    loops = tuple(
        StepLoop("tf-data", f"ctl.py:{line}", 400, starts[400 * k], starts[400 * k + 399],
                 traced if k == 2 else eager)
        for k, line in enumerate((61, 93, 151))
    )  # fmt: skip
    steps = StepFacts(
        source="tf-data",
        marker="ctl.py:61",
        count=1200,
        warmup=3,
        later_warmup=(400, 800),
        median_s=eager,
        total_s=sum(durations) - 0.12,
        input_wait_fraction=1200 * 0.0002 / (sum(durations) - 0.12),
        input_wait_median_s=0.0002,
        input_wait_source="next() timing",
        starts=tuple(starts),
        durations=tuple(durations),
        input_waits=tuple(waits),
        loops=loops,
    )
    function = train_step(
        calls=400,
        call_s=0.06 + 399 * 0.0009,
        traced_call_s=0.06,
        signatures=(TraceSignature(at_s=starts[800] + 0.001, args=()),),
        gap_median_s=0.0004,
        gaps=399,
    )
    return steps, function


def test_the_projected_functions_own_loop_is_the_step_projected_among_several():
    """The traced step's host work is its own loop's (0.2 ms between its calls), not the
    pool of all three loops' (13 ms of the eager loops' Python read as between its calls)."""
    from gpuwhy.derived.loop_steps import loop_steps
    from gpuwhy.projection.host import function_loop

    steps, function = several_loops()
    assert function_loop(steps, function) == steps.loops[2]
    own = loop_steps(steps, steps.loops[2])
    assert own.count == 400 and own.warmup == 1 and own.median_s == 0.0013
    assert len(own.durations) == 400 and own.input_wait_median_s == pytest.approx(0.0002)
    assert own.total_s == pytest.approx(399 * 0.0013)
    assert between_calls(own, function) == pytest.approx(0.0002)
    facts = Facts(placement=placement(), tracing=TracingFacts(functions=(function,)))
    # eager ops counted in the eager loops' steps only: none added to the traced step
    eager = EagerFacts(
        sampled_steps=80, ops=80 * 250, per_step=250.0, dispatch_fraction=0.9,
        median_gap_us=60.0, of_loops=("ctl.py:61", "ctl.py:93"),
    )  # fmt: skip
    found = projection_facts(facts, "A100", None, steps, eager)
    assert found.host_between_s == pytest.approx(0.0002)
    assert found.host_s == pytest.approx(0.0002)
    assert not found.eager_s
    # one loop: as before, the run's steps are the loop's
    alone = replace(steps, loops=steps.loops[2:])
    assert function_loop(alone, function) is None
