"""Real Keras training, one configuration at a time, each watched by ``gpuwhy.session()``.

Run as a script (``python tests/keras/fit_matrix.py``) by tests/keras/test_keras_fit.py,
under the installed Keras and under each other Keras the compatibility set covers
(``PYTHONPATH=<a folder with that keras>``). Prints one JSON line per configuration:
what gpuwhy found, in plain values the test asserts on, so a Keras that builds its step
differently fails a named assertion rather than a placement that goes unnoticed.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np
import tensorflow as tf

import gpuwhy
from tests.keras.configs import FIT_CONFIGS, LOOP_POLICIES, fit_name

FLOATS = ("float16", "bfloat16", "float32", "float64")
BAD_REASONS = ("colocated", "no-gpu-kernel", "no-gpu-kernel-for-dtype", "resource-on-gpu-no-kernel")


def _optimizer(name: str):
    if name == "adam":
        return keras.optimizers.Adam(1e-3)
    if name == "sgd-momentum":
        return keras.optimizers.SGD(1e-2, momentum=0.9)
    if name == "adamw":
        return keras.optimizers.AdamW(1e-3)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(1e-3)
    raise ValueError(name)


class HostExp(keras.layers.Layer):
    """A layer that pins its op to the CPU: a real host<->GPU copy each way per step."""

    def call(self, x):
        with tf.device("/CPU:0"):
            return tf.math.exp(-tf.abs(x))


def _model(policy: str, kind: str = "dense") -> keras.Model:
    keras.mixed_precision.set_global_policy(policy)
    if kind == "embedding":
        inputs = keras.Input(shape=(12,), dtype="int64")
        x = keras.layers.Embedding(500, 48)(inputs)
        x = keras.layers.GlobalAveragePooling1D()(x)
    else:
        inputs = keras.Input(shape=(48,))
        x = inputs
    x = keras.layers.Dense(64, activation="relu")(x)
    if kind == "pinned":
        x = HostExp()(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    outputs = keras.layers.Dense(10, dtype="float32")(x)
    return keras.Model(inputs, outputs)


def _data(kind: str = "dense"):
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, size=(320,))
    if kind == "embedding":
        return rng.integers(0, 500, size=(320, 12)), labels
    return rng.random((320, 48), dtype=np.float32), labels


def _summary(config: dict, record) -> dict:
    facts = record.facts
    placement = facts.placement
    tracing = facts.tracing
    steps = facts.steps
    return {
        **config,
        "keras": keras.__version__,
        "findings": sorted({f.id for f in record.findings}),
        # each input.bound: whether it says the host's other processes kept its cores
        # busy (the wait may be the load's): a loaded host makes such waits in any fit
        "input_bound_by_load": [
            "other_processes_cpu_fraction" in f.evidence
            for f in record.findings
            if f.id == "input.bound"
        ],
        # ... or that the wait is each epoch's new iterator (epochs of 10 steps here)
        "input_bound_at_epoch_starts": [
            "epoch_start_wait_ms" in f.evidence for f in record.findings if f.id == "input.bound"
        ],
        # what each input finding said, for a failing assertion to show (a CI host's)
        "input_findings": [
            (f.id, f.severity, f.title, f.evidence)
            for f in record.findings
            if f.id.startswith("input.")
        ],
        "step_ms": [round(d * 1000, 2) for d in (steps.durations if steps else ())],
        "fixes": {f.id: f.fix for f in record.findings if f.id.startswith("placement.")},
        "xla_ops": sum(
            g.count for g in (placement.groups if placement else ()) if g.reason == "xla"
        ),
        "audited": [f.name for f in placement.functions] if placement else [],
        "notes": [f.note for f in placement.functions if f.note] if placement else [],
        "placed": [
            (f.name, f.location, f.jit_compile) for f in (placement.functions if placement else ())
        ],
        "bad_groups": [
            (g.op, g.reason, g.count)
            for g in (placement.groups if placement else ())
            if g.device == "CPU" and g.reason in BAD_REASONS
        ],
        "float_step_copies": [
            (f"{c.src} -> {c.dst}", c.dtype, c.bytes)
            for c in (placement.copies if placement else ())
            if c.kind == "step" and c.dtype in FLOATS
        ],
        "variable_reads_on_gpu": sum(
            g.count
            for g in (placement.groups if placement else ())
            if g.op == "ReadVariableOp" and g.device == "GPU"
        ),
        "functions": [
            {
                "name": f.name,
                "location": f.location,
                "calls": f.calls,
                "traces": f.traces,
                "inside": list(f.inside),
            }
            for f in (tracing.functions if tracing else ())
            if f.library
        ],
        "steps": steps.count if steps else None,
        "warmup": steps.warmup if steps else None,
        "later_warmup": list(steps.later_warmup) if steps else [],
        "step_source": steps.source if steps else None,
    }


def fit(policy: str, optimizer: str, steps_per_execution: int, kind: str, jit) -> dict:
    keras.utils.set_random_seed(0)
    model = _model(policy, kind)
    x, y = _data(kind)
    # compile inside the session, as in a script under `gpuwhy run`: what Keras' "auto"
    # would choose on a GPU is read when compile is called
    with gpuwhy.session(hz=2, eager=False) as session:
        model.compile(
            optimizer=_optimizer(optimizer),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
            jit_compile=jit,
        )
        model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    config = {"kind": "fit", "policy": policy, "optimizer": optimizer, "model": kind}
    config.update(steps_per_execution=steps_per_execution, jit_compile=jit)
    return _summary(config, session.record)


def fit_compiled_before() -> dict:
    """compile() before the session (``with gpuwhy.session(): model.fit(...)``): what
    its jit_compile was is not seen."""
    keras.utils.set_random_seed(0)
    model = _model("mixed_float16")
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
    x, y = _data()
    with gpuwhy.session(hz=2, eager=False) as session:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    return _summary({"kind": "fit", "policy": "mixed_float16"}, session.record)


def predict_never_compiled() -> dict:
    """predict() of a model that was never compiled (an inference model beside the one
    trained): no compile() to have seen, its jit_compile is Keras' default."""
    keras.utils.set_random_seed(0)
    model = _model("float32")
    x, _ = _data()
    with gpuwhy.session(hz=2, eager=False) as session:
        for _ in range(3):
            model.predict(x, batch_size=64, verbose=0)
    return _summary({"kind": "predict", "policy": "float32"}, session.record)


