"""``gpuwhy diff BEFORE AFTER``: did the change make it faster? Two records compared, or
several a side.

The flow mirrors a run's: the records' facts -> resampling units (units.py) -> changes
with their intervals (changes.py, bootstrap.py; several runs a side: sides.py,
between_runs.py), the findings and the environment that changed (findings.py,
environment.py) -> :class:`Comparison` (model.py) -> the verdict.
Renderers are in report/diff/; the gate that fails a CI job is gate.py.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace

from gpuwhy.comparison.between_runs import Noise
from gpuwhy.comparison.changes import (
    busy_change,
    example_change,
    part_changes,
    projected_change,
    step_change,
)
from gpuwhy.comparison.environment import (
    HOST_LOAD,
    QUEUED,
    batch_size,
    environment_changes,
    host_changes,
    host_contention,
    program,
)
from gpuwhy.comparison.findings import finding_changes
from gpuwhy.comparison.model import (
    AlignedWindow,
    Change,
    Comparison,
    EnvironmentChange,
    FindingChange,
    PartChange,
    RunSide,
)
from gpuwhy.comparison.sides import (
    Side,
    busy_between,
    parts_between,
    side_findings,
    side_notes,
    step_between,
)
from gpuwhy.comparison.units import RunUnits, run_units
from gpuwhy.facts import Facts
from gpuwhy.formatting import duration
from gpuwhy.record import Record

BY_FACTOR = 1.25  # changes this large are said as a factor ("1.31x faster"), smaller in %


def compare(
    before: Record, after: Record, names: tuple[str, str] = ("BEFORE", "AFTER")
) -> Comparison:
    """Everything that differs between two records, each difference with its interval."""
    units_b, units_a = run_units(before.facts), run_units(after.facts)
    step = step_change(units_b, units_a)
    batch_b, batch_a = batch_size(before.facts), batch_size(after.facts)
    batches = (batch_b, batch_a) if batch_b and batch_a and batch_b != batch_a else None
    example = example_change(step, *batches) if batches else None
    busy = busy_change(units_b, units_a)
    parts, notes = part_changes(units_b, units_a, before.facts, after.facts)
    parts = _shares_of_a_change(parts, example or step)
    projected, projected_on = projected_change(before.facts, after.facts)
    if projected is None and projected_on is not None:
        notes = (*notes, projected_on)
        projected_on = None
    notes = (
        *_about_the_pair(before, after),
        *_why_not_compared(units_b, units_a, step, busy),
        *notes,
        ONE_RUN_A_SIDE,
    )
    environment = environment_changes(before.facts, after.facts)
    confounded = _confounded([before.facts], [after.facts], example or step)
    return Comparison(
        verdict=diff_verdict(step, busy, parts, environment, confounded, example, batches),
        before=_side(names[0], before, units_b),
        after=_side(names[1], after, units_a),
        step_time=step,
        example_time=example,
        batches=batches,
        gpu_busy=busy,
        projected_step=projected,
        projected_gpu=projected_on,
        parts=parts,
        findings=finding_changes(before.findings, after.findings),
        environment=environment,
        notes=notes,
        timeline_before=units_b.aligned,
        timeline_after=units_a.aligned,
        confounded_by=confounded,
    )


ONE_RUN_A_SIDE = (
    "one run a side: the intervals are each run's own spread, which cannot see how far "
    "another run of the same code lands (on a shared machine, often several per cent); "
    "record 3 or more a side (gpuwhy run --repeat 3) and diff them all"
)


HOST = (HOST_LOAD, QUEUED)


def compare_runs(
    before: Sequence[Record],
    after: Sequence[Record],
    names: tuple[Sequence[str], Sequence[str]] | None = None,
    noise: Noise | None = None,
) -> Comparison:
    """Several records a side (one of each is :func:`compare`): the changes' intervals
    from the variation between the runs, estimated from the runs themselves, and from
    ``noise`` (a calibration of this program's unchanged runs) where given: then one
    run a side has a step-time interval that sees how runs differ too."""
    if not before or not after:
        raise ValueError("each side needs at least one record")
    names_b, names_a = names or (
        [f"BEFORE {i + 1}" for i in range(len(before))],
        [f"AFTER {i + 1}" for i in range(len(after))],
    )
    side_b, left_b = Side(
        tuple(before), tuple(run_units(r.facts) for r in before), tuple(names_b)
    ).timed()
    side_a, left_a = Side(
        tuple(after), tuple(run_units(r.facts) for r in after), tuple(names_a)
    ).timed()
    left = [
        f"{name}'s {', '.join(names)}: left out, no training steps to compare (a run that "
        "failed or stopped before 30 steps after warm-up)"
        for name, names in (("BEFORE", left_b), ("AFTER", left_a))
        if names
    ]
    before, after = side_b.records, side_a.records
    if len(before) == 1 and len(after) == 1:
        single = compare(before[0], after[0], names=(side_b.names[0], side_a.names[0]))
        if noise is not None:
            single = _calibrated(single, side_b, side_a, noise)
        return replace(single, notes=(*left, *single.notes)) if left else single
    rep_b = before[side_b.representative()]
    rep_a = after[side_a.representative()]
    step = step_between(side_b, side_a, noise)
    batch_b, batch_a = batch_size(rep_b.facts), batch_size(rep_a.facts)
    batches = (batch_b, batch_a) if batch_b and batch_a and batch_b != batch_a else None
    example = example_change(step, *batches) if batches else None
    busy = busy_between(side_b, side_a)
    parts = _shares_of_a_change(parts_between(side_b, side_a, step), example or step)
    projected, projected_on = projected_change(rep_b.facts, rep_a.facts)
    notes: list[str] = [*left, *_about_the_sides(side_b, side_a)]
    notes.append(_runs_note(len(before), len(after), step, noise))
    if projected is None and projected_on is not None:
        notes.append(projected_on)
        projected_on = None
    if step is None:
        notes.append(
            "step time: not compared, some runs have fewer than 30 training steps after "
            "warm-up (or none)"
        )
    notes += side_notes("BEFORE", side_b) + side_notes("AFTER", side_a)
    # what else differed, from the runs standing for each side; the host's load from
    # every run's (the figures the contention check reads)
    environment = (
        *(e for e in environment_changes(rep_b.facts, rep_a.facts) if e.what not in HOST),
        *host_changes([r.facts for r in before], [r.facts for r in after]),
    )
    confounded = _confounded([r.facts for r in before], [r.facts for r in after], example or step)
    return Comparison(
        verdict=diff_verdict(
            step, busy, parts, environment, confounded, example, batches, (len(before), len(after))
        ),
        before=_runs_side(side_b),
        after=_runs_side(side_a),
        step_time=step,
        example_time=example,
        batches=batches,
        gpu_busy=busy,
        projected_step=projected,
        projected_gpu=projected_on,
        parts=parts,
        findings=finding_changes(side_findings(side_b), side_findings(side_a)),
        environment=environment,
        notes=tuple(notes),
        timeline_before=side_b.units[side_b.representative()].aligned,
        timeline_after=side_a.units[side_a.representative()].aligned,
        confounded_by=confounded,
        spread="between runs",
    )


def _shares_of_a_change(
    parts: tuple[PartChange, ...], judged: Change | None
) -> tuple[PartChange, ...]:
    """Each part's share of the step-time change, only where there is one (a share of
    no measurable difference says nothing)."""
    if judged is not None and judged.called != "same":
        return parts
    return tuple(replace(p, share=None) for p in parts)


def _about_the_sides(before: Side, after: Side) -> list[str]:
    """What the reader must know first: records on both sides, two programs."""
    notes = []
    same = [
        n
        for r, n in zip(after.records, after.names)
        if any(r is b or _same_record(r, b) for b in before.records)
    ]
    if same:
        notes.append(
            "BEFORE and AFTER are the same records"
            if len(same) == len(after.records) == len(before.records)
            else f"on both sides: {', '.join(same)}"
        )
    programs_b = {os.path.basename(p) for r in before.records if (p := program(r.facts))}
    programs_a = {os.path.basename(p) for r in after.records if (p := program(r.facts))}
    if programs_b and programs_a and programs_b != programs_a:
        notes.append(
            f"the records are of two programs: {', '.join(sorted(programs_b))} and "
            f"{', '.join(sorted(programs_a))}"
        )
    return notes


def _same_record(a: Record, b: Record) -> bool:
    return a.created == b.created and a.facts == b.facts


def _calibrated(single: Comparison, before: Side, after: Side, noise: Noise) -> Comparison:
    """One run a side, its step time judged against a calibration's spread between runs
    (the rest, each run's own spread, as :func:`compare` has it)."""
    step = step_between(before, after, noise)
    if step is None:
        return single
    batches = single.batches
    example = example_change(step, *batches) if batches else None
    confounded = _confounded([before.records[0].facts], [after.records[0].facts], example or step)
    notes = [n for n in single.notes if n != ONE_RUN_A_SIDE]
    return replace(
        single,
        parts=_shares_of_a_change(single.parts, example or step),
        verdict=diff_verdict(
            step, single.gpu_busy, single.parts, single.environment, confounded, example, batches
        ),
        step_time=step,
        example_time=example,
        confounded_by=confounded,
        notes=(*notes, _runs_note(1, 1, step, noise)),
        spread="between runs",
    )


def _confounded(before: list[Facts], after: list[Facts], judged: Change | None) -> str | None:
    """Why a called change may be the machine's (the host loaded differently), or None."""
    contention = host_contention(before, after, judged)
    return f"{contention}: part of the difference may be the machine's" if contention else None


def _runs_note(runs_b: int, runs_a: int, step: Change | None, noise: Noise | None) -> str:
    df = runs_b + runs_a - 2 + (noise.df if noise is not None else 0)
    if noise is None:
        text = (
            f"{runs_b} runs of BEFORE, {runs_a} of AFTER: the intervals come from how the "
            "runs differ from each other (each run one observation of its side; Student's t "
            f"with {df} degrees of freedom)"
        )
    else:
        text = (
            f"{_runs(runs_b)} of BEFORE, {runs_a} of AFTER: the step time's interval comes "
            f"from how runs of this program differ, as the calibration {noise.source} "
            f"measured it ({noise.df + 1} unchanged runs, a spread of "
            f"{math.expm1(math.sqrt(noise.variance)):.1%})"
            + (", pooled with these runs'" if runs_b + runs_a > 2 else "")
            + f" (Student's t with {df} degrees of freedom)"
        )
    if step is not None:
        text += (
            f"; with {_runs_a_side(runs_b, runs_a)} this program can show step-time "
            f"changes of {step.detectable:.0%} or more"
        )
    return text


def _runs_a_side(runs_b: int, runs_a: int) -> str:
    return f"{_runs(runs_b)} a side" if runs_b == runs_a else f"{runs_b} and {runs_a} runs"


def _runs(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def _runs_side(side: Side) -> RunSide:
    rep = side.representative()
    record = side.records[rep]
    shown = ", ".join(side.names[:3]) + (
        f" and {len(side.names) - 3} more" if len(side.names) > 3 else ""
    )
    return RunSide(
        path=shown,
        command=record.command,
        created=record.created,
        verdict=record.verdict,
        steps=sum(u.step_count for u in side.units),
        units=sum(len(u.steps) for u in side.units),
        basis=f"{_runs(len(side.records))}, each: {side.units[rep].basis}",
        seconds=round(sum(u.seconds for u in side.units), 3),
        runs=len(side.records),
        run_paths=side.names,
        run_step_s=tuple(round(v, 9) for v in side.levels),
    )


def diff_verdict(
    step: Change | None,
    busy: Change | None,
    parts: tuple[PartChange, ...],
    environment: tuple[EnvironmentChange, ...],
    confounded: str | None = None,
    example: Change | None = None,
    batches: tuple[int, int] | None = None,
    runs: tuple[int, int] = (1, 1),
) -> str:
    """The first line: faster, slower or no measurable difference, by how much with its
    interval, and the part that moved most."""
    if step is None:
        if busy is None:
            where = "records" if runs == (1, 1) else "sides"
            return f"Nothing to compare: neither training steps nor GPU samples in both {where}."
        return _busy_verdict(busy)
    b, a = duration(step.before), duration(step.after)
    interval = _ratio_interval(step)
    if example is not None and batches is not None:
        text = (
            f"AFTER trains on batches of {batches[1]} against {batches[0]}: "
            + (
                "no measurable difference per example "
                f"(AFTER/BEFORE {example.estimate:.3f}, {example.low:.3f}-{example.high:.3f}, 95%)"
                if example.called == "same"
                else _ratio_interval(example).replace("per step", "per example")
            )
            + f"; {interval if step.called != 'same' else 'no measurable difference per step'}"
            + f" ({b} -> {a} a step)"
        )
    elif step.called == "same":
        text = (
            f"No measurable difference in step time: {b} and {a} a step "
            f"(AFTER/BEFORE {step.estimate:.3f}, {step.low:.3f}-{step.high:.3f}, 95%); "
            + (
                f"these runs cannot show a change under {step.detectable:.0%}"
                if runs == (1, 1)
                else f"with {_runs_a_side(*runs)} this program can show changes of "
                f"{step.detectable:.0%} or more"
            )
        )
    else:
        text = f"AFTER is {interval}: {b} -> {a} a step"
        if runs != (1, 1):
            text += f" ({_runs_a_side(*runs)})"
    if example is None and step.called != "same":
        moved = _largest_part(parts, step)
        if moved is not None:
            text += f"; {moved}"
    if confounded:
        text += f"; but {confounded}"
    # the host's load is said where it may explain the change (confounded), and the
    # program's own waiting for a core is a measure, not a difference of set-up
    others = [
        e.what for e in environment if e.what != QUEUED and (e.what != HOST_LOAD or not confounded)
    ]
    if others:
        text += f" (also changed: {', '.join(others[:3])})"
    return text + "."


def _ratio_interval(step: Change) -> str:
    """ "1.31x faster per step (1.24-1.38x, 95%)" or "12% slower per step (+8% to +16%, 95%)"."""
    if step.estimate <= 1 / BY_FACTOR:
        return (
            f"{1 / step.estimate:.2f}x faster per step "
            f"({1 / step.high:.2f}-{1 / step.low:.2f}x, 95%)"
        )
    if step.estimate >= BY_FACTOR:
        return f"{step.estimate:.2f}x slower per step ({step.low:.2f}-{step.high:.2f}x, 95%)"
    word = "slower" if step.estimate > 1 else "faster"
    return (
        f"{abs(step.estimate - 1):.1%} {word} per step "
        f"({step.low - 1:+.1%} to {step.high - 1:+.1%}, 95%)"
    )


def _largest_part(parts: tuple[PartChange, ...], step: Change) -> str | None:
    """The part that moved most in the step's direction, where it was called."""
    direction = 1 if step.called == "slower" else -1
    moved = [p for p in parts if p.called and p.delta_s * direction > 0]
    if not moved:
        return None
    best = max(moved, key=lambda p: abs(p.delta_s))
    share = f" ({best.share:.0%} of the change)" if best.share is not None else ""
    return f"{best.label} {duration(best.before_s)} -> {duration(best.after_s)}{share}"


def _busy_verdict(busy: Change) -> str:
    span = f"{busy.before:.0%} -> {busy.after:.0%}"
    interval = f"{busy.low * 100:+.0f} to {busy.high * 100:+.0f} points, 95%"
    if busy.called == "same":
        return f"No measurable difference in GPU busy: {span} ({interval})."
    return f"The GPUs are busy {busy.called} in AFTER: {span} ({interval})."


def _about_the_pair(before: Record, after: Record) -> tuple[str, ...]:
    """What the reader must know before any figure: one record twice, two programs."""
    if _same_record(before, after):
        return (
            "BEFORE and AFTER are the same record: the interval says only how that run "
            "varied within itself",
        )
    a, b = program(before.facts), program(after.facts)
    if a and b and os.path.basename(a) != os.path.basename(b):
        return (f"the records are of two programs: {a} and {b}",)
    return ()


def _why_not_compared(
    before: RunUnits, after: RunUnits, step: Change | None, busy: Change | None
) -> tuple[str, ...]:
    notes = []
    if step is None:
        for name, units in (("BEFORE", before), ("AFTER", after)):
            if not units.steps:
                notes.append(
                    f"{name} has fewer than 30 training steps after warm-up (or none): "
                    "no step time to compare"
                )
    if busy is None and (before.gpu_busy or after.gpu_busy):
        notes.append("GPU busy: sampled in only one record (or fewer than 3 windows)")
    return tuple(notes)


def _side(name: str, record: Record, units: RunUnits) -> RunSide:
    return RunSide(
        path=name,
        command=record.command,
        created=record.created,
        verdict=record.verdict,
        steps=units.step_count,
        units=len(units.steps),
        basis=units.basis,
        seconds=round(units.seconds, 3),
    )


__all__ = [
    "AlignedWindow",
    "Change",
    "Comparison",
    "EnvironmentChange",
    "FindingChange",
    "PartChange",
    "RunSide",
    "compare",
    "compare_runs",
    "verdict",
]
