"""FunctionWatcher against real TensorFlow programs: calls, traces, facts, audit targets.

Lines that must be named carry a ``# @marker`` comment, found by :func:`_at`.
"""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.eager.polymorphic_function import polymorphic_function  # noqa: E402

from gpuwhy.collect.inprocess import functions as functions_module  # noqa: E402
from gpuwhy.collect.inprocess.functions import FunctionWatcher  # noqa: E402
from gpuwhy.collect.placement import AuditTarget, audit_functions  # noqa: E402
from gpuwhy.facts import TracingFacts, from_dict, to_dict  # noqa: E402
from tests import markers  # noqa: E402

THIS_FILE = Path(__file__)

_at = markers.marker_lines(THIS_FILE)


@pytest.fixture
def watcher():
    w = FunctionWatcher()
    w.start(time.perf_counter())
    w.on_tensorflow()
    assert w.error is None
    try:
        yield w
    finally:
        w.stop()


def _fact(facts: TracingFacts, name: str):
    (fn,) = [f for f in facts.functions if f.name == name]
    return fn


def test_retracing_on_a_python_int_names_the_changed_argument(watcher):
    @tf.function  # @scale-def
    def scale(x, n):
        return x * n

    for n in range(8):
        scale(tf.ones([4]), n)  # @scale-call
    fn = _fact(watcher.facts(), "scale")
    assert (fn.calls, fn.traces, fn.instances) == (8, 8, 1)
    assert fn.location == _at("scale-def")
    assert fn.changed_args == ("n",)
    assert len(fn.signatures) == functions_module.MAX_SIGNATURES
    assert [dict(s.args)["n"] for s in fn.signatures] == [f"{n} (int)" for n in range(5)]
    assert all(s.caller == _at("scale-call") for s in fn.signatures)
    assert 0 < fn.trace_s <= fn.call_s
    assert not fn.library and not fn.reduce_retracing
    assert (
        len(watcher.concrete_functions(f"scale ({fn.location})"))
        == functions_module.MAX_KEPT_CONCRETE
    )


def test_shapes_with_and_without_reduce_retracing(watcher):
    @tf.function
    def plain(x):
        return x + 1

    @tf.function(reduce_retracing=True)
    def reducing(x):
        return x + 1

    for size in range(2, 8):
        plain(tf.ones([size]))
        reducing(tf.ones([size]))
    facts = watcher.facts()
    plain_fn, reducing_fn = _fact(facts, "plain"), _fact(facts, "reducing")
    assert plain_fn.traces == 6 and plain_fn.changed_args == ("x",)
    assert (
        reducing_fn.traces == 2
        and reducing_fn.changed_args == ("x",)
        and reducing_fn.reduce_retracing
    )
    assert [s.args for s in reducing_fn.signatures] == [
        (("x", "float32[2]"),),
        (("x", "float32[None]"),),
    ]


def test_nested_calls_count_once_as_outermost(watcher):
    @tf.function
    def inner(x):
        return x * 2

    @tf.function
    def outer(x):
        return inner(x) + 1

    for _ in range(3):
        outer(tf.ones([2]))
    calls = watcher.calls()
    (outer_name,) = [n for n in calls if n.startswith("outer (")]
    assert len(calls[outer_name]) == 3
    assert not any(n.startswith("inner (") for n in calls)
    facts = watcher.facts()
    assert (_fact(facts, "inner").calls, _fact(facts, "inner").traces) == (0, 1)
    assert _fact(facts, "outer").changed_args == ()
    # "0 calls" is not the fact to show: inner runs inside outer's calls
    assert (_fact(facts, "inner").inside, _fact(facts, "outer").inside) == (("outer",), ())


def test_calls_are_timed_relative_to_the_run(watcher):
    @tf.function
    def add(x):
        return x + 1

    for _ in range(4):
        add(tf.ones([2]))
    (name,) = [n for n in watcher.calls() if n.startswith("add (")]
    calls = watcher.calls()[name]
    assert len(calls) == 4 and all(watcher.t0 <= s <= e for s, e in calls)
    assert [s for s, _ in calls] == sorted(s for s, _ in calls)
    fn = _fact(watcher.facts(watcher.t0), "add")
    assert 0 <= fn.signatures[0].at_s <= time.perf_counter() - watcher.t0
    assert fn.call_s == pytest.approx(sum(e - s for s, e in calls), abs=1e-5)
    # every call timed: a span between each two in a row, their median one of them
    assert fn.gaps == 3
    spans = [b[0] - a[1] for a, b in zip(calls, calls[1:])]
    assert min(spans) * 0.98 <= fn.gap_median_s <= max(spans) * 1.02


def test_keras_fit_train_function_is_a_library_function_traced_once(watcher):
    import numpy as np

    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(  # @fit
        np.ones((40, 4), "float32"),
        np.ones((40, 2), "float32"),
        batch_size=16,
        epochs=3,
        verbose=0,
    )
    facts = watcher.facts()
    step = _fact(facts, "multi_step_on_iterator")
    assert step.library and step.reduce_retracing
    assert step.traces == 1  # the last, smaller batch does not retrace
    assert step.calls == 9  # 3 batches x 3 epochs
    assert step.location == _at("fit")
    inner = _fact(facts, "one_step_on_data")
    assert inner.library and inner.calls == 0 and inner.traces == 1
    assert f"multi_step_on_iterator ({_at('fit')})" in watcher.calls()
    targets = watcher.audit_targets(["multi_step_on_iterator"])
    assert len(targets) == 1 and targets[0].location == _at("fit")


