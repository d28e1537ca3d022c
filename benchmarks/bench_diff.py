"""`gpuwhy diff`'s verdicts on real step series, and its time on two records of a million
steps.

1. **Same program, no change**: 100 pairs, each two *different* recorded runs of one
   unchanged workload (benchmarks/data/diff_series.json.gz, recorded by
   record_diff_series.py: `gpuwhy run` records of benchmarks/workloads/custom_loop.py,
   keras_fit.py and input_bound.py, ten runs each, interleaved on this project's 2-core
   machine), each side a random contiguous stretch of 50-100 % of its run's training.
   Counted: pairs called "no measurable difference" (target: at least 95).
2. **A real 5 % change**: the same 100 pairs with every step of AFTER 5 % longer.
   Counted: pairs called slower (target: at least 95). Also at 3 % and 10 %.
3. **Three runs a side** (`gpuwhy diff base/*.json -- head/*.json`; and with `--noise`,
   a calibration of the workload's four other runs): 100 pairs of sides,
   each side 3 different recorded runs of one workload (6 distinct runs a pair), the
   runs drawn at random from the ten, or interleaved as the docs ask (runs i, i+2, i+4
   against i+1, i+3, i+5: recorded in that order), unchanged and with every step of
   AFTER +5 % and +10 %. Counted as above; "confounded" is a called change the diff
   attributes to the host (the gate does not fail on it). Then `--calibrate` on each
   workload's ten runs: what N runs a side can call on this machine.
4. **Speed**: `gpuwhy diff A.json B.json` on two records of 1,000,000 steps each (a
   record keeps the first 5,000 steps one by one and the run in at most 256 windows
   whatever its length; these are built from a recorded run's series laid out as a
   1,000,000-step run's record would be), median of 5: in-process (load both, compare,
   render) and the command's wall time in a fresh process (target: at most 1 s).

    .venv/bin/python benchmarks/bench_diff.py [--pairs 100] [--seed 1] [--runs 5] [--series F...]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuwhy.collect.quantiles import Sketch
from gpuwhy.comparison import compare, compare_runs
from gpuwhy.comparison.between_runs import Noise
from gpuwhy.comparison.calibration import calibrate, run_spread
from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.facts import Facts, RunTimeline, RunWindow, StepFacts, StepSpan, StepTimeline
from gpuwhy.record import Record
from gpuwhy.report.diff.terminal import render_comparison

SERIES = Path(__file__).resolve().parent / "data" / "diff_series_quiet.json.gz"
LOADED = "diff_series_loaded.json.gz"
KEPT = 5000


def load_runs(path: Path) -> dict[str, list[dict]]:
    with gzip.open(path, "rt") as f:
        runs = json.load(f)["runs"]
    by: dict[str, list[dict]] = {}
    for run in runs:
        by.setdefault(run["workload"], []).append(run)
    return by


def stretch(run: dict, rng: random.Random, slower: float = 1.0) -> Facts:
    """A random contiguous 50-100 % of the run's training, its steps ``slower`` times
    as long, as a record's facts: its steps, and its timeline rows over the same time
    (the host's CPU shares, tf.function seconds)."""
    if run["all_kept"]:
        per_step = [d / 1e6 / run["steps_per_call"] for d in run["durations_us"][run["warmup"] :]]
        n = len(per_step)
        length = rng.randint(n // 2, n)
        first = rng.randint(0, n - length)
        origin = run["timeline"]["windows"][0]["start_s"] + sum(
            d / 1e6 for d in run["durations_us"][: run["warmup"]]
        )
        origin += sum(per_step[:first])
        steps = steps_of([d * slower for d in per_step[first : first + length]], origin)
    else:
        windows = [StepSpan(**w) for w in run["timeline"]["windows"]][1:]  # 1st: warm-up
        windows = [w for w in windows if w.steps >= 3]
        n = len(windows)
        length = rng.randint(max(3, n // 2), n)
        first = rng.randint(0, n - length)
        chosen = [scaled(w, slower) for w in windows[first : first + length]]
        # the steps a long run keeps one by one are its first ones, whatever the stretch
        head = [d / 1e6 * slower for d in run["durations_us"]]
        head_starts = list(itertools.accumulate(head[:-1], initial=windows[0].start_s))
        steps = StepFacts(
            source="tf-data",
            marker="recorded",
            count=sum(w.steps for w in chosen),
            warmup=run["warmup"],
            steps_per_call=run["steps_per_call"],
            starts=tuple(head_starts),
            durations=tuple(head),
            timeline=StepTimeline(width_s=run["timeline"]["width_s"], windows=tuple(chosen)),
            all_kept=False,
        )
    assert steps.timeline is not None
    begin = steps.timeline.windows[0].start_s
    end = steps.timeline.windows[-1].start_s
    rows = tuple(
        RunWindow(**w) for w in run["rows"]["windows"] if begin - 1e-9 <= w["start_s"] <= end + 1e-9
    )
    width = run["rows"]["width_s"] or 1.0
    return Facts(steps=steps, timeline=RunTimeline(width_s=width, run_s=end + width, windows=rows))


def scaled(w: StepSpan, k: float) -> StepSpan:
    def times(v: float | None) -> float | None:
        return None if v is None else v * k

    return replace(
        w,
        p50_s=times(w.p50_s),
        p90_s=times(w.p90_s),
        max_s=w.max_s * k,
        step_s=w.step_s * k,
        input_wait_s=times(w.input_wait_s),
    )


def steps_of(durations: list[float], origin: float = 0.0, width: float = 1.0) -> StepFacts:
    """Steps kept one by one (every one) and their timeline, as a run records them."""
    starts, t = [], origin
    for d in durations:
        starts.append(t)
        t += d
    return StepFacts(
        source="tf-data",
        marker="recorded",
        count=len(durations),
        starts=tuple(starts),
        durations=tuple(durations),
        timeline=timeline_of(starts, durations, width),
        all_kept=True,
    )


def timeline_of(starts: list[float], durations: list[float], width: float) -> StepTimeline:
    windows: dict[int, list[float]] = {}
    for s, d in zip(starts, durations):
        windows.setdefault(int(s // width), []).append(d)
    spans = [span_of(i * width, ds) for i, ds in sorted(windows.items())]
    return StepTimeline(width_s=width, windows=tuple(spans))


def span_of(start_s: float, durations: list[float], steps: int | None = None) -> StepSpan:
    """A window of these steps' durations (``steps``: as many steps, drawn like them)."""
    sketch = Sketch()
    for d in durations:
        sketch.add(d)
    count = steps or len(durations)
    return StepSpan(
        start_s=start_s,
        steps=count,
        p50_s=sketch.quantile(0.5),
        p90_s=sketch.quantile(0.9),
        max_s=max(durations),
        step_s=statistics.fmean(durations) * count,
    )


def halves(run: dict, rng: random.Random, slower: float) -> tuple[Facts, Facts]:
    """One recorded run cut in two at 40-60 % of its training: one process, its own
    wander only (no run-to-run difference), the second part ``slower`` times as long."""
    cut = rng.uniform(0.4, 0.6)
    if run["all_kept"]:
        d = run["durations_us"][run["warmup"] :]
        k = int(len(d) * cut)
        first = {**run, "durations_us": d[:k], "warmup": 0}
        second = {**run, "durations_us": d[k:], "warmup": 0}
    else:
        w = run["timeline"]["windows"]
        k = 1 + int((len(w) - 1) * cut)
        first = {**run, "timeline": {**run["timeline"], "windows": w[:k]}}
        second = {**run, "timeline": {**run["timeline"], "windows": [w[0], *w[k:]]}}
    whole = random.Random(0)  # every step of each part: rng.randint(n, n)
    return stretch_all(first, whole), stretch_all(second, whole, slower)


def stretch_all(run: dict, rng: random.Random, slower: float = 1.0) -> Facts:
    class Whole(random.Random):
        def randint(self, a: int, b: int) -> int:
            return b if a <= b else a  # the whole part: its length, from its start

    return stretch(run, Whole(0), slower)


def verdicts(
    by: dict[str, list[dict]], pairs: int, seed: int, slower: float, within: bool = False
) -> dict:
    """``pairs`` pairs of two different runs of one workload, AFTER ``slower`` times as
    slow: how the diff called them. "confounded" is a called change the diff says may be
    the machine's (a host loaded differently, or saturated): the gate does not fail on
    it."""
    rng = random.Random(seed)
    names = sorted(by)
    counts: dict[str, int] = {}
    per_workload: dict[str, dict[str, int]] = {n: {} for n in names}
    widths = []
    for i in range(pairs):
        name = names[i % len(names)]
        if within:
            first, second = halves(rng.choice(by[name]), rng, slower)
        else:
            a, b = rng.sample(by[name], 2)
            first, second = stretch(a, rng), stretch(b, rng, slower)
        c = compare(Record(command="run", facts=first), Record(command="run", facts=second))
        step = c.step_time
        verdict = "none" if step is None else step.called
        if step is not None and c.confounded_by is not None:
            verdict += " (confounded)"
        counts[verdict] = counts.get(verdict, 0) + 1
        per_workload[name][verdict] = per_workload[name].get(verdict, 0) + 1
        if step is not None:
            widths.append(step.high - step.low)
    return {
        "called": dict(sorted(counts.items())),
        "by_workload": per_workload,
        "median_interval_width": round(statistics.median(widths), 4) if widths else None,
    }


def sides_verdicts(
    by: dict[str, list[dict]],
    pairs: int,
    seed: int,
    slower: float,
    runs: int,
    interleaved: bool,
    calibrated: bool = False,
) -> dict:
    """``pairs`` pairs of sides of ``runs`` distinct recorded runs each, AFTER's steps
    ``slower`` times as long: how the several-runs diff called them. ``calibrated``:
    judged with ``--noise``, a calibration of the workload's other recorded runs."""
    rng = random.Random(seed)
    names = sorted(by)
    counts: dict[str, int] = {}
    widths = []
    for i in range(pairs):
        name = names[i % len(names)]
        total = len(by[name])
        if interleaved:
            first = rng.randint(0, total - 2 * runs)
            chosen = list(range(first, first + 2 * runs))
            b, a = chosen[0::2], chosen[1::2]
            if rng.random() < 0.5:  # which revision ran first
                b, a = a, b
        else:
            chosen = rng.sample(range(total), 2 * runs)
            b, a = chosen[:runs], chosen[runs:]
        before = [Record(command="run", facts=stretch(by[name][j], rng)) for j in b]
        after = [Record(command="run", facts=stretch(by[name][j], rng, slower)) for j in a]
        noise = None
        if calibrated:
            others = [r for j, r in enumerate(by[name]) if j not in (*b, *a)]
            units = [run_units(stretch_all(r, random.Random(0))) for r in others]
            sd = run_spread(units)[0]
            noise = Noise(variance=sd * sd, df=len(units) - 1, source="the other runs")
        c = compare_runs(before, after, noise=noise)
        step = c.step_time
        verdict = "none" if step is None else step.called
        if step is not None and c.confounded_by is not None:
            verdict += " (confounded)"
        counts[verdict] = counts.get(verdict, 0) + 1
        if step is not None:
            widths.append(step.high - step.low)
    return {
        "called": dict(sorted(counts.items())),
        "median_interval_width": round(statistics.median(widths), 4) if widths else None,
    }


def calibrations(by: dict[str, list[dict]]) -> dict:
    """``gpuwhy diff --calibrate`` on each workload's recorded runs, whole."""
    out = {}
    for name, runs in sorted(by.items()):
        records = [Record(command="run", facts=stretch_all(r, random.Random(0))) for r in runs]
        c = calibrate(records, [f"{name}-{i}" for i in range(len(runs))])
        out[name] = {
            "between_runs": c.between_runs,
            "fail_on": c.fail_on,
            "by_runs": {
                r.runs: (r.called_half, r.called_9_in_10, f"{r.splits_called}/{r.splits}")
                for r in c.by_runs
            },
            "one_run_pairs_called": f"{c.one_run_called}/{c.one_run_pairs}",
        }
    return out


def million_step_record(run: dict, rng: random.Random) -> Record:
    """A 1,000,000-step record as gpuwhy run writes one: its first 5,000 steps one by
    one, the run in 256 windows; the windows drawn from the recorded run's."""
    per_step = [d / 1e6 for d in run["durations_us"]]
    kept = [per_step[i % len(per_step)] for i in range(KEPT)]
    mean = statistics.fmean(per_step)
    width = 8.0  # 256 windows of 8 s: 2,048 s of steps
    per_window = 1_000_000 // 256
    windows = [span_of(i * width, rng.choices(per_step, k=200), per_window) for i in range(256)]
    starts, t = [], 0.0
    for d in kept:
        starts.append(t)
        t += d
    steps = StepFacts(
        source="tf-data",
        marker="recorded",
        count=1_000_000,
        warmup=1,
        median_s=statistics.median(per_step),
        total_s=mean * 1_000_000,
        starts=tuple(starts),
        durations=tuple(kept),
        timeline=StepTimeline(width_s=width, windows=tuple(windows)),
        all_kept=False,
    )
    return Record.diagnose("run", Facts(steps=steps))


def spread(by: dict[str, list[dict]]) -> dict:
    """Each workload's runs: the mean step of each (ms), and the others' CPU share."""
    out = {}
    for name, runs in sorted(by.items()):
        means, loads = [], []
        for run in runs:
            windows = run["timeline"]["windows"][1:]
            steps = sum(w["steps"] for w in windows)
            means.append(round(1e3 * sum(w["step_s"] for w in windows) / steps, 2))
            shares = [
                w["cpu_others_share"]
                for w in run["rows"]["windows"]
                if w.get("steps") and w.get("cpu_others_share") is not None
            ]
            loads.append(round(statistics.fmean(shares), 2) if shares else None)
        out[name] = {"mean_step_ms": means, "others_cpu": loads}
    return out


def speed(by: dict[str, list[dict]], runs: int) -> dict:
    rng = random.Random(0)
    source = by["custom_loop"][0]
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a.json", Path(tmp) / "b.json"
        million_step_record(source, rng).save(a)
        million_step_record(source, rng).save(b)
        inside, command = [], []
        for _ in range(runs):
            t = time.perf_counter()
            render_comparison(compare(Record.load(a), Record.load(b)))
            inside.append(time.perf_counter() - t)
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "gpuwhy", "diff", str(a), str(b)],
                check=True,
                capture_output=True,
            )
            command.append(time.perf_counter() - t)
        return {
            "record_bytes": a.stat().st_size,
            "in_process_s": statistics.median(inside),
            "command_s": statistics.median(command),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--series", type=Path, nargs="+", default=[SERIES, SERIES.with_name(LOADED)]
    )
    args = parser.parse_args()
    for series in args.series:
        by = load_runs(series)
        print(f"== {series.name}: recorded runs {spread(by)}")
        for within, what in ((True, "two parts of one run"), (False, "two runs")):
            same = verdicts(by, args.pairs, args.seed, 1.0, within)
            print(f"{what}, unchanged, {args.pairs} pairs: {same}")
            for change in (1.05, 1.10, 1.25):
                slower = verdicts(by, args.pairs, args.seed, change, within)
                print(f"{what}, every AFTER step +{change - 1:.0%}, {args.pairs} pairs: {slower}")
        for interleaved, calibrated in ((False, False), (True, False), (True, True)):
            order = "interleaved" if interleaved else "drawn at random"
            if calibrated:
                order += ", --noise from the other 4 runs"
            for change in (1.0, 1.05, 1.10, 1.25):
                got = sides_verdicts(by, args.pairs, args.seed, change, 3, interleaved, calibrated)
                what = "unchanged" if change == 1.0 else f"every AFTER step +{change - 1:.0%}"
                print(f"3 runs a side ({order}), {what}, {args.pairs} pairs: {got}")
        print(f"--calibrate on each workload's runs: {calibrations(by)}")
    by = load_runs(SERIES)
    print(f"two 1,000,000-step records: {speed(by, args.runs)}")


if __name__ == "__main__":
    main()
