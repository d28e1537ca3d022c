"""Cost of one live-metrics update as a run grows: what the metrics thread does every
``--metrics-interval`` (the live facts, the rules on them, the series updated), timed in
a Session fed N steps of a ``for x in ds`` loop through the step collector's own hook.

The steps are synthetic (``next()`` calls 10 µs apart, so 1,000,000 fit in 10 s of the
clock), TensorFlow is imported so every live collector answers, and nothing runs on a
GPU. After each length's steps are folded (as the drain thread folds them while a
program runs), ``--updates`` updates are timed (wall clock, and the CPU time of the
thread that makes them, which other processes on a busy machine do not inflate); the
figures are medians, beside the steps the last one published (every step after
warm-up: the histogram follows the run).

    .venv/bin/python benchmarks/bench_live_update.py [--steps 10000 200000] [--updates 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SPACING_S = 10e-6  # between two synthetic steps


def measure(steps: int, updates: int) -> tuple[float, float, int, int]:
    """(median seconds per update, median CPU seconds of the updating thread, steps
    counted, steps in the step histogram)."""
    import tensorflow as tf  # noqa: F401 - every live collector answers once TF is imported

    from gpuwhy.export.live import LiveMetrics, MetricsOptions, _rule_ids
    from gpuwhy.modes.run.session import Session

    session = Session(hz=1, audit=False, eager=False, command=["bench.py"]).start()
    live = LiveMetrics(MetricsOptions(), "run", "bench.py", session.t0, session.live)
    from gpuwhy.export.prometheus import PrometheusMetrics

    live.metrics = PrometheusMetrics({}, {"mode": "run", "command": "bench.py", "version": "0"})
    collector = session.steps
    assert session.t0 is not None
    t = session.t0
    chunk = 50_000
    for first in range(0, steps + 1, chunk):  # one more read: it ends the last step
        for i in range(first, min(first + chunk, steps + 1)):
            start = t + i * SPACING_S
            collector._on_next(1, ("bench.py", 12), start, start + SPACING_S / 4, False)
        collector.fold()
    time.sleep(max(0.0, t + (steps + 1) * SPACING_S - time.perf_counter()))
    timings, cpu = [], []
    for _ in range(updates):
        started, started_cpu = time.perf_counter(), time.thread_time()
        facts, loops = session.live()
        live.update(facts, loops, _rule_ids(facts))
        timings.append(time.perf_counter() - started)
        cpu.append(time.thread_time() - started_cpu)
    counted = facts.steps.count - facts.steps.warmup if facts.steps is not None else 0
    published = live._published.count
    session.stop()
    return statistics.median(timings), statistics.median(cpu), counted, published


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[10_000, 200_000])
    parser.add_argument("--updates", type=int, default=7)
    args = parser.parse_args()
    print(f"{'steps':>10} {'update':>10} {'its CPU':>10} {'counted':>10} {'published':>10}")
    for steps in args.steps:
        seconds, cpu, counted, published = measure(steps, args.updates)
        print(
            f"{steps:>10,} {seconds * 1e3:>8.1f}ms {cpu * 1e3:>8.1f}ms {counted:>10,} {published:>10,}"
        )


if __name__ == "__main__":
    main()
