"""Overhead of `gpuwhy run`: the same script with and without gpuwhy, side by side.

Each workload (benchmarks/workloads/) measures its own median step time with
perf_counter and prints it; this script runs it alternately under `python` and under
`gpuwhy run`, several times, and prints the median of those medians and their ratio.
The issue's budget: at most 2% for Keras fit and a custom tf.function loop, 5% for a
loop of small eager ops. Run: .venv/bin/python benchmarks/bench_run.py [--runs 5]
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


def step_time(command: list[str]) -> tuple[float, float | None]:
    """The workload's median step and, where it prints one, its whole loop's time."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    loops = [ln for ln in out.splitlines() if ln.startswith("LOOP_S ")]
    return float(line.split()[1]), float(loops[0].split()[1]) if loops else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(WORKLOADS))
    args = parser.parse_args()
    print(
        f"{'workload':<12} {'python':>11} {'gpuwhy run':>11} {'ratio':>7} {'budget':>7}  runs"
        "  loop ratio (min-max)"
    )
    for name, budget in WORKLOADS.items():
        if args.only and name != args.only:
            continue
        script = str(HERE / "workloads" / f"{name}.py")
        plain, watched, ratios, loops = [], [], [], []
        for run in range(args.runs):  # alternate (and which goes first), so drift hits both
            sides = [[sys.executable, script], [GPUWHY, "run", "-o", os.devnull, script]]
            order = sides if run % 2 == 0 else sides[::-1]
            timed = {tuple(side): step_time(side) for side in order}
            (p, p_loop), (w, w_loop) = timed[tuple(sides[0])], timed[tuple(sides[1])]
            plain.append(p)
            watched.append(w)
            ratios.append(w / p)
            if p_loop and w_loop:
                loops.append(w_loop / p_loop)
        ratio = statistics.median(ratios)
        loop = (
            f"  {statistics.median(loops):.3f} ({min(loops):.3f}-{max(loops):.3f})" if loops else ""
        )
        print(
            f"{name:<12} {statistics.median(plain) * 1e3:>9.3f}ms {statistics.median(watched) * 1e3:>9.3f}ms "
            f"{ratio:>7.3f} {1 + budget:>7.2f}  {args.runs}{loop}"
        )


if __name__ == "__main__":
    main()
