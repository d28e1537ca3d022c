"""input.iterator-end-wait's fix as the trial writes it: one tf.data iterator for the run,
each epoch one pass of it. The edits are made on real programs (a custom loop, an
enumerating loop over a ``take``, Keras fit) and both versions run under python: the fix
must read the same elements in the same order, so what they print is the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import SourceFiles
from gpuwhy.trial.kinds import plan
from gpuwhy.trial.source_edits import apply

LOOP = '''"""Twelve epochs, each a new iterator over a shuffled, mapped, prefetched dataset."""
import numpy as np
import tensorflow as tf

tf.random.set_seed(0)
rng = np.random.default_rng(0)
features = rng.normal(size=(640, 8)).astype("float32")
labels = (features[:, :1] > 0).astype("float32")
train_ds = (
    tf.data.Dataset.from_tensor_slices((features, labels))
    .shuffle(640, seed=1)
    .map(lambda x, y: (x * 0.5, y), num_parallel_calls=tf.data.AUTOTUNE)
    .batch(32)
    .prefetch(tf.data.AUTOTUNE)
)
w = tf.Variable(tf.zeros([8, 1]))


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((tf.matmul(x, w) - y) ** 2)
    w.assign_sub(0.1 * tape.gradient(loss, w))
    return loss


for epoch in range(4):
    total = 0.0
    for x, y in train_ds:
        total += float(train_step(x, y))
    print(f"epoch {epoch} loss {total:.6f} first {float(x[0, 0]):.6f}")
'''

ENUMERATE_TAKE = """import itertools
import tensorflow as tf

base = tf.data.Dataset.range(1000).shuffle(1000, seed=3).map(lambda i: i * 2).batch(10)


def main():
    seen = []
    epoch = 0
    while epoch < 3:
        for step, batch in enumerate(base.take(7), 1):
            seen.append(int(batch[0]) + step)
        print(epoch, seen[-7:])
        epoch += 1


