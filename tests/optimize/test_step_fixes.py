"""The launch fixes pasted into real custom training loops, run, and compared.

`gpuwhy run` reads a program whose step runs eagerly; its launch.eager-ops fix is then
applied to the script's text the way its reader would (the decorator above the ``def``
it names, objects it says the loop re-creates made once before the loop and emptied at
the top of each pass) and both versions run: the pasted one must print the same metrics.
The decorator alone, pasted into a loop that makes its metrics anew each epoch, prints
other figures (the traced step keeps updating the first epoch's metrics): that is the
paste the fix must not offer bare.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_run_tensorflow import ROOT, run

pytest.importorskip("tensorflow")

# TF's "training loop from scratch" guide, with its metrics made per epoch.
PER_EPOCH = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    keras.utils.set_random_seed(1)
    x = np.random.RandomState(0).rand(256, 8).astype("float32")
    y = (x.sum(axis=1) > 4).astype("int32")
    train_dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model = keras.Sequential(
        [keras.Input((8,))] + [keras.layers.Dense(8, activation="relu") for _ in range(12)]
        + [keras.layers.Dense(2)]
    )
    optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            loss = loss_fn(yb, logits)
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
        train_loss.update_state(loss)
        train_acc.update_state(yb, logits)


    for epoch in range(3):
        train_loss = keras.metrics.Mean()
        train_acc = keras.metrics.SparseCategoricalAccuracy()
        for xb, yb in train_dataset:
            train_step(xb, yb)
        print(f"epoch {epoch} loss {float(train_loss.result()):.4f} "
              f"acc {float(train_acc.result()):.4f}")
    """
)

# The healthy variant: metrics made once and emptied each epoch.
ONCE = PER_EPOCH.replace(
    """for epoch in range(3):
    train_loss = keras.metrics.Mean()
    train_acc = keras.metrics.SparseCategoricalAccuracy()
""",
    """train_loss = keras.metrics.Mean()
train_acc = keras.metrics.SparseCategoricalAccuracy()
for epoch in range(3):
    train_loss.reset_state()
    train_acc.reset_state()
""",
)

# TF's "custom training with tf.distribute" guide, over two logical CPUs, step eager.
MIRRORED = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
    import keras

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    GLOBAL_BATCH = 16
    keras.utils.set_random_seed(1)
    x = np.random.RandomState(0).rand(256, 8).astype("float32")
    y = (x.sum(axis=1) > 4).astype("int32")
    dist_dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH))
    with strategy.scope():
        model = keras.Sequential(
            [keras.Input((8,))] + [keras.layers.Dense(8, activation="relu") for _ in range(12)]
            + [keras.layers.Dense(2)])
        optimizer = keras.optimizers.SGD(0.05)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            per_example = loss_fn(yb, model(xb, training=True))
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss


    def distributed_train_step(xb, yb):
        losses = strategy.run(train_step, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)


    for epoch in range(3):
        total = 0.0
        for xb, yb in dist_dataset:
            total += float(distributed_train_step(xb, yb))
        print(f"epoch {epoch} loss {total:.4f}")
    """
)

# TF's "custom training: walkthrough" with synthetic iris data: the step is the body of
# the loop over batches, its metrics made anew each epoch.
WALKTHROUGH = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    rs = np.random.RandomState(0)
    features = rs.rand(120, 4).astype("float32") * [4.0, 2.0, 6.0, 2.5] + [4.3, 2.0, 1.0, 0.1]
    labels = (features[:, 2] > 3).astype("int32") + (features[:, 2] > 5)
    train_dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(32)

    model = tf.keras.Sequential([
        tf.keras.layers.Dense(10, activation=tf.nn.relu, input_shape=(4,)),
        tf.keras.layers.Dense(10, activation=tf.nn.relu),
        tf.keras.layers.Dense(3),
    ])
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


    def loss(model, x, y, training):
        y_ = model(x, training=training)
        return loss_object(y_true=y, y_pred=y_)


    def grad(model, inputs, targets):
        with tf.GradientTape() as tape:
            loss_value = loss(model, inputs, targets, training=True)
        return loss_value, tape.gradient(loss_value, model.trainable_variables)


    optimizer = tf.keras.optimizers.SGD(learning_rate=0.01)
    train_loss_results = []
    train_accuracy_results = []
    num_epochs = 21
    for epoch in range(num_epochs):
        epoch_loss_avg = tf.keras.metrics.Mean()
        epoch_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()
        for x, y in train_dataset:
            loss_value, grads = grad(model, x, y)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            epoch_loss_avg.update_state(loss_value)
            epoch_accuracy.update_state(y, model(x, training=True))
        train_loss_results.append(epoch_loss_avg.result())
        train_accuracy_results.append(epoch_accuracy.result())
        if epoch % 10 == 0:
            print("Epoch {:03d}: Loss: {:.3f}, Accuracy: {:.3%}".format(
                epoch, epoch_loss_avg.result(), epoch_accuracy.result()))
    """
)

