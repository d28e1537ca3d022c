"""What finding stalls costs: per step folded, per GC collection, and in memory.

- fold: a loop's steps through :class:`LoopRecord` without a stall tracker and with one
  (a stall every 200 steps, each attributed against an activity collector's rings
  holding a GC collection per step and a checkpoint per stall), in microseconds per
  step: the drain thread's work, never the program's;
- GC: ``gc.collect(0)`` of an empty young generation, with and without the activity
  collector's ``gc.callbacks`` entry, in microseconds per collection (the one hook on the
  program's thread that runs often);
- memory: a tracker's pickled size after 1,000 and 1,000,000 stalls.

    .venv/bin/python benchmarks/bench_stalls.py [--steps 1000000]
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import time

from gpuwhy.collect.inprocess.activities import ActivityCollector
from gpuwhy.collect.inprocess.stall_tracker import StallTracker
from gpuwhy.collect.inprocess.step_record import LoopRecord, Step


def fold_us(steps: int, tracked: bool) -> float:
    activities = ActivityCollector()
    activities.t0 = 0.0
    record = LoopRecord(0.0, stalls=activities.tracker() if tracked else None)
    t = 0.0
    for i in range(steps):
        length = 0.5 if i % 200 == 199 else 0.01
        if tracked:
            activities._events.append(("gc", t + 0.001, t + 0.0025, None, 0))
            if i % 200 == 199:
                activities._record("checkpoint", t, t + 0.49, "train.py:57", "x")
            if i % 1000 == 0:
                activities.fold()  # the drain's pace: a few hundred steps at a time
        step = Step(t, t + length)
        t += length
        if i == 0:
            start = time.perf_counter()
        record.add(step)
    return (time.perf_counter() - start) / steps * 1e6


def gc_us(hooked: bool, rounds: int = 20000) -> float:
    collector = ActivityCollector()
    if hooked:
        collector.start(time.perf_counter())
    try:
        start = time.perf_counter()
        for _ in range(rounds):
            gc.collect(0)
        return (time.perf_counter() - start) / rounds * 1e6
    finally:
        if hooked:
            collector.stop()


def tracker_bytes(stalls: int) -> int:
    tracker = StallTracker(0.0)
    t = 0.0
    for i in range(30):
        tracker.add(Step(t, t + 0.01))
        t += 0.01
    for i in range(stalls):
        tracker.inside.add(30 + i * 100, t, 0.5, 0.49, [("checkpoint", 0.45, "train.py:57", "x")])
        t += 1.5
    return len(pickle.dumps(tracker.inside))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1_000_000)
    args = parser.parse_args()
    bare = statistics.median(fold_us(args.steps // 5, False) for _ in range(3))
    tracked = statistics.median(fold_us(args.steps // 5, True) for _ in range(3))
    full = fold_us(args.steps, True)
    print(f"fold per step: {bare:.2f} us bare, {tracked:.2f} us tracked "
          f"({args.steps // 5:,} steps); {full:.2f} us tracked over {args.steps:,} steps")  # fmt: skip
    plain = statistics.median(gc_us(False) for _ in range(3))
    hooked = statistics.median(gc_us(True) for _ in range(3))
    print(f"gc.collect(0): {plain:.2f} us bare, {hooked:.2f} us with the callback")
    print(f"tracker group: {tracker_bytes(1000):,} B after 1,000 stalls, "
          f"{tracker_bytes(1_000_000):,} B after 1,000,000")  # fmt: skip


if __name__ == "__main__":
    main()
