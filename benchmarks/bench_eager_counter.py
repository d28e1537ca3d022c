"""What counting eager ops costs a loop of small eager ops (issue 5: at most 5%).

One process, TensorFlow imported once. Each round runs the same loop of 8x8 eager ops
(``a + b``, ``tf.matmul``, ``tf.nn.relu``) three ways, side by side so that all three see
the same machine load:

* bare: nothing armed;
* armed: an :class:`EagerOpCounter` armed just before the loop and stopped after it,
  with its default windows (what ``gpuwhy run`` does);
* always on: the recording callback on for the whole loop (the cost of one window).

Each loop runs for about ``--seconds`` (a fixed number of ops, sized on a first bare
run), so the armed loop sees the windows of a run that long. The default, 11.5 s, is
the worst case for the counter's default windows: the loop ends as the second window
closes, with the callback on 1.5 s of it (13%); longer runs tend to 1/11. The figures are the
median and the fastest time per op over ``--runs`` rounds (the fastest is the one
least disturbed by other load on the machine) and the median of each round's ratio.
Run:

    .venv/bin/python benchmarks/bench_eager_counter.py [--runs 5] [--seconds 11.5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tensorflow as tf

from gpuwhy.collect.inprocess.base import StepWindow
from gpuwhy.collect.inprocess.eager import EagerOpCounter
from gpuwhy.tfapi import op_callbacks

A = tf.random.normal((8, 8))
B = tf.random.normal((8, 8))
OPS_PER_ITERATION = 3


def loop(iterations: int) -> float:
    """Seconds per eager op over ``iterations`` of three small ops."""
    start = time.perf_counter()
    for _ in range(iterations):
        c = A + B
        c = tf.matmul(c, A)
        c = tf.nn.relu(c)
    return (time.perf_counter() - start) / (iterations * OPS_PER_ITERATION)


def armed(iterations: int) -> tuple[float, float]:
    """(seconds per op, share of the loop the callback was on)."""
    counter = EagerOpCounter()
    counter.start(time.perf_counter())
    counter.on_tensorflow()
    start = time.perf_counter()
    per_op = loop(iterations)
    end = time.perf_counter()
    counter.stop()
    facts = counter.facts(StepWindow(counter.t0))
    return per_op, facts.counted_s / (end - start)


def always_on(iterations: int) -> float:
    records: list = []
    switch = op_callbacks.CallbackSwitch(
        op_callbacks.thread_callbacks(),
        op_callbacks.recording_callback(records.append, op_callbacks.UserFrames()),
    )
    switch.on()
    try:
        return loop(iterations)
    finally:
        switch.off()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=11.5)
    args = parser.parse_args()

    loop(5000)  # warm-up
    per_op = loop(20000)  # sizing
    iterations = max(1000, int(args.seconds / (per_op * OPS_PER_ITERATION)))
    print(
        f"{iterations} iterations x {OPS_PER_ITERATION} ops of 8x8 per loop, "
        f"~{args.seconds:.0f} s each, {args.runs} rounds; TF {tf.__version__}, "
        f"{os.cpu_count()} CPUs"
    )

    bare, counted, on, shares = [], [], [], []
    for round_ in range(args.runs):
        order = ["bare", "armed", "on"] if round_ % 2 == 0 else ["on", "armed", "bare"]
        for kind in order:
            if kind == "bare":
                bare.append(loop(iterations))
            elif kind == "armed":
                seconds, share = armed(iterations)
                counted.append(seconds)
                shares.append(share)
            else:
                on.append(always_on(iterations))
        print(
            f"  round {round_ + 1}: bare {bare[-1] * 1e6:.2f} µs/op, "
            f"armed {counted[-1] * 1e6:.2f} µs/op (on {shares[-1]:.0%} of the loop), "
            f"always on {on[-1] * 1e6:.2f} µs/op"
        )

    for name, figure in (("median", statistics.median), ("fastest", min)):
        b, a, o = figure(bare), figure(counted), figure(on)
        print(
            f"{name} per op: bare {b * 1e6:.2f} µs, armed {a * 1e6:.2f} µs "
            f"({a / b - 1:+.1%}), always on {o * 1e6:.2f} µs ({o / b - 1:+.1%})"
        )
    paired = statistics.median(a / b for a, b in zip(counted, bare))
    print(
        f"armed / bare, median of the rounds' ratios: {paired:.3f} "
        f"(callback on {statistics.median(shares):.0%} of the loop)"
    )
    print(
        f"always on / bare, median of the rounds' ratios: "
        f"{statistics.median(o / b for o, b in zip(on, bare)):.3f}"
    )


if __name__ == "__main__":
    main()
