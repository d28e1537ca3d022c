"""Rebuilding the user's tf.data pipeline (read by stages.py) with safe changes.

A ``tf.data.Dataset`` keeps what it was built from on private attributes, one class
per transformation (``tensorflow/python/data/ops/*_op.py``): ``_input_dataset``,
``_map_func`` (a ``StructuredFunctionWrapper``, structured_function.py, whose
``.function`` is the ConcreteFunction TF traced and ``._func`` the user's Python
function), ``_num_parallel_calls``, ``_deterministic`` ("default"/"true"/"false"),
``_batch_size``, ``_buffer_size``, ``_seed``/``_seed2`` ... stages.py reads them;
this module builds a pipeline anew from them, so that gpuwhy.optimize can change it safely.

Rebuilding a stage on a new input calls the same private constructor TF's public
method calls (``_ParallelMapDataset(input, fn, ...)`` is what ``Dataset.map`` does), with
every argument read back from the stage. The function is *not* traced again from the
user's Python code (which may close over Python state that has changed since, or draw
new random seeds): the new stage gets the very ``StructuredFunctionWrapper`` (and
ConcreteFunction) TF traced for the original. The constructors always wrap what they
are given in a new ``StructuredFunctionWrapper`` (looked up on the structured_function
module at call time), so for the length of the call that name is a subclass whose
``__new__`` hands back the existing wrapper for a :class:`_Reused` marker and builds a
real one for anything else (no TF code checks ``isinstance`` against it). Should that
ever fail, :func:`replay` is the fallback: a one-node function calling the traced
ConcreteFunction (same results; it costs ~5 ms more per iterator, the extra function
being instantiated each time).

Stages that cannot be rebuilt faithfully (an unknown class, an argument the Python
object does not keep, a file cache that two pipelines would share) are *opaque*: they
and everything below them stay the user's own objects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, Protocol

from gpuwhy.tfapi.tfdata.classes import dataset_class
from gpuwhy.tfapi.tfdata.dataset_args import AUTOTUNE, int_value


class Stage(Protocol):
    """What a rebuild reads of a stage (stages.Stage is one; stages.py imports this
    module, so it is named by what it has, not imported)."""

    dataset: Any
    type_name: str
    rebuildable: bool
    why_not: str | None


class RebuildError(Exception):
    """This stage cannot be rebuilt faithfully on a new input; the message says why."""


# -- rebuilding --------------------------------------------------------------------------


class _Reused:
    """Stands for an already traced wrapper in a dataset constructor's ``map_func``."""

    __slots__ = ("wrapper",)

    def __init__(self, wrapper: Any) -> None:
        self.wrapper = wrapper


_SWAP_LOCK = threading.RLock()
_MODE = threading.local()


@contextmanager
def _reusing_traced_functions():
    """While inside, dataset constructors given a :class:`_Reused` keep its wrapper."""
    from tensorflow.python.data.ops import structured_function

    real = structured_function.StructuredFunctionWrapper

    class _Reuse(real):  # type: ignore[misc, valid-type]
        def __new__(cls, func, *args, **kwargs):
            if isinstance(func, _Reused):
                return func.wrapper  # not a _Reuse: __init__ is not called again
            return real(func, *args, **kwargs)

    with _SWAP_LOCK:
        structured_function.StructuredFunctionWrapper = _Reuse
        try:
            yield
        finally:
            structured_function.StructuredFunctionWrapper = real


def _function(wrapper: Any, new_input: Any) -> Any:
    """What to pass as the rebuilt stage's function: the original wrapper itself, or
    (fallback mode, or another input structure) a replay of its ConcreteFunction."""
    if getattr(_MODE, "replay", False) or not _same_spec(
        getattr(wrapper, "_input_structure", None), new_input.element_spec
    ):
        return replay(wrapper)
    return _Reused(wrapper)


def _construct(build: Callable[[], Any]) -> Any:
    """``build()`` reusing traced functions; again with replays if that fails."""
    try:
        with _reusing_traced_functions():
            return build()
    except Exception:  # noqa: BLE001 - a TF whose constructors differ: replay instead
        _MODE.replay = True
        try:
            return build()
        finally:
            _MODE.replay = False


