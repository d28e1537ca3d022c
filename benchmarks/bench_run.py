"""Overhead of `gpuwhy run`: the same script with and without gpuwhy, side by side.

Each workload (benchmarks/workloads/) measures its own median step time with
perf_counter and prints it; this script runs it alternately under `python` and under
`gpuwhy run`, several times, and prints the median of those medians and their ratio.
The issue's budget: at most 2% for Keras fit and a custom tf.function loop, 5% for a
loop of small eager ops. A workload that prints its loop's figures (``LOOP_S`` with the
process's and the main thread's CPU over the loop) gets each one's ratio too, and
``--pairs`` prints every pair as it ends: a run that went wrong on one side shows as
itself, not as a wider range. Each process's own wall and CPU time (``PROC_S``,
``PROC_CPU_S``: from its start to its exit, what the issue measured) are ratios too,
fixed costs (imports before the script, the report after it) included. A loop's end
that held its process half a second or more (``END_S``: TensorFlow's race as an iterator
ends, which doubled one of the issue's runs, under python as under gpuwhy) is said per
side: it is in the process's wall time and none of the loop's figures.

Run: .venv/bin/python benchmarks/bench_run.py [--runs 5] [--only tiny_steps] [--pairs]
[--control] [--together]

``--control`` adds a third side, ``python`` with every module ``gpuwhy run`` loads
imported and nothing watching (imported_control.py), and prints the ratios of each pair
of sides: what watching costs, apart from what a process differs from the next by.

``--together`` starts the sides of a run at the same moment instead of one after the
other: both see one state of the machine (a shared host's other load comes and goes
for both), but each is the other's load, a program beside another as busy: on a 2-core
host each gets about a core, so gpuwhy's own threads take time from its program's
instead of using a core that was idle. A pessimistic figure, the loaded machine's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = {"keras_fit": 0.02, "custom_loop": 0.02, "tiny_steps": 0.02, "eager_ops": 0.05}
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
# END_S: how long the loop's end took (its iterator freed), a few ms or the seconds of
# TensorFlow's race at an iterator's end (docs/speed.md): said per side, not as a ratio
NOT_RATIOS = {"END_S"}
HELD_S = 0.5


def both_sides(script: str) -> dict[str, list[str]]:
    """The script as python runs it and as `gpuwhy run` does (its report thrown away)."""
    return {
        "python": [sys.executable, script],
        "gpuwhy run": [GPUWHY, "run", "-o", os.devnull, script],
    }


def step_time(command: list[str]) -> tuple[float, dict[str, float]]:
    """The workload's median step and its figures: the process's wall and CPU time, and
    where the workload prints them, its loop's.

    The loop's figures are what the workload prints on its ``LOOP_S`` line (the loop's
    wall time, the process's and the main thread's CPU over it), keyed by their names.
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    start = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert process.stdout is not None
    out = process.stdout.read()
    process.stdout.close()
    # its own resources (and its children's), whatever else runs beside it (--together)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command, out)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    loops = [ln.split() for ln in out.splitlines() if ln.startswith("LOOP_S ")]
    figures = {k: float(v) for k, v in zip(loops[0][::2], loops[0][1::2])} if loops else {}
    ends = [ln.split() for ln in out.splitlines() if ln.startswith("END_S ")]
    if ends:
        figures["END_S"] = float(ends[0][1])
    figures["PROC_S"] = wall
    figures["PROC_CPU_S"] = usage.ru_utime + usage.ru_stime
    return float(line.split()[1]), figures


def spread(values: list[float]) -> str:
    """Median and range, the way the speed page quotes ratios."""
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def run_sides(
    commands: list[list[str]], args: argparse.Namespace
) -> list[tuple[float, dict[str, float]]]:
    """Each command's figures: one after the other, or all started at once (--together)."""
    if not args.together:
        return [step_time(command) for command in commands]
    with ThreadPoolExecutor(len(commands)) as pool:
        return list(pool.map(step_time, commands))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=sorted(WORKLOADS))
    parser.add_argument(
        "--pairs", action="store_true", help="print each pair's loop times and CPU as it ends"
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="a third side: python with gpuwhy's modules imported, nothing watching",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="start a run's sides at the same moment (each the other's load)",
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
        sides = {
            "python": [sys.executable, script],
            "gpuwhy": [GPUWHY, "run", "-o", os.devnull, script],
        }
        if args.control:
            sides["imported"] = [sys.executable, str(HERE / "imported_control.py"), script]
        names = list(sides)
        steps: dict[str, list[float]] = {side: [] for side in names}
        loops: dict[str, list[dict[str, float]]] = {side: [] for side in names}
        for run in range(args.runs):  # rotate which goes first, so drift hits every side
            order = names[run % len(names) :] + names[: run % len(names)]
            for side, (step, loop) in zip(order, run_sides([sides[s] for s in order], args)):
                steps[side].append(step)
                loops[side].append(loop)
            if args.pairs:
                shown = "  ".join(
                    f"{key} " + "/".join(f"{loops[side][-1][key]:.2f}" for side in names)
                    for key in sorted(loops["python"][-1])
                )
                print(
                    f"  run {run + 1} {'/'.join(names)}: step "
                    + "/".join(f"{steps[side][-1] * 1e3:.3f}" for side in names)
                    + f" ms  {shown}"
                )
        for side in names:  # TensorFlow's race at the loop's end, on either side
            held = [loop["END_S"] for loop in loops[side] if loop.get("END_S", 0.0) >= HELD_S]
            if held:
                print(
                    f"  {side}: {len(held)} of {args.runs} loops' ends held the process "
                    f"{', '.join(f'{s:.2f}' for s in held)} s (an iterator's end: TensorFlow's "
                    "race, docs/speed.md; in PROC_S, not in the loop's figures)"
                )
        comparisons = [("gpuwhy", "python")]
        if args.control:
            comparisons += [("imported", "python"), ("gpuwhy", "imported")]
        for side, against in comparisons:
            ratios = [w / p for p, w in zip(steps[against], steps[side])]
            figures = "".join(
                f"  {key} {spread([w[key] / p[key] for p, w in zip(loops[against], loops[side])])}"
                for key in sorted(loops[against][0].keys() & loops[side][0].keys())
                if key not in NOT_RATIOS
            )
            label = name if (side, against) == ("gpuwhy", "python") else f"  {side}/{against}"
            print(
                f"{label:<12} {statistics.median(steps[against]) * 1e3:>9.3f}ms "
                f"{statistics.median(steps[side]) * 1e3:>9.3f}ms "
                f"{statistics.median(ratios):>7.3f} {1 + budget:>7.2f}  {args.runs}{figures}"
            )


if __name__ == "__main__":
    main()
