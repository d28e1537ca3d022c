"""What ``gpuwhy run`` adds outside the program's loop: before its first line, after its
last line, and the CPU of both, against ``python`` running the same script.

On a 20 s program every 0.1 s outside the loop is half a point of the 2 % budget, so this
is measured on its own, phase by phase: the workload (workloads/fixed_cost.py) imports
TensorFlow, runs an op and prints the wall clock at its first and its last line; this
script stamps the process's start and end around it. The sides alternate, the first one
of each round rotating, and the medians of each phase are printed with their ranges.

    .venv/bin/python benchmarks/bench_fixed_cost.py [--runs 7] [--gpuwhy-args '--no-audit']
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "fixed_cost.py")
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))


def one_run(command: list[str]) -> dict[str, float]:
    """One process: seconds before the script's first line, of the script, after its last
    line, in all, and the CPU the process used (user + system)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    end = time.time()
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    stamps = dict(ln.split()[:2] for ln in out.splitlines() if ln.startswith(("FIRST", "LAST")))
    first, last = float(stamps["FIRST"]), float(stamps["LAST"])
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {
        "before": first - start,
        "script": last - first,
        "after": end - last,
        "total": end - start,
        "cpu": cpu,
    }


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--gpuwhy-args",
        default="",
        help="options given to gpuwhy run before the script (default: none)",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="a third side: python with every module gpuwhy run loads imported first",
    )
    args = parser.parse_args()
    sides = {
        "python": [sys.executable, WORKLOAD],
        "gpuwhy run": [GPUWHY, "run", *args.gpuwhy_args.split(), WORKLOAD],
    }
    if args.control:
        sides["control"] = [sys.executable, str(HERE / "imported_control.py"), WORKLOAD]
    results: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    names = list(sides)
    for round_no in range(args.runs):
        turn = round_no % len(names)
        order = names[turn:] + names[:turn]
        for name in order:
            results[name].append(one_run(sides[name]))
        print(f"round {round_no + 1}/{args.runs} done", file=sys.stderr)
    for phase in ("before", "script", "after", "total", "cpu"):
        cells = [f"{name} {spread([r[phase] for r in results[name]])} s" for name in names]
        print(f"{phase:7s} " + "   ".join(cells))
    for phase in ("before", "after"):
        extra = [
            g[phase] - p[phase]
            for g, p in zip(results["gpuwhy run"], results["python"], strict=True)
        ]
        print(f"gpuwhy run's extra {phase} per pair {spread(extra)} s")
    extra = [
        g["total"] - p["total"]
        for g, p in zip(results["gpuwhy run"], results["python"], strict=True)
    ]
    extra_cpu = [
        g["cpu"] - p["cpu"] for g, p in zip(results["gpuwhy run"], results["python"], strict=True)
    ]
    print(f"gpuwhy run's extra wall per pair {spread(extra)} s, CPU {spread(extra_cpu)} s")


if __name__ == "__main__":
    main()
