"""Steps found without step markers, against real TensorFlow and Keras loops."""

import sys
import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gpuwhy.collect.inprocess import imports  # noqa: E402
from gpuwhy.tfapi.graph_ops import relative  # noqa: E402
from gpuwhy.tfapi.tfdata.iterators import install as install_iterator_hook  # noqa: E402


def line_of(marker: str) -> str:
    """file:line of the line carrying ``marker`` in this file."""
    for number, text in enumerate(open(__file__, encoding="utf-8"), 1):
        if marker in text and "line_of(" not in text:
            return relative(__file__, number)
    raise AssertionError(marker)


def test_a_python_loop_over_a_dataset_measures_the_input_wait(steps):
    def slow(x):
        time.sleep(0.004)
        return x

    ds = tf.data.Dataset.range(12).map(lambda x: tf.py_function(slow, [x], tf.int64))
    for _ in range(2):  # two epochs: two iterators, one loop site
        for _x in ds:  # marker: loop-over-dataset
            time.sleep(0.001)
    facts, window = steps.facts(steps.t0)
    assert facts.source == "tf-data"
    assert facts.marker.endswith(line_of("marker: loop-over-dataset"))
    assert facts.count == 24  # 12 per iterator: the last one ends at StopIteration
    assert 0.5 < facts.input_wait_fraction < 1.0
    assert facts.input_wait_median_s >= 0.002  # tf.data prefetches one element itself
    assert len(window.intervals) == facts.count - facts.warmup
    assert all(w is not None for w in facts.input_waits)


def test_keras_fit_batches_are_steps_and_validation_is_not(steps):
    x = np.random.rand(64, 4).astype("float32")
    y = np.random.rand(64, 1).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=2)
    model.fit(  # marker: fit-call
        x,
        y,
        batch_size=8,
        epochs=2,
        validation_data=(x[:16], y[:16]),
        verbose=0,
    )
    facts, _ = steps.facts(steps.t0)
    assert facts.source == "keras-fit"
    assert facts.marker == f"Model.fit at {line_of('marker: fit-call')}"
    assert facts.count == 16 and facts.steps_per_call == 2
    assert len(facts.durations) == 8  # one entry per train-function call
    assert facts.input_wait_fraction is None  # read inside the compiled step
    names = [p[0] for p in facts.phases]
    assert names.count("evaluate") == 2 and "epoch 0" in names and names[-1] == "fit"
    evaluate = [p for p in facts.phases if p[0] == "evaluate"]
    for start, duration in zip(facts.starts, facts.durations):
        assert not any(a < start + duration / 2 < b for _, a, b in evaluate)


def test_an_epoch_of_unknown_length_cut_short_in_its_last_call_counts_the_steps_it_ran(steps):
    """75 batches an epoch at 32 a call over a dataset whose length TF does not know (a
    filter): Keras reports each epoch's last call as 32 steps (batch 95); it ran 11, as
    the optimizer's step counter says."""
    x = np.random.rand(2400, 4).astype("float32")
    y = np.random.rand(2400, 1).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=32)
    model.fit(dataset, epochs=3, verbose=0)
    facts, _ = steps.facts(steps.t0)
    assert facts.count == 3 * 75 and facts.steps_per_call == 32
    assert sum(w.steps for w in facts.timeline.windows) == 225
    assert len(facts.durations) == 9  # three calls an epoch


def test_eager_apply_gradients_marks_the_steps_of_a_loop_without_tf_function(steps):
    w = tf.Variable(1.0)
    opt = keras.optimizers.SGD(0.1)
    for _ in range(6):
        with tf.GradientTape() as tape:
            loss = (w * 3.0 - 1.0) ** 2
        opt.apply_gradients([(tape.gradient(loss, w), w)])
    facts, _ = steps.facts(steps.t0)
    assert facts.source == "optimizer" and facts.count == 6


def test_tf_function_calls_are_the_clock_when_nothing_else_is(steps):
    t = steps.t0
    calls = {
        "train_step (x.py:3)": [(t + i * 0.1, t + i * 0.1 + 0.05) for i in range(8)],
        "rare (x.py:9)": [(t, t + 1.0)],
    }
    facts, window = steps.facts(t, calls, t_end=t + 2)
    assert facts.source == "tf-function" and facts.marker == "calls of train_step (x.py:3)"
    assert facts.count == 8
    assert facts.median_s == pytest.approx(0.1)  # a step lasts until the next call
    assert window.intervals[-1][1] == pytest.approx(t + 0.75)


