"""``gpuwhy diff --calibrate RUNS``: from runs of unchanged code alone, how large a change
the gate can call on this machine with N runs a side, so that ``--fail-on step:+N%`` is
chosen from data rather than hoped.

The runs' levels (each run's mean time per step) spread by what this machine does to
this program from one run to the next; that spread, estimated from the runs, gives the
interval a comparison of N runs a side will have (between_runs.py), hence the smallest
change it calls. Two checks beside the formula, on the runs themselves: the unchanged
runs split N against N in many ways (how many were called different: about 1 in 20 is
what a 95 % interval allows), and pairs of single runs compared as one run a side (what
a gate of one run a side would have called on unchanged code).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuwhy.comparison import compare
from gpuwhy.comparison.between_runs import Noise, detectable, difference
from gpuwhy.comparison.comparable_units import RunUnits, run_units
from gpuwhy.comparison.environment import others_cpu, program
from gpuwhy.comparison.sides import own_log_variance
from gpuwhy.json_input import TooDeep, loads
from gpuwhy.record import Record

CALIBRATION_SCHEMA_VERSION = 1
MIN_RUNS = 3
SHOWN_RUNS = (2, 3, 5, 10)  # runs a side the table lists (and the one asked for)
SPLITS = 60  # random N-against-N splits of the runs tried, at most
PAIRS = 20  # pairs of single runs compared as one run a side, at most
SEED = 2027
HOST_SPREAD = 0.10  # runs whose other processes' CPU share differs this much: said


@dataclass(frozen=True)
class RunsASide:
    """What a comparison of ``runs`` runs a side of this program can call."""

    runs: int
    called_half: float  # a relative step-time change called at least half the time
    called_9_in_10: float  # ... called 9 times in 10
    splits: int = 0  # unchanged runs split ``runs`` against ``runs`` (0: too few runs)
    splits_called: int = 0  # ... that were called different


@dataclass(frozen=True)
class Calibration:
    """``gpuwhy diff --calibrate``: the noise of unchanged runs, and the gate it allows."""

    verdict: str
    runs: int
    paths: tuple[str, ...]
    step_s: tuple[float, ...]  # each run's mean time per step
    others_cpu: tuple[float | None, ...]  # other processes' share of the host's CPU
    between_runs: float  # relative spread of a run's level (its standard deviation)
    within_run: float  # a run's own sampling spread of its level (typical)
    runs_a_side: int  # the number of runs a side the recommendation is for
    fail_on: str  # the --fail-on condition recommended for it
    by_runs: tuple[RunsASide, ...] = ()
    one_run_pairs: int = 0  # pairs of single runs compared as one run a side
    one_run_called: int = 0  # ... called different
    notes: tuple[str, ...] = ()
    schema: int = field(default=CALIBRATION_SCHEMA_VERSION)


def calibrate(records: Sequence[Record], names: Sequence[str], runs_a_side: int = 3) -> Calibration:
    """The calibration of ``records``, runs of one unchanged program. Raises ValueError
    (its message is the one line the user sees) with fewer than 3 runs with steps."""
    units = [run_units(r.facts) for r in records]
    missing = [n for n, u in zip(names, units) if not u.step_count]
    if missing:
        raise ValueError(
            f"{missing[0]}: fewer than 30 training steps after warm-up: nothing to calibrate on"
        )
    if len(records) < MIN_RUNS:
        raise ValueError(
            f"--calibrate needs at least {MIN_RUNS} records of unchanged runs, "
            f"got {len(records)} (gpuwhy run --repeat 5 --json runs/base.json SCRIPT)"
        )
    sd, logs, within = run_spread(units)
    floor = statistics.fmean(within)
    shown = sorted({*SHOWN_RUNS, runs_a_side})
    by_runs = tuple(_runs_a_side(k, sd, logs, within) for k in shown)
    chosen = next(r for r in by_runs if r.runs == runs_a_side)
    percent = max(1, math.ceil(chosen.called_half * 100 - 1e-9))
    pairs, pairs_called = _one_run_pairs(records)
    loads = [others_cpu(r.facts) for r in records]
    fail_on = f"step:+{percent}%"
    return Calibration(
        verdict=(
            f"Unchanged runs of this program spread by {math.exp(sd) - 1:.1%} a run "
            f"({len(records)} runs): with {runs_a_side} runs a side the gate can call "
            f"step-time changes of {chosen.called_half:.1%} or more (one of "
            f"{_pct(chosen.called_9_in_10)} is called 9 times in 10); "
            f"use --fail-on {fail_on} (rounded up)."
        ),
        runs=len(records),
        paths=tuple(names),
        step_s=tuple(round(math.exp(v), 9) for v in logs),
        others_cpu=tuple(None if v is None else round(v, 3) for v in loads),
        between_runs=round(math.exp(sd) - 1, 5),
        within_run=round(math.exp(math.sqrt(floor)) - 1, 5),
        runs_a_side=runs_a_side,
        fail_on=fail_on,
        by_runs=by_runs,
        one_run_pairs=pairs,
        one_run_called=pairs_called,
        notes=tuple(_notes(records, loads, len(records), runs_a_side)),
    )


def run_spread(units: Sequence[RunUnits]) -> tuple[float, list[float], list[float]]:
    """How far unchanged runs' levels spread (the standard deviation of their log mean
    step, never below their own sampling spread), with each run's log level and its own
    sampling variance."""
    logs = [math.log(u.seconds / u.step_count) for u in units]
    within = [own_log_variance(u) for u in units]
    return math.sqrt(max(statistics.variance(logs), statistics.fmean(within))), logs, within


def read_noise(path: str) -> Noise:
    """A calibration written by ``gpuwhy diff --calibrate -f json`` (or ``--json``), as
    the spread the comparison pools in. Raises ValueError with the one line to say."""
    try:
        with open(path, encoding="utf-8") as f:
            data = loads(f.read(), path)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except TooDeep as e:
        raise ValueError(str(e)) from None
    except ValueError:
        raise ValueError(f"{path} is not valid JSON") from None
    try:
        if data["schema"] != CALIBRATION_SCHEMA_VERSION or "by_runs" not in data:
            raise KeyError
        spread, runs = float(data["between_runs"]), int(data["runs"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(
            f"{path} is not a calibration: write one with gpuwhy diff --calibrate -f json "
            "-o PATH RUNS..."
        ) from None
    if runs < MIN_RUNS or not spread >= 0:
        raise ValueError(f"{path}: a calibration of {runs} runs cannot be used")
    return Noise(variance=math.log1p(spread) ** 2, df=runs - 1, source=path)


def _runs_a_side(k: int, sd: float, logs: list[float], within: list[float]) -> RunsASide:
    half, nine = detectable(sd, k)
    splits = called = 0
    if 2 * k <= len(logs):
        rng = random.Random(SEED + k)
        seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
        for _ in range(SPLITS * 4):
            if splits >= min(SPLITS, _ways(len(logs), k)):
                break
            picked = rng.sample(range(len(logs)), 2 * k)
            first, second = tuple(sorted(picked[:k])), tuple(sorted(picked[k:]))
            if (first, second) in seen:
                continue
            seen.add((first, second))
            d = difference(
                [logs[i] for i in first],
                [logs[i] for i in second],
                [within[i] for i in (*first, *second)],
            )
            splits += 1
            called += d is not None and (d.low > 0 or d.high < 0)
    return RunsASide(
        runs=k,
        called_half=round(math.exp(half) - 1, 5),
        called_9_in_10=round(math.exp(nine) - 1, 5),
        splits=splits,
        splits_called=called,
    )


def _ways(n: int, k: int) -> int:
    """Ordered ways to pick two disjoint sets of k from n."""
    return math.comb(n, k) * math.comb(n - k, k)


def _one_run_pairs(records: Sequence[Record]) -> tuple[int, int]:
    """Pairs of these unchanged runs compared as one run a side (``gpuwhy diff A B``):
    how many were called different."""
    pairs = [(i, j) for i in range(len(records)) for j in range(i + 1, len(records))]
    random.Random(SEED).shuffle(pairs)
    pairs = pairs[:PAIRS]
    called = 0
    for i, j in pairs:
        step = compare(records[i], records[j]).step_time
        called += step is not None and step.called != "same"
    return len(pairs), called


def _notes(
    records: Sequence[Record], loads: list[float | None], runs: int, runs_a_side: int
) -> list[str]:
    notes = []
    programs = {p for r in records if (p := program(r.facts))}
    if len(programs) > 1:
        notes.append(f"the records are of {len(programs)} programs: {', '.join(sorted(programs))}")
    known = [v for v in loads if v is not None]
    if known and max(known) - min(known) >= HOST_SPREAD:
        notes.append(
            f"other processes used {min(known):.0%} to {max(known):.0%} of the host's CPU "
            "during these runs: the spread includes theirs; calibrate on the runner the gate "
            "will use, as loaded as it will be"
        )
    if runs < 2 * runs_a_side:
        notes.append(
            f"{runs} runs cannot be split {runs_a_side} against {runs_a_side}: the figures "
            f"for {runs_a_side} runs a side are from the formula alone"
        )
    if runs < 6:
        notes.append(f"the spread is estimated from {runs} runs: 8 or more make it firmer")
    return notes


def _pct(change: float) -> str:
    return f"{change:.0%}" if math.isfinite(change) else "any size"
