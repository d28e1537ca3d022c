"""A generator that only yields slices of the program's arrays, read as the
from_tensor_slices call that yields the same elements (gpuwhy/source_generator.py), on
real functions, real arrays and TF's own specs; and that call checked against what
from_generator yields."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from gpuwhy.source_generator import as_slices

x_train = np.random.rand(50, 4)  # float64, as NumPy makes them
y_train = np.random.randint(0, 3, 50)
images = np.random.rand(50, 2, 2).astype("float32")
short = np.arange(20)
n_examples = 50

PAIR = (tf.TensorSpec((4,), tf.float32), tf.TensorSpec((), tf.int64))


def by_index():
    """One example at a time."""
    for i in range(len(x_train)):
        yield x_train[i], y_train[i]


def by_shape():
    for i in range(x_train.shape[0]):
        yield x_train[i], y_train[i]


def by_count():
    for i in range(n_examples):
        yield x_train[i], y_train[i]


def zipped_swapped():
    for features, label in zip(x_train, y_train):
        yield label, features


def one_array():
    for image in images:  # noqa: UP028 - as programs write it
        yield image


def delegated():
    yield from images


def delegated_zip():
    yield from zip(x_train, y_train)


def forever():
    while True:
        for i in range(len(x_train)):
            yield x_train[i], y_train[i]


def closure(features, labels):
    def gen():
        for a, b in zip(features, labels):  # noqa: UP028 - as programs write it
            yield a, b

    return gen


def transformed():
    for i in range(len(x_train)):
        yield x_train[i] * 2, y_train[i]


def other_index():
    for i in range(len(x_train)):
        yield x_train[i], y_train[i + 1]


def lengths_differ():
    for a, b in zip(x_train, short):  # noqa: UP028 - as programs write it
        yield a, b


def too_few():
    for i in range(10):
        yield x_train[i], y_train[i]


def with_argument(split):
    for i in range(len(x_train)):
        yield x_train[i], y_train[i]


def two_statements():
    for i in range(len(x_train)):
        print(i)
        yield x_train[i], y_train[i]


def test_an_index_loop_over_the_arrays_is_their_slices_cast_to_the_signature():
    expected = 'tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))'
    assert as_slices(by_index, PAIR) == expected
    assert as_slices(by_shape, PAIR) == expected
    assert as_slices(by_count, PAIR) == expected


def test_a_zip_in_the_order_yielded_a_single_array_and_a_generator_that_never_ends():
    signature = (tf.TensorSpec((), tf.int64), tf.TensorSpec((4,), tf.float64))
    assert as_slices(zipped_swapped, signature) == (
        "tf.data.Dataset.from_tensor_slices((y_train, x_train))"
    )
    image = tf.TensorSpec((2, 2), tf.float32)
    assert as_slices(one_array, image, "tfd.Dataset.") == "tfd.Dataset.from_tensor_slices(images)"
    assert as_slices(delegated, image) == "tf.data.Dataset.from_tensor_slices(images)"
    assert as_slices(delegated_zip, PAIR) == (
        'tf.data.Dataset.from_tensor_slices((x_train.astype("float32"), y_train))'
    )
    assert as_slices(forever, PAIR).endswith("y_train)).repeat()")
    made = closure(images, np.arange(50))  # the arrays are the closure's
    spec = (tf.TensorSpec((2, 2), tf.float32), tf.TensorSpec((), tf.int64))
    assert as_slices(made, spec) == "tf.data.Dataset.from_tensor_slices((features, labels))"


def test_anything_but_plain_slices_keeps_the_general_advice():
    for generator in (transformed, other_index, lengths_differ, too_few, two_statements):
        assert as_slices(generator, PAIR) is None, generator.__name__
    assert as_slices(with_argument, PAIR) is None  # given args=: not one set of arrays
    assert as_slices(lambda: by_index(), PAIR) is None
    # a signature the slices do not have: another shape, another structure
    assert as_slices(by_index, (tf.TensorSpec((5,), tf.float32), PAIR[1])) is None
    assert as_slices(by_index, PAIR[0]) is None


def test_the_call_yields_what_the_generator_yields():
    dataset = tf.data.Dataset.from_generator(by_index, output_signature=PAIR)
    sliced = eval(as_slices(by_index, dataset.element_spec))  # its own output
    assert sliced.element_spec == dataset.element_spec
    for (a, b), (c, d) in zip(dataset, sliced, strict=True):
        assert np.array_equal(a.numpy(), c.numpy()) and int(b) == int(d)