def test_mid_run_a_loop_keeps_its_steps_out_until_its_warm_up_is_decided(steps):
    """Live metrics read the window mid-run: a first (tracing) step published while the
    loop had too few steps to call it warm-up would stay in the step histogram."""
    t = steps.t0
    first = [(t, t + 0.5)]  # traces
    early = {
        "train_step (x.py:3)": first + [(t + 0.5 + i * 0.1, t + 0.55 + i * 0.1) for i in range(3)]
    }
    _, window = steps.facts(t, early, t_end=t + 1, live=True)
    assert window.intervals == () and window.histograms == ()
    _, final = steps.facts(t, early, t_end=t + 1)
    assert final.intervals  # the end of the run decides with what there is
    later = {
        "train_step (x.py:3)": first + [(t + 0.5 + i * 0.1, t + 0.55 + i * 0.1) for i in range(12)]
    }
    facts, window = steps.facts(t, later, t_end=t + 2, live=True)
    assert facts.warmup == 1 and len(window.intervals) == facts.count - 1
    _, final = steps.facts(t, later, t_end=t + 2)
    assert window.intervals == final.intervals
    # the histogram: every step after warm-up, the last call's only once the run ended
    # (mid-run its step lasts until the next call)
    ((name, live_counts),) = window.histograms
    assert name == "tf-function train_step (x.py:3)"
    assert live_counts.count == facts.count - 2
    assert dict(final.histograms)[name].count == facts.count - 1


def test_stop_restores_the_classes_exactly(steps):
    from keras.src.callbacks.callback_list import CallbackList
    from tensorflow.python.data.ops import iterator_ops

    before_next = iterator_ops.OwnedIterator.__dict__["__next__"]
    steps.stop()
    assert iterator_ops.OwnedIterator.__dict__["__next__"] is before_next.__wrapped__
    assert not hasattr(CallbackList.__dict__["on_train_batch_begin"], "__wrapped__")
    patches = install_iterator_hook(lambda *a: None)
    for p in patches:
        p.undo()
    assert iterator_ops.OwnedIterator.__dict__["__next__"] is before_next.__wrapped__


