"""gpuwhy.tfapi.tracing against the installed TensorFlow: the tf.function hooks.

These say which private API moved when TensorFlow is upgraded: Function.__call__ and
tracing_compilation._create_concrete_function. Lines that must be named carry a
``# @marker`` comment, found by :func:`_at`.
"""

from __future__ import annotations

import gc
import threading
import weakref
from array import array
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager.polymorphic_function import (  # noqa: E402
    polymorphic_function,
    tracing_compilation,
)

from gpuwhy.tfapi.tracing import FunctionHooks, describe  # noqa: E402
from tests import markers  # noqa: E402

THIS_FILE = Path(__file__)

_at = markers.marker_lines(THIS_FILE)


class Recorder:
    """What the hooks reported: call times per Function, and the traces."""

    def __init__(self) -> None:
        self.times: dict[int, array] = {}
        self.functions: dict[int, object] = {}
        self.traces: list = []
        self.hooks = FunctionHooks(self.times, self._new, self.traces.append)

    def _new(self, function):
        self.functions[id(function)] = function
        return self.times.setdefault(id(function), array("d"))

    def calls(self, function) -> list[tuple[float, float]]:
        t = self.times.get(id(function), array("d")).tolist()
        return list(zip(t[0::2], t[1::2]))

    def traces_of(self, function) -> list:
        return [t for t in self.traces if t.function is function]


@pytest.fixture
def hooks():
    recorder = Recorder()
    recorder.hooks.install()
    try:
        yield recorder
    finally:
        recorder.hooks.uninstall()


def test_a_changing_python_int_retraces_and_names_the_argument(hooks):
    @tf.function
    def scale(x, n):
        return x * n

    x = tf.ones([2, 3])
    for n in range(3):
        scale(x, n)  # @scale-call
    traces = hooks.traces_of(scale)
    assert [t.args for t in traces] == [
        (("x", "float32[2,3]"), ("n", f"{n} (int)")) for n in range(3)
    ]
    assert all(t.caller == _at("scale-call") for t in traces)
    assert all(t.seconds > 0 and not t.nested for t in traces)
    assert [id(t.concrete) for t in traces] == [
        id(cf) for cf in scale._list_all_concrete_functions()
    ]
    assert len(hooks.calls(scale)) == 3


def test_tensor_shapes_retrace_unless_reduce_retracing_generalises_them(hooks):
    @tf.function
    def plain(x):
        return x + 1

    @tf.function(reduce_retracing=True)
    def reducing(x):
        return x + 1

    for size in (2, 3, 4, 5):
        plain(tf.ones([size]))
        reducing(tf.ones([size]))
    assert [t.args for t in hooks.traces_of(plain)] == [
        (("x", f"float32[{n}]"),) for n in (2, 3, 4, 5)
    ]
    assert [t.args for t in hooks.traces_of(reducing)] == [
        (("x", "float32[2]"),),
        (("x", "float32[None]"),),
    ]
    assert describe(reducing).reduce_retracing and not describe(plain).reduce_retracing


def test_nested_tf_function_calls_count_once_as_the_outermost(hooks):
    @tf.function
    def inner(x):
        return x * 2

    @tf.function
    def outer(x):
        return inner(x) + 1

    for _ in range(4):
        outer(tf.ones([2]))
    assert len(hooks.calls(outer)) == 4
    assert hooks.calls(inner) == []  # only ever called while outer was traced
    (inner_trace,) = hooks.traces_of(inner)
    (outer_trace,) = hooks.traces_of(outer)
    assert inner_trace.nested and not outer_trace.nested
    # the trace it ran in is named: inner's graph is called by outer's
    assert inner_trace.inside is outer and outer_trace.inside is None
    # outer's trace includes inner's
    assert outer_trace.started <= inner_trace.started
    assert inner_trace.started + inner_trace.seconds <= outer_trace.started + outer_trace.seconds


def test_calls_are_timed_in_order(hooks):
    @tf.function
    def add(x):
        return x + 1

    before = __import__("time").perf_counter()
    for _ in range(5):
        add(tf.ones([3]))
    calls = hooks.calls(add)
    assert len(calls) == 5
    assert before <= calls[0][0]
    assert all(start <= end for start, end in calls)
    assert all(a[1] <= b[0] for a, b in zip(calls, calls[1:]))
    (trace,) = hooks.traces_of(add)  # the first call traced, inside the first call's time
    assert calls[0][0] <= trace.started <= calls[0][1]


def test_jit_compile_function_is_traced_and_called(hooks):
    @tf.function(jit_compile=True)
    def fused(x):
        return tf.nn.relu(x * 2.0 + 1.0)

    fused(tf.ones([4]))
    fused(tf.ones([4]))
    assert describe(fused).jit_compile is True
    assert len(hooks.calls(fused)) == 2
    (trace,) = hooks.traces_of(fused)
    assert trace.args == (("x", "float32[4]"),)


