"""Step time, its parts and the GPUs' busy share of two runs, each with its 95 % interval
from the two runs' own spread (gpuwhy/comparison/bootstrap.py), and whether the change is
called.

A change is called when its interval leaves no-change out *and* it is at least
``MIN_STEP_CHANGE`` (step time) or ``MIN_BUSY_CHANGE`` (GPU busy): two runs of one
unchanged program differ by a level neither run's own spread sees (on this project's
quiet CI machine, a steady sleep-timed step by 3.6 % with an interval of -6.5 % to -0.7 %;
benchmarks/bench_diff.py measures both rates).
"""

from __future__ import annotations

import math
import statistics

from gpuwhy.comparison.bootstrap import SEED, Sums, interval, resampled_sums
from gpuwhy.comparison.comparable_units import (
    PART_LABELS,
    PARTS,
    REST,
    RunUnits,
    how_measured,
    part_column,
    with_rest,
)
from gpuwhy.comparison.model import Change, PartChange
from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, ProjectionFacts

Z95 = 1.96
MIN_STEP_CHANGE = 0.05  # relative: smaller step-time changes are never called
MIN_BUSY_CHANGE = 0.02  # GPU busy share, in points of 1
MIN_PART_CHANGE = 0.02  # a part's change called only at this share of the step time
# fewer windows than this in a run (a short run: 1 s windows): a part gets no interval of
# its own, and is called where it moved by a quarter of the step-time change or more
MIN_PART_UNITS = 8
PART_SHARE_WITHOUT_INTERVAL = 0.25
NOTHING_S = 1e-6  # a part under a microsecond a step in both runs is not listed


def step_change(before: RunUnits, after: RunUnits) -> Change | None:
    """AFTER's mean time per step over BEFORE's, with its interval."""
    if not before.steps or not after.steps:
        return None
    b = resampled_sums(before.steps, seed=SEED)
    a = resampled_sums(after.steps, seed=SEED + 1)
    ratios = [_per(x, 1) / _per(y, 1) for x, y in zip(a, b) if x[0] and y[0] and y[1]]
    low, high = interval(ratios)
    mean_b = before.seconds / before.step_count
    mean_a = after.seconds / after.step_count
    estimate = mean_a / mean_b
    low, high = _with_wander(estimate, low, high, wander(before.steps), wander(after.steps))
    return _ratio_change(
        "step_time",
        mean_b,
        mean_a,
        (estimate, low, high),
        median_before=None if before.median_s is None else round(before.median_s, 9),
        median_after=None if after.median_s is None else round(after.median_s, 9),
    )


def example_change(step: Change | None, batch_before: int, batch_after: int) -> Change | None:
    """The step-time change per example, where the two runs' batches differ: a step of
    4x the batch that takes 2.4x as long is 1.7x faster per example."""
    if step is None or batch_before <= 0 or batch_after <= 0 or batch_before == batch_after:
        return None
    k = batch_before / batch_after
    return _ratio_change(
        "example_time",
        step.before / batch_before,
        step.after / batch_after,
        (step.estimate * k, step.low * k, step.high * k),
        digits=12,
    )


def _ratio_change(
    measure: str,
    before: float,
    after: float,
    ratio: tuple[float, float, float],
    digits: int = 9,
    median_before: float | None = None,
    median_after: float | None = None,
) -> Change:
    """A change of times judged as AFTER / BEFORE (``ratio``: the estimate and its
    interval), called slower or faster past MIN_STEP_CHANGE."""
    estimate, low, high = ratio
    return Change(
        measure=measure,
        before=round(before, digits),
        after=round(after, digits),
        estimate=round(estimate, 5),
        low=round(low, 5),
        high=round(high, 5),
        called=_called(estimate, low, high, 1.0, MIN_STEP_CHANGE, ("slower", "faster")),
        detectable=round(max(MIN_STEP_CHANGE, (high - low) / 2), 5),
        median_before=median_before,
        median_after=median_after,
    )