main()
"""

FIT = """import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(256, seed=2).batch(32)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
history = model.fit(data, epochs=3, verbose=0)
print([round(v, 6) for v in history.history["loss"]])
"""

FIT_VALIDATED = """import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(256, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
held_out = tf.data.Dataset.from_tensor_slices((x[:64] * 2, y[:64] * 2)).batch(16)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
history = model.fit(data, epochs=3, verbose=0, validation_data=held_out)
print([round(v, 5) for v in history.history["loss"]])
print([round(v, 5) for v in history.history["val_loss"]])
"""

MIRRORED = """import tensorflow as tf

strategy = tf.distribute.MirroredStrategy()
train_ds = tf.data.Dataset.range(64).shuffle(64, seed=5).batch(8)
dist_ds = strategy.experimental_distribute_dataset(train_ds)
for epoch in range(3):
    firsts = []
    for batch in dist_ds:
        firsts.append(int(strategy.experimental_local_results(batch)[0][0]))
    print(epoch, firsts)
"""

ONE_EPOCH_FUNCTION = """import tensorflow as tf

train_ds = tf.data.Dataset.range(200).shuffle(200, seed=7).batch(20)


class Trainer:
    def run_epoch(self, ds, scale=1):
        seen = []
        for step, batch in enumerate(ds):
            seen.append(int(batch[0]) * scale + step)
        return seen


def main(epochs):
    trainer = Trainer()
    for epoch in range(epochs):
        print(epoch, trainer.run_epoch(train_ds, scale=2))


main(3)
"""

# a progress bar around the dataset (tqdm's call, written here: the test needs no tqdm), and
# a validation function whose result the epochs' loop keeps
PROGRESS = """import tensorflow as tf

train_ds = tf.data.Dataset.range(60).shuffle(60, seed=11).batch(6)
val_ds = tf.data.Dataset.range(30).batch(10)


def tqdm(iterable, leave=True):
    return iterable


def evaluate(ds):
    found = []
    for b in ds:
        found.append(int(b[0]))
    return found


for epoch in range(3):
    firsts = []
    for x in tqdm(train_ds, leave=False):
        firsts.append(int(x[-1]))
    scores = evaluate(
        val_ds
    )
    print(epoch, firsts, scores)
"""


def _finding(
    location: str, per_pass: int, source: str = "tf-data", validation: int | None = None
) -> Finding:
    evidence: dict = {"loop_source": source, "batches_per_pass": per_pass}
    if validation is not None:
        evidence["validation_batches_per_pass"] = validation
    return Finding("input.iterator-end-wait", "medium", "t", location=location, evidence=evidence)


def _patched(
    tmp_path: Path,
    text: str,
    line: int,
    per_pass: int,
    source: str = "tf-data",
    validation: int | None = None,
):
    path = tmp_path / "train.py"
    path.write_text(text)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    finding = _finding(f"{path}:{line}", per_pass, source, validation)
    found, refused = plan([finding], Facts(), files)
    assert not refused and len(found) == 1, refused
    fixed = tmp_path / "fixed" / "train.py"
    fixed.parent.mkdir()
    fixed.write_text(apply(text, found[0].edits))
    return found[0], path, fixed


def _output(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=path.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _line_of(text: str, part: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if part in line)


def test_a_loop_over_a_shuffled_dataset_reads_the_same_batches_from_one_iterator(tmp_path):
    fix, original, fixed = _patched(tmp_path, LOOP, _line_of(LOOP, "for x, y in train_ds"), 20)
    text = fixed.read_text()
    assert fix.fix == "one iterator for the run: train_ds repeated, 20 batches an epoch"
    assert fix.by_loop_time
    assert text.startswith('"""Twelve epochs')  # the import goes after the docstring
    assert "\nimport itertools\nimport numpy as np\n" in text
    assert "train_ds_batches = iter(train_ds.repeat())\nfor epoch in range(4):" in text
    assert "    for x, y in itertools.islice(train_ds_batches, 20):" in text
    before = _output(original)
    assert before.count("epoch ") == 4 and _output(fixed) == before


def test_an_enumerated_take_in_a_while_loop_keeps_its_start_and_its_import(tmp_path):
    line = _line_of(ENUMERATE_TAKE, "enumerate(base.take(7), 1)")
    _, original, fixed = _patched(tmp_path, ENUMERATE_TAKE, line, 7)
    text = fixed.read_text()
    assert text.count("import itertools") == 1  # the program's own
    assert "    base_batches = iter(base.take(7).repeat())\n    while epoch < 3:" in text
    assert "enumerate(itertools.islice(base_batches, 7), 1)" in text
    assert _output(fixed) == _output(original)


def test_fit_gets_its_dataset_repeated_and_steps_per_epoch_with_the_same_losses(tmp_path):
    line = _line_of(FIT, "model.fit(")
    fix, original, fixed = _patched(tmp_path, FIT, line, 8, source="keras-fit")
    assert fix.fix == "fit over its dataset repeated, steps_per_epoch=8"
    assert "model.fit(data.repeat(), epochs=3, verbose=0, steps_per_epoch=8)" in fixed.read_text()
    # Keras draws one shuffle order more per epoch than the repeated dataset: the first
    # epoch is the same, the later ones come in another order, and the means are compared
    assert fix.by_mean and fix.tolerance == 0.1
    before, after = (json.loads(_output(p)) for p in (original, fixed))
    assert after[0] == before[0] and after != before
    assert all(abs(a - b) <= 0.05 * b for a, b in zip(after, before, strict=True))


def test_fit_s_validation_data_is_repeated_with_validation_steps_and_validates_the_same(
    tmp_path,
):
    line = _line_of(FIT_VALIDATED, "model.fit(")
    fix, original, fixed = _patched(
        tmp_path, FIT_VALIDATED, line, 8, source="keras-fit", validation=4
    )
    assert fix.fix == (
        "fit over its dataset repeated, steps_per_epoch=8, its validation too, validation_steps=4"
    )
    assert (
        "model.fit(data.repeat(), epochs=3, verbose=0, validation_data=held_out.repeat(), "
        "steps_per_epoch=8, validation_steps=4)"
    ) in fixed.read_text()
    # unshuffled: every epoch the same batches, its losses and its validation's the same
    before, after = _output(original), _output(fixed)
    assert before.count("\n") == 2 and after == before


def test_a_strategy_s_distributed_dataset_is_made_again_over_the_dataset_repeated(tmp_path):
    """A DistributedDataset has no repeat(): the one iterator is made of the strategy's
    call over the dataset repeated."""
    _, original, fixed = _patched(tmp_path, MIRRORED, _line_of(MIRRORED, "for batch in"), 8)
    text = fixed.read_text()
    made = "dist_ds_batches = iter(strategy.experimental_distribute_dataset(train_ds.repeat()))"
    assert f"{made}\nfor epoch in range(3):" in text
    assert "    for batch in itertools.islice(dist_ds_batches, 8):" in text
    assert _output(fixed) == _output(original)


def test_a_function_that_loops_over_its_parameter_is_given_each_epoch_s_batches(tmp_path):
    """``trainer.run_epoch(train_ds)`` once an epoch, its loop over the parameter: the
    call gives it a pass of the one iterator, the function is left as written."""
    line = _line_of(ONE_EPOCH_FUNCTION, "enumerate(ds)")
    _, original, fixed = _patched(tmp_path, ONE_EPOCH_FUNCTION, line, 10)
    text = fixed.read_text()
    made = "    train_ds_batches = iter(train_ds.repeat())\n    for epoch in range(epochs):"
    assert made in text
    assert "trainer.run_epoch(itertools.islice(train_ds_batches, 10), scale=2)" in text
    assert "for step, batch in enumerate(ds):" in text
    before = _output(original)
    assert before.count("\n") == 3 and _output(fixed) == before


def test_a_progress_bar_around_the_dataset_and_a_kept_result_are_written_around_the_pass(
    tmp_path,
):
    """``tqdm(train_ds, leave=False)`` keeps its call with the pass inside it; the call
    of a function that loops over its parameter keeps its assignment and its lines."""
    line = _line_of(PROGRESS, "    for x in tqdm(")
    _, original, fixed = _patched(tmp_path, PROGRESS, line, 10)
    text = fixed.read_text()
    assert "    for x in tqdm(itertools.islice(train_ds_batches, 10), leave=False):" in text
    assert _output(fixed) == _output(original)
    (tmp_path / "fixed" / "train.py").unlink()
    (tmp_path / "fixed").rmdir()
    _, original, fixed = _patched(tmp_path, PROGRESS, _line_of(PROGRESS, "for b in ds"), 3)
    text = fixed.read_text()
    made = "val_ds_batches = iter(val_ds.repeat())\nfor epoch in range(3):"
    assert made in text
    assert "    scores = evaluate(\n        itertools.islice(val_ds_batches, 3)\n    )" in text
    assert _output(fixed) == _output(original)


@pytest.mark.parametrize(
    "text, why",
    [
        (
            "for e in range(3):\n    for x in ds:\n        if x > 2:\n            break\n",
            "its break at line 4 can end an epoch early",
        ),
        (
            "for e in range(3):\n    ds = make(e)\n    for x in ds:\n        pass\n",
            "ds is assigned",
        ),
        ("def epoch():\n    for x in ds:\n        pass\n", "no epochs' loop around it"),
        (
            "def epoch(ds):\n    for x in ds:\n        pass\n\n\nfor e in range(3):\n"
            "    epoch(train_ds)\n    epoch(val_ds)\n",
            "epoch is called at 2 places",
        ),
        (
            "def epoch(ds):\n    for x in ds:\n        pass\n    return len(ds)\n\n\n"
            "for e in range(3):\n    epoch(train_ds)\n",
            "ds, epoch's parameter, is used elsewhere in it",
        ),
        (
            "for e in range(3):\n    first = [b for b in ds.take(1)]\n    for x in ds:\n"
            "        pass\n    n = len(ds) + ds.cardinality()\n",
            "ds is read again at line 2 in the epochs' loop: a seeded shuffle's order",
        ),
        (
            "@tf.function\ndef epoch(ds):\n    for x in ds:\n        pass\n\n\n"
            "for e in range(3):\n    epoch(train_ds)\n",
            "epoch is a tf.function (line 1): an iterator given to it is a Python value",
        ),
        (
            "def epoch(ds):\n    for x in ds:\n        pass\n\n\nepoch = tf.function(epoch)\n"
            "for e in range(3):\n    epoch(train_ds)\n",
            "epoch is made a tf.function at line 6",
        ),
        (
            "def epoch(ds):\n    for x in ds:\n        pass\n\n\nepoch(train_ds)\n",
            "no epochs' loop around epoch's call at line 6",
        ),
        (
            "def epoch(ds):\n    for x in ds:\n        pass\n\n\nfor e in range(3):\n"
            "    epoch(make(e))\n",
            "epoch's call at line 7 passes make(e): no dataset by its form",
        ),
        ("for e in range(3):\n    for x in zip(a, b):\n        pass\n", "it reads zip(a, b)"),
        (
            "d = s.distribute_datasets_from_function(f)\nfor e in range(3):\n    for x in d:\n"
            "        pass\n",
            "d is made by s.distribute_datasets_from_function: the dataset it distributes",
        ),
    ],
)
def test_a_loop_the_fix_would_change_is_refused_with_why(tmp_path, text, why):
    path = tmp_path / "train.py"
    path.write_text(text)
    files = SourceFiles(root=str(tmp_path), script=str(path))
    line = _line_of(text, "for x in")
    found, refused = plan([_finding(f"{path}:{line}", 10)], Facts(), files)
    assert found == [] and why in refused[0].why, refused