def replay(wrapper: Any) -> Callable:
    """A Python function that calls the ConcreteFunction TF traced for ``wrapper``.

    Handing it to a dataset constructor traces a one-node function (a call of the
    original), so the rebuilt stage computes what the original did without running the
    user's Python again."""
    import tensorflow as tf
    from tensorflow.python.data.util import structure

    concrete = wrapper.function
    input_structure = wrapper._input_structure
    output_structure = wrapper.output_structure
    unpack = type(input_structure) is tuple  # structured_function._should_unpack

    @tf.autograph.experimental.do_not_convert
    def replayed(*args):
        value = tuple(args) if unpack else args[0]
        flat = structure.to_tensor_list(input_structure, value)
        outputs = concrete(*flat)
        if not isinstance(outputs, (list, tuple)):
            outputs = [outputs]
        return structure.from_compatible_tensor_list(output_structure, list(outputs))

    replayed._gpuwhy_replays = getattr(wrapper, "_func", None)  # for names and file:line
    replayed.__name__ = getattr(getattr(wrapper, "_func", None), "__name__", "replayed")
    return replayed


def _deterministic_arg(value: str | None) -> bool | None:
    return {"true": True, "false": False}.get(value or "default")


def _map(ds, new, **over):
    from tensorflow.python.data.ops import map_op

    return map_op._MapDataset(
        new,
        _function(ds._map_func, new),
        force_synchronous=ds._force_synchronous,
        use_inter_op_parallelism=ds._use_inter_op_parallelism,
        preserve_cardinality=ds._preserve_cardinality,
        name=ds._name,
    )


def _parallel_map(ds, new, num_parallel_calls=None, deterministic=None, **over):
    from tensorflow.python.data.ops import map_op

    return map_op._ParallelMapDataset(
        new,
        _function(ds._map_func, new),
        num_parallel_calls if num_parallel_calls is not None else int_value(ds._num_parallel_calls),
        deterministic if deterministic is not None else _deterministic_arg(ds._deterministic),
        use_inter_op_parallelism=ds._use_inter_op_parallelism,
        preserve_cardinality=ds._preserve_cardinality,
        use_unbounded_threadpool=getattr(ds, "_use_unbounded_threadpool", False),
        name=ds._name,
    )


def make_parallel_map(ds: Any, new: Any, *, deterministic: bool | None) -> Any:
    """``ds`` (a sequential or fixed-parallelism map) as ``map(fn, AUTOTUNE)`` on ``new``."""
    from tensorflow.python.data.ops import map_op

    return _construct(
        lambda: map_op._ParallelMapDataset(
            new,
            _function(ds._map_func, new),
            AUTOTUNE,
            deterministic,
            use_inter_op_parallelism=getattr(ds, "_use_inter_op_parallelism", True),
            preserve_cardinality=getattr(ds, "_preserve_cardinality", True),
            use_unbounded_threadpool=getattr(ds, "_use_unbounded_threadpool", False),
            name=ds._name,
        )
    )


def make_parallel_interleave(ds: Any, new: Any, *, deterministic: bool | None) -> Any:
    """A sequential ``interleave`` as the same interleave with ``num_parallel_calls=AUTOTUNE``:
    with ``deterministic=True`` it yields the same sequence (interleave_op.py)."""
    from tensorflow.python.data.ops import interleave_op

    return _construct(
        lambda: interleave_op._ParallelInterleaveDataset(
            new,
            _function(ds._map_func, new),
            int_value(ds._cycle_length),
            int_value(ds._block_length),
            AUTOTUNE,
            deterministic=deterministic,
            name=ds._name,
        )
    )


def _filter(ds, new, **over):
    from tensorflow.python.data.ops import filter_op

    return filter_op._FilterDataset(new, _function(ds._predicate, new), name=ds._name)


def _flat_map(ds, new, **over):
    from tensorflow.python.data.ops import flat_map_op

    return flat_map_op._FlatMapDataset(new, _function(ds._map_func, new), name=ds._name)


