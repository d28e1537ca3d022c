"""The run's timeline: every source on one grid that fits the whole run, from small facts
(the layout) and from a real TensorFlow loop watched by a real session."""

import numpy as np
import pytest

from gpuwhy.collect.inprocess.functions import CallWindows
from gpuwhy.collect.inprocess.timeline import laid_out, resident_bytes
from gpuwhy.facts import EagerFacts, GpuSamplesFacts, GpuSeries, StepFacts, StepSpan, StepTimeline
from gpuwhy.facts.gpu_samples import WindowSpread


def steps_over(width: float, spans: list[StepSpan]) -> StepFacts:
    return StepFacts(
        source="tf-data", marker="x", count=sum(s.steps for s in spans),
        timeline=StepTimeline(width_s=width, windows=tuple(spans)),
    )  # fmt: skip


def test_steps_eager_gpus_and_memory_share_the_windows_of_the_whole_run():
    run_s = 1000.0  # 1,000 s: windows of 4 s (250 of them)
    spans = [
        StepSpan(start_s=0.0, steps=10, p50_s=0.1, p90_s=0.2, max_s=0.3, step_s=1.2,
                 input_wait_s=0.6),
        StepSpan(start_s=996.0, steps=5, p50_s=0.5, p90_s=0.6, max_s=0.7, step_s=2.5),
    ]  # fmt: skip
    eager = EagerFacts(sampled_steps=4, ops=40, windows=((0.0, 4, 40),))
    # one GPU, windowed: two windows of samples (3 and 2 samples), at 1 s and 997 s
    gpu = GpuSeries(
        index=0, name="H100", t=(1.0, 997.0), t_last=(1.2, 997.1), counts=(3, 2),
        samples_per_window=3, utilization=(0.5, 0.9), sm_clock_mhz=(1980.0, 1400.0),
        memory_used_bytes=(2e9, 3e9),
        spread=(
            WindowSpread("utilization", known=(3, 2), low=(0.2, 0.8), high=(0.7, 1.0)),
            WindowSpread("sm_clock_mhz", known=(3, 2), low=(1980.0, 1300.0), high=(1980, 1500)),
            WindowSpread("memory_used_bytes", known=(3, 2), low=(2e9, 3e9), high=(2e9, 3.5e9)),
        ),
    )  # fmt: skip
    rows = {0: {"host_rss_max_bytes": 700_000_000, "traces": 2}, 249: {"host_rss_max_bytes": 9}}
    timeline = laid_out(run_s, steps_over(4.0, spans), eager, GpuSamplesFacts(10, (gpu,)), rows)
    assert timeline.width_s == 4.0 and timeline.run_s == run_s
    first, last = timeline.windows
    assert (first.start_s, last.start_s) == (0.0, 996.0)
    assert (first.steps, first.step_p50_s, first.input_wait_share) == (10, 0.1, 0.5)
    assert last.input_wait_share is None  # not timed
    assert (first.eager_ops_per_step, first.eager_sampled_steps) == (10.0, 4)
    assert (first.traces, first.host_rss_max_bytes, last.host_rss_max_bytes) == (2, 700_000_000, 9)
    (g0,), (g1,) = first.gpus, last.gpus
    assert (g0.samples, g0.utilization, g0.utilization_max) == (3, 0.5, 0.7)
    assert (g1.samples, g1.sm_clock_mhz, g1.sm_clock_min_mhz) == (2, 1400.0, 1300.0)
    assert g1.memory_used_max_bytes == 3_500_000_000


def test_a_day_is_256_windows_of_512_seconds():
    spans = [StepSpan(start_s=i * 512.0, steps=1, p50_s=1, p90_s=1, max_s=1, step_s=1)
             for i in range(169)]  # fmt: skip
    timeline = laid_out(86_400.0, steps_over(512.0, spans), None, None)
    assert timeline.width_s == 512.0 and len(timeline.windows) == 169


def test_a_watched_loop_has_a_timeline_from_its_first_step_to_its_last():
    tf = pytest.importorskip("tensorflow")
    from gpuwhy.modes.run.session import Session

    ds = tf.data.Dataset.from_tensor_slices(np.arange(400, dtype="float32")).batch(4)
    w = tf.Variable(1.0)

    @tf.function
    def step(x):
        w.assign_add(tf.reduce_sum(x) * 1e-3)

    with Session(hz=5, audit=False) as session:
        for x in ds:
            step(x)
    facts = session.record.facts
    timeline = facts.timeline
    assert timeline is not None and timeline.run_s == pytest.approx(facts.steps.run_s, abs=1e-5)
    assert sum(w.steps for w in timeline.windows) == facts.steps.count == 100
    assert timeline.windows[0].host_rss_max_bytes > 0
    assert sum(w.traces for w in timeline.windows) >= 1  # `step` was traced
    assert sum(w.trace_s for w in timeline.windows) > 0  # and its tracing took time
    assert resident_bytes() > 0


