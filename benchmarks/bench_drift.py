"""The drift method's false-alarm rate on healthy runs, and how often it finds a real
slowdown, measured on real step times (gpuwhy/derived/change_points.py).

Healthy step series come from real programs run under ``gpuwhy run`` on this machine (a
Keras fit with validation after each epoch and a learning-rate schedule; a custom
tf.function loop over epochs): their first steps one by one, with whatever noise the
machine put in them. Synthetic runs are drawn from them by a block bootstrap (blocks of
consecutive steps, so a slow stretch stays a stretch): a random number of windows (12 to
256) of a random number of steps (20 to 400), each window's time per step as the rule
reads it (its steps' time less its slowest, over the rest).

- false alarms: the share of healthy synthetic runs in which the method calls any change
  (the rule reports slowdowns only: both are printed);
- detection: the same runs with every step after a random point (30-70 % of the run)
  made 15, 25, 38 or 50 % slower: the share found within two windows of that point.

Run: .venv/bin/python benchmarks/bench_drift.py [--runs 1000] [--records a.json b.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpuwhy.derived.change_points import Settings, shifts

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = {
    "fit_validation_schedule": """
import numpy as np, tensorflow as tf, keras
x = np.random.rand(16384, 32).astype("float32"); y = np.random.randint(0, 4, 16384)
train = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(16384).batch(32).prefetch(tf.data.AUTOTUNE)
val = tf.data.Dataset.from_tensor_slices((x[:2048], y[:2048])).batch(64)
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(4)])
schedule = keras.optimizers.schedules.ExponentialDecay(0.05, decay_steps=200, decay_rate=0.5)
model.compile(optimizer=keras.optimizers.SGD(schedule), metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train, epochs=14, validation_data=val, verbose=0)
""",
    "custom_loop_epochs": """
import numpy as np, tensorflow as tf, keras
x = np.random.rand(8192, 64).astype("float32"); y = np.random.randint(0, 10, 8192)
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(8192).batch(64).prefetch(2)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(10)])
opt = keras.optimizers.Adam(1e-3); loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
@tf.function
def step(xb, yb):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights))
    return loss
for epoch in range(40):
    for xb, yb in ds:
        step(xb, yb)
""",
}
CHANGES = (0.15, 0.25, 0.38, 0.50)


def record_healthy(folder: Path) -> list[Path]:
    paths = []
    for name, source in HEALTHY.items():
        script = folder / f"{name}.py"
        script.write_text(source)
        out = folder / f"{name}.json"
        subprocess.run(
            [sys.executable, "-m", "gpuwhy", "run", "--json", str(out), str(script)],
            check=True,
            capture_output=True,
            env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        )
        paths.append(out)
    return paths


def step_series(path: Path) -> list[float]:
    """A record's steps one by one after its warm-up."""
    steps = json.loads(path.read_text())["steps"]
    return [d for d in steps["durations"][steps["warmup"] :] if d > 0]


def synthetic(
    rng: random.Random, series: list[float], change: float | None
) -> tuple[list[float], list[int], int | None]:
    windows, per = rng.randint(12, 256), rng.randint(20, 400)
    block = 50
    steps: list[float] = []
    while len(steps) < windows * per:
        start = rng.randrange(0, max(1, len(series) - block))
        steps.extend(series[start : start + block])
    at = None
    if change is not None:
        at = int(windows * rng.uniform(0.3, 0.7))
        steps = steps[: at * per] + [s * (1 + change) for s in steps[at * per : windows * per]]
    # each window as the rule reads it: its steps' time less its slowest, per step
    windows_of = [steps[i * per : (i + 1) * per] for i in range(windows)]
    values = [(sum(w) - max(w)) / (len(w) - 1) for w in windows_of]
    return values, [per] * windows, at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="synthetic runs per case")
    parser.add_argument("--records", nargs="*", type=Path, help="healthy run records")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="write the healthy records here")
    parser.add_argument("--min-score", type=float, default=Settings().min_score)
    args = parser.parse_args()
    settings = Settings(min_score=args.min_score)
    with tempfile.TemporaryDirectory() as folder:
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
        records = args.records or record_healthy(args.keep or Path(folder))
        sources = [(p.stem, step_series(p)) for p in records]
    rng = random.Random(args.seed)
    for name, series in sources:
        cv = statistics.pstdev(series) / statistics.mean(series)
        print(
            f"{name}: {len(series):,} healthy steps, median {statistics.median(series) * 1e3:.2f} ms, cv {cv:.2f}"
        )
    any_alarm = slower_alarm = 0
    started = time.perf_counter()
    for _ in range(args.runs):
        _, series = rng.choice(sources)
        values, counts, _ = synthetic(rng, series, None)
        found = shifts(values, counts, settings)
        any_alarm += bool(found)
        slower_alarm += any(s.change > 0 for s in found)
    per_run = (time.perf_counter() - started) / args.runs
    print(
        f"false alarms on {args.runs} healthy runs: any change {any_alarm / args.runs:.1%}, "
        f"a slowdown (what the rule reports) {slower_alarm / args.runs:.1%}; "
        f"{per_run * 1e3:.1f} ms per run"
    )
    for change in CHANGES:
        hit = 0
        for _ in range(args.runs):
            _, series = rng.choice(sources)
            values, counts, at = synthetic(rng, series, change)
            found = shifts(values, counts, settings)
            assert at is not None
            hit += any(s.change > 0 and (s.gradual or abs(s.at - at) <= 2) for s in found)
        print(f"+{change:.0%} from a random point: found {hit / args.runs:.1%}")


if __name__ == "__main__":
    main()
