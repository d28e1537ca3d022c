"""gpuwhy.tfapi.tfdata.rewrite against the installed TensorFlow: reading a pipeline's
Python objects, judging its functions, and rebuilding every stage faithfully.

When TensorFlow renames an attribute or a constructor argument of a dataset class,
these say which (``test_every_rebuilder_*`` fails for that stage).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpuwhy.tfapi.tfdata import dataset_args, dataset_size, functions, stages  # noqa: E402
from gpuwhy.tfapi.tfdata import rewrite as dr  # noqa: E402
from tests.records import write_tfrecords  # noqa: E402


def _table():
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(["cat", "dog"], [0, 1]), default_value=-1
    )


def _values(ds):
    def plain(t):
        return t.to_list() if isinstance(t, tf.RaggedTensor) else np.asarray(t.numpy()).tolist()

    return [tf.nest.map_structure(plain, e) for e in ds]


# -- functions ---------------------------------------------------------------------------


def _info(ds) -> functions.FunctionInfo:
    (wrapper,) = ds._functions()
    return functions.function_info(wrapper)


def test_a_pure_tf_function_is_stateless_and_tf_parallelises_it():
    def double(x):
        return x * 2

    info = _info(tf.data.Dataset.range(3).map(double))
    assert info.name.endswith("double")
    assert info.location and info.location.endswith(
        f"{__name__.split('.')[-1]}.py:{double.__code__.co_firstlineno}"
    )
    assert info.stateless_enough and info.tf_parallelises
    assert not (info.random or info.python or info.unsafe_stateful)


def test_a_lookup_is_stateful_for_tf_but_only_reads():
    table = _table()
    info = _info(tf.data.Dataset.from_tensor_slices(["cat", "dog"]).map(table.lookup))
    assert "LookupTableFindV2" in info.ops
    assert not info.tf_parallelises  # what keeps TF's map_parallelization away
    assert info.stateless_enough  # what lets gpuwhy parallelise it


def test_random_ops_are_found_inside_nested_functions():
    @tf.function
    def noisy(x):
        return tf.cond(x > 1, lambda: tf.random.uniform([]), lambda: tf.constant(0.0))

    info = _info(tf.data.Dataset.range(3).map(noisy))
    assert info.random == ("RandomUniform",)
    assert not info.stateless_enough


def test_stateless_random_with_a_seed_is_not_random():
    info = _info(
        tf.data.Dataset.range(3).map(
            lambda x: tf.random.stateless_uniform([], seed=tf.stack([x, x]))
        )
    )
    assert info.random == () and info.stateless_enough


def test_python_functions_are_named_and_a_declared_pure_numpy_function_is_told_apart():
    py = _info(tf.data.Dataset.range(3).map(lambda x: tf.py_function(lambda v: v, [x], tf.int64)))
    assert py.python == ("EagerPyFunc",) and not py.python_declared_pure
    pure = _info(
        tf.data.Dataset.range(3).map(
            lambda x: tf.numpy_function(lambda v: v, [x], tf.int64, stateful=False)
        )
    )
    assert pure.python == ("PyFuncStateless",) and pure.python_declared_pure


def test_writing_a_variable_is_unsafe():
    counter = tf.Variable(0, dtype=tf.int64)

    def count(x):
        counter.assign_add(1)
        return x + counter.read_value()

    info = _info(tf.data.Dataset.range(3).map(count))
    assert "AssignAddVariableOp" in info.unsafe_stateful and not info.stateless_enough


# -- reading the chain ---------------------------------------------------------------------


def test_read_chain_goes_from_the_source_to_the_dataset_with_parameters():
    ds = (
        tf.data.Dataset.range(10)
        .map(lambda x: x + 1)
        .shuffle(4, seed=3)
        .batch(3, drop_remainder=True)
        .prefetch(2)
    )
    chain = stages.read_chain(ds)
    assert [s.kind for s in chain] == ["range", "map", "shuffle", "batch", "prefetch"]
    assert chain[-1].dataset is ds and chain[2].input is chain[1]
    assert chain[1].sequential_map
    assert chain[2].random and chain[2].params["seed2"] == 3
    assert chain[3].params == {"batch_size": 3, "drop_remainder": True}
    assert chain[4].describe() == "prefetch(2)"
    assert all(s.rebuildable for s in chain)


def test_a_multi_input_stage_ends_the_chain_and_is_not_rebuilt():
    left = tf.data.Dataset.range(4).map(lambda x: x * 2)
    ds = tf.data.Dataset.zip(left, tf.data.Dataset.range(4)).batch(2)
    chain = stages.read_chain(ds)
    assert [s.kind for s in chain] == ["zip", "batch"]
    assert not chain[0].rebuildable and "_ZipDataset" in chain[0].why_not


def test_unbatch_is_read_through_tfs_normalising_wrappers():
    ds = tf.data.Dataset.range(6).batch(2).unbatch()
    assert [s.kind for s in stages.read_chain(ds)] == ["range", "batch", "unbatch"]


def test_from_generator_is_a_python_generator_stage():
    ds = tf.data.Dataset.from_generator(
        lambda: iter([1, 2]), output_signature=tf.TensorSpec([], tf.int32)
    )
    top = stages.read_chain(ds)[-1]
    assert top.kind == "generator" and top.python


def test_reproducibility_names_the_first_random_stage():
    ds = tf.data.Dataset.range(8).map(lambda x: x * 2).shuffle(4).map(lambda x: x + 1)
    assert "shuffle" in stages.reproducibility(ds)
    assert stages.reproducibility(ds._input_dataset._input_dataset) is None
    py = tf.data.Dataset.range(3).map(lambda x: tf.py_function(lambda v: v, [x], tf.int64))
    assert "calls Python" in stages.reproducibility(py)
    assert stages.reproducibility(py, assume_pure=True) is None


# -- rebuilding ----------------------------------------------------------------------------


def _rebuild_all(ds):
    """Every stage rebuilt on the rebuilt stage below it (none reused)."""
    chain = stages.read_chain(ds)
    current = chain[0].dataset
    for stage in chain[1:]:
        current = dr.rebuild(stage, current)
        assert current is not stage.dataset
    return current


@pytest.mark.parametrize(
    "build",
    [
        lambda r: r.map(lambda x: x * 3),
        lambda r: r.map(lambda x: x * 3, num_parallel_calls=2, deterministic=True),
        lambda r: r.filter(lambda x: x % 3 == 0),
        lambda r: r.flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(2)),
        lambda r: r.interleave(lambda x: tf.data.Dataset.range(x), cycle_length=2, block_length=2),
        lambda r: r.batch(3),
        lambda r: r.batch(3, drop_remainder=True, num_parallel_calls=2, deterministic=True),
        lambda r: r.map(lambda x: tf.range(x)).padded_batch(
            2, padding_values=tf.constant(-1, tf.int64)
        ),
        lambda r: r.map(lambda x: tf.range(x)).ragged_batch(3, row_splits_dtype=tf.int32),
        lambda r: r.prefetch(3),
        lambda r: r.shuffle(5, seed=7, reshuffle_each_iteration=False),
        lambda r: r.repeat(2),
        lambda r: r.take(4).skip(1),
        lambda r: r.shard(3, 1),
        lambda r: r.cache(),
        lambda r: r.batch(2).unbatch(),
        lambda r: r.take_while(lambda x: x < 5),
        lambda r: r.map(lambda x: (x, {"sq": x * x})).map(lambda a, d: a + d["sq"]),
    ],
    ids=[
        "map",
        "parallel_map",
        "filter",
        "flat_map",
        "interleave",
        "batch",
        "parallel_batch",
        "padded_batch",
        "ragged_batch",
        "prefetch",
        "seeded_shuffle",
        "repeat",
        "take_skip",
        "shard",
        "cache",
        "unbatch",
        "take_while",
        "nested_structures",
    ],
)
def test_every_rebuilder_gives_the_same_elements(build):
    ds = build(tf.data.Dataset.range(10))
    rebuilt = _rebuild_all(ds)
    assert rebuilt.element_spec == ds.element_spec
    assert _values(rebuilt) == _values(ds)


def test_a_shuffle_with_a_global_seed_is_rebuilt_with_the_same_seed_pair():
    tf.random.set_seed(11)
    try:
        ds = tf.data.Dataset.range(50).shuffle(50, reshuffle_each_iteration=False)
        rebuilt = _rebuild_all(ds)
        assert (int(rebuilt._seed), int(rebuilt._seed2)) == (int(ds._seed), int(ds._seed2))
        assert _values(rebuilt) == _values(ds)
    finally:
        tf.random.set_seed(None)


def test_a_shuffle_whose_seeds_cannot_be_reproduced_is_refused():
    tf.random.set_seed(5)
    ds = tf.data.Dataset.range(10).shuffle(10)  # seeds (5, op counter)
    tf.random.set_seed(6)  # the global seed changed since
    try:
        (shuffle,) = [s for s in stages.read_chain(ds) if s.kind == "shuffle"]
        with pytest.raises(dr.RebuildError, match="seeds cannot be reproduced"):
            dr.rebuild(shuffle, tf.data.Dataset.range(10))
    finally:
        tf.random.set_seed(None)


def test_options_are_carried_over():
    options = tf.data.Options()
    options.threading.private_threadpool_size = 3
    options.experimental_optimization.map_parallelization = False
    ds = tf.data.Dataset.range(4).with_options(options).map(lambda x: x + 1)
    rebuilt = _rebuild_all(ds)
    assert rebuilt.options() == ds.options()
    assert rebuilt.options().threading.private_threadpool_size == 3


def test_replay_does_not_run_the_users_python_again():
    traced = []
    scale = [2]

    def scaled(x):
        traced.append(1)
        return x * scale[0]

    ds = tf.data.Dataset.range(4).map(scaled)
    scale[0] = 100  # the Python state changed after the dataset was built
    rebuilt = _rebuild_all(ds)
    assert len(traced) == 1  # traced once, by TF, when the user built it
    assert _values(rebuilt) == [0, 2, 4, 6]


def test_a_rebuilt_stage_runs_the_very_function_tf_traced():
    ds = tf.data.Dataset.range(5).map(lambda x: x + 1).filter(lambda x: x > 2)
    rebuilt = _rebuild_all(ds)
    assert rebuilt._predicate is ds._predicate
    assert rebuilt._input_dataset._map_func is ds._input_dataset._map_func
    from tensorflow.python.data.ops import structured_function

    assert structured_function.StructuredFunctionWrapper.__name__ == "StructuredFunctionWrapper"


def test_the_replay_fallback_gives_the_same_elements():
    ds = (
        tf.data.Dataset.range(6)
        .map(lambda x: (x, {"half": x // 2}))
        .map(lambda a, d: a * d["half"])
    )
    dr._MODE.replay = True
    try:
        rebuilt = _rebuild_all(ds)
    finally:
        dr._MODE.replay = False
    assert rebuilt._map_func is not ds._map_func
    assert _values(rebuilt) == _values(ds)


def test_make_parallel_map_keeps_the_sequence_with_deterministic_true():
    table = _table()
    words = tf.data.Dataset.from_tensor_slices(["dog", "cat", "cow"] * 30)
    ds = words.map(lambda w: (table.lookup(w), tf.strings.length(w)))
    (_, stage) = stages.read_chain(ds)
    parallel = dr.make_parallel_map(stage.dataset, words, deterministic=True)
    assert type(parallel).__name__ == "_ParallelMapDataset"
    assert (
        int(parallel._num_parallel_calls) == dataset_args.AUTOTUNE
        and parallel._deterministic == "true"
    )
    assert _values(parallel) == _values(ds)


def test_an_unknown_stage_is_opaque_with_a_reason():
    ds = (
        tf.data.Dataset.range(6)
        .scan(tf.constant(0, tf.int64), lambda s, x: (s + x, s + x))
        .batch(2)
    )
    chain = stages.read_chain(ds)
    scan = chain[1]
    assert scan.kind == "scan" and not scan.rebuildable
    with pytest.raises(dr.RebuildError, match="_ScanDataset"):
        dr.rebuild(scan, tf.data.Dataset.range(6))


def test_tfrecord_parallel_reads_keep_the_multiset(tmp_path):
    files = write_tfrecords(tmp_path, ([f"{f}-{i}".encode() for i in range(5)] for f in range(3)))
    ds = tf.data.TFRecordDataset(files)
    (stage,) = stages.read_chain(ds)
    assert stage.kind == "tfrecord" and stage.params["files"] == 3
    assert stage.params["num_parallel_reads"] is None
    parallel = dr.tfrecord_parallel_reads(stage)
    assert sorted(_values(parallel)) == sorted(_values(ds))


# -- hooks ------------------------------------------------------------------------------------


def test_the_hooks_record_creation_sites_and_see_iterators(tmp_path):
    """In a fresh process: the hooks must be installed before the datasets are made."""
    script = tmp_path / "pipeline.py"
    script.write_text(
        textwrap.dedent("""\
        import tensorflow as tf
        from gpuwhy.tfapi.tfdata import stages
        seen = []
        patches = stages.install_creation_sites() + stages.install_iterator_capture(
            lambda ds, where: seen.append((ds, where)))
        ds = tf.data.Dataset.range(4).map(lambda x: x + 1)
        wrapped = ds.with_options(tf.data.Options()).prefetch(1)
        for _ in wrapped:
            pass
        (captured, where), = seen
        assert captured is wrapped, captured
        print("ITERATED", where)
        print("CREATED", stages.creation_site(ds), stages.made_by_user(ds))
        print("USER", stages.user_dataset(wrapped) is wrapped)
        print("CALLER", stages.creation_caller(ds))
        def configure(d):
            return d.batch(2)
        train = configure(ds)
        val = configure(ds)
        print("HELPER", stages.creation_site(train), stages.creation_caller(train),
              stages.creation_caller(val))
        for p in reversed(patches):
            p.undo()
    """)
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert lines["ITERATED"] == "pipeline.py:8"
    assert lines["CREATED"] == "pipeline.py:6 True"
    assert lines["USER"] == "True"
    assert lines["CALLER"] == "None"  # made at the top level
    # one helper builds both: its line, told apart by the line that called it
    assert lines["HELPER"] == "pipeline.py:17 pipeline.py:18 pipeline.py:19"


def test_static_element_bytes_from_the_spec():
    ds = tf.data.Dataset.from_tensors((np.zeros((4, 5), np.float32), np.int64(1)))
    assert dataset_size.element_bytes(ds) == 4 * 5 * 4 + 8
    assert dataset_size.element_bytes(tf.data.Dataset.from_tensors("text")) is None
