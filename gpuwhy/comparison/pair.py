"""Two records compared, one run a side: each change's interval from the two runs' own
spread (changes.py), the findings and the environment that changed, and what the reader
must know about the pair first."""

from __future__ import annotations

import os
from dataclasses import replace

from gpuwhy.comparison.changes import (
    busy_change,
    example_change,
    part_changes,
    projected_change,
    step_change,
)
from gpuwhy.comparison.comparable_units import RunUnits, run_units
from gpuwhy.comparison.environment import batch_size, environment_changes, host_contention, program
from gpuwhy.comparison.findings import finding_changes, projections_apart
from gpuwhy.comparison.model import Change, Comparison, PartChange, RunSide
from gpuwhy.comparison.near_threshold import note, settled
from gpuwhy.comparison.verdict import diff_verdict
from gpuwhy.facts import Facts
from gpuwhy.record import Record


def compare(
    before: Record,
    after: Record,
    names: tuple[str, str] = ("BEFORE", "AFTER"),
    units: tuple[RunUnits, RunUnits] | None = None,
) -> Comparison:
    """Everything that differs between two records, each difference with its interval
    (``units``: the records' units where the caller read them already)."""
    units_b, units_a = units or (run_units(before.facts), run_units(after.facts))
    step = step_change(units_b, units_a)
    batch_b, batch_a = batch_size(before.facts), batch_size(after.facts)
    batches = (batch_b, batch_a) if batch_b and batch_a and batch_b != batch_a else None
    example = example_change(step, *batches) if batches else None
    busy = busy_change(units_b, units_a)
    parts, notes = part_changes(units_b, units_a, before.facts, after.facts)
    parts = shares_of_a_change(parts, example or step)
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
    confounded = confounded_by_host([before.facts], [after.facts], example or step)
    apart = projections_apart([before.facts], [after.facts])
    changes = finding_changes(before.findings, after.findings, projected_apart=apart is not None)
    findings, crossed = settled(changes, [before], [after])
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
        findings=findings,
        findings_near_threshold=crossed,
        environment=environment,
        notes=(*notes, *([apart] if apart else []), *(note(c) for c in crossed)),
        timeline_before=units_b.aligned,
        timeline_after=units_a.aligned,
        confounded_by=confounded,
    )


ONE_RUN_A_SIDE = (
    "one run a side: the intervals are each run's own spread, which cannot see how far "
    "another run of the same code lands (on a shared machine, often several per cent); "
    "record 3 or more a side (gpuwhy run --repeat 3) and diff them all"
)


def shares_of_a_change(
    parts: tuple[PartChange, ...], judged: Change | None
) -> tuple[PartChange, ...]:
    """Each part's share of the step-time change, only where there is one (a share of
    no measurable difference says nothing)."""
    if judged is not None and judged.called != "same":
        return parts
    return tuple(replace(p, share=None) for p in parts)


def confounded_by_host(
    before: list[Facts], after: list[Facts], judged: Change | None
) -> str | None:
    """Why a called change may be the machine's (the host loaded differently), or None."""
    contention = host_contention(before, after, judged)
    return f"{contention}: part of the difference may be the machine's" if contention else None


def _about_the_pair(before: Record, after: Record) -> tuple[str, ...]:
    """What the reader must know before any figure: one record twice, two programs."""
    if same_record(before, after):
        return (
            "BEFORE and AFTER are the same record: the interval says only how that run "
            "varied within itself",
        )
    a, b = program(before.facts), program(after.facts)
    if a and b and os.path.basename(a) != os.path.basename(b):
        return (f"the records are of two programs: {a} and {b}",)
    return ()


def same_record(a: Record, b: Record) -> bool:
    return a.created == b.created and a.facts == b.facts


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
