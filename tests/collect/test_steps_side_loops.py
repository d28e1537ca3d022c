"""The training loop is the program's steps; loops beside it that train nothing (a few
sample images plotted, a loop of predictions over a test set, images generated each
epoch) are not pooled into it, and their eager ops are not the training step's."""

import time

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gpuwhy.collect.inprocess.eager import EagerOpCounter  # noqa: E402
from gpuwhy.collect.inprocess.functions import FunctionWatcher  # noqa: E402
from tests import markers  # noqa: E402

_at = markers.marker_lines(__file__)


def _model() -> keras.Model:
    model = keras.Sequential(
        [keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(3)]
    )
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(True))
    return model


def _train_step(model: keras.Model):
    """A custom loop's training step: a GradientTape, SGD's update (a backward pass)."""
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(True)

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(grads, model.trainable_weights))

    return train_step


def _plot(model, images) -> None:
    """What plotting a few images does with TensorFlow: a model call, a resize and a
    copy to NumPy per image."""
    for i in range(images.shape[0]):
        prediction = model(images[i][None])  # @plot
        _ = tf.image.resize(images[i][None], (16, 16)).numpy(), prediction.numpy()


def test_plotting_and_prediction_loops_beside_fit_are_not_its_steps(steps):
    x = np.random.rand(256, 8, 8, 1).astype("float32")
    y = np.random.randint(0, 3, 256)
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    test_ds = tf.data.Dataset.from_tensor_slices((x[:96], y[:96])).batch(4)
    small_ds = tf.data.Dataset.from_tensor_slices(x[:9])
    model = _model()
    for image in small_ds:  # nine images looked at before training
        _plot(model, image[None])
    model.fit(train_ds, epochs=2, verbose=0)  # @fit
    model.evaluate(test_ds, verbose=0)
    for xb, _ in test_ds:  # more reads than fit's batches, none training
        model.predict_on_batch(xb)
    for xb, _ in test_ds:
        model(xb)
    facts, window = steps.facts(steps.t0)
    assert [(loop.source, loop.count) for loop in facts.loops] == [("keras-fit", 32)]
    assert facts.source == "keras-fit" and facts.marker == f"Model.fit at {_at('fit')}"
    assert facts.count == 32
    assert len(window.intervals) == facts.count - facts.warmup


@pytest.fixture
def watcher():
    watcher = FunctionWatcher()
    watcher.start(time.perf_counter())
    watcher.on_tensorflow()
    yield watcher
    watcher.stop()


def test_sample_loops_run_each_epoch_are_not_the_custom_loop_s_steps(steps, watcher):
    x = np.random.rand(64, 8, 8, 1).astype("float32")
    y = np.random.randint(0, 3, 64)
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    samples = tf.data.Dataset.from_tensor_slices(x[:12]).batch(3)
    model = _model()
    train_step = _train_step(model)

    counter = EagerOpCounter(first_on_s=60.0)  # counts every op of the test
    counter.start(time.perf_counter())
    counter.on_tensorflow()
    try:
        for _ in range(3):
            for xb, yb in train_ds:  # @train-loop
                train_step(xb, yb)
            for images in samples.take(3):  # three sample images each epoch
                _plot(model, images)
            for i, images in enumerate(samples.take(2)):
                _plot(model, images)
    finally:
        counter.stop()
    loops = watcher.loops()
    trains = watcher.trains(list(loops))
    facts, window = steps.facts(steps.t0, trains=trains, function_loops=loops)
    assert [(loop.source, loop.name, loop.count) for loop in facts.loops] == [
        ("tf-data", _at("train-loop"), 24)
    ]
    eager = counter.facts(window)
    assert eager.sampled_steps == len(window.intervals) == 24 - facts.warmup
    assert _at("plot") not in {site.location for site in eager.sites}
    assert eager.outside_steps > 0  # the plotting's ops: counted, outside the steps


def test_a_few_steps_beside_a_far_longer_loop_are_left_out_where_nothing_trains(steps):
    t = steps.t0
    calls = {
        "look (x.py:3)": [(t + i * 0.01, t + i * 0.01 + 0.005) for i in range(9)],
        "infer (x.py:9)": [(t + 1 + i * 0.01, t + 1 + i * 0.01 + 0.005) for i in range(90)],
    }
    facts, _ = steps.facts(t, calls, t_end=t + 3)
    assert [(loop.name, loop.count) for loop in facts.loops] == [("infer (x.py:9)", 90)]
    # beside a loop of fewer than ten times its steps, it is a loop of its own
    calls["infer (x.py:9)"] = calls["infer (x.py:9)"][:80]
    facts, _ = steps.facts(t, calls, t_end=t + 3)
    assert facts.count == 89