def test_post_import_hook_waits_for_the_module_and_fires_once(tmp_path, monkeypatch):
    (tmp_path / "gpuwhy_lazy_mod.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    imports.when_imported("gpuwhy_lazy_mod", lambda m: seen.append(m.VALUE))
    assert seen == []
    import gpuwhy_lazy_mod  # noqa: F401

    assert seen == [42]
    assert sys.modules["gpuwhy_lazy_mod"].__loader__.exec_module.__func__  # class method again
    imports.when_imported("gpuwhy_lazy_mod", lambda m: seen.append("now"))
    assert seen == [42, "now"]
    assert imports._FINDER not in sys.meta_path


def test_cancelled_hooks_never_fire(tmp_path, monkeypatch):
    (tmp_path / "gpuwhy_lazy_two.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    callback = seen.append
    imports.when_imported("gpuwhy_lazy_two", callback)
    imports.cancel(callback)
    import gpuwhy_lazy_two  # noqa: F401

    assert seen == []


def test_zip_of_two_datasets_is_one_step_per_pair_and_a_break_hands_over(steps):
    a = tf.data.Dataset.range(6)
    b = tf.data.Dataset.range(6)
    for _ in range(2):
        for _x, _y in zip(a, b):  # marker: zip-loop
            time.sleep(0.001)
    for _x in a:  # abandoned after 3: the next loop leads
        break
    facts, _ = steps.facts(steps.t0)
    assert facts.marker.endswith(line_of("marker: zip-loop"))
    assert facts.count == 12  # 6 pairs per epoch, not 24


def test_keras_own_predict_loop_is_not_a_user_loop(steps):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.predict(np.random.rand(64, 4).astype("float32"), batch_size=8, verbose=0)
    facts, _ = steps.facts(steps.t0)
    assert facts is None


def test_every_training_loop_s_steps_are_counted(steps):
    # a warm-up loop, then one loop per model, each at its own line
    warm = tf.data.Dataset.range(5)
    train = tf.data.Dataset.range(8)
    for _x in warm:  # marker: warm-up-loop
        time.sleep(0.001)
    for _ in range(2):
        for _x in train:  # marker: first-model-loop
            time.sleep(0.001)
    for _x in train:  # marker: second-model-loop
        time.sleep(0.001)
    facts, window = steps.facts(steps.t0)
    assert facts.count == 5 + 16 + 8
    assert facts.marker == (
        f"next() on a tf.data iterator in 3 loops (also {line_of('marker: second-model-loop')}, "
        f"{line_of('marker: warm-up-loop')}) at {line_of('marker: first-model-loop')}"
    )
    assert list(facts.starts) == sorted(facts.starts)  # one time line
    assert len(window.intervals) == facts.count - facts.warmup


def test_nested_loops_count_the_inner_steps_once(steps):
    outer = tf.data.Dataset.range(6)
    inner = tf.data.Dataset.range(4)
    for _x in outer:  # each outer element spans a whole inner loop: not a step too
        for _y in inner:  # marker: inner-loop
            time.sleep(0.001)
    facts, _ = steps.facts(steps.t0)
    assert facts.marker == f"next() on a tf.data iterator at {line_of('marker: inner-loop')}"
    assert facts.count == 24


def test_tf_functions_of_separate_loops_are_all_steps(steps):
    t = steps.t0
    calls = {
        "train_a (x.py:3)": [(t + i * 0.1, t + i * 0.1 + 0.05) for i in range(8)],
        "train_b (x.py:9)": [(t + 2 + i * 0.1, t + 2 + i * 0.1 + 0.05) for i in range(5)],
    }
    facts, _ = steps.facts(t, calls, t_end=t + 3)
    assert facts.count == 13
    assert facts.marker == "calls of 2 functions (also train_b (x.py:9)), most of train_a (x.py:3)"


def test_a_validation_function_s_loop_is_not_steps_where_another_loop_trains(steps):
    t = steps.t0
    calls = {  # per epoch: 8 train steps, then 3 validation steps
        "train_step (x.py:3)": [
            (t + e + i * 0.05, t + e + i * 0.05 + 0.04) for e in range(2) for i in range(8)
        ],
        "test_step (x.py:9)": [
            (t + e + 0.5 + i * 0.02, t + e + 0.51 + i * 0.02) for e in range(2) for i in range(3)
        ],
    }
    trains = {"train_step (x.py:3)": True, "test_step (x.py:9)": False}
    facts, _ = steps.facts(t, calls, t_end=t + 3, trains=trains)
    assert facts.count == 16
    assert [(loop.name, loop.count) for loop in facts.loops] == [("train_step (x.py:3)", 16)]
    # without a training loop to compare with (inference only), its calls are the steps
    facts, _ = steps.facts(t, {"test_step (x.py:9)": calls["test_step (x.py:9)"]}, t + 3, trains)
    assert facts.count == 6


def test_a_custom_loop_and_fit_are_both_counted_and_evaluate_is_not(steps):
    x = np.random.rand(64, 4).astype("float32")
    y = np.random.rand(64, 1).astype("float32")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    optimizer = keras.optimizers.SGD(0.01)
    for xb, yb in dataset:  # marker: custom-loop
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(xb) - yb) ** 2)
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))
    model.fit(dataset, epochs=1, verbose=0)
    before = time.perf_counter()
    model.evaluate(dataset, verbose=0)
    after = time.perf_counter()
    # Keras' evaluate function, as the FunctionWatcher reports its calls: inside evaluate
    tick = (after - before) / 10
    calls = {
        "multi_step_on_iterator (y.py:1)": [
            (before + i * tick, before + (i + 0.5) * tick) for i in range(1, 9)
        ]
    }
    facts, _ = steps.facts(steps.t0, calls)
    assert {(loop.source, loop.count) for loop in facts.loops} == {("tf-data", 8), ("keras-fit", 8)}
    assert facts.count == 16
    # each loop with its own steps: the 16 before the marker are both loops'
    assert facts.marker.endswith(f"next() at {line_of('marker: custom-loop')} (8)")
    assert " (8 steps), and 1 more loop: " in facts.marker
