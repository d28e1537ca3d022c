"""Overhead of `gpuwhy run`: the same script with and without gpuwhy, side by side.

Each workload (benchmarks/workloads/) measures its own median step time with
perf_counter and prints it; this script runs it alternately under `python` and under
`gpuwhy run`, several times, and prints the median of those medians and their ratio.
The issue's budget: at most 2% for Keras fit and a custom tf.function loop, 5% for a
loop of small eager ops. A workload that prints its loop's figures (``LOOP_S`` with the
process's and the main thread's CPU over the loop) gets each one's ratio too, and
``--pairs`` prints every pair as it ends: a run that went wrong on one side shows as
itself, not as a wider range. Run: .venv/bin/python benchmarks/bench_run.py [--runs 5]
[--only tiny_steps] [--pairs]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = {"keras_fit": 0.02, "custom_loop": 0.02, "tiny_steps": 0.02, "eager_ops": 0.05}
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))


def step_time(command: list[str]) -> tuple[float, dict[str, float]]:
    """The workload's median step and, where it prints them, its loop's figures.

    The loop's figures are what the workload prints on its ``LOOP_S`` line (the loop's
    wall time, the process's and the main thread's CPU over it), keyed by their names.
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    loops = [ln.split() for ln in out.splitlines() if ln.startswith("LOOP_S ")]
    figures = {k: float(v) for k, v in zip(loops[0][::2], loops[0][1::2])} if loops else {}
    return float(line.split()[1]), figures


def spread(values: list[float]) -> str:
    """Median and range, the way the speed page quotes ratios."""
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(WORKLOADS))
    parser.add_argument(
        "--pairs", action="store_true", help="print each pair's loop times and CPU as it ends"
    )
    args = parser.parse_args()
    print(
        f"{'workload':<12} {'python':>11} {'gpuwhy run':>11} {'ratio':>7} {'budget':>7}  runs"
        "  ratios of the loop's figures, median (min-max)"
    )
    for name, budget in WORKLOADS.items():
        if args.only and name != args.only:
            continue
        script = str(HERE / "workloads" / f"{name}.py")
        plain, watched, ratios = [], [], []
        loops: dict[str, list[float]] = {}
        for run in range(args.runs):  # alternate (and which goes first), so drift hits both
            sides = [[sys.executable, script], [GPUWHY, "run", "-o", os.devnull, script]]
            order = sides if run % 2 == 0 else sides[::-1]
            timed = {tuple(side): step_time(side) for side in order}
            (p, p_loop), (w, w_loop) = timed[tuple(sides[0])], timed[tuple(sides[1])]
            plain.append(p)
            watched.append(w)
            ratios.append(w / p)
            for key in p_loop.keys() & w_loop.keys():
                loops.setdefault(key, []).append(w_loop[key] / p_loop[key])
            if args.pairs:
                shown = "  ".join(
                    f"{key} {p_loop[key]:.2f}/{w_loop[key]:.2f}" for key in sorted(p_loop)
                )
                print(
                    f"  pair {run + 1} python/gpuwhy: step {p * 1e3:.3f}/{w * 1e3:.3f} ms  {shown}"
                )
        ratio = statistics.median(ratios)
        loop = "".join(f"  {key} {spread(values)}" for key, values in sorted(loops.items()))
        print(
            f"{name:<12} {statistics.median(plain) * 1e3:>9.3f}ms {statistics.median(watched) * 1e3:>9.3f}ms "
            f"{ratio:>7.3f} {1 + budget:>7.2f}  {args.runs}{loop}"
        )


if __name__ == "__main__":
    main()
