"""The time between Keras' ``on_train_end`` and ``fit`` returning, and the whole program's
wall time, under ``python`` and under ``gpuwhy run``, paired run by run.

gpuwhy must never change the program's own time. An iterator that gpuwhy kept alive to
the end of ``fit`` made ``fit`` wait on its way out for tf.data's autotune thread (up to
its optimisation period, up to a minute); this measures that wait on an OCR-style fit
(benchmarks/workloads/ocr_fit.py: PNG decode in a parallel map, a py_function label
encoder, validation every epoch). Both sides see the same TF behaviour (TF can lose the
wake-up of an autotune thread whenever an iterator is freed, python included): what must
match is the distribution, so compare medians and the count of slow exits over several
runs. Run: .venv/bin/python benchmarks/bench_end_of_fit.py [--runs 5] [--epochs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = str(HERE / "workloads" / "ocr_fit.py")
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
SLOW_S = 2.0  # an exit slower than this counts as a stall


def timings(command: list[str], epochs: int) -> tuple[float, float]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "OCR_EPOCHS": str(epochs)}
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    values = dict(line.split() for line in out.splitlines() if line.endswith(tuple("0123456789")))
    return float(values["END_OF_FIT_S"]), float(values["PROGRAM_S"])


def summary(name: str, rows: list[tuple[float, float]]) -> str:
    ends = [end for end, _ in rows]
    walls = [wall for _, wall in rows]
    slow = sum(end > SLOW_S for end in ends)
    return (
        f"{name:<11} end of fit median {statistics.median(ends):7.3f}s max {max(ends):7.3f}s "
        f"slow (>{SLOW_S:g}s) {slow}/{len(ends)}   program median {statistics.median(walls):7.2f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    plain, watched = [], []
    print(f"{'run':<4} {'python end/program':>22} {'gpuwhy end/program':>22}")
    for number in range(1, args.runs + 1):  # alternate, so drift hits both alike
        p = timings([sys.executable, SCRIPT], args.epochs)
        w = timings([GPUWHY, "run", "-o", os.devnull, SCRIPT], args.epochs)
        plain.append(p)
        watched.append(w)
        print(f"{number:<4} {p[0]:>9.3f}s {p[1]:>9.2f}s {w[0]:>10.3f}s {w[1]:>9.2f}s", flush=True)
    print(summary("python", plain))
    print(summary("gpuwhy run", watched))


if __name__ == "__main__":
    main()
