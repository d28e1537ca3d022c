"""The training loop's wall time per step (trial/judge.py), what a fix is judged on where
it and the steps alone disagree: fit's validation between epochs is in it. And a fix of
many steps a call measured over the same steps as the original."""

from __future__ import annotations

from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.comparison.model import Change
from gpuwhy.facts import Facts, StepFacts, StepLoop, StepTimeline
from gpuwhy.trial.judge import (
    loop_change,
    loop_note,
    loop_per_step,
    loop_speaks,
    main_loop_change,
    same_warmup,
    step_change,
)


def loop(steps: int, step_s: float, every: int = 0, pause_s: float = 0.0) -> Facts:
    """``steps`` steps of ``step_s``, a pause of ``pause_s`` (a validation) every
    ``every`` steps; the first step a warm-up of a second."""
    starts, t = [], 5.0
    for i in range(steps):
        starts.append(t)
        t += 1.0 if i == 0 else step_s
        if every and i and i % every == 0:
            t += pause_s
    facts = StepFacts(
        source="keras-fit",
        marker="keras-fit",
        count=steps,
        warmup=1,
        median_s=step_s,
        starts=tuple(starts),
        loops=(StepLoop("keras-fit", "train.py:9", steps, starts[0], starts[-1], step_s),),
    )
    return Facts(steps=facts)


def test_the_loop_per_step_counts_what_happens_between_steps_after_warm_up():
    assert abs(loop_per_step(loop(101, 0.01)) - 0.01) < 1e-9
    # a 0.5 s validation every 20 steps: 4 of them between the first kept step and the last
    assert abs(loop_per_step(loop(101, 0.01, 20, 0.5)) - (0.99 + 2.0) / 99) < 1e-9


def test_a_step_twice_as_fast_beside_a_validation_that_dominates_is_a_small_gain():
    before = [loop(101, 0.02, 20, 1.0), loop(101, 0.021, 20, 1.0)]
    after = [loop(101, 0.01, 20, 1.0), loop(101, 0.0105, 20, 1.0)]
    change = loop_change(before, after)
    assert change is not None and 0.8 < change.estimate < 0.9  # not the steps' 0.5


def test_no_loop_time_without_one_loop_or_enough_steps():
    assert loop_per_step(Facts()) is None
    assert loop_per_step(loop(8, 0.01)) is None
    two = loop(101, 0.01)
    assert two.steps is not None
    first = two.steps.loops[0]
    two = Facts(steps=StepFacts(**{**two.steps.__dict__, "loops": (first, first)}))
    assert loop_per_step(two) is None
    assert loop_change([loop(101, 0.01)], [loop(101, 0.01)]) is None  # one run a side


def test_the_loop_time_is_named_in_the_loop_s_own_terms():
    fit = loop(101, 0.01)
    assert "validation and callbacks included: the steps alone were 2.00x" in loop_note([fit], 2)
    assert fit.steps is not None
    custom = Facts(steps=StepFacts(**{**fit.steps.__dict__, "source": "tf-data"}))
    note = loop_note([custom], 1.5)
    assert "everything the loop does between its steps included" in note
    assert "validation" not in note


def test_a_call_of_many_steps_is_one_start_and_the_loop_time_is_per_step():
    """steps_per_execution=32: each start is a call of 32 steps, the warm-up (32 steps)
    one call; 48 calls of 32 steps at 0.4 ms a step are 12.8 ms a call."""
    calls, per_call, step_s = 48, 32, 0.0004
    starts = tuple(
        5.0 + (1.0 if i else 0.0) + max(0, i - 1) * per_call * step_s for i in range(calls)
    )
    facts = StepFacts(
        source="keras-fit",
        marker="keras-fit",
        count=calls * per_call,
        warmup=per_call,
        steps_per_call=per_call,
        median_s=step_s,
        starts=starts,
        loops=(
            StepLoop("keras-fit", "train.py:9", calls * per_call, starts[0], starts[-1], step_s),
        ),
    )
    per_step = loop_per_step(Facts(steps=facts))
    assert per_step is not None and abs(per_step - step_s) < 1e-9


