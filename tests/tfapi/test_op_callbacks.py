"""gpuwhy.tfapi.op_callbacks against real TensorFlow: what the callback sees, from where,
and that switching it from another thread works on the thread that owns the list.

Locations are checked exactly: the line of each op that must be named carries a
``# @marker`` comment and :func:`_site` finds it.
"""

from __future__ import annotations

import threading

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager import execute  # noqa: E402

from gpuwhy.tfapi import op_callbacks as oc  # noqa: E402
from tests import markers  # noqa: E402

_site = markers.marker_lines(__file__)


@pytest.fixture
def recorder():
    """(records, frames, switch) for the current thread; switched off and checked after."""
    records: list = []
    frames = oc.UserFrames()
    switch = oc.CallbackSwitch(oc.thread_callbacks(), oc.recording_callback(records.append, frames))
    yield records, frames, switch
    switch.off()
    assert switch.callback not in oc.thread_callbacks()


def _sites(records, frames):
    return [(r[2], frames.location(r[3], r[4])) for r in records]


def test_eager_ops_are_recorded_with_type_site_size_and_device(recorder):
    records, frames, switch = recorder
    a = tf.ones((8, 8))
    b = tf.ones((8, 3))
    switch.on()
    c = a + a  # @add
    d = tf.matmul(c, b)  # @matmul
    switch.off()
    e = c * c  # @after
    assert _sites(records, frames) == [("AddV2", _site("add")), ("MatMul", _site("matmul"))]
    assert [r[5] for r in records] == [64, 24]
    assert all(oc.device_name(r[6]).startswith(("CPU", "GPU")) for r in records)
    assert [oc.dtype_name(r[7]) for r in records] == ["float32", "float32"]
    switch.on()
    tf.matmul(tf.ones((2, 2), tf.float64), tf.ones((2, 2), tf.float64))
    switch.off()
    assert oc.dtype_name(records[-1][7]) == "float64" and oc.dtype_name(None) is None
    assert all(r[0] <= r[1] for r in records)
    assert d.shape == (8, 3) and e.shape == (8, 8)


def test_the_callback_leaves_results_unchanged(recorder):
    records, _, switch = recorder
    x = tf.constant([[1.0, -2.0], [3.0, 4.0]])
    plain = tf.nn.relu(tf.matmul(x, x) - 1.0).numpy()
    switch.on()
    watched = tf.nn.relu(tf.matmul(x, x) - 1.0).numpy()
    switch.off()
    assert records, "the callback saw nothing"
    assert (watched == plain).all()
    assert switch.callback("AddV2", (), (), ()) is None


def test_graph_building_is_ignored_and_a_function_call_is_told_apart(recorder):
    records, frames, switch = recorder
    x = tf.ones((4, 4))

    @tf.function
    def step(v):
        return tf.nn.relu(v * 2.0) + 1.0

    switch.on()
    step(x)  # @call
    switch.off()
    assert len(records) == 1, _sites(records, frames)  # Mul, Relu, AddV2 were only built
    ((op_type, location),) = _sites(records, frames)
    assert op_type.startswith("__inference_step")
    assert location == _site("call")
    assert oc.is_function_call(op_type)
    assert not oc.is_function_call("AddV2") and not oc.is_function_call("MatMul")


def test_library_frames_are_skipped_up_to_the_innermost_user_frame(recorder):
    records, frames, switch = recorder
    x = tf.ones((2, 2))
    layer = tf.keras.layers.Dense(3, use_bias=False)
    layer(x)  # build outside the measurement
    switch.on()
    tf.nest.map_structure(lambda t: t - 1.0, [x])  # @lambda
    layer(x)  # @layer
    switch.off()
    sites = _sites(records, frames)
    assert sites[0] == ("Sub", _site("lambda"))
    assert {location for _, location in sites[1:]} == {_site("layer")}
    assert "MatMul" in {op for op, _ in sites[1:]}


def test_user_frames_resolve_multi_line_calls_to_their_first_line():
    frames = oc.UserFrames()
    here = frames.here(  # @here
        skip=1,
    )
    assert here == _site("here")


def test_switching_from_another_thread_acts_on_the_owning_thread(recorder):
    records, _, switch = recorder
    x = tf.ones((2, 2))
    for action in (switch.on, switch.off, switch.on):
        worker = threading.Thread(target=action)
        worker.start()
        worker.join()
        before = len(records)
        tf.identity(x)
        assert len(records) == before + (1 if action == switch.on else 0)
    assert execute.execute is execute.execute_with_callbacks  # slow-path ops are seen too
    switch.off()
    assert switch.callbacks == [] and execute.execute is execute.quick_execute


def test_callbacks_are_per_thread(recorder):
    records, _, switch = recorder
    switch.on()
    worker = threading.Thread(target=lambda: tf.identity(tf.ones((2, 2))))
    worker.start()
    worker.join()
    switch.off()
    assert records == []
    assert oc.thread_callbacks() is switch.callbacks


def test_device_name_keeps_the_device_part():
    assert oc.device_name("/job:localhost/replica:0/task:0/device:GPU:0") == "GPU:0"
    assert oc.device_name(None) is None
