"""Where to put the tf.function of a custom loop that fetches its batches from Python:
around the step, or around the whole loop over the dataset (issue #28, item 11).

TF's "custom training: walkthrough" (a small classifier, batches of 32, an eager step
that updates Keras metrics) with synthetic data, run three ways, each in its own
process, in rounds so that all three see the same machine load:

* eager: as the walkthrough writes it;
* step: ``train_step = tf.function(train_step)``, the loop over the dataset in Python;
* epoch: ``train_epoch = tf.function(train_epoch)``, the loop over the dataset traced too
  (what input.bound's fetch-overhead fix used to offer).

Each run times ``--epochs`` epochs after the first (tracing left out) and prints the
final metrics, which must agree across the three. The figures are each mode's median
time and the median of each round's ratio. Run:

    .venv/bin/python benchmarks/bench_epoch_function.py [--runs 3] [--epochs 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

PROGRAM = """
import sys, time
import numpy as np, tensorflow as tf, keras
mode, epochs = sys.argv[1], int(sys.argv[2])
keras.utils.set_random_seed(0)
rs = np.random.RandomState(0)
x = rs.rand(120, 4).astype("float32")
y = (x @ np.array([1.0, 2.0, -1.0, 0.5]) > 1.2).astype("int32") + (x[:, 0] > 0.8)
train_dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(10, activation="relu"),
                          keras.layers.Dense(10, activation="relu"), keras.layers.Dense(3)])
loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(learning_rate=0.01)
epoch_loss_avg = keras.metrics.Mean()
epoch_accuracy = keras.metrics.SparseCategoricalAccuracy()

def grad(model, inputs, targets):
    with tf.GradientTape() as tape:
        loss_value = loss_object(y_true=targets, y_pred=model(inputs, training=True))
    return loss_value, tape.gradient(loss_value, model.trainable_variables)

def train_step(x, y):
    loss_value, grads = grad(model, x, y)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    epoch_loss_avg.update_state(loss_value)
    epoch_accuracy.update_state(y, model(x, training=True))

if mode == "step":
    train_step = tf.function(train_step)

def train_epoch(dataset):
    for x, y in dataset:
        train_step(x, y)

if mode == "epoch":
    train_epoch = tf.function(train_epoch)

for epoch in range(epochs + 1):
    epoch_loss_avg.reset_state()
    epoch_accuracy.reset_state()
    train_epoch(train_dataset)
    if epoch == 0:
        start = time.perf_counter()
print(time.perf_counter() - start, float(epoch_loss_avg.result()), float(epoch_accuracy.result()))
"""

MODES = ("eager", "step", "epoch")


def _run(program: str, mode: str, epochs: int) -> tuple[float, str]:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, program, mode, str(epochs)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    return float(out[0]), " ".join(out[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=100)
    args = parser.parse_args()
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    # a file, not ``python -c``: tf.function and Keras read the functions' source
    with tempfile.TemporaryDirectory() as folder:
        program = os.path.join(folder, "walkthrough.py")
        with open(program, "w") as handle:
            handle.write(PROGRAM)
        for _ in range(args.runs):
            _round(program, args.epochs, times)
    _report(times, args.epochs)


def _round(program: str, epochs: int, times: dict[str, list[float]]) -> None:
    results = {mode: _run(program, mode, epochs) for mode in MODES}
    metrics = {result[1] for result in results.values()}
    assert len(metrics) == 1, f"the three modes computed different metrics: {results}"
    for mode, (seconds, _) in results.items():
        times[mode].append(seconds)


def _report(times: dict[str, list[float]], epochs: int) -> None:
    for mode in MODES:
        print(f"{mode:6s} median {statistics.median(times[mode]):.3f} s for {epochs} epochs")
    for a, b in (("epoch", "step"), ("epoch", "eager"), ("eager", "step")):
        ratios = [x / y for x, y in zip(times[a], times[b], strict=True)]
        print(
            f"{a}/{b}: median {statistics.median(ratios):.2f}x (runs: "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + ")"
        )


if __name__ == "__main__":
    main()
