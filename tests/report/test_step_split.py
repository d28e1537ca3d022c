"""The line under the verdict: the median step split into the parts gpuwhy measured, as
one line of proportional bars, from small records (a run's split is the one `gpuwhy diff`
compares: comparison/comparable_units.py; a capture's, the GPU's kernels and the host's activities
while it idled) and from the real H100 capture."""

import math
import random
import statistics
from pathlib import Path

import pytest

from gpuwhy.facts import (
    CaptureDevice,
    CaptureFacts,
    CaptureStep,
    EagerFacts,
    Facts,
    HostShare,
    RunTimeline,
    RunWindow,
    StepFacts,
    StepLoop,
    StepSpan,
    StepTimeline,
)
from gpuwhy.modes.capture import diagnose_capture
from gpuwhy.record import Record
from gpuwhy.report.run.step_bars import run_bars
from gpuwhy.report.run.step_split import BAR_WIDTH, LOOKS, bar_cells, split_line, step_split
from gpuwhy.report.run.terminal import TerminalRenderer

H100 = Path(__file__).parents[1] / "data" / "xplane" / "h100_slow_input"
STEP, WAIT, CALL = 0.010, 0.004, 0.005  # per step: 4 ms input, 5 ms in tf.function


def loop_facts(count: int = 300, eager_ops: float | None = None) -> Facts:
    """A Python loop of 10 ms steps over 1 s windows: 4 ms waiting for input (next()
    timing), 5 ms inside the step's tf.function, the rest the loop's own Python."""
    starts = [i * STEP for i in range(count)]
    spans, rows = [], []
    for w in range(int(count * STEP)):
        n = sum(1 for s in starts if w <= s < w + 1)
        spans.append(
            StepSpan(
                start_s=float(w),
                steps=n,
                p50_s=STEP,
                p90_s=STEP,
                max_s=STEP,
                step_s=n * STEP,
                input_wait_s=n * WAIT,
            )
        )
        rows.append(
            RunWindow(
                start_s=float(w),
                steps=n,
                function_call_s=n * CALL,
                eager_ops_per_step=eager_ops,
                eager_sampled_steps=n if eager_ops else 0,
            )
        )
    steps = StepFacts(
        source="tf-data",
        marker="loop",
        count=count,
        median_s=statistics.median([STEP] * count),
        input_wait_fraction=WAIT / STEP,
        input_wait_source="next() timing",
        starts=tuple(starts),
        durations=(STEP,) * count,
        input_waits=(WAIT,) * count,
        timeline=StepTimeline(width_s=1.0, windows=tuple(spans)),
        all_kept=True,
    )
    eager = (
        EagerFacts(
            sampled_steps=count, ops=int(eager_ops * count), per_step=eager_ops, median_gap_us=5.0
        )
        if eager_ops
        else None
    )
    return Facts(
        steps=steps,
        timeline=RunTimeline(width_s=1.0, run_s=count * STEP, windows=tuple(rows)),
        eager=eager,
    )


def test_the_median_step_splits_into_its_measured_parts():
    split = step_split(loop_facts())
    assert split is not None and split.step_s == STEP
    shares = {p.part: p.share for p in split.parts}
    assert shares == pytest.approx({"traced_step": 0.5, "input": 0.4, "python": 0.1})
    assert [p.part for p in split.parts] == ["traced_step", "input", "python"]  # largest first
    seconds = {p.part: p.seconds for p in split.parts}
    assert seconds["input"] == pytest.approx(0.004)


def long_steps_facts(count: int = 40, between: float = 0.0005) -> Facts:
    """A custom loop of steps of 0.4-1.5 s (a GAN on a CPU), back to back: each all inside
    its tf.function but ``between``. Step time lands in the window a step starts in, its
    call time in the windows it runs through (cut at their edges, as the timeline's rows
    are), so most windows hold one or two starts and some none."""
    rng = random.Random(3)
    durations = [rng.uniform(0.4, 1.5) for _ in range(count)]
    starts, t = [], 2.0
    for d in durations:
        starts.append(t)
        t += d
    end = t
    windows = range(2, math.ceil(end))
    spans, rows = [], []
    for w in windows:
        started = [i for i, s in enumerate(starts) if w <= s < w + 1]
        calls = sum(
            max(0.0, min(w + 1, s + d - between) - max(w, s)) for s, d in zip(starts, durations)
        )
        if started:
            step_s = sum(durations[i] for i in started)
            p50 = statistics.median(durations[i] for i in started)
            spans.append(StepSpan(float(w), len(started), p50, p50, p50, step_s))
        rows.append(RunWindow(start_s=float(w), steps=len(started), function_call_s=calls))
    steps = StepFacts(
        source="tf-function",
        marker="train_step",
        count=count,
        warmup=1,
        median_s=statistics.median(durations[1:]),
        total_s=sum(durations[1:]),
        starts=tuple(starts),
        durations=tuple(durations),
        loops=(StepLoop("tf-function", "train_step", count, starts[0], last_s=starts[-1]),),
        timeline=StepTimeline(width_s=1.0, windows=tuple(spans)),
        all_kept=True,
    )
    return Facts(steps=steps, timeline=RunTimeline(width_s=1.0, run_s=end, windows=tuple(rows)))


