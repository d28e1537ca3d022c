"""Several records a side: each run read as one observation of its side, and the changes
between the sides from the runs' figures (between_runs.py).

Per run: its time per step (the level), its GPUs' busy share, each part of its step per
step, its own sampling spread (the floor of the between-run spread). Per side: the run
whose level is the side's median stands for the side where one record must (the
timelines, the environment, the projection); a finding is the side's where more than
half of its runs have it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from gpuwhy.comparison.between_runs import Difference, Noise, difference
from gpuwhy.comparison.bootstrap import SEED, resampled_sums
from gpuwhy.comparison.changes import MIN_BUSY_CHANGE, MIN_PART_CHANGE, NOTHING_S
from gpuwhy.comparison.comparable_units import (
    PART_LABELS,
    PARTS,
    REST,
    RunUnits,
    how_measured,
    part_column,
    with_rest,
)
from gpuwhy.comparison.environment import HOST_LOAD, QUEUED, environment_changes
from gpuwhy.comparison.model import Change, PartChange
from gpuwhy.finding import SEVERITY_RANK, Finding
from gpuwhy.record import Record

WITHIN_REPLICATES = 400  # a run's own spread is a floor, not the interval: fewer suffice


@dataclass(frozen=True)
class Side:
    """One side's runs, in the order given."""

    records: tuple[Record, ...]
    units: tuple[RunUnits, ...]
    names: tuple[str, ...]

    @cached_property
    def levels(self) -> list[float]:
        """Each run's mean time per step (0 where it has none to compare)."""
        return [u.seconds / u.step_count if u.step_count else 0.0 for u in self.units]

    def timed(self) -> tuple[Side, tuple[str, ...]]:
        """The side without its runs that have no training steps to compare (a run that
        failed or stopped early), and their names; the side as it is where none has
        steps (watch records: their GPUs are compared)."""
        kept = [i for i, u in enumerate(self.units) if u.step_count]
        if not kept or len(kept) == len(self.units):
            return self, ()
        left = tuple(n for i, n in enumerate(self.names) if i not in kept)
        side = Side(
            tuple(self.records[i] for i in kept),
            tuple(self.units[i] for i in kept),
            tuple(self.names[i] for i in kept),
        )
        return side, left

    @cached_property
    def representative(self) -> int:
        """The run whose level is the side's median (the first of the two middle ones)."""
        timed = [i for i, u in enumerate(self.units) if u.step_count] or list(
            range(len(self.units))
        )
        levels = self.levels
        ordered = sorted(timed, key=lambda i: levels[i])
        return ordered[(len(ordered) - 1) // 2]


def step_between(before: Side, after: Side, noise: Noise | None = None) -> Change | None:
    """AFTER's mean step over BEFORE's (the geometric means of the runs' levels), with
    the interval from the runs' spread (and a calibration's, ``noise``). None unless
    every run has steps to compare."""
    if not all(u.step_count for u in (*before.units, *after.units)):
        return None
    logs_b = [math.log(v) for v in before.levels]
    logs_a = [math.log(v) for v in after.levels]
    within = [own_log_variance(u) for u in (*before.units, *after.units)]
    d = difference(logs_b, logs_a, within, noise)
    if d is None:
        return None
    mean_b, mean_a = math.exp(statistics.fmean(logs_b)), math.exp(statistics.fmean(logs_a))
    medians_b = [u.median_s for u in before.units if u.median_s is not None]
    medians_a = [u.median_s for u in after.units if u.median_s is not None]
    return Change(
        measure="step_time",
        before=round(mean_b, 9),
        after=round(mean_a, 9),
        estimate=round(math.exp(d.estimate), 5),
        low=round(math.exp(d.low), 5),
        high=round(math.exp(d.high), 5),
        called=_called(d, "slower", "faster"),
        detectable=round(math.exp(d.half_width) - 1, 5),
        median_before=round(statistics.median(medians_b), 9) if medians_b else None,
        median_after=round(statistics.median(medians_a), 9) if medians_a else None,
    )


def busy_between(before: Side, after: Side) -> Change | None:
    """The GPUs' busy share, AFTER's runs less BEFORE's, in points."""
    busy_b = [_mean_busy(u) for u in before.units]
    busy_a = [_mean_busy(u) for u in after.units]
    if any(v is None for v in (*busy_b, *busy_a)):
        return None
    b = [v for v in busy_b if v is not None]
    a = [v for v in busy_a if v is not None]
    d = difference(b, a)
    if d is None:
        return None
    called = _called(d, "higher", "lower") if abs(d.estimate) >= MIN_BUSY_CHANGE else "same"
    return Change(
        measure="gpu_busy",
        before=round(statistics.fmean(b), 4),
        after=round(statistics.fmean(a), 4),
        estimate=round(d.estimate, 4),
        low=round(d.low, 4),
        high=round(d.high, 4),
        called=called,
        detectable=round(max(MIN_BUSY_CHANGE, d.half_width), 4),
    )


def parts_between(before: Side, after: Side, step: Change | None) -> tuple[PartChange, ...]:
    """Each part measured in every run of both sides, per step, its interval from the
    runs' spread."""
    runs = (*before.units, *after.units)
    common = [p for p in PARTS if all(p in u.parts_measured and u.part_units for u in runs)]
    if not common:
        return ()
    delta_step = (step.after - step.before) if step is not None else 0.0
    units_b = [with_rest(u.part_units, common) for u in before.units]
    units_a = [with_rest(u.part_units, common) for u in after.units]
    out = []
    for part in (*common, REST):
        k = part_column(part)
        per_b = [_per_step(u, k) for u in units_b]
        per_a = [_per_step(u, k) for u in units_a]
        mean_b, mean_a = statistics.fmean(per_b), statistics.fmean(per_a)
        if max(mean_b, mean_a) < NOTHING_S:
            continue
        d = difference(per_b, per_a)
        if d is None:
            continue
        steps = max(step.before, step.after) if step is not None else max(mean_b, mean_a)
        big = abs(d.estimate) >= MIN_PART_CHANGE * steps
        out.append(
            PartChange(
                part=part,
                label=PART_LABELS[part],
                before_s=round(mean_b, 9),
                after_s=round(mean_a, 9),
                delta_s=round(d.estimate, 9),
                low_s=round(d.low, 9),
                high_s=round(d.high, 9),
                share=round(d.estimate / delta_step, 3) if abs(delta_step) > 0 else None,
                called=big and (d.low > 0 or d.high < 0),
                measured_by=how_measured(after.units[after.representative], part),
            )
        )
    return tuple(out)


def side_findings(side: Side) -> list[Finding]:
    """The findings of the side: more than half of its runs have them."""
    return majority_findings(side.records, side.records[side.representative])


def majority_findings(records: Sequence[Record], first: Record | None = None) -> list[Finding]:
    """The findings more than half of ``records`` have (by id and place), each as
    ``first`` has it where it does, else as the first run with it."""
    present: dict[tuple[str, str | None], int] = {}
    for record in records:
        for key in {(f.id, f.location) for f in record.findings}:
            present[key] = present.get(key, 0) + 1
    holders = (first, *records) if first is not None else tuple(records)
    out = []
    for key, runs in present.items():
        if 2 * runs > len(records):
            out.append(next(f for r in holders for f in r.findings if (f.id, f.location) == key))
    return sorted(out, key=lambda f: (SEVERITY_RANK[f.severity], f.id))


def side_notes(name: str, side: Side) -> list[str]:
    """What the runs of one side did not share among themselves (a version, the batch):
    runs of one revision should differ only by chance."""
    rep = side.records[side.representative].facts
    differ: list[str] = []
    for record in side.records:
        for change in environment_changes(rep, record.facts):
            if change.what not in (HOST_LOAD, QUEUED) and change.what not in differ:
                differ.append(change.what)
    if not differ:
        return []
    return [f"{name}'s runs differ among themselves in: {', '.join(differ)}"]


def _called(d: Difference, up: str, down: str) -> str:
    if d.low > 0:
        return up
    if d.high < 0:
        return down
    return "same"


def own_log_variance(units: RunUnits) -> float:
    """The variance of a run's log mean step from resampling its own windows."""
    replicates = resampled_sums(units.steps, replicates=WITHIN_REPLICATES, seed=SEED)
    logs = [math.log(r[1] / r[0]) for r in replicates if r[0] and r[1] > 0]
    return statistics.pvariance(logs) if len(logs) > 1 else 0.0


def _mean_busy(units: RunUnits) -> float | None:
    if len(units.gpu_busy) < 3:
        return None
    return sum(v for _, v in units.gpu_busy) / len(units.gpu_busy)


def _per_step(part_units: Sequence[tuple[float, ...]], k: int) -> float:
    steps = sum(u[0] for u in part_units)
    return sum(u[k] for u in part_units) / steps if steps else 0.0