def test_functions_traced_before_the_watch_still_tell_the_training_loop(steps):
    """A notebook cell run again: its train_step and test_step were traced by the first
    run, so no trace is seen; their earlier traces still say which one trains, and the
    test loop's batches are not counted as training steps."""
    x = np.random.rand(64, 8, 8, 1).astype("float32")
    y = np.random.randint(0, 3, 64)
    train_ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    test_ds = tf.data.Dataset.from_tensor_slices((x[:40], y[:40])).batch(4)
    model = _model()
    train_step = _train_step(model)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(True)

    @tf.function
    def test_step(xb, yb):
        return loss_fn(yb, model(xb, training=False))

    for xb, yb in train_ds.take(1):  # the first run of the cell: both traced
        train_step(xb, yb)
    for xb, yb in test_ds.take(1):
        test_step(xb, yb)
    watcher = FunctionWatcher()
    watcher.start(time.perf_counter())
    watcher.on_tensorflow()
    try:
        for xb, yb in train_ds:  # @rerun-train
            train_step(xb, yb)
        for xb, yb in test_ds:  # more batches than training's, none training
            test_step(xb, yb)
    finally:
        watcher.stop()
    loops = watcher.loops()
    trains = watcher.trains(list(loops))
    assert sorted(trains.values()) == [False, True]
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops)
    assert [(loop.source, loop.name, loop.count) for loop in facts.loops] == [
        ("tf-data", _at("rerun-train"), 8)
    ]
    # and their placement is audited from those traces: nothing lost on the second run
    audited = {target.label for target in watcher.audit_targets(list(loops))}
    assert audited == {"train_step", "test_step"}


def test_a_loop_of_train_on_batch_with_a_predict_each_step_is_the_training_loop(steps, watcher):
    """A DCGAN's loop written by hand: each iteration runs generator.predict() (a Keras
    loop of its own, one batch) and train_on_batch. The training function's steps hold
    a predict each: they are the program's steps, not steps nested in Keras' loops."""
    generator = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8 * 8)])
    model = _model()
    for _ in range(12):  # @gan-loop
        fake = generator.predict(np.random.rand(8, 4).astype("float32"), verbose=0)
        model.train_on_batch(fake.reshape(8, 8, 8, 1), np.random.randint(0, 3, 8))
    loops = watcher.loops()
    trains = watcher.trains(list(loops))
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops)
    assert [(loop.source, loop.count) for loop in facts.loops] == [("tf-function", 12)]
    assert facts.loops[0].name.startswith("one_step_on_data")
    assert facts.median_s is not None


def test_a_loop_of_one_batch_fits_with_predicts_between_is_fit_s_steps_once(steps, watcher):
    """A DQN's replay: model.predict() then model.fit(state, target, epochs=1) per sample.
    fit's steps are the steps; its own step function, whose calls each lie in one fit and
    whose steps span the predicts between, is not a second loop of as many steps."""
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    for _ in range(12):
        state = np.random.rand(1, 4).astype("float32")
        for _ in range(3):  # the action's, the next state's and the target's
            target = model.predict(state, verbose=0)
        model.fit(state, target, epochs=1, verbose=0)
    loops = watcher.loops()
    trains = watcher.trains(list(loops))
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops)
    assert [(loop.source, loop.count) for loop in facts.loops] == [("keras-fit", 12)]


def test_fit_s_own_step_function_is_never_a_loop_of_its_own(steps):
    """One-batch fits with longer predicts between (a DQN's replay, hand-timed): each call
    of fit's step function lies in one fit, its steps span the predicts between fits.
    The predicts held in its steps do not make it a loop of its own beside fit's steps."""
    from gpuwhy.collect.inprocess.step_record import LoopRecord
    from gpuwhy.collect.inprocess.step_streams import CycleStream, cycle_view

    t = steps.t0
    calls = []
    for i in range(40):
        steps._on_keras_event("on_train_begin", t, "dqn.py:27")
        steps._on_keras_event("on_epoch_begin", t + 0.001, 0)
        steps._on_keras_event("on_train_batch_begin", t + 0.001, 0)
        calls.append((t + 0.001, t + 0.005))
        steps._on_keras_event("on_train_batch_end", t + 0.005, 0)
        steps._on_keras_event("on_epoch_end", t + 0.0055, 0)
        steps._on_keras_event("on_train_end", t + 0.006, None)
        t += 0.006
        for _ in range(2):  # the predicts between
            steps._on_keras_event("on_predict_begin", t, None)
            steps._on_keras_event("on_predict_end", t + 0.04, None)
            t += 0.04
    record = LoopRecord(steps.t0)
    stream = CycleStream(record.add)
    for start, end in calls:
        stream.feed(start, end)
    loops = {"multi_step_on_iterator (dqn.py:27)": cycle_view(steps.t0, stream, record)}
    trains = dict.fromkeys(loops, True)  # its graph has a backward pass
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops, t_end=t)
    assert [(loop.source, loop.count) for loop in facts.loops] == [("keras-fit", 40)]