def test_steps_longer_than_a_window_show_no_python_between_calls_that_no_one_ran():
    split = step_split(long_steps_facts())
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    # 0.5 ms between calls of ~1 s steps: no Python part worth drawing
    assert shares.get("python", 0.0) < 0.01, shares
    assert shares["traced_step"] > 0.95
    # and where the loop does spend time between its calls, it is found
    slow = step_split(long_steps_facts(between=0.2))
    assert slow is not None
    python = {p.part: p.share for p in slow.parts}["python"]
    assert 0.15 < python < 0.3, python


def test_eager_dispatch_is_its_own_part_taken_from_the_pythons():
    split = step_split(loop_facts(eager_ops=100))  # 100 ops x 5 µs = 0.5 ms a step
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    assert shares["eager"] == pytest.approx(0.05)
    assert shares["python"] == pytest.approx(0.05)


def test_the_input_share_is_the_one_the_verdict_states():
    facts = loop_facts()
    steps = facts.steps
    assert steps is not None
    # the steps' whole-run figure (edges included) differs from the windows' a little
    skewed = Facts(
        steps=StepFacts(**{**steps.__dict__, "input_wait_fraction": 0.5}),
        timeline=facts.timeline,
    )
    split = step_split(skewed)
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    assert shares["input"] == pytest.approx(0.5)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["traced_step"] / shares["python"] == pytest.approx(5.0)  # kept in proportion


def test_the_verdicts_input_share_is_drawn_where_the_windows_did_not_time_it():
    """A notebook's second fit: too few windows had the gap timer's reading to split the
    wait there; the bar still draws the share the verdict states."""
    from dataclasses import replace

    facts = loop_facts()
    steps, timeline = facts.steps, facts.steps.timeline
    untimed = tuple(replace(w, input_wait_s=None) for w in timeline.windows)
    facts = replace(
        facts,
        steps=replace(steps, input_wait_fraction=0.12, timeline=replace(timeline, windows=untimed)),
    )
    split = step_split(facts)
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    assert shares["input"] == pytest.approx(0.12)
    assert sum(shares.values()) == pytest.approx(1.0)


def test_a_wait_the_steps_line_says_was_not_measured_is_not_drawn():
    """A next() loop beside fit's steps (tensorflow/text's text generation): the windows
    the loop timed have a wait, the run as a whole has none (the Steps line: 'input wait
    not measured for this kind of loop'). The bar drew the loop's windows' wait as the
    step's; it is the rest, not split, as the Steps line says."""
    from dataclasses import replace

    facts = loop_facts()
    windowed = {p.part: p.share for p in step_split(facts).parts}
    assert windowed["input"] > 0
    unmeasured = replace(facts, steps=replace(facts.steps, input_wait_fraction=None))
    shares = {p.part: p.share for p in step_split(unmeasured).parts}
    assert "input" not in shares
    assert shares["rest"] == pytest.approx(windowed.get("rest", 0.0) + windowed["input"])
    assert sum(shares.values()) == pytest.approx(1.0)


def test_no_split_without_enough_training_steps_or_a_timeline():
    assert step_split(loop_facts(count=20)) is None  # fewer than comparison's 30
    assert step_split(Facts()) is None
    facts = loop_facts()
    assert step_split(Facts(steps=facts.steps)) is not None  # the input part alone
    only_input = step_split(Facts(steps=facts.steps))
    assert only_input is not None
    assert {p.part for p in only_input.parts} == {"input", "rest"}  # the rest never guessed