def test_fit_s_and_evaluate_s_functions_of_one_name_are_each_an_audit_target(watcher):
    import numpy as np

    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 4), "float32"), np.ones((40, 2), "float32")
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)  # @fit-twin
    model.evaluate(x, y, batch_size=16, verbose=0)  # @evaluate-twin
    ran = [
        (f.name, f.location)
        for f in watcher.facts().functions
        if f.calls and f.name == "multi_step_on_iterator"
    ]
    assert sorted(location for _, location in ran) == sorted(
        [_at("fit-twin"), _at("evaluate-twin")]
    )
    targets = watcher.audit_targets(ran)
    assert sorted(t.location for t in targets) == sorted(location for _, location in ran)
    assert targets[0].function is not targets[1].function


def _fit_models(keras, models: int, compiles: int) -> None:
    import numpy as np

    x, y = np.ones((32, 4), "float32"), np.ones((32, 2), "float32")
    model = None
    for _ in range(models):
        del model  # the last model is freed before the next is built: its id may be reused
        gc.collect()
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        for _ in range(compiles):
            model.compile(optimizer="sgd", loss="mse")
            model.fit(x, y, batch_size=16, validation_data=(x, y), verbose=0)  # @fit-many


def test_keras_step_functions_are_told_apart_by_the_model_they_were_made_for(watcher):
    """Four models, each fit once with validation: Keras makes a train and a test
    function per model at one def, eight objects, and launch.retracing must not read
    them as one function re-created in a loop."""
    keras = pytest.importorskip("keras")
    _fit_models(keras, models=4, compiles=1)
    inner = _fact(watcher.facts(), "one_step_on_data")
    assert inner.location == _at("fit-many")
    assert (inner.instances, inner.models, inner.most_per_model) == (8, 4, 2)


def test_a_model_compiled_again_before_each_fit_has_its_step_functions_made_anew(watcher):
    keras = pytest.importorskip("keras")
    _fit_models(keras, models=1, compiles=4)
    inner = _fact(watcher.facts(), "one_step_on_data")
    assert (inner.models, inner.most_per_model) == (1, 8)


def test_a_tf_function_created_in_a_loop_is_merged_and_not_kept_alive(watcher):
    refs = []
    for _ in range(12):
        step = tf.function(lambda x: x * 3)  # @loop
        step(tf.ones([2]))
        refs.append(weakref.ref(step))
    del step
    gc.collect()
    assert sum(r() is not None for r in refs) == 0
    fn = _fact(watcher.facts(), "<lambda>")
    assert (fn.instances, fn.traces, fn.calls) == (12, 12, 12)
    assert fn.location == _at("loop") and fn.changed_args == ()
    names = [n for n in watcher.calls() if n.startswith("<lambda> (")]
    assert len(names) == 12 and len(set(names)) == 12
    kept = [n for n in names if watcher.concrete_functions(n)]
    assert len(kept) <= functions_module.MAX_DEAD_KEPT


def test_functions_made_without_end_add_up_per_place_beyond_the_cap(watcher, monkeypatch):
    monkeypatch.setattr(functions_module, "MAX_RECORDS", 5)
    for i in range(40):
        step = tf.function(lambda x: x * 3)  # @churn
        step(tf.ones([2]))
        step(tf.ones([2]))
        del step
        gc.collect()
    fn = _fact(watcher.facts(), "<lambda>")
    assert (fn.instances, fn.traces, fn.calls) == (40, 40, 80)
    assert fn.location == _at("churn") and len(fn.signatures) <= functions_module.MAX_SIGNATURES
    # the cap, the dead ones whose traces stay for the audit, one record for the rest
    assert len(watcher._records) <= 5 + functions_module.MAX_DEAD_KEPT + 1
    assert len([n for n in watcher.calls() if n.startswith("<lambda> (")]) <= 5


def test_display_names_are_unique_per_function_object(watcher):
    class Layer(tf.Module):
        @tf.function
        def step(self, x):
            return x + 1

    a, b = Layer(), Layer()
    a.step(tf.ones([1]))
    b.step(tf.ones([1]))
    b.step(tf.ones([1]))
    names = sorted(n for n in watcher.calls() if n.startswith("step ("))
    assert len(names) == 2 and names[1] == names[0] + " #2"
    assert sorted(len(watcher.calls()[n]) for n in names) == [1, 2]
    fn = _fact(watcher.facts(), "step")
    assert (fn.instances, fn.calls, fn.traces) == (2, 3, 2)


