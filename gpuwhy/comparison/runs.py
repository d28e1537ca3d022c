"""Several records a side compared: the step time's interval from how the runs differ
(sides.py, between_runs.py; a calibration's spread pooled in with ``noise``), runs
without steps left out, and what the reader must know about the sides first."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import replace

from gpuwhy.comparison.between_runs import Noise
from gpuwhy.comparison.changes import example_change, projected_change
from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.comparison.environment import (
    HOST_LOAD,
    QUEUED,
    batch_size,
    environment_changes,
    host_changes,
    program,
)
from gpuwhy.comparison.findings import finding_changes, projections_apart
from gpuwhy.comparison.model import Change, Comparison, RunSide
from gpuwhy.comparison.near_threshold import note, settled
from gpuwhy.comparison.pair import (
    ONE_RUN_A_SIDE,
    compare,
    confounded_by_host,
    same_record,
    shares_of_a_change,
)
from gpuwhy.comparison.sides import (
    Side,
    busy_between,
    parts_between,
    side_findings,
    side_notes,
    step_between,
)
from gpuwhy.comparison.verdict import diff_verdict, runs_a_side, runs_text
from gpuwhy.comparison.work import fast_between, resolved, work_between
from gpuwhy.record import Record

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
        single = compare(
            before[0],
            after[0],
            names=(side_b.names[0], side_a.names[0]),
            units=(side_b.units[0], side_a.units[0]),
        )
        if noise is not None:
            single = _calibrated(single, side_b, side_a, noise)
        return replace(single, notes=(*left, *single.notes)) if left else single
    rep_b = before[side_b.representative]
    rep_a = after[side_a.representative]
    work = work_between([r.facts for r in before], [r.facts for r in after])
    fast = fast_between([r.facts for r in before], [r.facts for r in after])
    step, called_by = resolved(step_between(side_b, side_a, noise), work, fast)
    batch_b, batch_a = batch_size(rep_b.facts), batch_size(rep_a.facts)
    batches = (batch_b, batch_a) if batch_b and batch_a and batch_b != batch_a else None
    example = example_change(step, *batches) if batches else None
    busy = busy_between(side_b, side_a)
    parts = shares_of_a_change(parts_between(side_b, side_a, step), example or step)
    projected, projected_on = projected_change(rep_b.facts, rep_a.facts)
    notes: list[str] = [*left, *_about_the_sides(side_b, side_a)]
    notes.append(_runs_note(len(before), len(after), step, noise))
    if called_by is not None:
        notes.append(called_by)
    elif step is not None:
        notes += [
            f"{words[0].upper()}{words[1:]}: {m.estimate:.3f}x ({m.low:.3f}-{m.high:.3f}); their runs "
            f"resolve {m.detectable:.1%}, the step time's {step.detectable:.1%}"
            for words, m in (("the program's CPU time per step", work), ("the fastest steps", fast))
            if m is not None
        ]
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
    confounded = confounded_by_host(
        [r.facts for r in before], [r.facts for r in after], example or step
    )
    apart = projections_apart([r.facts for r in before], [r.facts for r in after])
    changes = finding_changes(
        side_findings(side_b), side_findings(side_a), projected_apart=apart is not None
    )
    findings, crossed = settled(changes, before, after)
    notes += [*([apart] if apart else []), *(note(c) for c in crossed)]
    return Comparison(
        verdict=diff_verdict(
            step, busy, parts, environment, confounded, example, batches, (len(before), len(after))
        ),
        before=_runs_side(side_b),
        after=_runs_side(side_a),
        step_time=step,
        cpu_time=work,
        fast_steps=fast,
        example_time=example,
        batches=batches,
        gpu_busy=busy,
        projected_step=projected,
        projected_gpu=projected_on,
        parts=parts,
        findings=findings,
        findings_near_threshold=crossed,
        environment=environment,
        notes=tuple(notes),
        timeline_before=side_b.units[side_b.representative].aligned,
        timeline_after=side_a.units[side_a.representative].aligned,
        confounded_by=confounded,
        spread="between runs",
    )


def _about_the_sides(before: Side, after: Side) -> list[str]:
    """What the reader must know first: records on both sides, two programs."""
    notes = []
    same = [
        n
        for r, n in zip(after.records, after.names)
        if any(r is b or same_record(r, b) for b in before.records)
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


def _calibrated(single: Comparison, before: Side, after: Side, noise: Noise) -> Comparison:
    """One run a side, its step time judged against a calibration's spread between runs
    (the rest, each run's own spread, as :func:`compare` has it)."""
    step = step_between(before, after, noise)
    if step is None:
        return single
    batches = single.batches
    example = example_change(step, *batches) if batches else None
    confounded = confounded_by_host(
        [before.records[0].facts], [after.records[0].facts], example or step
    )
    notes = [n for n in single.notes if n != ONE_RUN_A_SIDE]
    return replace(
        single,
        parts=shares_of_a_change(single.parts, example or step),
        verdict=diff_verdict(
            step, single.gpu_busy, single.parts, single.environment, confounded, example, batches
        ),
        step_time=step,
        example_time=example,
        confounded_by=confounded,
        notes=(*notes, _runs_note(1, 1, step, noise)),
        spread="between runs",
    )


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
            f"{runs_text(runs_b)} of BEFORE, {runs_a} of AFTER: the step time's interval comes "
            f"from how runs of this program differ, as the calibration {noise.source} "
            f"measured it ({noise.df + 1} unchanged runs, a spread of "
            f"{math.expm1(math.sqrt(noise.variance)):.1%})"
            + (", pooled with these runs'" if runs_b + runs_a > 2 else "")
            + f" (Student's t with {df} degrees of freedom)"
        )
    if step is not None:
        text += (
            f"; with {runs_a_side(runs_b, runs_a)} this program can show step-time "
            f"changes of {step.detectable:.0%} or more"
        )
    return text


def _runs_side(side: Side) -> RunSide:
    rep = side.representative
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
        basis=f"{runs_text(len(side.records))}, each: {side.units[rep].basis}",
        seconds=round(sum(u.seconds for u in side.units), 3),
        runs=len(side.records),
        run_paths=side.names,
        run_step_s=tuple(round(v, 9) for v in side.levels),
    )