def test_gpu_windows_carry_the_slowdowns_the_heat_and_the_link_of_their_samples():
    from tests.collect.test_sampler import replay

    capped, _ = replay("constructed_a100_power_cap.jsonl")  # SW power cap from 120 s
    timeline = laid_out(300.0, None, None, capped)
    gpus = [(w.start_s, w.gpus[0]) for w in timeline.windows]
    before = [g for start, g in gpus if start + timeline.width_s <= 120.0]
    after = [g for start, g in gpus if start >= 120.0]
    assert before and after
    assert all(g.throttle_share == 0.0 and g.throttle_reasons == () for g in before)
    assert all(g.throttle_share == 1.0 and g.throttle_reasons == ("sw_power_cap",) for g in after)
    assert {g.temperature_max_c for g in after} == {71}
    assert {g.power_limit_w for g in before + after if g.power_limit_w is not None} == {300.0}
    gen2, _ = replay("constructed_a100_pcie_gen2.jsonl")
    windows = [w.gpus[0] for w in laid_out(6.0, None, None, gen2).windows]
    assert {(g.pcie_gen_busy_min, g.pcie_width_busy_min) for g in windows} == {(2, 16)}
    assert sum(g.pcie_replays or 0 for g in windows) == 33
    healthy, _ = replay("constructed_a100_healthy_link.jsonl")
    windows = [w.gpus[0] for w in laid_out(8.0, None, None, healthy).windows]
    assert {g.pcie_gen_busy_min for g in windows} == {None, 4}  # idle windows: not judged
    assert {g.throttle_reasons for g in windows} == {()}  # GPU idle is no slowdown
    shared, _ = replay("constructed_h100_busy.jsonl")  # a notebook holds 2 GiB beside it
    windows = [w.gpus[0] for w in laid_out(4.0, None, None, shared).windows]
    assert {g.others_memory_max_bytes for g in windows} == {2 * 1024**3}  # read once a second


def test_seconds_are_placed_over_the_windows_they_ran_through():
    # a call or a trace is placed where it ran, each window its part: a 0.7 s trace of a
    # loop's first step, read as a total at the next poll, landed a window late
    windows = CallWindows(10.0).calls
    windows.capacity = 4
    CallWindows.place(windows, 10.5, 12.5, 2.0)
    assert [(s, w.value) for s, w in windows.items()] == [(10.0, 0.5), (11.0, 1.0), (12.0, 0.5)]
    CallWindows.place(windows, 12.5, 19.0, 6.5)  # past four windows: they merge to 4 s
    assert windows.width == 4.0
    assert [(s, w.value) for s, w in windows.items()] == [(10.0, 3.5), (14.0, 4.0), (18.0, 1.0)]
    CallWindows.place(windows, 19.0, 19.0, 0.25)  # no length: all at its moment
    CallWindows.place(windows, 8.0, 10.5, 2.5)  # before the start: in the first window
    assert [(s, w.value) for s, w in windows.items()] == [(10.0, 6.0), (14.0, 4.0), (18.0, 1.25)]


def test_calls_and_the_calls_that_traced_are_in_the_rows_of_the_windows_they_ran_in():
    placed = CallWindows(0.0)
    placed.place_calls(4.6, 5.3, 0.7)  # the loop's first call, tracing: over two windows
    placed.place(placed.traced_calls, 4.6, 5.3, 0.7)
    placed.place(placed.tracing, 4.6, 5.2, 0.6)
    placed.traces.at(4.6).value += 1
    for i in range(100):  # short calls: each whole in the window it began in
        placed.place_calls(5.5 + i * 0.001, 5.5005 + i * 0.001, 0.0005)
    rows = placed.rows(1.0)
    assert rows[4]["traced_call_s"] == pytest.approx(0.4)
    assert rows[5]["traced_call_s"] == pytest.approx(0.3)
    assert rows[4]["function_call_s"] == pytest.approx(0.4)
    assert rows[5]["function_call_s"] == pytest.approx(0.3 + 0.05)
    assert rows[4]["traces"] == 1 and "traces" not in rows[5]
    assert rows[4]["trace_s"] == pytest.approx(0.4) and rows[5]["trace_s"] == pytest.approx(0.2)
    coarse = placed.rows(2.0)  # read at a coarser width, the windows merged
    assert coarse[2]["function_call_s"] == pytest.approx(0.75)


def test_calls_and_traces_of_fit_s_validation_are_not_the_training_steps():
    """fit's validation runs between the training steps: its first call traces (0.07 s
    beside steps of 1 ms) and was read as tracing inside the steps."""
    placed = CallWindows(0.0)
    placed.between_steps = lambda t: 5.5 <= t <= 5.7
    placed.place_calls(5.2, 5.201, 0.001)  # a training step
    placed.place_calls(5.53, 5.6, 0.07)  # validation's first call, tracing
    placed.place_traced_call(5.53, 5.6)
    placed.place_trace(5.531, 0.045)
    rows = placed.rows(1.0)
    assert rows == {5: {"function_call_s": 0.001}}
