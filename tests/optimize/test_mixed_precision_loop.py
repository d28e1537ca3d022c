"""tensorcore.unused's mixed-precision fix pasted into a custom training loop.

A GradientTape loop written with ``tf.keras`` only (no ``import keras``), run under
`gpuwhy run`; the finding's fix is pasted as its reader would (its code lines after the
imports) and the pasted program must train as the float32 one does. The advice it
replaced (a LossScaleOptimizer around the loop's optimizer, the loss not scaled in the
step) is pasted too: it runs, and trains nothing (Keras 3 divides every gradient by the
loss scale), which is why the fix never offers it alone.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from gpuwhy.rules.tensorcore.unused import CPU_ONLY_NOTE
from tests.optimize.test_step_fixes import _printed
from tests.optimize.test_token_ids import paste
from tests.test_run_tensorflow import run

pytest.importorskip("tensorflow")

LOOP = textwrap.dedent(
    """
    import sys

    import numpy as np
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    x = np.random.rand(512, 64).astype("float32")
    y = (x[:, :8].sum(axis=1) > 4).astype("int32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)
    model = tf.keras.Sequential([
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(256, activation="relu"),
        tf.keras.layers.Dense(2, dtype="float32"),
    ])
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss


    first = None
    for epoch in range(6):
        for xb, yb in dataset:
            loss = float(train_step(xb, yb))
            first = loss if first is None else first
    print(f"{first:.4f} {loss:.4f}")
    """
)


def _losses(source: str, path: Path) -> tuple[float, float]:
    """The first and last loss the script prints (run as python would)."""
    (line,) = _printed(source, path, prefix="")[-1:]
    first, last = map(float, line.split())
    return first, last


def test_a_custom_loop_pasted_with_the_fix_trains_as_in_float32(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = tmp_path / "run.json"
    result = run("--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (finding,) = [
        f for f in json.loads(out.read_text())["findings"] if f["id"] == "tensorcore.unused"
    ]
    fix = finding["fix"]
    assert fix.startswith(CPU_ONLY_NOTE)  # this machine has no GPU: said first
    assert fix.removeprefix(CPU_ONLY_NOTE).startswith(
        "tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')"
    )
    first, last = _losses(LOOP, tmp_path / "original.py")
    assert last < 0.8 * first  # the float32 loop trains
    pasted_first, pasted_last = _losses(paste(LOOP, fix), tmp_path / "pasted.py")
    assert abs(pasted_first - first) < 0.05 * first
    assert abs(pasted_last - last) < 0.15 * first, (pasted_last, last)
    # the advice it replaced: the optimizer wrapped, the loss not scaled in the step
    wrapped = paste(
        LOOP.replace(
            "loss_fn = tf.keras",
            "optimizer = tf.keras.optimizers.LossScaleOptimizer(optimizer)\nloss_fn = tf.keras",
        ),
        "tf.keras.mixed_precision.set_global_policy('mixed_float16')",
    )
    _, stuck = _losses(wrapped, tmp_path / "wrapped.py")
    assert stuck > 0.95 * first, (stuck, first)  # trains nothing