def test_a_trace_says_whether_its_call_ran_through_this_session_s_hook(hooks):
    """A call that began with the call hook stepped aside (a pause) traces unhooked,
    though the hook is back by the trace's end (the steps' drain puts it back from
    another thread): only the stack says which, and a chained session's hook on it is
    not this one's."""

    @tf.function
    def hooked(x):
        return x + 1

    hooked(tf.ones([2]))
    (trace,) = hooks.traces_of(hooked)
    assert trace.hooked and trace.in_call

    (call,) = [p for p in hooks.hooks._patches if p.name == "__call__"]

    @tf.function
    def aside(x):
        call.step_back()  # back mid-trace, as the drain does
        return x + 2

    assert call.step_aside()
    aside(tf.ones([2]))
    (trace,) = hooks.traces_of(aside)
    assert not trace.hooked and trace.in_call
    assert hooks.calls(aside) == []  # began unhooked: not timed

    other = Recorder()  # a second session chained over this one, paused
    other.hooks.install()
    try:
        (over,) = [p for p in other.hooks._patches if p.name == "__call__"]

        @tf.function
        def under(x):
            return x + 3

        assert over.step_aside()  # this session's hook still runs the call
        under(tf.ones([2]))
        over.step_back()
    finally:
        other.hooks.uninstall()
    assert hooks.traces_of(under)[0].hooked
    assert not other.traces_of(under)[0].hooked


def test_get_concrete_function_reports_a_trace_but_no_call(hooks):
    @tf.function
    def double(x):
        return x * 2

    concrete = double.get_concrete_function(tf.TensorSpec([None, 8], tf.int32))
    (trace,) = hooks.traces_of(double)
    assert trace.concrete is concrete
    assert trace.args == (("x", "int32[None,8]"),)
    assert hooks.calls(double) == []


def test_python_values_and_containers_are_written_as_tf_keyed_them(hooks):
    @tf.function
    def many(x, *rest, flag=True, options=None):
        return x

    class Config:
        pass

    many(
        tf.ones([2], tf.int64),
        3.5,
        "s",
        tf.Variable(1.0),
        Config(),
        flag=False,
        options={"a": tf.ones([1]), "b": [1, 2]},
    )
    (trace,) = hooks.traces_of(many)
    args = dict(trace.args)
    assert args["x"] == "int64[2]"
    assert args["rest_0"] == "3.5 (float)"
    assert args["rest_1"] == "'s' (str)"
    assert args["rest_2"] == "Variable float32[]"
    assert args["rest_3"] == "<Config object> (by identity)"
    assert args["flag"] == "False (bool)"
    assert args["options"] == "{a: float32[1], b: [1, 2]}"


def test_tf_data_functions_are_traces_of_tf_data_wrappers_not_calls(hooks):
    @tf.function
    def preprocess(x):
        return x * 2

    dataset = tf.data.Dataset.range(4).map(preprocess)
    assert [int(v) for v in dataset] == [0, 2, 4, 6]
    assert hooks.calls(preprocess) == []  # called while tf.data traced its map function
    wrappers = [t for t in hooks.traces if describe(t.function).tf_data]
    assert wrappers and all(describe(t.function).library for t in wrappers)
    assert [t.args for t in hooks.traces_of(preprocess)] == [(("x", "int64[]"),)]


def test_keras_fit_train_function_is_seen_with_one_trace(hooks):
    import numpy as np

    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(  # @fit
        np.ones((64, 4), "float32"),
        np.ones((64, 2), "float32"),
        batch_size=16,
        epochs=2,
        verbose=0,
    )
    train = model.train_function
    stepper = [t for t in hooks.traces if describe(t.function).name == "multi_step_on_iterator"]
    assert len(stepper) == 1
    info = describe(stepper[0].function)
    assert info.library and info.reduce_retracing and not info.tf_data
    assert stepper[0].caller == _at("fit")
    assert stepper[0].args == (("iterator", "iterator of (float32[16,4], float32[16,2])"),)
    calls = [
        c
        for f_id, f in hooks.functions.items()
        if describe(f).name == "multi_step_on_iterator"
        for c in hooks.calls(f)
    ]
    assert len(calls) == 8  # 4 batches x 2 epochs
    assert callable(train)


