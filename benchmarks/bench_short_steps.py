"""What watching costs a loop of very short steps, measured side by side in one process.

`bench_run.py` compares whole processes, python against `gpuwhy run`: on a shared
2-core machine two processes a minute apart differ by more than the 2 % this asks of
gpuwhy. Here one process runs the same `for x in ds: train_step(x)` loop of
`tf.function` steps over tf.data again and again, alternately plain and inside
`gpuwhy.session()` (the collectors `gpuwhy run` uses, in the same process), so each
watched loop has a plain one beside it. Printed: per loop, the wall time and the main
thread's CPU time per step; then the medians and the median of the paired ratios.

    .venv/bin/python benchmarks/bench_short_steps.py [--rounds 7] [--steps 6000] [--size 16]
        [--session eager=False] [--every]

``--session NAME=VALUE`` (repeated) passes ``gpuwhy.session()`` an option of ``gpuwhy run``
(``eager=False`` is ``--no-eager``): what one collector costs, measured apart.
``--every`` adds a third loop to each round, watched with every step timed
(``--time-every-step``: the hooks never pause), so the pauses' gain is a ratio measured
side by side; ``--steps`` must then be well over the 5,000 steps a loop times one by one
before its hooks may pause (30,000 is 6 s of 0.2 ms steps).

``--size`` sets the matmul (16: steps of ~0.2 ms here; 288 with ``--batch 160``: ~0.5 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=6000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--session", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--every", action="store_true", help="also watch with every step timed")
    args = parser.parse_args()
    options = {k: _value(v) for k, _, v in (o.partition("=") for o in args.session)}

    import tensorflow as tf

    import gpuwhy

    size, steps = args.size, args.steps
    w = tf.Variable(tf.random.uniform((size, size), seed=1))

    @tf.function
    def train_step(x):
        w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))
        return w

    data = tf.random.uniform((4096, size), seed=0)
    ds = tf.data.Dataset.from_tensor_slices(data).repeat().batch(args.batch).take(steps)
    ds = ds.prefetch(2)

    def loop() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.thread_time()
        for x in ds:
            train_step(x)
        return (time.perf_counter() - start) / steps, (time.thread_time() - cpu) / steps

    loop()  # traced and warm
    plain: list[tuple[float, float]] = []
    watched: list[tuple[float, float]] = []
    every: list[tuple[float, float]] = []
    for i in range(args.rounds):
        plain.append(loop())
        sides = [(watched, options)]
        if args.every:
            sides.append((every, {**options, "pause_timing": False}))
        for kept, chosen in sides if i % 2 == 0 else sides[::-1]:
            with gpuwhy.session(**chosen):
                kept.append(loop())
    print("round   plain wall / cpu per step     watched wall / cpu per step")
    for i, (p, w_) in enumerate(zip(plain, watched)):
        print(
            f"{i + 1:>5}   {p[0] * 1e6:8.1f} / {p[1] * 1e6:6.1f} µs"
            f"         {w_[0] * 1e6:8.1f} / {w_[1] * 1e6:6.1f} µs"
            + (f"   every step timed {every[i][0] * 1e6:8.1f} µs" if every else "")
        )
    for label, side in (("watched", watched), ("every step timed", every)):
        if not side:
            continue
        for k, what in ((0, "wall"), (1, "main thread's CPU")):
            ratios = [b[k] / a[k] for a, b in zip(plain, side)]
            print(
                f"{what}: plain {statistics.median(a[k] for a in plain) * 1e6:.1f} µs, "
                f"{label} {statistics.median(b[k] for b in side) * 1e6:.1f} µs, "
                f"median paired ratio {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}-{max(ratios):.3f})"
            )


def _value(text: str) -> object:
    """An option's value as written: True/False/None, a number, else the text."""
    named = {"True": True, "False": False, "None": None}
    if text in named:
        return named[text]
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


if __name__ == "__main__":
    main()
