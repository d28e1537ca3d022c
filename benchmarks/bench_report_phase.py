"""What gpuwhy does after the program's last line, part by part, in one process.

Every collector's section is filled once the program ended (``Session.stop``): on a
loop of short steps that is most of what ``gpuwhy run`` adds after the last line, and
on a 20 s program every 0.1 s of it is half a point of the 2 % budget. Whole processes
cannot resolve it on a shared 2-core host (python alone moves 0.65-0.87 s after its last
line there), so this runs a loop in a watched session (all of ``gpuwhy run``'s
collectors; the program workloads/tiny_steps.py), stops the session with each
collector's ``fill`` timed, and prints per part the median over ``--runs`` processes.
Run it on two trees (``--tree`` another checkout, compiled as ``make setup`` does) to
compare code before and after, side by side:

    .venv/bin/python benchmarks/bench_report_phase.py [--runs 3] [--steps 20000]
        [--tree /path/to/other/checkout]
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
ROOT = HERE.parent
WORKLOAD = str(HERE / "workloads" / "tiny_steps.py")  # a tf.data loop of short steps

# one process: the loop watched, then every collector's fill timed as the session stops
CHILD = """
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from gpuwhy.collect import registry
from gpuwhy.modes.run.session import Session

parts = {}

def timed(cls):
    fill = cls.fill
    def wrapper(self, gathering):
        start = time.perf_counter()
        try:
            return fill(self, gathering)
        finally:
            parts[cls.__name__] = parts.get(cls.__name__, 0.0) + time.perf_counter() - start
    cls.fill = wrapper

for cls in registry.COLLECTORS:
    timed(cls)
session = Session(command=["bench_report_phase"], collectors=registry.COLLECTORS).start()
import runpy

runpy.run_path(sys.argv[1], run_name="__main__")  # the program: a real file, as run reads it
start = time.perf_counter()
session.stop()
parts["the whole stop"] = time.perf_counter() - start
print("PARTS", json.dumps(parts))
"""


def one_run(tree: Path, steps: int) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "WORKLOAD_STEPS": str(steps),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, WORKLOAD],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
        check=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("PARTS "))
    return json.loads(line[len("PARTS ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--tree", type=Path, help="another checkout, run alternately")
    args = parser.parse_args()
    trees = {"this tree": ROOT}
    if args.tree is not None:
        trees["--tree"] = args.tree.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for r in range(args.runs):
        for name in list(trees)[r % len(trees) :] + list(trees)[: r % len(trees)]:
            runs[name].append(one_run(trees[name], args.steps))
        print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
    names = sorted(
        {part for side in runs.values() for run in side for part in run},
        key=lambda part: -statistics.median(run.get(part, 0.0) for run in runs["this tree"]),
    )
    print(
        f"{'part (ms, median of ' + str(args.runs) + ')':34s}" + "".join(f"{t:>12s}" for t in trees)
    )
    for part in names:
        cells = [statistics.median(run.get(part, 0.0) for run in runs[t]) * 1e3 for t in trees]
        if max(cells) >= 0.5:
            print(f"{part:34s}" + "".join(f"{c:12.1f}" for c in cells))


if __name__ == "__main__":
    main()
