"""How often gpuwhy's own threads wake during a loop, and the CPU they take.

Each wake-up of a Python thread takes the GIL from the program's thread: on a loop of
short steps the program waits for it back, and on a busy host the thread holding it may
lose its core for a scheduler's quantum meanwhile. A count of wake-ups is a figure that
does not depend on the machine's noise, where the loop's time (bench_short_steps.py,
bench_run.py) does: this prints, per gpuwhy thread alive at the loop's end, its wake-ups
a second (the kernel's voluntary context switches of that thread) and its CPU time, over
a loop of ``--seconds`` of tiny ``tf.function`` steps over tf.data inside
``gpuwhy.session()``, the collectors ``gpuwhy run`` uses.

    .venv/bin/python benchmarks/bench_wakeups.py [--seconds 20] [--warm 3]

``--warm`` runs the loop that many seconds more before measuring: past each loop's
first steps, all timed, and the hooks' first pause (the steady state of a long loop).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def switches(native_id: int) -> int | None:
    """The thread's voluntary context switches so far (None: not readable here)."""
    try:
        with open(f"/proc/self/task/{native_id}/status") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_s(thread: threading.Thread) -> float | None:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident or 0))
    except (OSError, AttributeError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warm", type=float, default=0.0, help="seconds of steps before measuring")
    args = parser.parse_args()

    import tensorflow as tf

    import gpuwhy

    w = tf.Variable(tf.random.uniform((16, 16), seed=1))

    @tf.function
    def train_step(x):
        w.assign_sub(0.0001 * tf.matmul(tf.transpose(x), tf.matmul(x, w)))

    ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((1024, 16), seed=0))
    ds = ds.repeat().batch(16).prefetch(2)
    with gpuwhy.session():
        iterator = iter(ds)
        for _ in range(200):  # traced, warm, every collector started
            train_step(next(iterator))
        warming = time.perf_counter()
        while time.perf_counter() - warming < args.warm:
            train_step(next(iterator))
        ours = [t for t in threading.enumerate() if t.name.startswith("gpuwhy")]
        before = {t: (switches(t.native_id or 0), cpu_s(t)) for t in ours}
        began = time.perf_counter()
        steps = 0
        while time.perf_counter() - began < args.seconds:
            train_step(next(iterator))
            steps += 1
        seconds = time.perf_counter() - began
        after = {t: (switches(t.native_id or 0), cpu_s(t)) for t in ours if t.is_alive()}
    print(f"{steps} steps in {seconds:.1f} s ({seconds / steps * 1e6:.0f} µs a step)")
    print(f"{'thread':<24} {'wake-ups/s':>10} {'CPU ms/s':>9}")
    total_wakes = total_cpu = 0.0
    for thread, (s1, c1) in sorted(after.items(), key=lambda kv: kv[0].name):
        s0, c0 = before[thread]
        wakes = (s1 - s0) / seconds if s1 is not None and s0 is not None else float("nan")
        cpu = (c1 - c0) / seconds * 1e3 if c1 is not None and c0 is not None else float("nan")
        total_wakes += wakes
        total_cpu += cpu
        print(f"{thread.name:<24} {wakes:>10.1f} {cpu:>9.2f}")
    print(f"{'all of gpuwhy':<24} {total_wakes:>10.1f} {total_cpu:>9.2f}")


if __name__ == "__main__":
    main()
