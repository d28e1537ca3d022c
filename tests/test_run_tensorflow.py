"""`gpuwhy run` on real TensorFlow programs (subprocesses), and the same watching from
Python (`gpuwhy.session()`, `gpuwhy.KerasCallback()`) in this process."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from gpuwhy.schema import validation_errors

ROOT = Path(__file__).resolve().parents[1]
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
EXAMPLE = ROOT / "examples" / "slow_training.py"


def line_with(path: Path, text: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(text)


def run(*args, cwd=ROOT, env_extra=None):
    return subprocess.run(
        [GPUWHY, "run", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        # this checkout's gpuwhy, whichever one the environment installed
        env={
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            **(env_extra or {}),
        },
    )


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "run.json"
    # every eager op counted (the default windows sample 1/11 of the run: not exact here)
    result = run(
        "--json",
        out,
        "--eager-duty",
        "1",
        "examples/slow_training.py",
        "--epochs",
        "2",
        "--samples",
        "800",
    )
    return result, json.loads(out.read_text())


def test_the_demo_runs_unchanged_and_writes_a_valid_record(demo):
    result, record = demo
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0].startswith("epoch 0: loss ")  # the script's own output
    assert "•" not in result.stdout and "✗" not in result.stdout  # the report is on stderr
    assert validation_errors(record) == []
    assert record["command"] == "run" and record["program"]["ended"] == "completed"
    assert record["program"]["tensorflow_imported"] is True


def test_the_demo_s_steps_and_input_wait_are_measured_at_its_loop(demo):
    _, record = demo
    steps = record["steps"]
    loop = line_with(EXAMPLE, "for x, y in dataset:")
    assert steps["source"] == "tf-data"
    assert steps["marker"].endswith(f"examples/slow_training.py:{loop}")
    assert steps["count"] == 50  # 2 epochs x 800/32 batches
    assert steps["input_wait_fraction"] > 0.2  # a sequential py_function per image
    (bound,) = [f for f in record["findings"] if f["id"] == "input.bound"]
    # the culprit is the pipeline's slowest stage: the map running `load` (a py_function)
    load = f"examples/slow_training.py:{line_with(EXAMPLE, 'def load(image, label)')}"
    assert bound["severity"] == "high" and bound["location"] == load
    assert bound["evidence"]["measured_at"] == steps["marker"]
    (python,) = [f for f in record["findings"] if f["id"] == "input.python-function"]
    assert python["location"] == load and python["severity"] == "high"


def test_the_demo_s_retracing_eager_ops_and_placement_are_found(demo):
    _, record = demo
    (step_fn,) = [f for f in record["tracing"]["functions"] if f["name"] == "train_step"]
    assert (
        step_fn["location"] == f"examples/slow_training.py:{line_with(EXAMPLE, '@tf.function')}"
    )  # co_firstlineno: the decorator
    assert step_fn["calls"] == 50 and step_fn["traces"] == 7  # lr halves every 8 steps
    assert step_fn["changed_args"] == ["learning_rate"]
    (retracing,) = [f for f in record["findings"] if f["id"] == "launch.retracing"]
    # the call that passes the changing Python float, the line its fix changes
    call = f"examples/slow_training.py:{line_with(EXAMPLE, '= train_step(x, y, learning_rate)')}"
    assert retracing["location"] == call
    equal_line = f"examples/slow_training.py:{line_with(EXAMPLE, 'tf.equal(y, label)')}"
    eager = record["eager"]
    assert eager["sampled_steps"] >= 45  # all but the few spanning a stop
    assert 100 < eager["per_step"] < 120  # 10 classes x 10 ops + 4 weights x 3
    sites = {(s["op"], s["location"]) for s in eager["sites"]}
    assert {("Equal", equal_line), ("Cast", equal_line)} <= sites
    assert "launch.eager-ops" in {f["id"] for f in record["findings"]}
    pinned = f"examples/slow_training.py:{line_with(EXAMPLE, 'tf.cast(logits, tf.float64)')}"
    ids = {f["id"]: f for f in record["findings"]}
    assert ids["placement.forced-cpu"]["location"] == pinned
    assert "placement.float64" in ids
    (audited,) = record["placement"]["functions"]  # the latest trace only
    assert audited["name"] == "train_step"


def test_a_lazy_tensorflow_import_and_keras_fit(tmp_path):
    script = tmp_path / "fit.py"
    script.write_text(
        textwrap.dedent("""
        import os, sys
        print("tf before main:", "tensorflow" in sys.modules)
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"      # must still be read by TF itself

        def main():
            import numpy as np
            import tensorflow as tf
            x = np.random.rand(256, 8).astype("float32")
            y = np.random.rand(256, 1).astype("float32")
            model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)   # batch dim: None
            model.fit(ds, epochs=2, verbose=0)                     # fit-here
            model.evaluate(x, y, batch_size=16, verbose=0)         # evaluate-here
            model.predict(x[:1], verbose=0)                        # predict-here
            print("done")

        if __name__ == "__main__":
            main()
    """)
    )
    out = tmp_path / "r.json"
    result = run("--json", out, script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "tf before main: False\ndone\n"
    record = json.loads(out.read_text())
    assert record["steps"]["source"] == "keras-fit"
    assert record["steps"]["marker"] == f"Model.fit at fit.py:{line_with(script, 'fit-here')}"
    assert record["steps"]["count"] == 32
    assert record["environment"]["env_vars"]["TF_CPP_MIN_LOG_LEVEL"] == "3"
    names = {f["name"] for f in record["tracing"]["functions"]}
    assert any("step_on" in n for n in names)  # Keras' own train function
    assert record["placement"]["functions"], "the train function was audited"
    # every function that ran is audited: fit's, evaluate's and predict's, by call site
    audited = {f["location"] for f in record["placement"]["functions"]}
    for marker in ("fit-here", "evaluate-here", "predict-here"):
        assert f"fit.py:{line_with(script, marker)}" in audited, (marker, audited)
    # the step's FLOPs use the batch of 16 the run delivered; predict's its own 1 image
    fit_site = f"fit.py:{line_with(script, 'fit-here')}"
    step_ops = [op for op in record["placement"]["tensor_ops"] if fit_site in op["function"]]
    assert step_ops and all(op["flops"] for op in step_ops)
    assert {op["flops_batch"] for op in step_ops} == {16}
    (unused,) = [f for f in record["findings"] if f["id"] == "tensorcore.unused"]
    # compile's default jit_compile="auto": the step a GPU runs is XLA-compiled
    assert unused["evidence"]["largest_from"].endswith(
        f"({fit_site}) (the training step, XLA-compiled)"
    )


def test_session_context_manager_in_process():
    import tensorflow as tf

    import gpuwhy

    ds = tf.data.Dataset.from_tensor_slices(np.arange(40, dtype="float32")).batch(4)
    w = tf.Variable(1.0)

    @tf.function
    def step(x):
        w.assign_add(tf.reduce_sum(x) * 1e-3)

    with gpuwhy.session(hz=5) as s:
        for x in ds:  # session-loop
            step(x)
    record = s.record
    assert record.command == "run"
    assert record.facts.steps.source == "tf-data" and record.facts.steps.count == 10
    assert record.facts.steps.marker.endswith(f":{line_with(Path(__file__), 'session-loop')}")
    assert record.facts.program.ended == "completed"
    text = s.render()
    assert text.splitlines()[0].startswith("•") or text.splitlines()[0].startswith("✗")
    assert "Steps" in text


def test_session_records_an_exception_and_re_raises_it():
    import gpuwhy

    with pytest.raises(ZeroDivisionError):
        with gpuwhy.session(audit=False) as s:
            1 / 0
    assert s.record.facts.program.ended == "exception"
    raised_at = line_with(Path(__file__), "1 / 0")
    assert s.record.facts.program.error == (
        f"ZeroDivisionError: division by zero; raised at tests/test_run_tensorflow.py:{raised_at}"
    )


def test_keras_callback_watches_fit_and_keeps_the_record(capsys):
    import keras

    import gpuwhy

    x = np.random.rand(64, 4).astype("float32")
    y = np.random.rand(64, 1).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    callback = gpuwhy.KerasCallback(hz=5)
    model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[callback])  # callback-fit
    record = callback.record
    assert record.facts.steps.source == "keras-fit" and record.facts.steps.count == 16
    assert record.facts.steps.marker.endswith(f":{line_with(Path(__file__), 'callback-fit')}")
    assert "Steps" in capsys.readouterr().err


FIT_ON_STRINGS = textwrap.dedent(
    """
    import numpy as np
    import keras

    x = np.random.rand(64, 4).astype("float32")
    y = (x[:, 0] > 0.5).astype("float32")
    inputs = keras.Input((4,), name="features")
    model = keras.Model(inputs, keras.layers.Dense(1, name="priority")(inputs))
    model.compile("adam", "mse")
    # the targets as a dict for a single output: Keras converts its key and raises
    model.fit({"features": x}, {"priority": y}, epochs=1, batch_size=16, verbose=0)
    """
)


def test_a_keras_error_s_traceback_is_python_s_to_its_last_frame(tmp_path):
    """Keras filters its own frames from a fit's error and keeps the innermost one where
    it filtered out all else; a gpuwhy frame it kept made it drop that one: the
    traceback under gpuwhy ended a frame early (a review's fit on a string column)."""
    script = tmp_path / "train.py"
    script.write_text(FIT_ON_STRINGS)

    def traceback_of(command: list[str]) -> str:
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=tmp_path, timeout=600,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )  # fmt: skip
        assert done.returncode == 1, done.stderr[-2000:]
        start = done.stderr.index("Traceback (most recent call last):")
        end = done.stderr.index("\n", done.stderr.index("Error: ", start))
        return done.stderr[start:end]

    plain = traceback_of([sys.executable, str(script)])
    # one interpreter's path on both sides (the console script's may name the venv
    # through another path: its frames' file names would differ, not its traceback)
    watched = traceback_of([sys.executable, "-m", "gpuwhy", "run", "-o", "/dev/null", str(script)])
    assert watched == plain
    assert plain.count('File "') >= 3  # the script's line, Keras' handler, the innermost
