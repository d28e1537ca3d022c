"""Cost of `--target` during a run: the custom tf.function loop
(benchmarks/workloads/custom_loop.py) under `gpuwhy run` and `gpuwhy run --target A100`,
alternately. `--target` profiles a few of the training function's steps under TF's
profiler once it is warm (their ops' time: ops that stay on the CPU) and projects the
step at the end. Printed per side, as medians over --runs: the workload's own median
step, the mean step from the record (steps after warm-up: the profiled ones are
slower, and the mean shows what they add), and the whole command's wall time (the
profile's analysis and the projection included). The issue's budget: the projection
adds at most 1 s to a run.

With --resnet: a ResNet-50 step (benchmarks/workloads/resnet_step.py, 15 steps after
the trace), the seconds its steps took together with and without --target, paired:
what the profiled steps and the profile's end (TF collecting its trace) add.

    .venv/bin/python benchmarks/bench_target.py [--runs 5] [--epochs 3] [--resnet]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "custom_loop.py")


def one_run(target: bool, epochs: int) -> tuple[float, float, float, str]:
    """(median step, mean step, wall seconds, what the projection said of the profile)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "WORKLOAD_EPOCHS": str(epochs)}
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "r.json"
        command = [sys.executable, "-m", "gpuwhy", "run", "--json", str(out)]
        command += ["--target", "A100"] if target else []
        started = time.perf_counter()
        done = subprocess.run([*command, WORKLOAD], capture_output=True, text=True, env=env)
        wall = time.perf_counter() - started
        record = json.loads(out.read_text())
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    steps = record["steps"]
    mean = steps["total_s"] / max(1, steps["count"] - steps["warmup"])
    profiled = ""
    if target and record.get("projection"):
        notes = record["program"]["notes"] + record["projection"]["notes"]
        profiled = next((n for n in notes if "profil" in n), "profiled")
    return float(line.split()[1]), mean, wall, profiled


def resnet_steps(target: bool) -> float:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    command = [sys.executable, "-m", "gpuwhy", "run", *(["--target", "A100"] if target else [])]
    script = str(HERE / "workloads" / "resnet_step.py")
    out = subprocess.run([*command, script], capture_output=True, text=True, env=env).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("STEPS_S ")]
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--resnet", action="store_true")
    args = parser.parse_args()
    if args.resnet:
        pairs = [(resnet_steps(False), resnet_steps(True)) for _ in range(args.runs)]
        print(f"ResNet-50, 15 steps: gpuwhy run {statistics.median(p[0] for p in pairs):.2f} s, "
              f"--target A100 {statistics.median(p[1] for p in pairs):.2f} s, paired "
              f"{statistics.median(p[1] - p[0] for p in pairs):+.2f} s (budget: +1 s)")  # fmt: skip
        return
    found: dict[bool, list[tuple[float, float, float, str]]] = {False: [], True: []}
    for _ in range(args.runs):
        for target in (False, True):
            found[target].append(one_run(target, args.epochs))
    print(f"{'':<18} {'median step':>12} {'mean step':>12} {'wall':>9}")
    for target, label in ((False, "gpuwhy run"), (True, "--target A100")):
        runs = found[target]
        median = statistics.median(r[0] for r in runs)
        mean = statistics.median(r[1] for r in runs)
        wall = statistics.median(r[2] for r in runs)
        print(f"{label:<18} {median * 1e3:>9.3f} ms {mean * 1e3:>9.3f} ms {wall:>7.2f} s")
    base, with_target = found[False], found[True]
    ratios = [t[0] / b[0] for b, t in zip(base, with_target)]
    means = [t[1] / b[1] for b, t in zip(base, with_target)]
    walls = [t[2] - b[2] for b, t in zip(base, with_target)]
    print(
        f"paired: median step x{statistics.median(ratios):.3f}, mean step "
        f"x{statistics.median(means):.3f}, wall {statistics.median(walls):+.2f} s "
        "(budget: +1 s)"
    )


if __name__ == "__main__":
    main()