def test_a_gan_s_iteration_is_the_training_function_called_least(steps):
    """A Keras GAN's loop (the Keras-GAN repository's style): the discriminator's
    train_on_batch twice an iteration (real, then fake images), the combined model's
    once. The iteration is the step, not the discriminator's calls, whose steps
    alternate a short and a long one."""
    from gpuwhy.collect.inprocess.step_record import LoopRecord
    from gpuwhy.collect.inprocess.step_streams import CycleStream, cycle_view

    def view(calls):
        record = LoopRecord(steps.t0)
        stream = CycleStream(record.add)
        for start, end in calls:
            stream.feed(start, end)
        return cycle_view(steps.t0, stream, record)

    t, disc, comb = steps.t0, [], []
    for _ in range(40):
        t += 0.2  # generator.predict(noise)
        disc += [(t, t + 0.014), (t + 0.015, t + 0.029)]
        comb.append((t + 0.03, t + 0.26))
        t += 0.26
    loops = {
        "one_step_on_data (gan.py:139)": view(disc),
        "one_step_on_data (gan.py:148)": view(comb),
    }
    trains = dict.fromkeys(loops, True)
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops, t_end=t)
    assert [(loop.name, loop.count) for loop in facts.loops] == [
        ("one_step_on_data (gan.py:148)", 40)
    ]
    assert facts.median_s is not None and abs(facts.median_s - 0.46) < 0.01
    # a training function called far more often (gradient steps of a side model, 20 a
    # step) is no iteration's marker: the busiest stays the step
    side = [(s + 0.001 * k, s + 0.001 * k + 0.0005) for s, _ in comb for k in range(20)]
    loops = {"train_step (x.py:9)": view(side), "one_step_on_data (gan.py:148)": view(comb)}
    facts, _ = steps.facts(
        steps.t0, trains=dict.fromkeys(loops, True), function_loops=loops, t_end=t
    )
    assert facts.loops[0].name == "train_step (x.py:9)"


def test_a_gan_whose_discriminator_keras_3_left_untrainable_steps_by_the_combined_model(
    steps, watcher
):
    """The Keras-GAN repository's loop under Keras 3: ``discriminator.trainable = False``
    after its compile leaves its own train_on_batch with nothing to train (Keras warns),
    called twice an iteration; the combined model's train_on_batch, once, trains. Its
    calls are the steps, not read as nested in the discriminator's."""
    generator = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8)])
    disc = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1, activation="sigmoid")])
    disc.compile(optimizer="adam", loss="binary_crossentropy")
    disc.trainable = False
    z = keras.Input((4,))
    combined = keras.Model(z, disc(generator(z)))
    combined.compile(optimizer="adam", loss="binary_crossentropy")
    for _ in range(12):
        fake = generator.predict(np.random.rand(8, 4), verbose=0)
        disc.train_on_batch(fake, np.ones((8, 1)))
        disc.train_on_batch(fake, np.zeros((8, 1)))
        combined.train_on_batch(np.random.rand(8, 4), np.ones((8, 1)))  # @combined
    loops = watcher.loops()
    trains = watcher.trains(list(loops))
    facts, _ = steps.facts(steps.t0, trains=trains, function_loops=loops)
    assert [(loop.source, loop.count) for loop in facts.loops] == [("tf-function", 12)]
    assert facts.loops[0].name.endswith(f"({_at('combined')})")


def _eager_epochs(model, optimizer, data, val, epochs: int) -> None:
    """keras-io's guide to a loop from scratch: GradientTape, Keras 3's optimizer.apply
    called by the loop itself, a validation pass after each epoch."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(True)
    for _ in range(epochs):
        for xb, yb in data:  # @eager-train
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_weights)
            optimizer.apply(grads, model.trainable_weights)
        for xv, _ in val:  # @eager-val
            model(xv, training=False)


def test_two_eager_loops_each_with_its_optimizer_apply_are_both_training(steps):
    """The guide trains a first model, then a second in a loop of its own: each loop
    holds its own share of the optimizer's calls (the second 40 % of all, once read as
    not training and left out), and the validation loops train nothing."""
    x = np.random.rand(512, 8, 8, 1).astype("float32")
    y = np.random.randint(0, 3, 512)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    val = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(16)
    _eager_epochs(_model(), keras.optimizers.Adam(1e-3), data, val, epochs=3)
    model, optimizer = _model(), keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(True)
    for _ in range(2):
        for xb, yb in data.take(20):  # @second-model
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            optimizer.apply(tape.gradient(loss, model.trainable_weights), model.trainable_weights)
    facts, _ = steps.facts(steps.t0, {}, t_end=time.perf_counter())
    assert facts is not None
    assert [(loop.name, loop.count) for loop in facts.loops] == [
        (_at("eager-train"), 96),
        (_at("second-model"), 40),
    ]