def busy_change(before: RunUnits, after: RunUnits) -> Change | None:
    """The GPUs' busy share (NVML utilisation, mean of the GPUs) AFTER less BEFORE, in
    points, over the training windows (the whole record for ``gpuwhy watch``)."""
    if len(before.gpu_busy) < 3 or len(after.gpu_busy) < 3:
        return None
    b = resampled_sums(before.gpu_busy, seed=SEED + 2)
    a = resampled_sums(after.gpu_busy, seed=SEED + 3)
    low, high = interval([_per(x, 1) - _per(y, 1) for x, y in zip(a, b)])
    mean_b = sum(v for _, v in before.gpu_busy) / len(before.gpu_busy)
    mean_a = sum(v for _, v in after.gpu_busy) / len(after.gpu_busy)
    estimate = mean_a - mean_b
    called = _called(estimate, low, high, 0.0, MIN_BUSY_CHANGE, ("higher", "lower"))
    return Change(
        measure="gpu_busy",
        before=round(mean_b, 4),
        after=round(mean_a, 4),
        estimate=round(estimate, 4),
        low=round(low, 4),
        high=round(high, 4),
        called=called,
        detectable=round(max(MIN_BUSY_CHANGE, (high - low) / 2), 4),
    )


def projected_change(before: Facts, after: Facts) -> tuple[Change | None, str | None]:
    """The training step projected onto the same GPU (``gpuwhy run --target``) in both
    records, and the GPU; or why not, as a note.

    Both are predictions of one cost model from each record's traced graph: where the
    graph did not change they are equal, so a moved projection is the graph's doing (more
    FLOPs, another precision, ops that left the GPU) or the CPU-only ops' measured time.
    The GPU's part is compared (``device_s``), not the host's own work the run measured
    between and in its calls: that moves from run to run, and the measured step time
    sees it. Called at ``MIN_STEP_CHANGE``; its interval is AFTER's band over BEFORE's
    middle, the model's uncertainty, not the runs' spread."""
    b, a = derived(before).projection, derived(after).projection
    if b is None or a is None:
        return None, None
    if b.gpu != a.gpu:  # said with the findings it leaves out (findings.projections_apart)
        return None, None
    (b_mid, _, _), (a_mid, a_low, a_high) = _graph_part(b), _graph_part(a)
    estimate = a_mid / b_mid
    if estimate >= 1 + MIN_STEP_CHANGE:
        called = "slower"
    elif estimate <= 1 - MIN_STEP_CHANGE:
        called = "faster"
    else:
        called = "same"
    change = Change(
        measure="projected_step",
        before=round(b_mid, 9),
        after=round(a_mid, 9),
        estimate=round(estimate, 5),
        low=round(a_low / b_mid, 5),
        high=round(a_high / b_mid, 5),
        called=called,
        detectable=MIN_STEP_CHANGE,
    )
    return change, b.gpu


def _graph_part(projection: ProjectionFacts) -> tuple[float, float, float]:
    """The projected GPU part (middle, low, high); a record from before it was kept,
    or a step with no traced function (only eager ops): the whole step."""
    if projection.device_s and projection.device_low_s and projection.device_high_s:
        return projection.device_s, projection.device_low_s, projection.device_high_s
    return projection.step_s, projection.step_low_s, projection.step_high_s


def part_changes(
    before: RunUnits, after: RunUnits, before_facts: Facts, after_facts: Facts
) -> tuple[tuple[PartChange, ...], tuple[str, ...]]:
    """Each part of the step measured in both runs, per step, with its interval and its
    share of the step-time change; and what could not be split, and why."""
    notes = []
    common = [p for p in PARTS if p in before.parts_measured and p in after.parts_measured]
    for part in PARTS:
        one = [n for n, u in (("BEFORE", before), ("AFTER", after)) if part in u.parts_measured]
        if len(one) == 1:
            notes.append(f"{PART_LABELS[part]}: measured in {one[0]} only, not compared")
    out = []
    if common and before.part_units and after.part_units:
        units_b = with_rest(before.part_units, common)
        units_a = with_rest(after.part_units, common)
        b = resampled_sums(units_b, seed=SEED + 4)
        a = resampled_sums(units_a, seed=SEED + 5)
        step_b = _total_per(units_b, 1)
        step_a = _total_per(units_a, 1)
        delta_step = step_a - step_b
        windows = min(len(units_b), len(units_a))
        for part in (*common, REST):
            k = part_column(part)
            per_b, per_a = _total_per(units_b, k), _total_per(units_a, k)
            if max(per_b, per_a) < NOTHING_S:
                continue  # nothing in either run (no tracing after warm-up): no row
            # the eager part is a count times one gap per run: no spread to resample
            spread = windows >= MIN_PART_UNITS and part != "eager"
            delta = per_a - per_b
            big = abs(delta) >= MIN_PART_CHANGE * max(step_b, step_a)
            if spread:
                low, high = interval([_per(x, k) - _per(y, k) for x, y in zip(a, b)])
                called = big and (low > 0 or high < 0)
            else:
                share = delta / delta_step if delta_step else 0.0
                called = big and share >= PART_SHARE_WITHOUT_INTERVAL
            out.append(
                PartChange(
                    part=part,
                    label=PART_LABELS[part],
                    before_s=round(per_b, 9),
                    after_s=round(per_a, 9),
                    delta_s=round(delta, 9),
                    low_s=round(low, 9) if spread else None,
                    high_s=round(high, 9) if spread else None,
                    share=round(delta / delta_step, 3) if abs(delta_step) > 0 else None,
                    called=called,
                    measured_by=how_measured(after, part),
                )
            )
    collectives = _collectives(before_facts, after_facts)
    if collectives is not None:
        out.append(collectives)
    return tuple(out), tuple(notes)