def two_models() -> dict:
    """Two models in one script, each compiled with Keras' default "auto": a Dense one
    (XLA on a GPU) and one with a cuDNN LSTM (no XLA there), then a predict."""
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("mixed_float16")
    x, y = _data()
    with gpuwhy.session(hz=2, eager=False) as session:
        dense = _model("mixed_float16")
        dense.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
        dense.fit(x, y, batch_size=32, epochs=2, verbose=0)  # @dense-fit
        inputs = keras.Input(shape=(6, 8))
        hidden = keras.layers.LSTM(16)(inputs)
        rnn = keras.Model(inputs, keras.layers.Dense(10, dtype="float32")(hidden))
        rnn.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(True))
        rnn.fit(x.reshape(-1, 6, 8), y, batch_size=32, epochs=2, verbose=0)  # @rnn-fit
        dense.predict(x, batch_size=64, verbose=0)  # @dense-predict
    return _summary({"kind": "fit", "policy": "mixed_float16"}, session.record)


def fine_tune() -> dict:
    """Transfer learning as Keras' guide writes it: fit with the base frozen, then
    unfreeze, compile anew (a lower learning rate) and fit again: heavier steps. Then
    fit called again in a loop on the same compile (one epoch a call)."""
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy("float32")
    x, y = _data()
    with gpuwhy.session(hz=2, eager=False) as session:
        base = keras.Sequential(
            [keras.Input((48,))] + [keras.layers.Dense(256, activation="relu") for _ in range(3)]
        )
        inputs = keras.Input((48,))
        model = keras.Model(inputs, keras.layers.Dense(10)(base(inputs, training=False)))
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        base.trainable = False
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=loss)
        model.fit(x, y, batch_size=32, epochs=3, verbose=0)
        base.trainable = True
        model.compile(optimizer=keras.optimizers.Adam(1e-5), loss=loss)
        for _ in range(3):
            model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    return _summary({"kind": "fit", "policy": "float32"}, session.record)


def custom_loop(policy: str) -> dict:
    """A custom loop with the loss-scale optimizer Keras wraps mixed precision in."""
    keras.utils.set_random_seed(0)
    model = _model(policy)
    optimizer = keras.optimizers.Adam(1e-3)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x, y = _data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)

    @tf.function
    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
            scaled = optimizer.scale_loss(loss) if hasattr(optimizer, "scale_loss") else loss
        grads = tape.gradient(scaled, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    with gpuwhy.session(hz=2, eager=False) as session:
        for _ in range(2):
            for features, labels in dataset:
                train_step(features, labels)
    return _summary({"kind": "custom-loop", "policy": policy, "optimizer": "adam"}, session.record)


def main() -> None:
    wanted = sys.argv[1:]
    for config in FIT_CONFIGS:
        name = fit_name(*config)
        if wanted and name not in wanted:
            continue
        print(json.dumps({"name": name, **fit(*config)}), flush=True)
    if not wanted or "fit:two-models" in wanted:
        print(json.dumps({"name": "fit:two-models", **two_models()}), flush=True)
    if not wanted or "fit:fine-tune" in wanted:
        print(json.dumps({"name": "fit:fine-tune", **fine_tune()}), flush=True)
    if not wanted or "fit:compiled-before" in wanted:
        print(json.dumps({"name": "fit:compiled-before", **fit_compiled_before()}), flush=True)
    if not wanted or "predict:never-compiled" in wanted:
        print(
            json.dumps({"name": "predict:never-compiled", **predict_never_compiled()}), flush=True
        )
    for policy in LOOP_POLICIES:
        if wanted and f"loop:{policy}" not in wanted:
            continue
        print(json.dumps({"name": f"loop:{policy}", **custom_loop(policy)}), flush=True)


if __name__ == "__main__":
    main()
