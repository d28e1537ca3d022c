"""What folding a step costs the drain thread, per kind of evidence, and what a loop
holds afterwards.

The hooks on the program's thread only append a tuple; the drain thread turns those into
steps (gpuwhy/collect/inprocess/step_streams.py) and bounded state (step_record.py).
That work holds the GIL, so it is time the program's own Python could not run: this
prints its cost per step, in one process, for a Keras fit's batch events, a loop's
next() calls and a tf.function's calls, past the 5,000 steps kept one by one, and the
memory one such loop holds at 100,000 and 1,000,000 steps (tracemalloc).

Run: .venv/bin/python benchmarks/bench_step_fold.py [--steps 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from array import array

from gpuwhy.collect.inprocess.functions import _Watched
from gpuwhy.collect.inprocess.steps import StepCollector


def keras(collector: StepCollector, n: int, t: float) -> None:
    for i in range(n):
        collector._on_keras_event("on_train_batch_begin", t, i)
        collector._on_keras_event("on_train_batch_end", t + 0.0008, i)
        t += 0.001


def loop(collector: StepCollector, n: int, t: float) -> None:
    for _ in range(n):
        collector._on_next(7, "train.py:40", t, t + 0.0001, False)
        t += 0.001


def fold_cost(kind: str, n: int) -> float:
    """Seconds per step to fold ``n`` steps of ``kind`` (events already recorded)."""
    collector = StepCollector()
    if kind == "function":
        watched = _Watched(info=None, location="train.py:12", display="train_step")
        t = collector.t0
        watched.times = array(
            "d", (x for i in range(n) for x in (t + i * 1e-3, t + i * 1e-3 + 8e-4))
        )
        start = time.perf_counter()
        watched.fold(collector.t0, None)
        return (time.perf_counter() - start) / n
    (keras if kind == "keras" else loop)(collector, n, collector.t0)
    start = time.perf_counter()
    collector.fold()
    return (time.perf_counter() - start) / n


def held(n: int) -> int:
    """Bytes one loop of ``n`` steps holds once folded (tracemalloc)."""
    tracemalloc.start()
    collector = StepCollector()
    t = collector.t0
    chunk = 50_000
    for done in range(0, n, chunk):  # as the drain does: a chunk at a time
        loop(collector, min(chunk, n - done), t + done * 0.001)
        collector.fold()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for kind in ("keras", "loop", "function"):
        costs = [fold_cost(kind, args.steps) for _ in range(args.runs)]
        print(
            f"{kind:<9} fold: median {statistics.median(costs) * 1e6:.1f} µs per step "
            f"(runs: {', '.join(f'{c * 1e6:.1f}' for c in costs)}; {args.steps:,} steps each)"
        )
    for n in (100_000, 1_000_000):
        print(f"one loop of {n:>9,} steps holds {held(n) / 2**20:.2f} MiB once folded")


if __name__ == "__main__":
    main()
