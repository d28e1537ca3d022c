"""Float inputs used as ids, read from real traced steps (collect/placement/index_inputs)."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

from gpuwhy.collect.placement import AuditTarget, audit_functions  # noqa: E402
from gpuwhy.source_calls import float_input_calls  # noqa: E402


def _indices(function, *args):
    concrete = tf.function(function).get_concrete_function(*args)
    facts, _ = audit_functions([AuditTarget("step", concrete)])
    return facts.float_indices


def test_ids_cast_from_a_float_argument_are_found_and_computed_ids_are_not():
    table = tf.Variable(tf.random.normal((5000, 4)))
    ids = tf.constant([[1.0, 4097.0]])
    (found,) = _indices(lambda x: tf.gather(table, tf.cast(x, tf.int32)), ids)
    assert found.op in ("GatherV2", "ResourceGather") and found.dtype == "float32"
    # a one-hot of ids carried as float64
    (hot,) = _indices(
        lambda x: tf.one_hot(tf.cast(x, tf.int64), 8), tf.constant([1.0, 2.0], tf.float64)
    )
    assert (hot.op, hot.dtype) == ("OneHot", "float64")
    # int ids, and ids the program computes from a float (its own arithmetic): nothing
    assert _indices(lambda x: tf.gather(table, x), tf.constant([[1, 2]])) == ()
    assert _indices(lambda x: tf.gather(table, tf.cast(tf.round(x * 10), tf.int32)), ids) == ()
    # one column of a float feature input: making the input int32 would truncate the rest
    assert _indices(lambda x: tf.gather(table, tf.cast(x[:, 0], tf.int32)), ids) == ()


def test_a_keras_embedding_behind_a_float_input_is_found():
    inputs = keras.Input(shape=(4,))
    model = keras.Model(inputs, keras.layers.Embedding(5000, 4)(inputs))
    (found,) = _indices(lambda x: model(x), tf.constant([[1.0, 2.0, 3.0, 4097.0]]))
    assert found.dtype == "float32" and found.layer and "embedding" in found.layer
    int_model = keras.Sequential([keras.Input((4,), dtype="int32"), keras.layers.Embedding(50, 4)])
    assert _indices(lambda x: int_model(x), tf.constant([[1, 2, 3, 4]])) == ()


def test_float_input_calls_are_read_with_the_name_the_script_gives_them(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(
        "import keras\n"
        "tokens = keras.Input(shape=(64,), name='tokens')\n"
        "ids = keras.Input(shape=(64,), dtype='int32')\n"
        "feats = keras.layers.Input((3,), dtype=tf.float16)\n"
        "model = keras.Sequential([keras.Input((8,)), keras.layers.Embedding(10, 2)])\n"
    )
    assert float_input_calls(str(path)) == [
        ("tokens", 2, "keras.Input(shape=(64,), name='tokens')"),
        ("feats", 4, "keras.layers.Input((3,), dtype=tf.float16)"),
        (None, 5, "keras.Input((8,))"),
    ]