def fit_run(calls: int, per_call: int, step_s: float, first_pass: int, first_s: float, warmup: int):
    """A fit of ``calls`` calls of ``per_call`` steps (steps_per_execution), all kept: the
    first ``first_pass`` steps ``first_s`` each (a cache filling), the rest ``step_s``."""
    durations, starts, t = [], [], 5.0
    for i in range(calls):
        seconds = sum(first_s if i * per_call + j < first_pass else step_s for j in range(per_call))
        starts.append(t)
        durations.append(seconds)
        t += seconds
    count = calls * per_call
    return Facts(
        steps=StepFacts(
            source="keras-fit",
            marker="keras-fit",
            count=count,
            warmup=warmup,
            steps_per_call=per_call,
            median_s=step_s,
            total_s=sum(durations),
            starts=tuple(starts),
            durations=tuple(durations),
            all_kept=True,
            timeline=StepTimeline(width_s=1.0),
            loops=(StepLoop("keras-fit", "train.py:9", count, starts[0], starts[-1], step_s),),
        )
    )


def test_a_fix_of_many_steps_a_call_is_measured_from_the_original_s_step_too():
    """The original runs a step a call and leaves 5 out; the fix (steps_per_execution=32)
    leaves its first two calls out, 64 steps: the whole first pass, 27 ms a step, that
    fills a cache. Measured from their own warm-ups, the fix would gain the first pass
    too; from the same step, both are measured with the same part of it."""
    original = [fit_run(2560, 1, 0.0015, 64, 0.027, warmup=5) for _ in range(2)]
    fixed = [fit_run(80, 32, 0.0005, 64, 0.027, warmup=64) for _ in range(2)]
    aligned = same_warmup([*original, *fixed])
    assert [f.steps.warmup for f in aligned if f.steps] == [64, 64, 64, 64]
    change = step_change(aligned[:2], aligned[2:])
    assert change is not None and abs(change.estimate - 0.0005 / 0.0015) < 1e-3
    unaligned = step_change(original, fixed)
    assert unaligned is not None and unaligned.estimate < 0.25  # the first pass counted once


def test_the_steps_of_a_call_after_warm_up_are_counted_in_steps_not_calls():
    """80 calls of 32 steps, 64 of them warm-up: the 78 calls after it are 2,496 steps
    (not the 16 calls after the 64th)."""
    (facts,) = [fit_run(80, 32, 0.0005, 0, 0.0, warmup=64)]
    units = run_units(facts)
    assert units.step_count == 78 * 32


def epochs_of(sizes: list[int], step_s: float, per_call: int) -> Facts:
    """A fit whose epochs run calls of ``sizes`` steps each (steps_per_execution
    ``per_call``: an epoch's last call runs fewer), ``step_s`` a step, the first call
    tracing for a second; every call kept, as the collector writes it."""
    starts, durations, t = [], [], 5.0
    for i, n in enumerate(sizes):
        seconds = n * step_s + (1.0 if i == 0 else 0.0)
        starts.append(t)
        durations.append(seconds)
        t += seconds
    count = sum(sizes)
    steps = StepFacts(
        source="keras-fit", marker="keras-fit", count=count, warmup=sizes[0],
        median_s=step_s, total_s=sum(durations[1:]), steps_per_call=per_call,
        starts=tuple(starts), durations=tuple(durations),
        call_steps=tuple(sizes) if any(n != per_call for n in sizes) else (),
        all_kept=True, timeline=StepTimeline(width_s=1.0),
        loops=(StepLoop("keras-fit", "train.py:9", count, starts[0], starts[-1], step_s),),
    )  # fmt: skip
    return Facts(steps=steps)


def test_an_epoch_s_short_last_call_is_its_own_steps_not_a_whole_call_s():
    """A VAE's fit: 2 epochs of 55 steps at 42 ms, steps_per_execution=32 runs each as a
    call of 32 and one of 23. Divided as 32 steps, the short calls read 78 kept steps as
    96 and the fix 1.22x faster where it was the same (keras-io's vae.py, here)."""
    original = [epochs_of([1] * 110, 0.042, 1) for _ in range(3)]
    fixed = [epochs_of([32, 23, 32, 23], 0.042, 32) for _ in range(3)]
    aligned = same_warmup([*original, *fixed])
    units = run_units(aligned[3])
    assert units.step_count == 78
    change = step_change(aligned[:3], aligned[3:])
    assert change is not None and abs(change.estimate - 1) < 1e-6
    assert change.called == "same"
    (b, a) = (loop_per_step(aligned[0]), loop_per_step(aligned[3]))
    assert b is not None and a is not None and abs(a / b - 1) < 1e-6