def test_jit_compile_and_audit_targets(watcher):
    @tf.function(jit_compile=True)
    def fused(x, w):
        return tf.nn.relu(tf.matmul(x, w))

    for batch in (8, 16):
        fused(tf.ones([batch, 4]), tf.ones([4, 3]))
    fn = _fact(watcher.facts(), "fused")
    assert fn.jit_compile is True and fn.traces == 2
    targets = watcher.audit_targets(["fused"])
    assert len(targets) == 1 and isinstance(targets[0], AuditTarget)
    assert targets[0].label == "fused" and targets[0].location == fn.location
    (display,) = [n for n in watcher.calls() if n.startswith("fused (")]
    kept = watcher.concrete_functions(display)
    assert len(kept) == 2 and targets[0].function is kept[-1]  # the latest trace
    assert [t.function for t in watcher.audit_targets([display])] == [kept[-1]]
    placement, _ = audit_functions(targets)
    assert [f.name for f in placement.functions] == ["fused"]
    assert placement.functions[0].jit_compile
    assert watcher.audit_targets(["no such function"]) == []


def test_an_epochs_smaller_last_batch_is_not_the_trace_audited(watcher):
    """60,000 examples at 64 end each epoch with a batch of 32 that traces the step
    again: the latest trace, run once an epoch. The audit (and the projection built on
    it) reads the full batch's; a trace that differs otherwise is the latest still."""

    @tf.function
    def step(x, y):
        return tf.reduce_sum(tf.matmul(x, tf.ones([4, 3]))) + tf.cast(tf.reduce_sum(y), tf.float32)

    for _ in range(3):
        step(tf.ones([64, 4]), tf.ones([64]))
    step(tf.ones([8, 4]), tf.ones([8]))
    (display,) = [n for n in watcher.calls() if n.startswith("step (")]
    kept = watcher.concrete_functions(display)
    assert len(kept) == 2
    (target,) = watcher.audit_targets(["step"])
    assert target.function is kept[0]  # batch 64, not the latest (8)
    # a trace that differs in more than its batch (labels of another dtype): the latest
    step(tf.ones([8, 4]), tf.ones([8], tf.float16))
    kept = watcher.concrete_functions(display)
    assert len(kept) == 3
    (target,) = watcher.audit_targets(["step"])
    assert target.function is kept[-1]


def test_stop_removes_the_hooks_and_tensorflow_still_works():
    original = polymorphic_function.Function.__dict__["__call__"]
    w = FunctionWatcher()
    w.start(time.perf_counter())
    w.on_tensorflow()

    @tf.function
    def during(x):
        return x + 1

    during(tf.ones([2]))
    w.stop()
    assert polymorphic_function.Function.__dict__["__call__"] is original
    during(tf.ones([2]))
    during(tf.ones([3]))  # a new trace, after stop

    @tf.function
    def after(x):
        return x * 2

    assert float(after(tf.constant(2.0))) == 4.0
    calls = w.calls()
    assert [len(v) for k, v in calls.items() if k.startswith("during (")] == [1]
    assert not any(k.startswith("after (") for k in calls)
    assert _fact(w.facts(), "during").traces == 1
    w.stop()  # twice is harmless


def test_facts_round_trip_through_json(watcher):
    @tf.function
    def tagged(x, mode):
        return x

    tagged(tf.ones([2]), "train")
    tagged(tf.ones([2]), "eval")
    facts = watcher.facts()
    assert from_dict(TracingFacts, to_dict(facts)) == facts
    assert _fact(facts, "tagged").changed_args == ("mode",)


def test_fit_s_validation_is_audited_beside_its_training_and_a_loop_s_copies_once(watcher):
    import numpy as np

    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    x, y = np.ones((40, 4), "float32"), np.ones((40, 2), "float32")
    model.fit(x, y, batch_size=16, epochs=2, validation_data=(x, y), verbose=0)  # @fit-val
    # one name, one call site, two graphs: the training step and the validation step
    targets = watcher.audit_targets([("multi_step_on_iterator", _at("fit-val"))])
    sizes = sorted(len(t.function.graph.get_operations()) for t in targets)
    assert len(targets) == 2 and sizes[0] < sizes[1]
    # a tf.function re-created in a loop: many objects, one graph, one target
    for _ in range(4):
        tf.function(lambda v: v * 3)(tf.constant(1.0))  # @recreated
    (looped,) = [f for f in watcher.facts().functions if f.location == _at("recreated")]
    assert looped.instances == 4
    assert len(watcher.audit_targets([(looped.name, looped.location)])) == 1


def test_a_model_freed_and_one_built_at_its_address_are_two_models(watcher):
    """A model's id is reused once it is freed (CPython gives a later object of its size
    its address): numbering models by id counted four models fit in a loop as three in
    one full suite of two."""

    class Model:  # any weakly referable object stands for a Keras model here
        pass

    first = [Model() for _ in range(200)]
    numbers = {id(m): watcher._model_number(m) for m in first}
    assert len(set(numbers.values())) == len(first)
    assert all(watcher._model_number(m) == numbers[id(m)] for m in first)
    del first
    gc.collect()
    later = [Model() for _ in range(2000)]
    reused = [m for m in later if id(m) in numbers]
    assert reused, "no object was built at a freed model's address"
    assert all(watcher._model_number(m) != numbers[id(m)] for m in reused)