@pytest.mark.parametrize(
    "shares", [[0.5, 0.4, 0.1], [0.98, 0.01, 0.01], [1 / 3, 1 / 3, 1 / 3], [1.0]]
)
def test_bars_are_proportional_and_every_part_shows(shares):
    cells = bar_cells(shares)
    assert sum(cells) == BAR_WIDTH and min(cells) >= 1
    for share, n in zip(shares, cells):
        assert abs(n - share * BAR_WIDTH) <= 1.5


def test_the_terminal_puts_the_split_between_the_verdict_and_the_findings():
    record = Record.diagnose("run", loop_facts())
    text = TerminalRenderer(color=False).render(record)
    lines = text.splitlines()
    assert lines[0].startswith(("✓", "✗", "•"))
    split = lines[1]
    assert split.startswith("Step (median 10.0 ms)  ")
    bar = split.split("  ")[1]
    glyphs = {part: LOOKS[part][1] for part in ("traced_step", "input", "python")}
    assert bar == glyphs["traced_step"] * 20 + glyphs["input"] * 16 + glyphs["python"] * 4
    assert "█ computing (in tf.function) 50% (5.0 ms)" in split
    assert "░ waiting for input 40% (4.0 ms)" in split
    findings = [i for i, line in enumerate(lines) if line[:2] in ("1.", "2.")]
    assert not findings or findings[0] > 1
    assert str(split_line(step_split(loop_facts()))) == split  # one line, as drawn


def capture(busy_share: float, idle: dict[str, float], gpu: bool = True) -> Facts:
    """Ten captured steps of 20 ms, the GPU busy ``busy_share`` of them, its idle time
    attributed to the host's activities (seconds over the ten steps)."""
    steps = tuple(
        CaptureStep(start_s=i * 0.02, duration_s=0.02, busy_s=0.02 * busy_share) for i in range(10)
    )
    total_idle = sum(idle.values()) or 1.0
    devices = (
        (
            CaptureDevice(
                name="/device:GPU:0",
                model="H100",
                streams=1,
                kernels=10,
                busy_s=0.2 * busy_share,
                kernel_time_s=0.2 * busy_share,
                tensor_core_s=0.0,
                matmul_s=0.0,
                matmul_tensor_core_s=0.0,
            ),
        )
        if gpu
        else ()
    )
    return Facts(
        capture=CaptureFacts(
            path="trace.xplane.pb",
            producer="tensorflow",
            span_s=0.2,
            devices=devices,
            steps=steps,
            step_count=10,
            idle=tuple(HostShare(a, s, s / total_idle) for a, s in idle.items()),
        )
    )


def test_a_captures_step_splits_into_the_gpus_kernels_and_the_hosts_activities():
    split = step_split(capture(0.25, {"input": 0.1, "dispatch": 0.04, "python": 0.01}))
    assert split is not None and split.step_s == pytest.approx(0.02)
    shares = {p.part: p.share for p in split.parts}
    assert shares == pytest.approx({"input": 0.5, "gpu": 0.25, "dispatch": 0.2, "python": 0.05})
    labels = {p.part: p.label for p in split.parts}
    assert labels["gpu"] == "GPU computing (kernels)"
    assert labels["dispatch"] == "launch and dispatch"


def test_a_capture_without_a_gpu_splits_the_whole_step_by_the_host():
    split = step_split(capture(0.0, {"compute": 0.1}, gpu=False))
    assert split is not None
    assert {p.part: p.share for p in split.parts} == pytest.approx({"compute": 0.5, "rest": 0.5})


def test_the_h100_captures_terminal_report_draws_its_split_under_the_verdict():
    text = TerminalRenderer(color=False).render(diagnose_capture(H100))
    split = text.splitlines()[1]
    assert split.startswith("Step (median 22.7 ms)  ")
    assert "░ waiting for input 96%" in split and "█ GPU computing (kernels) 3%" in split


def test_a_few_long_steps_make_the_bar_split_the_mean_step_that_holds_them():
    """Steps that traced (a few, long) hold most of the time: the median step holds none
    of it, so the shares are drawn over the mean step, and said to be."""
    from dataclasses import replace

    facts = loop_facts()
    steps = facts.steps
    assert steps is not None and steps.timeline is not None
    doubled = tuple(replace(w, step_s=2 * w.step_s) for w in steps.timeline.windows)
    longer = replace(steps, timeline=replace(steps.timeline, windows=doubled))
    split = step_split(replace(facts, steps=longer))
    assert split is not None and split.statistic == "mean"
    assert split.step_s == pytest.approx(2 * STEP)
    assert split_line(split).plain.startswith("Step (mean 20.0 ms)  ")
    plain = step_split(facts)
    assert plain is not None and plain.statistic == "median"