def test_calls_from_several_threads_are_each_recorded(hooks):
    @tf.function
    def work(x):
        return x + 1

    work(tf.ones([2]))
    threads = [
        threading.Thread(target=lambda: [work(tf.ones([2])) for _ in range(5)]) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    calls = hooks.calls(work)
    assert len(calls) == 16
    assert all(start <= end for start, end in calls)


def test_run_functions_eagerly_counts_only_the_outer_call(hooks):
    @tf.function
    def inner(x):
        return x * 2

    @tf.function
    def outer(x):
        return inner(x) + 1

    tf.config.run_functions_eagerly(True)
    try:
        outer(tf.ones([2]))
        outer(tf.ones([2]))
    finally:
        tf.config.run_functions_eagerly(False)
    assert len(hooks.calls(outer)) == 2
    assert hooks.calls(inner) == []
    assert hooks.traces == []  # nothing is traced when functions run eagerly


def test_uninstall_restores_tensorflow_exactly():
    call = polymorphic_function.Function.__dict__["__call__"]
    create = tracing_compilation._create_concrete_function
    recorder = Recorder()
    recorder.hooks.install()
    assert polymorphic_function.Function.__dict__["__call__"] is not call
    assert tracing_compilation._create_concrete_function is not create
    recorder.hooks.uninstall()
    assert polymorphic_function.Function.__dict__["__call__"] is call
    assert tracing_compilation._create_concrete_function is create

    @tf.function
    def after(x, n):
        return x * n

    assert float(after(tf.constant(2.0), 3)) == 6.0
    assert float(after(tf.constant(2.0), 4)) == 8.0
    assert recorder.times == {} and recorder.traces == []
    recorder.hooks.uninstall()  # twice is harmless


def test_two_hooks_chain_and_each_records():
    first, second = Recorder(), Recorder()
    first.hooks.install()
    second.hooks.install()
    try:

        @tf.function
        def shared(x):
            return x - 1

        shared(tf.ones([2]))
        shared(tf.ones([2]))
    finally:
        second.hooks.uninstall()
        first.hooks.uninstall()
    assert len(first.calls(shared)) == len(second.calls(shared)) == 2
    assert len(first.traces_of(shared)) == len(second.traces_of(shared)) == 1
    assert "gpuwhy" not in polymorphic_function.Function.__dict__["__call__"].__code__.co_filename


def test_a_tf_function_created_in_a_loop_is_a_new_function_each_time(hooks):
    seen = []
    for i in range(6):
        step = tf.function(lambda x: x + 1)  # @loop
        step(tf.ones([2]))
        seen.append(weakref.ref(step))
    traced = [t for t in hooks.traces if describe(t.function).name == "<lambda>"]
    assert len(traced) == 6
    assert len({id(t.function) for t in traced}) == 6
    assert describe(traced[0].function).location == _at("loop")
    del traced, step
    hooks.traces.clear()
    hooks.functions.clear()
    gc.collect()
    assert sum(ref() is not None for ref in seen) == 0  # the hooks keep no Function alive


def test_named_tuples_and_lists_are_written_field_by_field(hooks):
    import collections

    Batch = collections.namedtuple("Batch", ["images", "labels"])

    @tf.function
    def consume(batch, sizes):
        return batch.images

    consume(Batch(tf.ones([8, 28, 28]), tf.zeros([8], tf.int32)), [tf.ones([1]), 2])
    (trace,) = hooks.traces_of(consume)
    assert trace.args == (
        ("batch", "Batch(images=float32[8,28,28], labels=int32[8])"),
        ("sizes", "[float32[1], 2]"),
    )


# -- TF's own count of a function's calls (what the call hook's pauses count by) --------


def test_tf_counts_each_eager_call_under_the_function_s_code():
    from gpuwhy.tfapi.tracing import calls_key, eager_calls, functions_run_eagerly

    v = tf.Variable(0.0)

    @tf.function
    def step(x):
        v.assign_add(x)

    step(tf.constant(1.0))  # traces
    before = eager_calls(calls_key(step))
    for _ in range(25):
        step(tf.constant(1.0))
    assert eager_calls(calls_key(step)) - before == 25
    assert calls_key(step) is step.python_function.__code__
    assert not functions_run_eagerly()

    @tf.function
    def outer():
        step(tf.constant(1.0))  # a call inside a trace: a graph op, not counted

    outer()
    outer()
    assert eager_calls(calls_key(step)) - before == 25


def test_two_functions_of_one_def_share_their_count():
    from gpuwhy.tfapi.tracing import calls_key, eager_calls

    def make():
        return tf.function(lambda x: x + 1)

    a, b = make(), make()
    a(tf.constant(1))
    b(tf.constant(1))
    assert calls_key(a) is calls_key(b)
    start = eager_calls(calls_key(a))
    b(tf.constant(2))
    assert eager_calls(calls_key(a)) == start + 1  # why the pauses refuse such pairs
