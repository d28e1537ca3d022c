"""`gpuwhy run` of a real program whose pipelines call Python: a `from_generator` source
and a `tf.numpy_function` map in one pipeline (built by one function for fit's training
and validation data), and a second pipeline of its own with a `tf.py_function` map,
read by a custom loop. input.python-function says each pipeline's Python once: one
finding for the function's pipelines listing both Python stages, one for the other."""

import json
import textwrap

import pytest

from gpuwhy.schema import validation_errors
from tests.test_run_tensorflow import line_with, run

PROGRAM = textwrap.dedent(
    """
    import time

    import numpy as np
    import tensorflow as tf


    def rows(n):
        for _ in range(n):
            time.sleep(0.001)  # stands for reading a file
            yield np.ones(16, np.float32)


    def rotate(x):
        time.sleep(0.002)  # stands for scipy/PIL work
        return x[::-1].copy()


    def load(x):
        y = tf.numpy_function(rotate, [x], tf.float32)
        y.set_shape([16])
        return y, tf.reduce_sum(x)


    def make(n):
        ds = tf.data.Dataset.from_generator(
            rows, args=(n,), output_signature=tf.TensorSpec([16], tf.float32)
        )
        return ds.map(load).batch(16)


    def noisy(x):
        time.sleep(0.002)
        return x


    def add_noise(x):
        y = tf.py_function(noisy, [x], tf.float32)
        y.set_shape([16])
        return y


    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(make(384), validation_data=make(96), epochs=2, verbose=0)

    extra = tf.data.Dataset.from_tensor_slices(np.ones((384, 16), np.float32))
    extra = extra.map(add_noise).batch(16)
    total = 0.0
    for x in extra:
        total += float(tf.reduce_sum(model(x)))
    print("done")
    """
)


@pytest.fixture(scope="module")
def python_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("python-stages")
    (tmp / "prog.py").write_text(PROGRAM)
    result = run("--json", tmp / "run.json", "prog.py", cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp / "prog.py", json.loads((tmp / "run.json").read_text())


def test_each_pipeline_s_python_is_one_finding_and_other_pipelines_keep_theirs(python_run):
    program, record = python_run
    assert validation_errors(record) == []
    python = {f["location"]: f for f in record["findings"] if f["id"] == "input.python-function"}
    load = f"prog.py:{line_with(program, 'def load(x)')}"
    noise = f"prog.py:{line_with(program, 'def add_noise(x)')}"
    assert sorted(python) == sorted([load, noise])
    made = python[load]
    # fit's training and validation data, one function: one cause
    assert made["title"].endswith("(one cause, in 2 pipelines)")
    stages = [
        (row["stage"].split("(")[0], row["location"]) for row in made["evidence"]["python_stages"]
    ]
    assert stages == [
        ("MapAndBatch", load),
        ("Generator", f"prog.py:{line_with(program, 'def rows(n)')}"),
    ]
    assert "Generator(rows at" in made["title"]
    assert "# and Generator(rows at" in made["fix"]
    (other,) = python[noise]["evidence"]["python_stages"]
    assert other["location"] == noise