def test_the_bar_is_labelled_with_the_median_the_verdict_states():
    from dataclasses import replace

    facts = loop_facts()
    said = replace(facts, steps=replace(facts.steps, median_s=0.0103))
    split = step_split(said)
    assert split is not None and split.label == "median 10.3 ms"


def test_a_run_with_its_steps_totals_splits_its_mean_step_as_the_input_finding_says_it():
    """The input share is of the steps' totals: split over the mean step, the wait drawn
    is the one input.bound states ("a mean 6.0 ms of a 12.0 ms step"), where the median
    step split in the same share would draw a wait no one measured; the median is said
    beside it, and the steps' table says the wait the same way."""
    from dataclasses import replace

    from gpuwhy.formatting import GAP_TIMER, wait_in_time
    from gpuwhy.rules import run_rules

    facts = loop_facts()
    steps = replace(
        facts.steps, total_s=0.012 * 300, input_wait_fraction=0.5, input_wait_median_s=0.0045
    )
    facts = replace(facts, steps=steps)
    split = step_split(facts)
    assert split is not None and split.statistic == "mean"
    assert split.label == "mean 12.0 ms, median 10.0 ms"
    drawn = {p.part: p.seconds for p in split.parts}
    assert drawn["input"] == pytest.approx(0.006)
    findings, _ = run_rules(facts)
    (bound,) = [f for f in findings if f.id == "input.bound"]
    assert "(a mean 6.0 ms of a 12.0 ms step)" in bound.title
    said = wait_in_time(steps)
    assert said == " (a mean 6.0 ms of a 12.0 ms step; median 4.5 ms, by next() timing)"
    (bar,) = run_bars(facts)
    assert bar.total == "mean step 12.0 ms (median 10.0 ms)"
    # Keras fit's waits are not timed one by one: the gap timer's figure is the median
    # step less the median gap, which can exceed the mean wait; it is named so
    fit = replace(
        steps, input_wait_fraction=0.02, input_wait_median_s=0.0033, input_wait_source=GAP_TIMER
    )
    assert wait_in_time(fit) == (
        " (a mean 240.0 µs of a 12.0 ms step; typical 3.3 ms: the median step less "
        "tf.data's median gap, by tf.data gap timer)"
    )


def test_the_eager_share_is_the_one_launch_eager_ops_states():
    """The counter's sum of the gaps between eager ops (its direct measurement) where the
    windows estimate their count times the median gap; the difference comes out of the
    host's Python between the calls, which that estimate was cut from."""
    from dataclasses import replace

    facts = loop_facts(eager_ops=100)  # estimated: 5% eager, 5% Python
    measured = replace(facts, eager=replace(facts.eager, dispatch_fraction=0.08))
    shares = {p.part: p.share for p in step_split(measured).parts}
    assert shares["eager"] == pytest.approx(0.08) and shares["python"] == pytest.approx(0.02)
    more = replace(facts, eager=replace(facts.eager, dispatch_fraction=0.3))
    shares = {p.part: p.share for p in step_split(more).parts}
    assert shares["eager"] == pytest.approx(0.10) and "python" not in shares  # all of it
    assert sum(shares.values()) == pytest.approx(1.0)


