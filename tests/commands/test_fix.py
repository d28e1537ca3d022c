"""`gpuwhy fix --input SCRIPT` end to end: the script runs as python would run it, every
dataset it iterates is rewritten, checked and timed, and the report goes through the same
renderers as every command (`gpuwhy report fix.json` prints it again)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")

ROOT = Path(__file__).parents[2]


def _fix_command() -> list[str]:
    return [sys.executable, "-m", "gpuwhy", "fix"]


def _run(args, cwd):
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    return subprocess.run(
        _fix_command() + args, capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


SCRIPT = """\
import sys
import tensorflow as tf

table = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(["cat", "dog"], [0, 1]), default_value=-1)


def encode(word):
    return tf.fill([16], tf.cast(table.lookup(word), tf.float32))


words = tf.data.Dataset.from_tensor_slices(["cat", "dog"] * 64)
ds = words.map(encode)
ds = ds.shuffle(32)
ds = ds.batch(8)
for epoch in range(int(sys.argv[1])):
    for batch in ds:
        pass
print("script finished", sys.argv[1:])
"""


def test_fix_input_runs_the_script_and_prints_the_changes_with_its_lines(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = _run(["--input", "--repeats", "2", "--json", "fix.json", "train.py", "2"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "script finished ['2']" in out.stdout  # the script ran, with its argv
    err = out.stderr
    assert "[1] dataset created at train.py:15, iterated at train.py:17, 2 iterators" in err
    assert "train.py:13  map(encode)" in err
    assert ".map(encode, num_parallel_calls=tf.data.AUTOTUNE)" in err
    assert ".cache()   # right after .map(encode), before shuffle(32)" in err
    assert "was: ds = words.map(encode)" in err
    assert "train.py:15  batch(8)" in err and ".prefetch(tf.data.AUTOTUNE)" in err
    # the seconds it measured inside the script's run are said where they went
    assert re.search(r"gpuwhy fix: measured in \d+\.\d s, inside the script's run", err)
    saved = json.loads((tmp_path / "fix.json").read_text())
    from gpuwhy.schema import validation_errors

    assert validation_errors(saved) == [] and saved["command"] == "fix"
    (fix,) = saved["input_fixes"]["fixes"]
    assert fix["same_elements"] is True and fix["before"]["passes"] == 2
    assert fix["location"] == "train.py:15" and fix["iterated_at"] == ["train.py:17"]
    assert {c["kind"] for c in fix["changes"]} >= {"parallel-map", "cache", "prefetch"}
    assert saved["verdict"]["text"].startswith("Input pipeline ") or not fix["worth_it"]
    # the saved record renders again, with its before/after chart
    again = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", "fix.json", "--html", "fix.html"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "Input pipelines rewritten and measured" in again.stdout
    # one record, one renderer: the saved report prints what the command printed
    assert again.stdout.strip() in err
    assert 'id="before-after"' in (tmp_path / "fix.html").read_text()


def test_fix_input_stop_early_ends_the_script_at_its_first_iterator(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    out = _run(["--input", "--stop-early", "--no-measure", "train.py", "3"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "script finished" not in out.stdout
    assert "stopped the script at its first iterator" in out.stderr
    assert "1 iterator" in out.stderr and "Traceback" not in out.stderr


def test_fix_input_of_a_missing_script_is_one_line_and_exit_2(tmp_path):
    out = _run(["--input", "missing.py"], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["gpuwhy: error: missing.py: no such file"]


RECORDS_IN_A_TEMP_DIR = """\
import os
import tempfile

import tensorflow as tf


def parse(record):
    return tf.strings.to_number(record) * 2.0


with tempfile.TemporaryDirectory() as folder:      # gone when the script ends
    path = os.path.join(folder, "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(64):
            writer.write(str(i).encode())
    ds = tf.data.TFRecordDataset(path).map(parse).batch(8)
    for epoch in range(2):
        total = sum(float(tf.reduce_sum(b)) for b in ds)
    print("total", total)
"""


def test_fix_input_measures_while_the_script_s_files_still_exist(tmp_path):
    # The pipeline reads files the script deletes when it ends: it is measured when
    # first iterated. A TFRecord reader's count is unknown to TF: one pass counts it.
    (tmp_path / "train.py").write_text(RECORDS_IN_A_TEMP_DIR)
    out = _run(["--input", "--repeats", "2", "train.py"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["total 4032.0"]  # the script's own result
    err = out.stderr
    assert "could not optimise" not in err and "No such file" not in err
    assert "measuring the dataset created at train.py:16" in err
    assert "8 elements after batch(8), counted in one pass" in err
    assert ".cache()" in err


LIBRARY_AND_ONCE = """\
import numpy as np
import tensorflow as tf
import keras

series = np.random.rand(4000, 8).astype("float32")
targets = np.random.rand(4000).astype("float32")
windows = keras.utils.timeseries_dataset_from_array(
    series, targets, sequence_length=16, batch_size=64, shuffle=True, seed=1
).map(lambda x, y: (tf.math.log1p(tf.abs(x)), y))
for epoch in range(2):
    for x, y in windows:
        pass

vocabulary = tf.data.Dataset.from_tensor_slices(np.arange(4096)).map(
    lambda i: tf.strings.as_string(i * 7)
).batch(64)
for words in vocabulary:  # read once, as adapt() reads its dataset
    pass
"""


def test_no_cache_is_claimed_inside_a_librarys_dataset_or_for_a_dataset_read_once(tmp_path):
    """A cache inside a dataset keras.utils built (before its shuffle) has no line in the
    program to go at; a dataset the program reads once never reads a cache back: neither
    is offered as a gain."""
    (tmp_path / "train.py").write_text(LIBRARY_AND_ONCE)
    out = _run(["--input", "--repeats", "2", "--json", "fix.json", "train.py"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    err = out.stderr
    assert "cache(): not inserted: the last stage whose elements repeat, zip(...), is inside" in err
    assert ".cache()   # right after .zip(" not in err
    saved = json.loads((tmp_path / "fix.json").read_text())
    (once,) = [f for f in saved["input_fixes"]["fixes"] if f["iterators"] == 1]
    assert "cache" in {c["kind"] for c in once["changes"]}
    assert "changes (the program reads this dataset once: the gain above is the cache's" in err
    assert "over the program's one pass" in err
    verdict = saved["verdict"]["text"]
    assert not (verdict.startswith("Input pipeline") and once["location"] in verdict), verdict
