"""What gpuwhy's frames below the script cost each eager op the script runs.

TensorFlow captures the Python stack at every eager op (``StackTrace::Capture`` in its
fast path) and reads each frame's line: a scan of the frame's code's line table up to
where the frame waits. Under ``gpuwhy run`` the frames gpuwhy keeps below the script
are read too. Two figures, from a script run under ``python`` and under ``gpuwhy run``
(``python -m gpuwhy``, as the tests run it) of this tree and, with ``--tree``, of
another checkout, alternately:

- ``lines``: the microseconds of one read of ``f_lineno`` of each frame below the
  script (100,000 reads each, summed): what every eager op pays for them;
- ``op``: the microseconds of one small eager op (``tf.identity``, 200,000 calls) at the
  script's top, the eager op counter off (``--no-eager``): the whole of it.

Run: .venv/bin/python benchmarks/bench_stack_lines.py [--runs 3] [--tree /other/checkout]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import sys, time
frame, lines = sys._getframe().f_back, 0.0
while frame is not None:
    t = time.perf_counter()
    for _ in range(100000):
        frame.f_lineno
    lines += (time.perf_counter() - t) / 100000 * 1e6
    frame = frame.f_back
print("LINES_US", lines)
import tensorflow as tf
x = tf.constant(1.0)
for _ in range(20000):
    tf.identity(x)
t = time.perf_counter()
for _ in range(200000):
    tf.identity(x)
print("OP_US", (time.perf_counter() - t) / 200000 * 1e6)
"""


def one_run(tree: Path | None, probe: Path) -> dict[str, float]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if tree is None:
        command = [sys.executable, str(probe)]
    else:
        env["PYTHONPATH"] = str(tree)
        command = [sys.executable, "-m", "gpuwhy", "run", "-o", os.devnull, "--no-eager"]
        command.append(str(probe))
    out = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=probe.parent, check=True
    ).stdout
    figures = dict(
        line.split() for line in out.splitlines() if line.startswith(("LINES_US", "OP_US"))
    )
    return {"lines": float(figures["LINES_US"]), "op": float(figures["OP_US"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tree", type=Path, help="another checkout, run alternately")
    args = parser.parse_args()
    sides: dict[str, Path | None] = {"python": None, "gpuwhy run (this tree)": ROOT}
    if args.tree is not None:
        sides["gpuwhy run (--tree)"] = args.tree.resolve()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as folder:
        probe = Path(folder) / "probe.py"
        probe.write_text(PROBE)
        for r in range(args.runs):
            names = list(sides)
            for name in names[r % len(names) :] + names[: r % len(names)]:
                runs[name].append(one_run(sides[name], probe))
            print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
    plain_op = statistics.median(run["op"] for run in runs["python"])
    for name, figures in runs.items():
        lines = statistics.median(run["lines"] for run in figures)
        op = statistics.median(run["op"] for run in figures)
        print(
            f"{name:24s} lines below the script {lines:5.2f} us an op; "
            f"tf.identity {op:5.2f} us ({op / plain_op:.3f} of python's)"
        )


if __name__ == "__main__":
    main()