def _collectives(before: Facts, after: Facts) -> PartChange | None:
    """Seconds per step inside collective ops, as each record measured them once for the
    run (no windows: no interval)."""
    b = before.distribute.collective_step_s if before.distribute else None
    a = after.distribute.collective_step_s if after.distribute else None
    if b is None or a is None:
        return None
    return PartChange(
        part="collectives",
        label=PART_LABELS["collectives"],
        before_s=round(b, 9),
        after_s=round(a, 9),
        delta_s=round(a - b, 9),
        low_s=None,
        high_s=None,
        share=None,
        called=False,
        measured_by=(after.distribute.collective_measured_by if after.distribute else None)
        or "measured",
    )


def wander(units: list[tuple[float, float]]) -> float:
    """How far a run's level wanders: the relative spread (sample standard deviation) of
    its quarters' typical step, over the three quarters that agree most.

    Resampling a run's windows sees how its steps vary about its level, not how its
    level moves: a small model on this project's 2-core host ran its quarters at 1.72,
    1.90, 1.46 and 1.38 ms a step, and ten runs of it averaged 1.22 to 1.65 ms
    (benchmarks/bench_diff.py): another run could land anywhere in that range. A
    quarter's typical step is the median of its units' means, and the quarter furthest
    from the others is left out: a phase of the run's own (a first pass that fills a
    cache, a stretch of stalls) is its shape, not its level wandering. Where the quarters
    agree (a long, steady job) this is small."""
    total = sum(u[0] for u in units)
    if total <= 0 or len(units) < 8:
        return 0.0
    quarters: list[list[float]] = [[] for _ in range(4)]
    seen = 0.0
    for steps, seconds in units:
        if steps:
            quarters[min(3, int(4 * (seen + steps / 2) / total))].append(seconds / steps)
        seen += steps
    typical = [statistics.median(q) for q in quarters if q]
    if len(typical) < 4:
        return 0.0
    middle = statistics.median(typical)
    typical.remove(max(typical, key=lambda m: abs(m - middle)))
    return statistics.stdev(typical) / statistics.fmean(typical)


def _with_wander(
    estimate: float, low: float, high: float, wander_b: float, wander_a: float
) -> tuple[float, float]:
    """The resampled interval of AFTER / BEFORE widened by both runs' wander (on the log
    scale, the two uncertainties added in quadrature)."""
    if estimate <= 0 or low <= 0 or high <= 0:
        return low, high
    spread = (math.log(high) - math.log(low)) / 2
    half = math.hypot(spread, Z95 * math.hypot(wander_b, wander_a))
    centre = math.log(estimate)
    return min(low, math.exp(centre - half)), max(high, math.exp(centre + half))


def _called(
    estimate: float, low: float, high: float, none: float, floor: float, words: tuple[str, str]
) -> str:
    """``words[0]`` (up) or ``words[1]`` (down) where the interval leaves ``none`` (no
    change) out and the estimate is ``floor`` past it; else "same"."""
    if low > none and estimate >= none + floor:
        return words[0]
    if high < none and estimate <= none - floor:
        return words[1]
    return "same"


def _per(sums: Sums, k: int) -> float:
    """Column ``k`` of a replicate per step (column 0 counts the steps)."""
    return sums[k] / sums[0] if sums[0] else 0.0


def _total_per(units: list[tuple[float, ...]], k: int) -> float:
    steps = sum(u[0] for u in units)
    return sum(u[k] for u in units) / steps if steps else 0.0
