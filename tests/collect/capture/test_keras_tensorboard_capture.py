"""A capture written by Keras' ``TensorBoard(log_dir, profile_batch=3)`` callback: one
profiled batch, a "Profiled batch" event around the call of the training function
``multi_step_on_iterator``, read as that one training step (it was read as three steps
of 0.1 ms, by an eager ``_EagerConst`` the callbacks run around it). On a CPU-only
machine TensorFlow's profiler writes a host plane only; the step is read from it.

The capture is made here, in a child process, by the callback itself. Its summaries need
the ``tensorboard`` package, which TensorFlow 2.21 no longer depends on; where it is
missing, the child gives ``tf.summary.scalar`` TensorBoard's own body less its metadata
(the same ``tf.summary.write`` and eager ops), so the profiler records the same events."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwhy.collect.capture.analysis import NO_DEVICE, read_capture
from gpuwhy.collect.capture.files import capture_files
from tests.collect.capture import reference
from tests.commands.test_report_capture import report_json

PS = 1e-12

PROGRAM = textwrap.dedent(
    """
    import sys

    import numpy as np
    import tensorflow as tf

    try:
        import tensorboard  # noqa: F401  (the callback's summaries)
    except ImportError:
        import tensorflow.summary as summary  # the module the callback imports

        def scalar(name, data, step=None, description=None):
            scope = summary.experimental.summary_scope
            with scope(name, "scalar_summary", values=[data, step]) as (tag, _):
                tf.debugging.assert_scalar(data)
                return summary.write(tag=tag, tensor=tf.cast(data, tf.float32), step=step)

        summary.scalar = scalar

    rng = np.random.default_rng(0)
    x = rng.random((256, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 256)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)
    model = tf.keras.Sequential([
        tf.keras.Input((32, 32, 3)),
        tf.keras.layers.Conv2D(16, 3, activation="relu"),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(32, 3, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(10),
    ])
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callback = tf.keras.callbacks.TensorBoard(log_dir=sys.argv[1], profile_batch=3)
    model.fit(ds, epochs=2, verbose=0, callbacks=[callback])
    print("profiled")
    """
)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    pytest.importorskip("tensorflow")
    where = tmp_path_factory.mktemp("tensorboard")
    script = where / "fit.py"
    script.write_text(PROGRAM)
    logdir = where / "logs"
    result = subprocess.run(
        [sys.executable, str(script), str(logdir)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("profiled")
    return logdir


def _events(path: Path, matches) -> list[tuple[int, int]]:
    """(start, end) in ps of the host events whose name ``matches``, by TF's own parser."""
    host = reference.plane(reference.parse(path), "/host:CPU")
    found = []
    for line in host.lines:
        for start, event in zip(reference.starts_ps(line).tolist(), line.events):
            if matches(reference.event_name(host, event)):
                found.append((start, start + event.duration_ps))
    return sorted(found)


def test_the_profiled_batch_is_the_one_step_and_holds_the_training_call(logdir):
    (path,) = capture_files(logdir)
    assert path.parent.parent == logdir / "train" / "plugins" / "profile"
    facts = read_capture([path])
    assert facts.no_device == NO_DEVICE  # a host plane only
    assert (facts.steps_from, facts.step_name, facts.step_count) == (
        "step markers",
        "Profiled batch",
        1,
    )
    ((start, end),) = _events(path, lambda name: name == "Profiled batch")
    (step,) = facts.steps
    assert step.start_s == pytest.approx(start * PS, abs=1e-9)
    assert step.duration_s == pytest.approx((end - start) * PS, abs=1e-9)
    call = re.compile(r"^EagerLocalExecute: __inference_multi_step_on_iterator_\d+$")
    ((call_start, call_end),) = _events(path, lambda name: bool(call.match(name)))
    assert start <= call_start and call_end <= end  # the training function's call, inside


def test_the_report_describes_the_profiled_step(logdir):
    for target in (logdir, next(logdir.rglob("*.xplane.pb"))):
        _, record = report_json(target)
        capture = record["capture"]
        assert capture["steps_from"] == "step markers", capture
        assert capture["step_name"] == "Profiled batch"
        assert len(capture["steps"]) == 1
        verdict = record["verdict"]["text"]
        assert verdict.startswith("1 captured step of "), verdict
        assert "_EagerConst" not in verdict and "too few steps" in verdict


def test_one_keras_batch_traced_without_markers_steps_by_its_training_call(tmp_path):
    """The profiler started and stopped around one batch by hand: no "Profiled batch",
    one call of Keras' ``multi_step_on_iterator`` (10 ms), and three eager
    ``_EagerConst`` of the callbacks after it. The call is the step."""
    from gpuwhy.collect.capture import xspace

    _, _, xspace_class = xspace.classes()
    space = xspace_class()
    host = space.planes.add(id=1, name="/host:CPU")
    names = {
        1: "EagerLocalExecute: __inference_multi_step_on_iterator_77",
        2: "EagerLocalExecute: _EagerConst",
    }
    for i, name in names.items():
        host.event_metadata[i].id, host.event_metadata[i].name = i, name
    thread = host.lines.add(id=1, name="python", timestamp_ns=0)
    ms = 1_000_000_000  # ps
    thread.events.add(metadata_id=1, offset_ps=ms, duration_ps=10 * ms)
    for i in range(3):
        thread.events.add(metadata_id=2, offset_ps=11 * ms + i * ms // 5, duration_ps=ms // 10)
    path = tmp_path / "vm.xplane.pb"
    path.write_bytes(space.SerializeToString())
    facts = read_capture([path])
    assert (facts.steps_from, facts.step_name, facts.step_count) == (
        "function calls",
        "multi_step_on_iterator",
        1,
    )
    assert facts.median_step_s == pytest.approx(0.010)
