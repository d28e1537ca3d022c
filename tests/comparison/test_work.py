"""The program's CPU time per step: read from the timeline's whole training windows,
compared between runs, and calling a step-time change only where both measures agree."""

from __future__ import annotations

from gpuwhy.comparison.model import Change
from gpuwhy.comparison.work import cpu_per_step, resolved, work_between
from gpuwhy.facts import Facts, RunTimeline, RunWindow


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