def several_fits_facts(evaluate_at: float | None = None) -> Facts:
    """Four short fits one after the other, as a callbacks tutorial runs them: each
    fit's first call traces for 0.25-0.29 s, then steps of 1.2 ms, 1.0 ms of each in
    the traced train function. The last fit's first call begins 36 ms before a window
    and traces on into it; the timeline's rows hold a call's time where it ran, the
    steps' windows a step where it began (as the collectors keep them). ``evaluate_at``:
    an ``evaluate()`` between two fits at that time, its function traced (0.2 s), in the
    rows and no step."""
    calls: list[tuple[float, float, bool]] = []  # start, duration, traced
    t = 3.2
    for first, steps in ((0.278, 4), (0.245, 16), (0.244, 15), (0.294, 63)):
        calls.append((t, first, True))
        t += first
        for _ in range(steps - 1):
            calls.append((t, 0.0012, False))
            t += 0.0012
        t += 0.08  # between fits: compile, callbacks
    calls = [(round(s, 6), d, traced) for s, d, traced in calls]
    last_first = max(i for i, c in enumerate(calls) if c[2])
    shift = 4.963774 - calls[last_first][0]  # the last fit's first call: into window 5
    calls = calls[:last_first] + [(s + shift, d, x) for s, d, x in calls[last_first:]]
    end = calls[-1][0] + calls[-1][1]
    spans, rows = [], []
    for w in range(3, math.ceil(end)):
        started = [c for c in calls if w <= c[0] < w + 1]

        def ran(c: tuple[float, float, bool], w: int = w) -> float:
            return max(0.0, min(w + 1, c[0] + c[1]) - max(w, c[0]))

        outside = [(evaluate_at, 0.2, True)] if evaluate_at is not None else []
        traced = sum(ran(c) for c in calls + outside if c[2])
        inside = sum(ran(c) if c[2] else ran((c[0], 0.001, False)) for c in calls + outside)
        began = sum(1 for c in calls + outside if c[2] and w <= c[0] < w + 1)
        if started:
            per = sorted(c[1] for c in started)
            spans.append(
                StepSpan(float(w), len(started), per[len(per) // 2], per[-1], per[-1], sum(per))
            )
        rows.append(
            RunWindow(
                start_s=float(w),
                steps=len(started),
                function_call_s=inside,
                traced_call_s=traced,
                trace_s=0.9 * traced,
                traces=began,
            )
        )
    firsts = tuple(i for i, c in enumerate(calls) if c[2])
    steady = [c[1] for c in calls if not c[2]]
    steps = StepFacts(
        source="keras-fit",
        marker="Model.fit",
        count=len(calls),
        warmup=len(firsts),
        later_warmup=firsts[1:],
        median_s=statistics.median(steady),
        total_s=sum(steady),
        starts=tuple(c[0] for c in calls),
        durations=tuple(c[1] for c in calls),
        loops=(StepLoop("keras-fit", "Model.fit", len(calls), calls[1][0], last_s=calls[-1][0]),),
        timeline=StepTimeline(width_s=1.0, windows=tuple(spans)),
        all_kept=True,
    )
    return Facts(steps=steps, timeline=RunTimeline(width_s=1.0, run_s=end, windows=tuple(rows)))


def test_later_fits_first_calls_are_not_the_steady_steps_tracing():
    """A script of four short fits: each fit's first call traced, left out of the steps
    as warm-up; the bar splits the steady 1.2 ms step, of which 1.0 ms is in the traced
    function and none is tracing (it read "tracing tf.functions 81%" where the later
    fits' first calls fell in the main loop's windows, one of them tracing on into the
    next window)."""
    facts = several_fits_facts()
    split = step_split(facts)
    assert split is not None and split.step_s == pytest.approx(0.0012)
    shares = {p.part: p.share for p in split.parts}
    assert shares.get("tracing", 0.0) < 0.01, shares
    # the window the loop begins in has no row (it holds the first fit's warm-up calls
    # and their steps were trimmed of them: timeline_rows), so its steps are "the rest"
    split_ones = shares["traced_step"] + shares["python"]
    assert shares["traced_step"] / split_ones == pytest.approx(1.0 / 1.2, abs=0.02), shares
    assert shares["traced_step"] > 0.6, shares
    # an evaluate() between fits traces its function in the main loop's windows, outside
    # any step: not the steps' tracing either (it read "tracing 33%")
    evaluated = several_fits_facts(evaluate_at=4.40)
    split = step_split(evaluated)
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    assert shares.get("tracing", 0.0) < 0.01, shares
    assert shares["traced_step"] > 0.6, shares


def test_a_loop_that_retraces_at_every_step_keeps_its_tracing():
    """Every call traced (a Python float argument that changes): the traces are the
    steps', which the median step holds; they stay the bar's tracing part."""
    from dataclasses import replace

    facts = loop_facts()
    assert facts.timeline is not None
    rows = tuple(
        replace(r, traced_call_s=r.function_call_s, trace_s=0.8 * r.function_call_s, traces=r.steps)
        for r in facts.timeline.windows
    )
    split = step_split(replace(facts, timeline=replace(facts.timeline, windows=rows)))
    assert split is not None
    shares = {p.part: p.share for p in split.parts}
    assert shares["tracing"] == pytest.approx(0.5), shares  # the calls that traced, whole