_ABOVE = re.compile(r"^# (?P<file>\S+):(?P<line>\d+): above `(?P<def>.+)`$")
_MADE_ANEW = re.compile(r"made anew by the loop at \S+:(?P<loop>\d+) \((?P<where>[^)]*)\)")


def _eager_fix(script: Path, tmp_path: Path) -> str:
    out = tmp_path / "run.json"
    result = run("--json", out, "--eager-duty", "1", script, cwd=script.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    findings = json.loads(out.read_text())["findings"]
    (finding,) = [f for f in findings if f["id"] == "launch.eager-ops"]
    return finding["fix"]


def paste(source: str, fix: str, function: bool = True) -> str:
    """The script with the fix applied: decorator lines above the named ``def``; objects
    made anew in a loop moved before it, their ``reset_state()`` at the top of its body.
    ``function=False``: the second part only."""
    lines = source.splitlines()
    fix_lines = fix.splitlines()
    def_line, decorator = 0, []
    if function:
        (above,) = [i for i, text in enumerate(fix_lines) if _ABOVE.match(text)]
        def_line = int(_ABOVE.match(fix_lines[above])["line"])
        assert lines[def_line - 1] == _ABOVE.match(fix_lines[above])["def"]
        for text in fix_lines[above + 1 :]:
            if text.startswith("#"):
                break
            decorator.append(text)
        assert decorator and decorator[0].startswith("@tf.function")
    moves: list[int] = []
    loop = None
    made = _MADE_ANEW.search(fix)
    if made:
        loop = int(made["loop"])
        moves = [int(where.rsplit(":", 1)[1]) for where in made["where"].split(", ")]
    resets = [text for text in fix_lines if text.endswith(".reset_state()")]
    edited = []
    for number, text in enumerate(lines, 1):
        if number in moves:
            continue
        if number == def_line:
            edited += decorator
        if number == loop:
            edited += [lines[m - 1].strip() for m in moves]
        edited.append(text)
        if number == loop:
            indent = re.match(r"\s*", lines[number]).group(0)
            edited += [indent + reset for reset in resets]
    return "\n".join(edited) + "\n"


_BODY = re.compile(
    r"^# \S+:(?P<line>\d+): the body of this loop as one function, defined once before the"
    r" loop at \S+:(?P<before>\d+):$"
)
_BECOMES = re.compile(r"^# and the loop's body becomes: (?P<call>.+)$")


def paste_body(source: str, fix: str) -> str:
    """The loop's body as the fix's function, defined before the outer loop, the body
    replaced by the call; objects made anew in a loop moved before it, their
    ``reset_state()`` at the top of its body. Lines are the original source's."""
    lines = source.splitlines()
    fix_lines = fix.splitlines()
    (start,) = [i for i, text in enumerate(fix_lines) if _BODY.match(text)]
    (end,) = [i for i, text in enumerate(fix_lines) if _BECOMES.match(text)]
    marker = _BODY.match(fix_lines[start])
    loop, before = int(marker["line"]), int(marker["before"])
    function = fix_lines[start + 1 : end]
    assert "..." not in "\n".join(function)
    call = _BECOMES.match(fix_lines[end])["call"]
    body = range(loop + 1, loop + len(function) - 1)  # all but the decorator and the def
    made = _MADE_ANEW.search(fix)
    moves = [int(w.rsplit(":", 1)[1]) for w in made["where"].split(", ")] if made else []
    outer = int(made["loop"]) if made else None
    resets = [text for text in fix_lines if text.endswith(".reset_state()")]
    out = []
    for number, text in enumerate(lines, 1):
        if number in moves:
            continue
        if number == outer:
            out += [lines[m - 1].strip() for m in moves]
        if number == before:
            out += function
        if number in body:
            if number == body.start:
                out.append(re.match(r"\s*", text).group(0) + call)
            continue
        out.append(text)
        if number == outer:
            out += [re.match(r"\s*", lines[number]).group(0) + r for r in resets]
    return "\n".join(out) + "\n"


def _printed(source: str, path: Path, fails: str | None = None, prefix: str = "epoch") -> list[str]:
    """The lines the script prints, or, with ``fails``, that it fails saying so."""
    path.write_text(source)
    result = subprocess.run(
        [sys.executable, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    if fails is not None:
        assert result.returncode != 0 and fails in result.stderr, result.stderr[-2000:]
        return []
    assert result.returncode == 0, result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if line.startswith(prefix)]


def _figures(printed: list[str]) -> list[list[float]]:
    return [[float(n) for n in re.findall(r"\d+\.\d+", line)] for line in printed]


def _close(a: list[str], b: list[str]) -> bool:
    """The same epochs and figures, to the last printed digit but one (a graph may add
    in another order than eager code)."""
    rows = list(zip(_figures(a), _figures(b), strict=False))
    return len(a) == len(b) and all(
        len(p) == len(q) and all(abs(u - v) <= 2e-3 for u, v in zip(p, q, strict=True))
        for p, q in rows
    )


@pytest.mark.parametrize("program", [PER_EPOCH, ONCE], ids=["metrics-per-epoch", "metrics-once"])
def test_the_pasted_eager_ops_fix_prints_the_same_metrics(program, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(program)
    fix = _eager_fix(script, tmp_path)
    assert "train.py:18: above `def train_step(xb, yb):`" in fix
    if program is PER_EPOCH:
        assert "# train_loss, train_acc: made anew by the loop at train.py:28" in fix
        assert "train_loss.reset_state()\ntrain_acc.reset_state()" in fix
    else:  # already made once: nothing to move
        assert "made anew" not in fix and "reset_state" not in fix
    original = _printed(program, tmp_path / "original.py")
    pasted = _printed(paste(program, fix), tmp_path / "pasted.py")
    assert len(original) == 3
    assert _close(pasted, original), (original, pasted)


def test_the_decorator_alone_keeps_the_first_epochs_metrics(tmp_path):
    """Why the fix names the metrics: pasted bare, the traced step updates the first
    epoch's objects only and later epochs print the new, empty ones."""
    bare = PER_EPOCH.replace("def train_step(", "@tf.function\ndef train_step(", 1)
    original = _printed(PER_EPOCH, tmp_path / "original.py")
    pasted = _printed(bare, tmp_path / "bare.py")
    assert _close(pasted[:1], original[:1])
    assert _figures(pasted)[1] == [0.0, 0.0] and not _close(pasted, original)


def test_under_a_mirrored_strategy_the_pasted_fix_runs_where_xla_fails(tmp_path):
    script = tmp_path / "dist.py"
    script.write_text(MIRRORED)
    fix = _eager_fix(script, tmp_path)
    # the tf.function goes around strategy.run, as TF's guide writes it
    assert "dist.py:32: above `def distributed_train_step(xb, yb):`" in fix
    code = [line for line in fix.splitlines() if not line.startswith("#")]
    assert code == ["@tf.function   # not jit_compile=True under MirroredStrategy (2 replicas):"]
    original = _printed(MIRRORED, tmp_path / "original.py")
    pasted = _printed(paste(MIRRORED, fix), tmp_path / "pasted.py")
    assert len(original) == 3 and _close(pasted, original), (original, pasted)
    # what the fix leaves out: XLA on that step fails on the other replica's variables
    xla = fix.replace("@tf.function   #", "@tf.function(jit_compile=True)   #")
    _printed(paste(MIRRORED, xla), tmp_path / "xla.py", fails="Trying to access resource")


def test_the_walkthrough_s_loop_body_becomes_a_step_and_prints_the_same(tmp_path):
    script = tmp_path / "walkthrough.py"
    script.write_text(WALKTHROUGH)
    fix = _eager_fix(script, tmp_path)
    assert "# and the loop's body becomes: train_step(x, y)" in fix
    assert "# epoch_loss_avg, epoch_accuracy: made anew by the loop at walkthrough.py:34" in fix
    original = _printed(WALKTHROUGH, tmp_path / "original.py", prefix="Epoch")
    pasted_source = paste_body(WALKTHROUGH, fix)
    pasted = _printed(pasted_source, tmp_path / "pasted.py", prefix="Epoch")
    assert len(original) == 3 and _close(pasted, original), (original, pasted, pasted_source)