def variant(seconds: float, ended: str = "completed"):
    from gpuwhy.facts import ProgramFacts
    from gpuwhy.record import Record
    from gpuwhy.trial.variant_runs import VariantRun

    program = ProgramFacts(command=("loop.py",), ended=ended, seconds=seconds)
    record = Record(command="run", facts=Facts(program=program))
    return VariantRun("v", 0, seconds + 5, record, "", "", None)


def test_with_no_step_found_runs_that_ended_on_their_own_compare_the_whole_program():
    """A loop over NumPy slices marks no step; each run ended within the bound, so the
    program's own run time is what both sides share: 13.6 s against 5.1 s is a gain."""
    from gpuwhy.trial.judge import program_change

    before = [variant(13.6), variant(13.9), variant(13.4)]
    after = [variant(5.1), variant(5.3), variant(5.0)]
    change = program_change(before, after)
    assert change is not None and change.called == "faster"
    assert 0.35 < change.estimate < 0.4
    # a run the bound stopped ran the bound's time: no comparison
    assert program_change([*before[:2], variant(30.0, "stopped")], after) is None
    assert program_change(before[:1], after[:1]) is None  # one a side: no spread


def test_a_fix_of_one_call_an_epoch_is_measured_over_the_same_epochs_as_the_original():
    """3 epochs of 20 steps of 40 ms and a validation of 0.4 s after each; the first step
    traces for a second. steps_per_execution=32 makes each epoch one call of 20 steps:
    its first call (the trace) is the warm-up, as the original's first step, and both
    are measured over epochs 2 and 3 to their last step's end, validation between them
    once: the same work, the same time (it read 0.63x measured from call starts)."""

    def run(per_call: int, warmup: int) -> Facts:
        starts, durations, t = [], [], 5.0
        for epoch in range(3):
            for call in range(20 // per_call):
                first = epoch == 0 and call == 0
                seconds = (1.0 if first else 0.0) + per_call * 0.04
                starts.append(t)
                durations.append(seconds)
                t += seconds
            t += 0.4  # validation
        steps = StepFacts(
            source="keras-fit", marker="keras-fit", count=60, warmup=warmup, median_s=0.04,
            steps_per_call=per_call, starts=tuple(starts), durations=tuple(durations),
            loops=(StepLoop("keras-fit", "train.py:9", 60, starts[0], starts[-1], 0.04),),
        )  # fmt: skip
        return Facts(steps=steps)

    before = same_warmup([run(1, 1), run(1, 1)])
    after = same_warmup([run(20, 0), run(20, 0)])
    measured = same_warmup([*before, *after])
    assert [f.steps.warmup for f in measured] == [20, 20, 20, 20]
    (b, _, a, _) = [loop_per_step(f) for f in measured]
    assert b is not None and a is not None and abs(a / b - 1) < 1e-9
    assert abs(b - (40 * 0.04 + 0.4) / 40) < 1e-9


def test_the_loop_judges_only_where_its_runs_tell_it_from_the_steps():
    steps = Change("step_time", 1.0, 0.33, 0.33, 0.31, 0.35, "faster", 0.06)
    # a validation that dominates: the loop's tight interval leaves the steps' 3x out
    tight = Change("loop_time", 1.0, 0.85, 0.85, 0.8, 0.9, "faster", 0.06)
    assert loop_speaks(steps, tight)
    # an epoch's slow last read in one run: the loop's interval holds the steps' change
    loose = Change("loop_time", 1.0, 0.48, 0.48, 0.22, 1.04, "same", 1.2)
    assert not loop_speaks(steps, loose)
    # agreeing: the steps stand
    assert not loop_speaks(steps, Change("loop_time", 1.0, 0.34, 0.34, 0.3, 0.38, "faster", 0.1))


def test_a_fix_between_the_steps_is_judged_by_the_loop_whatever_the_steps_say():
    """predict() made predict_on_batch() between a DQN's one-batch fits: the fit steps
    are as long as before (a little longer, even), the loop runs 0.9 s less a second.
    Judged by its steps it would be no gain; by the loop's time it is one."""
    from dataclasses import replace

    from gpuwhy.record import Record
    from gpuwhy.trial.judge import _speed
    from gpuwhy.trial.variant_runs import VariantRun

    def run(step_s: float, pause_s: float) -> VariantRun:
        facts = loop(101, step_s, 1, pause_s)
        assert facts.steps is not None
        durations = tuple(step_s for _ in facts.steps.starts)
        facts = replace(facts, steps=replace(facts.steps, durations=durations, all_kept=True))
        return VariantRun("v", 0, 10.0, Record(command="run", facts=facts), "", "", None)

    before = [run(0.003, 0.2), run(0.0031, 0.21), run(0.003, 0.19)]
    after = [run(0.0034, 0.02), run(0.0035, 0.021), run(0.0034, 0.019)]
    speed = _speed(before, after, by_loop=True)
    assert speed["called"] == "faster" and speed["speedup"] > 5
    assert speed["speed_note"].startswith("the training loop's wall time per step")


def test_a_fix_that_moves_what_marks_the_steps_is_compared_on_what_the_program_prints(tmp_path):
    """predict() made predict_on_batch() takes away the dataset reads at whose 2nd, 6th
    and 21st the trained variables are read: they fall at other points of the two runs
    (a DCGAN's batch-norm beta, -0.0046 against -0.0002, its printed losses the same).
    Such a fix is compared on what the program prints alone; train_on_batch writes no
    Keras logs either."""
    import json

    from gpuwhy.trial.judge import values_of
    from gpuwhy.trial.variant_runs import VariantRun

    results = tmp_path / "results.jsonl"
    rows = [
        {"kind": "variables", "index": 1, "values": {"bn/beta:0[128]#0": -0.0046}},
        {"kind": "epoch", "index": 0, "values": {"loss": 0.7}},
    ]
    results.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run = VariantRun("v", 0, 1.0, None, "step 0: d 0.693 a 0.701\n", str(results), None)
    assert values_of(run).source == "Keras' logs"
    printed = values_of(run, printed_only=True)
    assert printed.source == "printed output"
    assert all(not key.startswith(("variables", "epoch")) for key, _ in printed.items)
    assert sorted(v for _, v in printed.items) == [0.0, 0.693, 0.701]


def loops(*specs: tuple[str, int, float, float]) -> Facts:
    """A run's training loops, each (site, steps, first step's start, median step),
    given most steps first as the collector lists them."""
    made = tuple(StepLoop("tf-data", site, n, first, median_s=m) for site, n, first, m in specs)
    ordered = tuple(sorted(made, key=lambda one: -one.count))
    return Facts(steps=StepFacts(source="tf-data", marker="x", count=1, loops=ordered))


def test_a_fix_whose_runs_reach_other_loops_is_judged_on_its_own_loop():
    """keras-io's guide under a 30 s bound: the original got through its eager loop
    (9 ms steps); the fix made that loop 3 ms a step and its runs reached the later
    loops, the eager one and a tf.function loop of 0.5 ms, which made a '17x'. The
    original's main loop is judged against the loop at its place: about 3x."""
    before = [loops(("loop.py:65", 1872, 2.0, 0.0090)), loops(("loop.py:65", 1872, 2.1, 0.0092))]
    after = [
        loops(("loop.py:72", 1872, 2.0, 0.0031), ("loop.py:118", 1248, 9.0, 0.0090),
              ("loop.py:176", 1248, 21.0, 0.0005)),
        loops(("loop.py:72", 1872, 2.0, 0.0030), ("loop.py:118", 1248, 9.0, 0.0091),
              ("loop.py:176", 1248, 21.0, 0.0005)),
    ]  # fmt: skip
    change = main_loop_change(before, after)
    assert change is not None and 0.3 < change.estimate < 0.36
    # the same loops on both sides: the steps' own measure stands
    assert main_loop_change(before, before) is None
    # a fix's run that never reached the loop's place: not judged this way
    two = loops(("a.py:1", 10, 1.0, 0.01), ("a.py:9", 90, 5.0, 0.01))
    one = loops(("a.py:1", 10, 1.0, 0.01))
    assert main_loop_change([two, two], [one, one]) is None


def test_a_fix_outside_the_training_loop_is_measured_on_the_program_s_run_time():
    """One-batch predict() calls after fit made predict_on_batch(): judged by each run's
    own time, 15 s against 11 s, whatever its steps say."""
    from gpuwhy.trial.candidate import FixCandidate
    from gpuwhy.trial.judge import judge

    note = "the compiled function runs the same batch"
    candidate = FixCandidate("steps.keras-call-per-step", "f", (), by_program_time=True, note=note)
    before = [variant(15.2), variant(14.9), variant(15.1)]
    after = [variant(11.0), variant(11.2), variant(10.9)]
    tried = judge(candidate, before, after, device_here=False)
    assert tried.note == note  # what the person pasting it should know, in the record
    assert tried.called == "faster" and tried.speed_note is not None
    assert "the calls it changes run outside the training steps" in tried.speed_note
    assert 1.3 < (tried.speedup or 0) < 1.45


def test_a_fix_of_one_of_several_loops_is_measured_on_that_loop():
    """keras-io's custom-loop guide trains three loops of 400 steps: an eager one, the
    eager one the fix traces (18 ms -> 8.7 ms a step), a tf.function one. Pooled, the
    change read 1.02x; the loop at the fix's place, in every run, is what it changed.
    The fix's edit moves the loop's line (93 -> 100): it is found by its place."""
    from gpuwhy.record import Record
    from gpuwhy.trial.judge import FIXED_LOOP, _speed
    from gpuwhy.trial.variant_runs import VariantRun

    def run(second_s: float, second_at: str) -> VariantRun:
        loops = (
            StepLoop("tf-data", "ctl.py:61", 400, 3.0, 10.0, 0.017),
            StepLoop("tf-data", second_at, 400, 11.0, 18.0, second_s),
            StepLoop("tf-data", "ctl.py:151", 400, 19.0, 20.0, 0.0009),
        )
        steps = StepFacts(source="tf-data", marker="m", count=1200, median_s=0.017, loops=loops)
        return VariantRun(
            "v", 0, 25.0, Record(command="run", facts=Facts(steps=steps)), "", "", None
        )

    before = [run(0.0182, "ctl.py:93"), run(0.0190, "ctl.py:93"), run(0.0171, "ctl.py:93")]
    after = [run(0.0079, "ctl.py:100"), run(0.0108, "ctl.py:100"), run(0.0077, "ctl.py:100")]
    speed = _speed(before, after, location="ctl.py:93")
    assert speed["speed_note"] == FIXED_LOOP and speed["called"] == "faster"
    assert 1.8 < speed["speedup"] < 2.3
    # a location that is no loop's (a compile line), or one loop only: as before
    assert _speed(before, after, location="ctl.py:20").get("speed_note") != FIXED_LOOP


def test_a_run_that_timed_no_step_is_left_out_where_two_a_side_timed_theirs():
    """helper-57's weather forecast: a steps_per_execution=32 fix's first run, slowed by
    the machine, timed no step after its warm-up (epochs of one call of 20 steps); the
    fix was judged on the whole program's time and said no training step was found,
    beside its other three runs of 60 steps timed. Those three are judged; with one
    run a side left, nothing is."""
    original = [epochs_of([1] * 60, 0.08, 1) for _ in range(3)]
    fixed = [epochs_of([1], 0.05, 1)] + [epochs_of([1] * 60, 0.05, 1) for _ in range(3)]
    aligned = same_warmup([*original, *fixed])
    assert run_units(aligned[3]).step_count == 0
    change = step_change(aligned[:3], aligned[3:])
    assert change is not None and abs(change.estimate - 0.625) < 1e-3
    assert step_change(aligned[:1], aligned[3:5]) is None