def _interleave(ds, new, **over):
    from tensorflow.python.data.ops import interleave_op

    return interleave_op._InterleaveDataset(
        new,
        _function(ds._map_func, new),
        int_value(ds._cycle_length),
        int_value(ds._block_length),
        name=ds._name,
    )


def _batch(ds, new, **over):
    from tensorflow.python.data.ops import batch_op

    return batch_op._BatchDataset(
        new,
        int_value(ds._batch_size),
        bool(int_value(ds._drop_remainder)),
        name=ds._name,
    )


def _parallel_batch(ds, new, **over):
    from tensorflow.python.data.ops import batch_op

    return batch_op._ParallelBatchDataset(
        new,
        int_value(ds._batch_size),
        bool(int_value(ds._drop_remainder)),
        int_value(ds._num_parallel_calls),
        _deterministic_arg(ds._deterministic),
        name=ds._name,
    )


def _padded_batch(ds, new, **over):
    from tensorflow.python.data.ops import padded_batch_op

    return padded_batch_op._PaddedBatchDataset(
        new,
        int_value(ds._batch_size),
        ds._padded_shapes,
        ds._padding_values,
        bool(int_value(ds._drop_remainder)),
        name=ds._name,
    )


def _prefetch(ds, new, **over):
    from tensorflow.python.data.ops import prefetch_op

    return prefetch_op._PrefetchDataset(new, int_value(ds._buffer_size), name=ds._name)


def _shuffle(ds, new, **over):
    """Same (seed, seed2) as the original, or refuse: a different seed pair would give a
    different order than the user's (random_seed.get_seed maps an op seed to the pair
    (global seed or DEFAULT_GRAPH_SEED, op seed); seed 0 is 'no seed')."""
    from tensorflow.python.data.ops import shuffle_op

    seed, seed2 = int_value(ds._seed), int_value(ds._seed2)
    rebuilt = shuffle_op._ShuffleDataset(
        new,
        int_value(ds._buffer_size),
        seed=None if seed == 0 else seed2,
        reshuffle_each_iteration=bool(ds._reshuffle_each_iteration),
        name=ds._name,
    )
    if (int_value(rebuilt._seed), int_value(rebuilt._seed2)) != (seed, seed2):
        raise RebuildError(
            "its shuffle seeds cannot be reproduced (the global seed changed since it was built)"
        )
    return rebuilt


def _repeat(ds, new, **over):
    from tensorflow.python.data.ops import repeat_op

    return repeat_op._RepeatDataset(new, int_value(ds._count), name=ds._name)


def _take(ds, new, **over):
    from tensorflow.python.data.ops import take_op

    return take_op._TakeDataset(new, int_value(ds._count), name=ds._name)


def _skip(ds, new, **over):
    from tensorflow.python.data.ops import skip_op

    return skip_op._SkipDataset(new, int_value(ds._count), name=ds._name)


def _shard(ds, new, **over):
    from tensorflow.python.data.ops import shard_op

    return shard_op._ShardDataset(
        new, int_value(ds._num_shards), int_value(ds._index), name=ds._name
    )


def _cache(ds, new, **over):
    return make_cache(new, name=ds._name)


def _options(ds, new, **over):
    return new.with_options(ds._options_attr, name=ds._name)


def _unbatch(ds, new, **over):
    return new.unbatch(name=ds._name)


def _take_while(ds, new, **over):
    from tensorflow.python.data.ops import take_while_op

    return take_while_op._TakeWhileDataset(new, _function(ds._predicate, new), name=ds._name)


def _dense_to_ragged(ds, new, **over):
    """ragged_batch's first half; row_splits_dtype is read back from the ragged specs it made."""
    import tensorflow as tf
    from tensorflow.python.data.ops import ragged_batch_op

    dtypes = {
        spec.row_splits_dtype
        for spec in tf.nest.flatten(ds._structure)
        if isinstance(spec, tf.RaggedTensorSpec)
    }
    if len(dtypes) > 1:
        raise RebuildError("its ragged components use several row_splits dtypes")
    return ragged_batch_op._DenseToRaggedDataset(
        new, dtypes.pop() if dtypes else tf.int64, name=ds._name
    )


