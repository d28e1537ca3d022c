"""gpuwhy.tfapi.training.has_backward_pass against the installed TensorFlow."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi.training import has_backward_pass, updates_weights  # noqa: E402


def test_a_transposed_convolutions_forward_is_no_backward_pass():
    """Conv2DTranspose runs Conv2DBackpropInput forward: a segmentation model's
    validation and predict() steps were labelled "the training step"."""
    layer = tf.keras.layers.Conv2DTranspose(4, 3, padding="same")
    layer.build((None, 8, 8, 2))
    images = tf.TensorSpec((2, 8, 8, 2), tf.float32)

    @tf.function(input_signature=[images])
    def predict(x):
        return layer(x)

    @tf.function(input_signature=[images])
    def train(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(layer(x))
        return tape.gradient(loss, layer.trainable_variables)

    forward = predict.get_concrete_function()
    assert "Conv2DBackpropInput" in {op.type for op in forward.graph.get_operations()}
    assert has_backward_pass(forward) is False
    assert has_backward_pass(train.get_concrete_function()) is True


def test_an_update_applied_to_gradients_taken_outside_the_function_trains():
    """keras-io's eager loop with its update made a tf.function (gpuwhy's own fix for
    its eager ops: ``loop_step(grads)``): no backward pass in the graph, but it trains;
    the optimizer hook names the optimizer's scope as the function traces."""
    keras = pytest.importorskip("keras")
    from gpuwhy.tfapi import keras_hooks

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(name="adam_for_loop_step")
    metric = keras.metrics.Mean()
    patches = keras_hooks.install_optimizer(lambda *event: None)
    try:

        @tf.function
        def loop_step(grads):
            optimizer.apply(grads, model.trainable_weights)

        @tf.function
        def count(x):
            metric.update_state(x)  # assigns too: no optimizer's

        grads = [tf.ones_like(w) for w in model.trainable_weights]
        update = loop_step.get_concrete_function(grads)
        counting = count.get_concrete_function(tf.ones([3]))
    finally:
        for patch in patches:
            patch.undo()
    assert has_backward_pass(update) is False
    assert updates_weights(update) is True
    assert updates_weights(counting) is False
