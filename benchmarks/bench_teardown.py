"""How often a tf.data iterator takes seconds to go away, under `python` and `gpuwhy run`.

Whole runs of a loop that took nearly twice their time (the issue's 22.4 s against
41.0 s) were one wait, not a slower loop: the program's thread sat in
``RootDataset::Iterator::~Iterator`` once its loop ended, waiting for tf.data's autotune
thread (``tf_data_model``) to end, with every thread of the process idle (py-spy's native
stack, caught in the wait). That thread runs ``Model::OptimizeLoop``
(tensorflow/core/framework/model.cc): it waits ``optimization_period_ms_`` between two
optimisations, a period that starts at 10 ms and doubles each time up to 60 s. The
iterator's destructor calls ``cancellation_manager_->StartCancel()``, whose callback
wakes the wait, but ``CancellationManager::StartCancelWithStatus`` (tsl) marks itself
cancelled only after all its callbacks ran: a thread woken in between reads
``IsCancelled()`` false and waits out the rest of its period. Where the race goes that
way, a loop ending ``t`` seconds after its first ``next()`` waits until the next
``0.01 * (2**k - 1)`` s (5.11, 10.23, 20.47, 40.95 s, then every 60 s): a loop of
11 s ended at 20.46 s, a loop of 22 s at 41 s. TensorFlow's own race: it happens under
plain `python` too.

This runs ``workloads/iterator_teardown.py`` (many short loops, each on a new iterator,
the teardown timed) alternately under `python` and `gpuwhy run`, and prints per side
the loops whose teardown took over ``--stall-ms`` and the time they lost.

    .venv/bin/python benchmarks/bench_teardown.py [--pairs 2] [--loops 150] [--steps 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
from pathlib import Path

from bench_run import both_sides

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "iterator_teardown.py")


def teardowns(command: list[str], loops: int, steps: int) -> tuple[list[float], list[float]]:
    """Each loop's teardown and loop time, seconds, as the workload printed them."""
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "WORKLOAD_LOOPS": str(loops),
        "WORKLOAD_STEPS": str(steps),
    }
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    lines = {
        name: values
        for name, *values in (ln.split() for ln in out.splitlines() if ln.strip())
        if name in ("TEARDOWN_S", "LOOP_S")
    }
    return [float(v) for v in lines["TEARDOWN_S"]], [float(v) for v in lines["LOOP_S"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--loops", type=int, default=150)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--stall-ms", type=float, default=50.0)
    args = parser.parse_args()
    sides = both_sides(WORKLOAD)
    seen: dict[str, list[float]] = {name: [] for name in sides}
    loop_s: dict[str, list[float]] = {name: [] for name in sides}
    for pair in range(args.pairs):  # alternate, and which side goes first
        for name in list(sides)[:: 1 if pair % 2 == 0 else -1]:
            ends, loops = teardowns(sides[name], args.loops, args.steps)
            seen[name].extend(ends)
            loop_s[name].extend(loops)
    print(
        f"{'side':<11} {'loops':>6} {'loop median':>12} {'teardown median':>16} {'stalls':>7} {'lost':>7}  stalls (s)"
    )
    for name, ends in seen.items():
        stalls = [s for s in ends if s * 1e3 > args.stall_ms]
        print(
            f"{name:<11} {len(ends):>6} {statistics.median(loop_s[name]):>11.3f}s "
            f"{statistics.median(ends) * 1e3:>14.2f}ms {len(stalls):>7} {sum(stalls):>6.2f}s  "
            + " ".join(f"{s:.2f}" for s in stalls)
        )


if __name__ == "__main__":
    main()
