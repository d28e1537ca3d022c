"""Cost of `%%gpuwhy` on a notebook cell, beside `gpuwhy run` on the same code.

Each workload (benchmarks/workloads/) measures its own median step time and prints it.
It runs four ways, each in a fresh process, alternating so that drift hits them all:
``python SCRIPT`` and ``gpuwhy run SCRIPT``; and as one cell of an IPython shell (the
in-process shell, as a notebook's kernel runs a cell) without and with ``%%gpuwhy``.
Printed: the medians over the runs of the step times, the two ratios side by side
(what watching costs the steps), and the cell's wall time with the magic over without
(the steps plus stopping the session and rendering the inline report, HTML and text).

    .venv/bin/python benchmarks/bench_notebook.py [--runs 5] [--only keras_fit]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = ("keras_fit", "custom_loop", "eager_ops")
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))


def run_cell(script: str, magic: bool) -> None:
    """In this process: the script as one cell of an IPython shell, with or without
    ``%%gpuwhy``; prints the cell's own MEDIAN_STEP_S and CELL_S, its wall time."""
    from IPython.testing.globalipapp import start_ipython
    from IPython.utils.capture import capture_output

    shell = start_ipython()
    shell.run_line_magic("load_ext", "gpuwhy")
    source = Path(script).read_text()
    cell = f"%%gpuwhy\n{source}" if magic else source
    with capture_output() as captured:
        start = time.perf_counter()
        result = shell.run_cell(cell)
        seconds = time.perf_counter() - start
    result.raise_error()
    if magic:
        assert any("text/html" in o.data for o in captured.outputs), "no report shown"
    (line,) = [ln for ln in captured.stdout.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    print(line)
    print(f"CELL_S {seconds:.6f}")


def measured(command: list[str]) -> dict[str, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    values = {}
    for line in out.splitlines():
        key, _, value = line.partition(" ")
        if key in ("MEDIAN_STEP_S", "CELL_S"):
            values[key] = float(value)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", choices=WORKLOADS)
    parser.add_argument("--cell", metavar="SCRIPT", help=argparse.SUPPRESS)
    parser.add_argument("--magic", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        run_cell(args.cell, args.magic)
        return
    print(
        f"{'workload':<12} {'python':>9} {'gpuwhy run':>11} {'ratio':>6}   "
        f"{'cell':>9} {'%%gpuwhy':>9} {'ratio':>6}   {'cell wall ratio':>15}  runs"
    )
    for name in WORKLOADS:
        if args.only and name != args.only:
            continue
        script = str(HERE / "workloads" / f"{name}.py")
        ways = {
            "python": [sys.executable, script],
            "run": [GPUWHY, "run", "-o", os.devnull, script],
            "cell": [sys.executable, __file__, "--cell", script],
            "magic": [sys.executable, __file__, "--cell", script, "--magic"],
        }
        steps: dict[str, list[float]] = {way: [] for way in ways}
        cells: dict[str, list[float]] = {"cell": [], "magic": []}
        run_ratios, magic_ratios, wall_ratios = [], [], []
        for run in range(args.runs):
            order = list(ways) if run % 2 == 0 else list(ways)[::-1]
            got = {way: measured(ways[way]) for way in order}
            for way in ways:
                steps[way].append(got[way]["MEDIAN_STEP_S"])
            for way in cells:
                cells[way].append(got[way]["CELL_S"])
            run_ratios.append(steps["run"][-1] / steps["python"][-1])
            magic_ratios.append(steps["magic"][-1] / steps["cell"][-1])
            wall_ratios.append(cells["magic"][-1] / cells["cell"][-1])
        ms = {way: statistics.median(values) * 1e3 for way, values in steps.items()}
        print(
            f"{name:<12} {ms['python']:>7.3f}ms {ms['run']:>9.3f}ms "
            f"{statistics.median(run_ratios):>6.3f}   {ms['cell']:>7.3f}ms {ms['magic']:>7.3f}ms "
            f"{statistics.median(magic_ratios):>6.3f}   "
            f"{statistics.median(wall_ratios):>6.3f} ({statistics.median(cells['cell']):.1f}s->"
            f"{statistics.median(cells['magic']):.1f}s)  {args.runs}"
        )


if __name__ == "__main__":
    main()
