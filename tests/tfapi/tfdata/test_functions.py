"""One judge of what a tf.data function runs: the chain ``gpuwhy run`` reads
(dataset_chain.written_chain) and the stages ``gpuwhy fix`` plans (stages.read_chain) give
the same answer about the same map, for each kind of function users write."""

from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi.tfdata import (  # noqa: E402
    dataset_chain,
    stages,
)
from gpuwhy.tfapi.tfdata.functions import is_random_op, runs_python  # noqa: E402

COUNTER = tf.Variable(0, dtype=tf.int64)


def plain(x):
    return x * 2


def random_noise(x):
    return tf.cast(x, tf.float32) + tf.random.uniform([])


def counts_calls(x):
    COUNTER.assign_add(1)
    return x


def in_python(x):
    return tf.py_function(lambda v: v + 1, [x], tf.int64)


def with_a_branch(x):  # If with two stateless branches: TF still parallelises it
    return tf.cond(x > 2, lambda: x * 2, lambda: x + 1)


CASES = {
    # function: (runs Python, random, TF's map_parallelization keeps it sequential)
    plain: (False, False, False),
    random_noise: (False, True, True),
    counts_calls: (False, False, True),
    in_python: (True, False, True),
}


@pytest.mark.parametrize("function", list(CASES), ids=lambda f: f.__name__)
def test_the_run_collector_and_the_fix_planner_judge_a_map_alike(function):
    python, random, stateful = CASES[function]
    ds = tf.data.Dataset.range(8).map(function)
    seen_by_run = dataset_chain.written_chain(ds)[-1]
    (seen_by_fix,) = stages.read_chain(ds)[-1].functions
    assert (seen_by_run.python, seen_by_run.random, seen_by_run.stateful) == (
        python,
        random,
        stateful,
    )
    assert (bool(seen_by_fix.python), bool(seen_by_fix.random)) == (python, random)
    assert seen_by_fix.tf_parallelises is not stateful
    assert seen_by_run.function == seen_by_fix.name == function.__name__
    assert seen_by_run.function_location == seen_by_fix.location


def test_a_branch_of_stateless_functions_is_stateless_for_both():
    ds = tf.data.Dataset.range(8).map(with_a_branch)
    assert not dataset_chain.written_chain(ds)[-1].stateful
    (info,) = stages.read_chain(ds)[-1].functions
    assert info.tf_parallelises and info.stateless_enough


def test_a_generator_source_runs_python_for_both():
    ds = tf.data.Dataset.from_generator(
        lambda: iter(np.arange(4)), output_signature=tf.TensorSpec([], tf.int64)
    )
    assert dataset_chain.written_chain(ds)[-1].python
    # TF builds from_generator as a flat_map over one dummy element; its function runs
    # the generator, and the fix planner judges it by that function
    assert any("GeneratorDataset" in f.python for f in stages.read_chain(ds)[-1].functions)
    assert runs_python("GeneratorDataset") and runs_python("EagerPyFunc")


@pytest.mark.parametrize(
    "op, random",
    [
        ("RandomUniform", True),
        ("StatelessRandomUniformV2", True),
        ("SampleDistortedBoundingBoxV2", True),
        ("RngReadAndSkip", True),
        ("StatefulUniformFullInt", True),
        ("DecodeJpeg", False),
        ("MatMul", False),
    ],
)
def test_one_list_of_random_ops(op, random):
    assert is_random_op(op) is random


TABLE = tf.lookup.StaticHashTable(
    tf.lookup.KeyValueTensorInitializer(["cat", "dog"], [0, 1], value_dtype=tf.int64), -1
)
PNG = tf.io.encode_png(tf.fill([4, 4, 3], tf.constant(7, tf.uint8)))


def decode_with_a_label_lookup(x):
    """A PNG decode whose label comes from a lookup table (the folder name): stateful for
    TF, the same image and label on every pass."""
    image = tf.io.decode_png(PNG, channels=3)
    return image, TABLE.lookup(tf.where(x % 2 == 0, "cat", "dog"))


def reads_a_variable(x):
    return x + COUNTER


def declared_pure(x):
    return tf.numpy_function(lambda v: v + 1, [x], tf.int64, stateful=False)


SAME_EVERY_PASS = {
    plain: True,
    decode_with_a_label_lookup: True,
    declared_pure: True,
    random_noise: False,
    counts_calls: False,
    in_python: False,
    reads_a_variable: False,
}


@pytest.mark.parametrize("function", list(SAME_EVERY_PASS), ids=lambda f: f.__name__)
def test_where_a_cache_is_safe_is_judged_once_for_run_and_fix(function):
    """input.no-cache (through the run collector's ``varies``) and gpuwhy fix's cache
    placement (stages.reproducibility) read one definition."""
    ds = tf.data.Dataset.range(8).map(function)
    seen_by_run = dataset_chain.written_chain(ds)[-1]
    assert (seen_by_run.varies is None) is SAME_EVERY_PASS[function]
    assert (stages.reproducibility(ds) is None) is SAME_EVERY_PASS[function]
    if SAME_EVERY_PASS[function]:  # and it does give the same elements twice
        first, second = (tf.nest.flatten(list(ds.as_numpy_iterator())) for _ in range(2))
        assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_a_lookup_decode_is_stateful_for_tf_but_neither_random_nor_varying():
    step = dataset_chain.written_chain(tf.data.Dataset.range(4).map(decode_with_a_label_lookup))[-1]
    assert step.stateful and not step.random and step.varies is None
    assert step.codec_ops == ("DecodePng",)


def test_a_shuffle_and_a_generator_vary_from_pass_to_pass():
    shuffled = dataset_chain.written_chain(tf.data.Dataset.range(8).shuffle(8))[-1]
    assert "reshuffles on every pass" in shuffled.varies
    generated = dataset_chain.written_chain(
        tf.data.Dataset.from_generator(
            lambda: iter(np.arange(4)), output_signature=tf.TensorSpec([], tf.int64)
        )
    )[-1]
    assert "Python generator" in generated.varies
