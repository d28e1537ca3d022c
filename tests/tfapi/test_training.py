"""gpuwhy.tfapi.training.has_backward_pass against the installed TensorFlow."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi.training import has_backward_pass  # noqa: E402


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
