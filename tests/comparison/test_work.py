"""The program's CPU time per step and the runs' fastest steps: read from the timeline's
whole training windows and the steps kept one by one, compared between runs, and calling
a step-time change only where both measures agree."""

from __future__ import annotations

import random

from gpuwhy.comparison.model import Change
from gpuwhy.comparison.work import cpu_per_step, fast_between, fast_steps, resolved, work_between
from gpuwhy.facts import Facts, RunTimeline, RunWindow, StepFacts


def run(share: float, steps_per_window: int = 100, windows: int = 6) -> Facts:
    """A run whose training windows each hold ``steps_per_window`` steps at ``share`` of
    all cores; the first window is start-up (no steps, another share)."""
    rows = [RunWindow(0.0, steps=0, cpu_process_share=0.9)]
    rows += [
        RunWindow(float(i), steps=steps_per_window, cpu_process_share=share)
        for i in range(1, windows + 1)
    ]
    return Facts(timeline=RunTimeline(width_s=1.0, run_s=windows + 1.0, windows=tuple(rows)))


def test_the_first_and_last_training_windows_are_left_out():
    facts = run(0.5)
    edge = list(facts.timeline.windows)
    edge[1] = RunWindow(1.0, steps=10, cpu_process_share=1.0)  # tracing, start-up
    edge[-1] = RunWindow(6.0, steps=3, cpu_process_share=0.1)  # the end
    facts = Facts(timeline=RunTimeline(1.0, 7.0, windows=tuple(edge)))
    assert cpu_per_step(facts) == 0.5 / 100


def test_too_few_training_windows_or_unread_cpu_give_nothing():
    assert cpu_per_step(run(0.5, windows=3)) is None
    unread = run(0.5)
    rows = list(unread.timeline.windows)
    rows[3] = RunWindow(3.0, steps=100)
    assert cpu_per_step(Facts(timeline=RunTimeline(1.0, 7.0, windows=tuple(rows)))) is None


def test_ten_percent_more_work_per_step_is_called_slower():
    before = [run(0.500), run(0.502), run(0.498)]
    after = [run(0.550), run(0.551), run(0.549)]
    change = work_between(before, after)
    assert change is not None and change.called == "slower"
    assert 1.09 < change.estimate < 1.11


def step(called: str, estimate: float, detectable: float) -> Change:
    return Change(
        "step_time", 1.0, estimate, estimate, estimate - 0.1, estimate + 0.1, called, detectable
    )


def test_the_cpu_time_calls_what_the_step_time_leaves_open_only_when_both_agree():
    work = Change("cpu_per_step", 1.0, 1.1, 1.1, 1.08, 1.12, "slower", 0.02)
    called, how = resolved(step("same", 1.08, 0.09), work)
    assert called is not None and called.called == "slower"
    assert how is not None and "CPU time per step" in how and "same way" in how
    # the step time points the other way: the direct measure is kept
    called, how = resolved(step("same", 0.97, 0.09), work)
    assert called is not None and called.called == "same" and how is None
    # a looser CPU interval calls nothing
    loose = Change("cpu_per_step", 1.0, 1.1, 1.1, 1.01, 1.2, "slower", 0.2)
    assert resolved(step("same", 1.08, 0.09), loose)[0].called == "same"


def test_when_both_call_opposite_ways_the_step_time_is_trusted_and_said_so():
    work = Change("cpu_per_step", 1.0, 0.9, 0.9, 0.88, 0.92, "faster", 0.02)
    called, how = resolved(step("slower", 1.2, 0.05), work)
    assert called is not None and called.called == "slower"
    assert how is not None and "the step time, the direct measure, is trusted" in how


def kept(durations: list[float], warmup: int = 2, all_kept: bool = True) -> Facts:
    starts, t = [], 10.0
    for d in durations:
        starts.append(t)
        t += d
    return Facts(
        steps=StepFacts(
            source="tf-data",
            marker="loop",
            count=len(durations),
            warmup=warmup,
            starts=tuple(starts),
            durations=tuple(durations),
            all_kept=all_kept,
        )
    )


def noisy_run(seed: int, step_s: float, stalled: float) -> Facts:
    """A run of steps of ``step_s`` where the machine lengthened a share ``stalled`` of
    them by up to twice (another process held the core): the warm-up first."""
    rng = random.Random(seed)
    steps = [0.5, 0.2]
    for _ in range(400):
        d = step_s * rng.uniform(0.99, 1.01)
        if rng.random() < stalled:
            d *= rng.uniform(1.2, 2.0)
        steps.append(d)
    return kept(steps)


def test_the_fastest_steps_are_the_tenth_percentile_after_warm_up_of_any_kept_steps():
    facts = kept([9.0, 9.0, *[0.001 * (i + 1) for i in range(100)]])
    assert fast_steps(facts) == 0.010  # 10th of the 100 after warm-up
    # a long run keeps its first steps only: those are read
    assert fast_steps(kept([9.0, 9.0, *[0.002] * 40], all_kept=False)) == 0.002
    assert fast_steps(kept([9.0, 9.0, *[0.002] * 20])) is None  # too few


def test_a_change_the_machine_s_noise_hides_in_the_mean_is_called_by_the_fastest_steps():
    # each run's mean moves with how much the machine held it (10 % to 45 % of steps),
    # its fastest steps do not: every step of AFTER is 10 % longer
    shares_b, shares_a = (0.10, 0.45, 0.25), (0.40, 0.12, 0.30)
    before = [noisy_run(i, 0.002, s) for i, s in enumerate(shares_b)]
    after = [noisy_run(10 + i, 0.0022, s) for i, s in enumerate(shares_a)]
    fast = fast_between(before, after)
    assert fast is not None and fast.called == "slower" and 1.08 < fast.estimate < 1.12
    open_step = step("same", fast.estimate, 0.15)  # the means' spread resolves 15 % only
    called, how = resolved(open_step, None, fast)
    assert called is not None and called.called == "slower"
    assert how is not None and "fastest steps" in how and "same way" in how


def test_the_tightest_agreeing_measure_calls_and_one_that_disagrees_in_size_does_not():
    work = Change("cpu_per_step", 1.0, 1.1, 1.1, 1.05, 1.15, "slower", 0.05)
    fast = Change("fast_steps", 1.0, 1.1, 1.1, 1.08, 1.12, "slower", 0.02)
    called, how = resolved(step("same", 1.1, 0.15), work, fast)
    assert called is not None and called.called == "slower"
    assert how is not None and "fastest steps" in how
    # the step time leans the same way but far beyond what the measure saw: two changes
    far = Change("fast_steps", 1.0, 1.02, 1.02, 1.01, 1.03, "slower", 0.01)
    assert resolved(step("same", 1.1, 0.15), None, far)[0].called == "same"
