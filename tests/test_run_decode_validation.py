"""`gpuwhy run` on Keras fit over PNG files with a validation pipeline beside it.

The decode map reads its label from a lookup table (folder names), as the Keras and TF
tutorials write it: stateful for TF's map_parallelization, the same elements on every
pass. Validation (Model.evaluate inside fit) reads a pipeline of its own: its wait is not
the training steps' wait, so the decode finding takes its figures from the pipeline fit
trains on, and offers the cache (the decode draws no random numbers).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuwhy.schema import validation_errors
from tests.rules.input import paste

tf = pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """\
import os
import sys

import numpy as np
import tensorflow as tf

root = sys.argv[1]
classes = sorted(os.listdir(root))
table = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(classes, list(range(len(classes))), value_dtype=tf.int64),
    -1,
)


def load(path):
    label = table.lookup(tf.strings.split(path, os.sep)[-2])
    image = tf.io.decode_png(tf.io.read_file(path), channels=3)
    return tf.cast(image, tf.float32) / 255.0, label


files = sorted(tf.io.gfile.glob(os.path.join(root, "*", "*.png")))
train_ds = tf.data.Dataset.from_tensor_slices(files[:256]).map(load).batch(16)
val_ds = tf.data.Dataset.from_tensor_slices(files[256:]).map(load).batch(16)

model = tf.keras.Sequential([
    tf.keras.Input((96, 96, 3)),
    tf.keras.layers.Conv2D(48, 3, activation="relu"),
    tf.keras.layers.Conv2D(48, 3, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(len(classes)),
])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(train_ds, validation_data=val_ds, epochs=3, verbose=0)
checksum = sum(float(tf.reduce_sum(x)) + float(tf.reduce_sum(y)) for x, y in train_ds)
print(f"checksum {checksum:.3f}")
"""


def _images(root: Path) -> None:
    rng = np.random.default_rng(0)
    for i in range(416):
        folder = root / ("cat", "dog", "owl", "fox")[i % 4]
        folder.mkdir(parents=True, exist_ok=True)
        image = rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)
        tf.io.write_file(str(folder / f"{i}.png"), tf.io.encode_png(image))


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def decode_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("decode")
    _images(tmp / "images")
    (tmp / "train.py").write_text(PROGRAM)
    result = _run("-m", "gpuwhy", "run", "--json", "run.json", "train.py", "images", cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp, result, json.loads((tmp / "run.json").read_text())


def _by_consumer(record):
    return {p["consumer"]: p for p in record["tfdata"]["pipelines"]}


def test_the_decode_is_judged_the_same_every_pass_though_tf_calls_it_stateful(decode_run):
    _, _, record = decode_run
    assert validation_errors(record) == []
    for pipeline in _by_consumer(record).values():
        (decode,) = [s for s in pipeline["stages"] if "DecodePng" in s["codec_ops"]]
        assert decode["stateful"] and not decode["random"] and decode["repeats"]


def test_the_decode_finding_takes_the_training_steps_wait_not_validation_s(decode_run):
    _, _, record = decode_run
    steps_wait = record["steps"]["input_wait_fraction"]
    codec = [f for f in record["findings"] if f["id"] == "compression.cpu-codec"]
    for finding in codec:
        rows = finding["evidence"].get("pipelines") or [finding["evidence"]]
        for row in rows:
            if row["pipeline"].endswith("read by Model.fit's validation"):
                assert row["severity"] == "low" if "severity" in row else finding["severity"]
        if finding["severity"] in ("medium", "high"):
            # the lead is the training pipeline's, with the steps' own wait
            assert f"steps wait for input {steps_wait:.0%}" in finding["title"]
            assert steps_wait >= 0.05
    if steps_wait < 0.05:
        assert all(f["severity"] == "low" for f in codec)
    for finding in codec:
        assert "random" not in finding["fix"] and ".cache()" in finding["fix"]


def test_the_offered_cache_pasted_into_the_program_runs_and_gives_the_same_elements(decode_run):
    tmp, result, record = decode_run
    fixes = [
        f["fix"]
        for f in record["findings"]
        if f["id"] in ("compression.cpu-codec", "input.no-cache") and ".cache()" in f["fix"]
    ]
    assert fixes, [f["title"] for f in record["findings"]]
    source = (tmp / "train.py").read_text()
    (pasted, *_) = paste.pasted(source, fixes[0], {})
    assert ".cache()" in pasted and pasted != source
    (tmp / "pasted.py").write_text(pasted)
    again = _run("pasted.py", "images", cwd=tmp)
    assert again.returncode == 0, again.stderr[-3000:]
    checksum = [line for line in result.stdout.splitlines() if line.startswith("checksum")]
    assert checksum == [line for line in again.stdout.splitlines() if line.startswith("checksum")]
