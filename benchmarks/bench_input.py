"""gpuwhy.optimize on an input-bound pipeline, and what watching tf.data costs.

Part 1, the fix: benchmarks/workloads/input_bound.py builds a JPEG-decoding pipeline
written the slow way (a sequential map TF keeps sequential, no cache, no prefetch);
each run (a fresh process) calls ``gpuwhy.optimize`` on it, which times the original,
the rewritten pipeline and the ideal (the original's output cached in memory) in
interleaved passes. Printed: the medians over runs of each run's median elements/s,
with the min-max over runs, the speedup and the gap closed = (optimised - original) /
(ideal - original). Target: >= 80% on the deterministic pipeline. The ``shuffle``
variant (a shuffle before batch, as training has) cannot reach the ideal by any
faithful rewrite: the ideal replays one epoch's shuffled batches, while the rewrite
keeps shuffling and batching live; it is printed for what it is.

Part 2, the cost of watching: the workload's own training loop (median step time of
epochs 2-3) run alternately under plain ``python``, with gpuwhy's PipelineCollector
alone started in-process (INPUT_BOUND_COLLECTOR=pipelines), and under ``gpuwhy run``
(every collector the Session has), for the slow pipeline as written and for the fixed
one (fast steps, where per-step costs would show).

Run: .venv/bin/python benchmarks/bench_input.py [--runs 3] [--overhead-runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "input_bound.py")
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _line(out: str, tag: str) -> str:
    (line,) = [ln for ln in out.splitlines() if ln.startswith(tag + " ")]
    return line[len(tag) + 1 :]


def optimise_once(variant: list[str], repeats: int) -> dict:
    out = subprocess.run(
        [sys.executable, WORKLOAD, "--optimize", "--repeats", str(repeats), *variant],
        capture_output=True,
        text=True,
        env=ENV,
        check=True,
    ).stdout
    return json.loads(_line(out, "OPTIMIZE"))


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):>9,.1f}  ({min(values):,.1f}-{max(values):,.1f})"


def part_fix(runs: int, repeats: int) -> None:
    print(
        f"== gpuwhy.optimize on benchmarks/workloads/input_bound.py: {runs} runs, "
        f"{repeats} timed passes per pipeline per run =="
    )
    print(
        "elements = batches of 32; per run: the median over its passes; below: the median "
        "over runs (min-max over runs)"
    )
    for name, variant in (("as written", []), ("with shuffle", ["--shuffle"])):
        results = [optimise_once(variant, repeats) for _ in range(runs)]
        rates = {k: [r[k]["median"] for r in results] for k in ("before", "after", "ideal")}
        gaps = [r["gap_closed"] for r in results if r["gap_closed"] is not None]
        speedups = [r["speedup"] for r in results if r["speedup"]]
        same = {r["elements_checked"] for r in results}
        print(f"\n-- {name} --")
        print(f"  original   {_spread(rates['before'])} elements/s")
        print(
            f"  optimised  {_spread(rates['after'])} elements/s   x{statistics.median(speedups):.1f} "
            f"(x{min(speedups):.1f}-x{max(speedups):.1f})"
        )
        print(f"  ideal      {_spread(rates['ideal'])} elements/s")
        print(
            f"  gap closed {statistics.median(gaps) * 100:>8.0f}%  ({min(gaps) * 100:.0f}%-"
            f"{max(gaps) * 100:.0f}% over runs){'   target >= 80%' if not variant else ''}"
        )
        print(
            "  per-run passes (original, optimised, ideal medians): "
            + "; ".join(
                f"{b:,.0f}/{a:,.0f}/{i:,.0f}"
                for b, a, i in zip(rates["before"], rates["after"], rates["ideal"])
            )
        )
        print(f"  elements checked: {'; '.join(sorted(same))}")
        print(
            "  changes: "
            + "; ".join(
                f"{c['kind']} ({c['code'].splitlines()[0].strip()})" for c in results[0]["changes"]
            )
        )


def step_time(command: list[str], env: dict) -> float:
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    return float(_line(out, "MEDIAN_STEP_S"))


def part_overhead(runs: int) -> None:
    print(
        f"\n== the cost of watching: median step time of input_bound.py's loop, {runs} runs "
        "per mode, alternated =="
    )
    modes = {
        "python": lambda extra: ([sys.executable, WORKLOAD, *extra], ENV),
        "PipelineCollector": lambda extra: (
            [sys.executable, WORKLOAD, *extra],
            {**ENV, "INPUT_BOUND_COLLECTOR": "pipelines"},
        ),
        "gpuwhy run": lambda extra: ([GPUWHY, "run", "-o", os.devnull, WORKLOAD, *extra], ENV),
    }
    print(f"{'pipeline':<12} {'mode':<18} {'median step':>12} {'min-max':>21} {'vs python':>10}")
    for name, extra in (("as written", []), ("fixed", ["--fixed"])):
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        ratios: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(runs):
            plain = None
            for mode, make in modes.items():  # alternate, so drift hits all alike
                command, env = make(extra)
                t = step_time(command, env)
                times[mode].append(t)
                plain = t if mode == "python" else plain
                ratios[mode].append(t / plain)
        for mode in modes:
            ts = times[mode]
            print(
                f"{name:<12} {mode:<18} {statistics.median(ts) * 1e3:>10.3f}ms "
                f"{min(ts) * 1e3:>9.3f}-{max(ts) * 1e3:.3f}ms {statistics.median(ratios[mode]):>10.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="optimize() runs per variant (3)")
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed passes per pipeline per run (5)"
    )
    parser.add_argument("--overhead-runs", type=int, default=5, help="runs per mode (5)")
    parser.add_argument("--only", choices=("fix", "overhead"))
    args = parser.parse_args()
    if args.only != "overhead":
        part_fix(args.runs, args.repeats)
    if args.only != "fix":
        part_overhead(args.overhead_runs)


if __name__ == "__main__":
    main()