_REBUILDERS: dict[str, Callable] = {
    "_MapDataset": _map,
    "_ParallelMapDataset": _parallel_map,
    "_FilterDataset": _filter,
    "_FlatMapDataset": _flat_map,
    "_InterleaveDataset": _interleave,
    "_BatchDataset": _batch,
    "_ParallelBatchDataset": _parallel_batch,
    "_PaddedBatchDataset": _padded_batch,
    "_PrefetchDataset": _prefetch,
    "_ShuffleDataset": _shuffle,
    "_RepeatDataset": _repeat,
    "_TakeDataset": _take,
    "_SkipDataset": _skip,
    "_ShardDataset": _shard,
    "CacheDataset": _cache,
    "_OptionsDataset": _options,
    "_UnbatchDataset": _unbatch,
    "_TakeWhileDataset": _take_while,
    "_DenseToRaggedDataset": _dense_to_ragged,
}


def rebuild(stage: Stage, new_input: Any) -> Any:
    """``stage`` as written, on ``new_input`` instead of its own input."""
    if not stage.rebuildable or stage.type_name not in _REBUILDERS:
        raise RebuildError(stage.why_not or f"gpuwhy does not rebuild {stage.type_name}")
    try:
        rebuilt = _construct(lambda: _REBUILDERS[stage.type_name](stage.dataset, new_input))
    except RebuildError:
        raise
    except Exception as e:  # noqa: BLE001 - an argument this TF version names differently
        raise RebuildError(f"rebuilding it failed: {type(e).__name__}: {e}") from None
    if not _same_spec(rebuilt.element_spec, stage.dataset.element_spec):
        raise RebuildError(
            "the rebuilt stage has another element_spec "
            f"({rebuilt.element_spec} != {stage.dataset.element_spec})"
        )
    return rebuilt


def _same_spec(a: Any, b: Any) -> bool:
    try:
        return a == b
    except Exception:  # noqa: BLE001
        return False


def make_cache(dataset: Any, name: str | None = None) -> Any:
    """An in-memory ``cache()``: filled by the first full pass, read by the next ones."""
    return dataset.cache(name=name) if name else dataset.cache()


def make_prefetch(dataset: Any) -> Any:
    return dataset.prefetch(AUTOTUNE)


def with_options(dataset: Any, options: Any) -> Any:
    return dataset.with_options(options)


def tfrecord_parallel_reads(stage: Stage) -> Any:
    """The same TFRecordDataset reading its files ``num_parallel_reads=AUTOTUNE``: records of
    several files interleaved, so the order changes (readers.py _create_dataset_reader)."""
    from tensorflow.python.data.ops import readers

    ds = stage.dataset
    return readers.TFRecordDatasetV2(
        ds._filenames,
        ds._compression_type,
        ds._buffer_size,
        num_parallel_reads=AUTOTUNE,
    )


def default_optimisations(options: Any) -> dict[str, bool]:
    """Which of TF's default rewrites apply under ``options`` (options.py defaults:
    map_parallelization and inject_prefetch default to True; both need autotune,
    map_parallelization.cc and inject_prefetch.cc return early when it is off)."""
    opt = options.experimental_optimization
    autotune = options.autotune.enabled is not False
    defaults_on = opt.apply_default_optimizations is not False
    return {
        "map_parallelization": autotune and defaults_on and opt.map_parallelization is not False,
        "inject_prefetch": autotune and defaults_on and opt.inject_prefetch is not False,
    }


def why_not_rebuildable(ds: Any, name: str, p: dict) -> str | None:
    if dataset_class(name).source and dataset_class(name).kind is not None:
        return None  # never rebuilt: nothing below it changes
    if name not in _REBUILDERS:
        return f"gpuwhy does not rebuild {name} stages"
    if name == "CacheDataset" and p.get("filename"):
        return "a file cache: a rebuilt pipeline would write the same cache files"
    if name in ("_MapDataset", "_ParallelMapDataset") and not getattr(ds, "_map_func", None):
        return "its function is not on the Python object"
    if name == "_ParallelInterleaveDataset":
        return "its `deterministic` argument is not kept on the Python object"
    return None
