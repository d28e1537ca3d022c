"""A fix's runs against the original's, judged three ways: it ran (every run ended as
the original's did), it computes the same (same_results), it is faster (the step time
of its runs against the original's, with the interval of ``gpuwhy diff``'s model:
each run one observation, the between-run spread measured from the runs).

Where the training loop's wall time per step (fit's validation, callbacks and the time
between steps included) disagrees with the steps' (its estimate outside their interval),
the loop's is the one judged, and the report says what the steps alone gave.

A fix *holds* when it ran, computed the same and was called faster. A fix whose effect
is on a GPU, tried on a machine without one, holds when it ran, computed the same and
its step projected onto ``--target`` (each run's traced graph through the cost model)
is at least 5 % faster over the whole band: a prediction, said to be; without ``--target`` nothing
shows its gain, and it is not kept.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import replace

from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.comparison.model import Change
from gpuwhy.comparison.work import (
    fast_between,
    levels_between,
    ratio_between,
    resolved,
    work_between,
)
from gpuwhy.facts import Facts, FixTried, StepLoop
from gpuwhy.fixes.trial_text import CALLS_OUTSIDE, WHOLE_PROGRAM
from gpuwhy.trial.candidate import FixCandidate
from gpuwhy.trial.same_results import (
    RTOL,
    Values,
    compare,
    printed_values,
    read_values,
    tolerance_text,
)
from gpuwhy.trial.variant_runs import VariantRun

# a projected gain is claimed where the whole band is at least this much faster: the
# cost model's own error is larger than a percent or two
MIN_PROJECTED_GAIN = 1.05
MIN_LOOP_STEPS = 10  # steps after warm-up a loop's wall time per step is read over
MIN_TIMED_RUNS = 2  # runs a side that timed steps, for the steps' time to judge a fix


def values_of(
    run: VariantRun, printed_only: bool = False, not_results: str | None = None
) -> Values:
    """What the run reported; only what it printed where the fix changes what marks
    the other sources (``FixCandidate.printed_only``); less the printed lines that say
    what the fix changes by design (``FixCandidate.not_results``, matched against each
    printed line's text, its numbers taken out)."""
    if printed_only:
        printed = printed_values(run.stdout)
        values = Values("printed output" if printed else "none", tuple(printed))
    else:
        values = read_values(run.results_path, run.stdout)
    if not_results is None:
        return values
    pattern = re.compile(not_results, re.IGNORECASE)
    kept = tuple((key, value) for key, value in values.items if not pattern.search(key))
    if len(kept) == len(values.items):
        return values
    left = len({key.split("|", 1)[0] for key, _ in values.items if pattern.search(key)})
    lines = "line" if left == 1 else "lines"
    source = f"{values.source} ({left} printed {lines} of what the fix changes left out)"
    return Values(source if kept else "none", kept)


def ended_well(run: VariantRun) -> bool:
    if run.error is not None or run.status not in (0,) or run.record is None:
        return False
    program = run.record.facts.program
    return program is None or program.ended in ("completed", "stopped")


def judge(
    candidate: FixCandidate,
    originals: Sequence[VariantRun],
    runs: Sequence[VariantRun],
    device_here: bool,
) -> FixTried:
    base = FixTried(
        finding=candidate.finding,
        fix=candidate.fix,
        location=candidate.location,
        runs=len(runs),
        edits=len(candidate.edits),
        note=candidate.note,
        projected=candidate.device_effect and not device_here,
        tolerance=tolerance_text(candidate.tolerance or RTOL, candidate.tolerance_why),
    )
    failed = next((r for r in runs if not ended_well(r)), None)
    if failed is not None or not runs:
        error = failed.error if failed is not None else "not run"
        if failed is not None and error is None:
            error = f"exit status {failed.status}"
        return _with(base, ran=False, error=error)
    good = [o for o in originals if ended_well(o)]
    rtol = candidate.tolerance or RTOL
    by_mean = candidate.by_mean
    printed = candidate.printed_only
    not_results = candidate.not_results
    originals_values = [values_of(o, printed, not_results) for o in good]
    same = compare(originals_values, values_of(runs[0], printed, not_results), rtol, by_mean)
    if same.same is True:  # every run of the fix, not only the first
        for r in runs[1:]:
            later = compare(originals_values, values_of(r, printed, not_results), rtol, by_mean)
            if later.same is False:
                same = later
                break
    speed = (
        _speed_fields(program_change(good, runs), CALLS_OUTSIDE)
        if candidate.by_program_time
        else _speed(good, runs, candidate.by_loop_time, candidate.location)
    )
    projection = _projected(good, runs) if base.projected else {}
    if base.projected:  # on a GPU machine: measured like any fix
        low = projection.get("projected_speedup_low") or 0.0
        held = same.same is True and low >= MIN_PROJECTED_GAIN
    else:
        held = same.same is True and speed.get("called") == "faster"
    return _with(
        base,
        ran=True,
        same_results=same.same,
        compared=same.how,
        difference=same.first_difference or same.largest_difference,
        held=held,
        **speed,
        **projection,
    )


def step_change(before: Sequence[Facts], after: Sequence[Facts]) -> Change | None:
    """AFTER's mean step over BEFORE's, each run one observation (its training steps'
    mean after warm-up), the interval from the runs' spread alone. Not floored by each
    run's own resampled spread as ``gpuwhy diff``'s is: a bounded run of a fix has a
    structure resampling breaks (a cache's slow first pass, then fast ones), while its
    runs, interleaved with the original's, agree. A run that timed no step after its
    warm-up (a fix's first, slowed by the machine, whose few calls of 20 steps were all
    warm-up) is left out where two runs a side remain: the weather forecast's
    steps_per_execution fix was judged on the whole program's time for one such run, and
    said that no training step was found, beside rounds of 60 steps timed."""
    units_b = [u for u in map(run_units, before) if u.step_count]
    units_a = [u for u in map(run_units, after) if u.step_count]
    if min(len(units_b), len(units_a)) < MIN_TIMED_RUNS:
        return None
    return ratio_between(
        "step_time",
        [u.seconds / u.step_count for u in units_b],
        [u.seconds / u.step_count for u in units_a],
    )


def loop_per_step(facts: Facts) -> float | None:
    """The training loop's wall time per step after its warm-up, from the first kept
    step's start to the last step's: what the steps alone leave out (fit's validation,
    callbacks and epoch set-up, the time between a custom loop's steps) is in it. None
    where the run trained in several loops or kept too few step starts."""
    steps = facts.steps
    if steps is None or len(steps.loops) != 1:
        return None
    last, count = steps.loops[0].last_s, steps.loops[0].count
    # a Keras call of N steps (steps_per_execution) is one start; counts are in steps
    per_call = max(1, steps.steps_per_call)
    sizes = steps.kept_call_steps  # an epoch's last call may run fewer than N
    first = steps.first_after_warmup
    before = sum(sizes[:first])  # the warm-up's steps
    if last is None or len(steps.starts) <= first:
        return None
    end = last
    if not steps.all_kept:  # from that call's start to the last one's start
        ran = count - before - per_call
    elif len(steps.durations) == len(steps.starts):
        # to the last call's end: a fix of one call an epoch (steps_per_execution) would
        # otherwise be measured without its last epoch, the original without one step
        end, ran = steps.starts[-1] + steps.durations[-1], sum(sizes[first:])
    else:
        ran = sum(sizes[first:-1])
    if ran < MIN_LOOP_STEPS:
        return None
    span = end - steps.starts[first]
    return span / ran if span > 0 else None


def loop_change(before: Sequence[Facts], after: Sequence[Facts]) -> Change | None:
    """AFTER's loop time per step over BEFORE's (each run one observation)."""
    return levels_between("loop_time", loop_per_step, before, after)


def loop_note(before: Sequence[Facts], steps_alone: float) -> str:
    """Why the loop's time judged the fix, in the loop's terms: fit's validation and
    callbacks, or what a custom loop does between its steps."""
    fit = any(f.steps is not None and f.steps.source == "keras-fit" for f in before)
    between = (
        "validation and callbacks included"
        if fit
        else "everything the loop does between its steps included"
    )
    return (
        f"the training loop's wall time per step, {between}: "
        f"the steps alone were {steps_alone:.2f}x"
    )


def same_warmup(facts: Sequence[Facts]) -> list[Facts]:
    """The runs with one warm-up, the longest any of them had (in steps, rounded up to
    whole calls): a fix that runs 32 steps a call (steps_per_execution) leaves its first
    calls out, 64 steps, where the original leaves out 5; compared from their own
    warm-ups, the fix would be measured without the slow first steps (a cache filling,
    tracing) the original is measured with."""
    calls = [f.steps for f in facts if f.steps is not None]
    if not calls:
        return list(facts)
    common = max(-(-s.warmup // max(1, s.steps_per_call)) * max(1, s.steps_per_call) for s in calls)
    # and whole calls of every run: the original's one step of warm-up is a whole call of
    # 20 steps where a fix runs an epoch of 20 in one call, else the fix's first call
    # (its trace) would be measured, the original's not
    whole = math.lcm(*(max(1, s.steps_per_call) for s in calls))
    common = -(-common // whole) * whole
    return [
        f
        if f.steps is None or f.steps.warmup >= common or f.steps.count <= common
        else replace(f, steps=replace(f.steps, warmup=common))
        for f in facts
    ]


def loop_speaks(steps: Change, loop: Change) -> bool:
    """Whether the loop's wall time per step, not the steps', judges a fix: where the two
    disagree (a faster step the validation between epochs outweighs: the loop is what the
    user waits for), each outside the other's interval. Where the loop's own interval
    holds the steps' change, its runs cannot tell the two apart (an epoch's last read
    waiting on the pipeline's threads, 2 runs a side: 0.96x-4.56x about steps 3.05x
    faster), and the steps, the direct measure, stand."""
    return not (steps.low <= loop.estimate <= steps.high) and not (
        loop.low <= steps.estimate <= loop.high
    )


def _speed(
    originals: Sequence[VariantRun],
    runs: Sequence[VariantRun],
    by_loop: bool = False,
    location: str | None = None,
) -> dict:
    measured = same_warmup([r.record.facts for r in (*originals, *runs) if r.record is not None])
    before = measured[: sum(1 for r in originals if r.record is not None)]
    after = measured[len(before) :]
    if not before or not after:
        return {}
    if by_loop:  # the steps alone leave out what the fix changes
        loop = loop_change(before, after)
        if loop is not None:
            return _speed_fields(loop, LOOP_TIME)
        return _speed_fields(program_change(originals, runs), WHOLE_PROGRAM)
    own = fixed_loop_change(before, after, location)
    if own is not None:
        return _speed_fields(own, FIXED_LOOP)
    moved = main_loop_change(before, after)
    if moved is not None:
        return _speed_fields(moved, MAIN_LOOP)
    change, how = resolved(
        step_change(before, after), work_between(before, after), fast_between(before, after)
    )
    if change is None:
        change, how = program_change(originals, runs), WHOLE_PROGRAM
    if change is None:
        return {}
    loop = loop_change(before, after)
    if loop is not None and loop_speaks(change, loop):
        how = loop_note(before, 1 / change.estimate)
        change = loop
    return _speed_fields(change, how)


MAIN_LOOP = (
    "the median step of the original's main loop, against the loop at its place in the "
    "fix's runs: the runs trained in other loops too, which the bounded runs reached "
    "as far as each side's pace let them"
)


def _loops_in_order(facts: Facts) -> list[StepLoop]:
    steps = facts.steps
    return sorted(steps.loops, key=lambda loop: loop.first_s) if steps is not None else []


def _main_place(facts: Facts) -> int | None:
    """Where the main loop (most steps) comes among the run's loops, first begun first."""
    steps = facts.steps
    if steps is None or not steps.loops:
        return None
    return _loops_in_order(facts).index(steps.loops[0])


FIXED_LOOP = (
    "the median step of the loop the fix changes, against the loop at its place in the "
    "fix's runs: the program's other loops, the same on both sides, left out"
)


def fixed_loop_change(
    before: Sequence[Facts], after: Sequence[Facts], location: str | None
) -> Change | None:
    """Where the runs trained in several loops and the fix is made at one of them (its
    location is that loop's, in every original run), that loop against the loop at the
    same place in each fix's run, by their median steps: pooled with the others, the
    same on both sides, a loop made twice as fast read 1.02x (keras-io's custom training
    loop guide: an eager loop, the eager loop the fix traces, a tf.function loop, 400
    steps each). None otherwise, or where a run lacks the loop at that place."""
    if location is None or not before:
        return None
    places = set()
    for facts in before:
        loops = _loops_in_order(facts)
        at = [i for i, loop in enumerate(loops) if loop.name == location]
        if len(loops) < 2 or len(at) != 1:
            return None
        places.add(at[0])
    if len(places) != 1:
        return None
    (place,) = places
    return _medians_at(before, after, place)


def _medians_at(before: Sequence[Facts], after: Sequence[Facts], place: int) -> Change | None:
    """The median steps of the loop at ``place`` (in order of their starts), AFTER's
    over BEFORE's; None where a run has no loop there."""
    medians = [
        [loops[place].median_s if len(loops := _loops_in_order(f)) > place else None for f in side]
        for side in (before, after)
    ]
    if any(m is None or m <= 0 for side in medians for m in side):
        return None
    return ratio_between(
        "step_time", [m or 0.0 for m in medians[0]], [m or 0.0 for m in medians[1]]
    )


def main_loop_change(before: Sequence[Facts], after: Sequence[Facts]) -> Change | None:
    """Where the fix's runs trained in another set of loops than the original's (keras-io's
    guide: an eager loop, a second one, a tf.function loop; a run bounded at 30 s got
    through the first only, and its fix, three times faster, into the third, whose
    0.5 ms steps then made a '17x'), the original's main loop against the loop at the
    same place in each fix's run, by their median steps: a fix changes how fast its
    loop runs, never which loops the program has. None where every run has the same
    loops (the steps' own measure compares like with like) or a place is missing."""
    places = {_main_place(f) for f in before}
    if len(places) != 1 or None in places:
        return None
    (place,) = places
    assert place is not None
    shapes = {len(f.steps.loops) if f.steps is not None else 0 for f in (*before, *after)}
    if len(shapes) == 1 and all(_main_place(f) == place for f in after):
        return None
    return _medians_at(before, after, place)


LOOP_TIME = (
    "the training loop's wall time per step, everything between its steps included (what "
    "the fix changes runs there: a Keras call around each batch, an epoch's end)"
)


def _speed_fields(change: Change | None, how: str | None) -> dict:
    if change is None:
        return {}
    return {
        "speed_note": how,
        "step_before_s": change.before,
        "step_after_s": change.after,
        "speedup": round(1 / change.estimate, 3),
        "speedup_low": round(1 / change.high, 3),
        "speedup_high": round(1 / change.low, 3),
        "called": change.called,
    }


def program_change(originals: Sequence[VariantRun], runs: Sequence[VariantRun]) -> Change | None:
    """The program's own run time, AFTER's over BEFORE's, where no step was timed but
    every run (two a side at least) ended on its own within the bound: the whole
    program is then the one measure both sides share. None otherwise (a run the bound
    stopped ran the bound's time, whatever the fix did)."""
    programs = [r.record.facts.program if r.record else None for r in (*originals, *runs)]
    if any(p is None or p.ended != "completed" for p in programs):
        return None  # one stopped by the bound (ended "stopped"), or failed: no comparison
    seconds = [
        [p.seconds if p is not None else 0.0 for p in side]
        for side in (programs[: len(originals)], programs[len(originals) :])
    ]
    if any(len(side) < 2 or min(side) <= 0 for side in seconds):
        return None
    return ratio_between("program_time", seconds[0], seconds[1])


def _projected(originals: Sequence[VariantRun], runs: Sequence[VariantRun]) -> dict:
    """The step projected onto ``--target`` (each run's traced graph through the cost
    model): the original's median projection against the fix's; the band, the ratio at
    the model's low and high ends too (one model error moves both variants' projections
    of one program alike, so the ends are compared end to end)."""
    before = [r.record.derived.projection for r in originals if r.record is not None]
    after = [r.record.derived.projection for r in runs if r.record is not None]
    if not before or not after or any(p is None for p in (*before, *after)):
        return {}
    b = [p for p in before if p is not None]
    a = [p for p in after if p is not None]
    mid_b = statistics.median(p.step_s for p in b)
    mid_a = statistics.median(p.step_s for p in a)
    if mid_a <= 0:
        return {}
    ratios = [
        mid_b / mid_a,
        statistics.median(p.step_low_s for p in b)
        / max(statistics.median(p.step_low_s for p in a), 1e-12),
        statistics.median(p.step_high_s for p in b)
        / max(statistics.median(p.step_high_s for p in a), 1e-12),
    ]
    return {
        "projected_gpu": a[0].gpu,
        "projected_before_s": round(mid_b, 9),
        "projected_after_s": round(mid_a, 9),
        "projected_speedup": round(ratios[0], 3),
        "projected_speedup_low": round(min(ratios), 3),
        "projected_speedup_high": round(max(ratios), 3),
    }


def _with(base: FixTried, **changes) -> FixTried:
    return replace(base, **changes)
