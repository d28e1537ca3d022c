"""Where in a loop of short steps watching costs: the loop's steps in chunks, python
against `gpuwhy run` chunk by chunk.

Whole processes of the same loop differ from one run to the next by about what the 2 %
budget allows; what differs between the parts of one loop does not move with the
machine as much. This runs ``workloads/tiny_steps.py`` with ``WORKLOAD_CHUNK`` set (each
chunk's mean and median step printed) alternately under `python` and `gpuwhy run`, and
prints per chunk the median over the pairs of the ratio of `gpuwhy run`'s figure to
python's, then the first 5,000 steps (each loop's head, every one of them timed: the
hooks pause only after them) against the rest.

    .venv/bin/python benchmarks/bench_loop_chunks.py [--pairs 3] [--steps 20000] [--chunk 1000]
        [--baseline DIR] [--setup-s S]

``--baseline DIR`` adds a third side, `gpuwhy run` from another checkout of gpuwhy (made
with ``git worktree add DIR REV``), run in the same rotation: a change's effect side by
side, both against python. ``--setup-s S``: the workload waits S seconds before its
loop, as a program that loads its data first does.

Measured on 2026-12-05 (docs/speed.md): the head 1.05-1.15 of python's mean step, the
chunks after it 0.93-1.04, at 0.34 ms a step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench_run import both_sides

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "tiny_steps.py")
HEAD_STEPS = 5000  # gpuwhy.collect.inprocess.step_record.HEAD_STEPS, not imported: the
# benchmark's own process stays free of gpuwhy


def chunks(
    command: list[str], steps: int, chunk: int, pythonpath: str | None = None, setup_s: float = 0
) -> dict[str, list[float]]:
    """The workload's chunk figures (seconds per step) as it printed them (gpuwhy
    imported from ``pythonpath`` where given)."""
    env = {
        **os.environ,
        **({"PYTHONPATH": pythonpath} if pythonpath else {}),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "WORKLOAD_STEPS": str(steps),
        "WORKLOAD_CHUNK": str(chunk),
        "WORKLOAD_SETUP_S": str(setup_s),
    }
    # run from the other checkout where given: ``python -m`` puts the working directory
    # first on the path, ahead of PYTHONPATH's
    out = subprocess.run(
        command, capture_output=True, text=True, env=env, check=True, cwd=pythonpath
    ).stdout
    return {
        name: [float(v) for v in values]
        for name, *values in (line.split() for line in out.splitlines() if line.strip())
        if name in ("CHUNK_MEAN_S", "CHUNK_MEDIAN_S")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--baseline", help="another checkout of gpuwhy, run as a third side")
    parser.add_argument("--setup-s", type=float, default=0.0, help="seconds before the loop")
    args = parser.parse_args()
    if args.steps <= HEAD_STEPS:
        parser.error(f"--steps must be over the head's {HEAD_STEPS:,} steps, to compare the rest")
    sides = both_sides(WORKLOAD)
    paths: dict[str, str | None] = dict.fromkeys(sides)
    if args.baseline:
        baseline = f"gpuwhy run ({args.baseline})"
        sides[baseline] = [sys.executable, "-m", "gpuwhy", "run", "-o", os.devnull, WORKLOAD]
        paths[baseline] = str(Path(args.baseline).resolve())
    runs: dict[str, list[dict[str, list[float]]]] = {name: [] for name in sides}
    for i in range(args.pairs):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for name in order:
            runs[name].append(
                chunks(sides[name], args.steps, args.chunk, paths[name], args.setup_s)
            )
    head = max(1, HEAD_STEPS // args.chunk)
    for name in (n for n in sides if n != "python"):
        print(f"== {name}")
        _compare(runs[name], runs["python"], head, args.chunk)
    step = statistics.median(statistics.median(r["CHUNK_MEDIAN_S"]) for r in runs["python"])
    print(f"python's median step {step * 1e6:.1f} µs")


def _compare(
    watched: list[dict[str, list[float]]],
    python: list[dict[str, list[float]]],
    head: int,
    chunk: int,
) -> None:
    """One side's chunks against python's, run by run in rotation order."""
    for figure in ("CHUNK_MEAN_S", "CHUNK_MEDIAN_S"):
        pairs = list(zip(watched, python))
        per_chunk = [
            statistics.median(w[figure][k] / p[figure][k] for w, p in pairs)
            for k in range(min(len(w[figure]) for w, _ in pairs))
        ]
        parts = {
            "first 5,000": [sum(w[figure][:head]) / sum(p[figure][:head]) for w, p in pairs],
            "after": [sum(w[figure][head:]) / sum(p[figure][head:]) for w, p in pairs],
            "whole loop": [sum(w[figure]) / sum(p[figure]) for w, p in pairs],
        }
        print(f"{figure} per chunk of {chunk} steps, against python:")
        print("  " + " ".join(f"{r:.3f}" for r in per_chunk))
        for part, ratios in parts.items():
            print(
                f"  {part}: {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}-{max(ratios):.3f}, {len(ratios)} pairs)"
            )


if __name__ == "__main__":
    main()
