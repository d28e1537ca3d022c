"""The user's tf.data pipeline as Python objects: read it, judge its functions, rebuild it.

A ``tf.data.Dataset`` keeps what it was built from on private attributes, one class
per transformation (``tensorflow/python/data/ops/*_op.py``): ``_input_dataset``,
``_map_func`` (a ``StructuredFunctionWrapper``, structured_function.py, whose
``.function`` is the ConcreteFunction TF traced and ``._func`` the user's Python
function), ``_num_parallel_calls``, ``_deterministic`` ("default"/"true"/"false"),
``_batch_size``, ``_buffer_size``, ``_seed``/``_seed2`` ... This module is the one place
that reads them, so that gpuwhy.fix can rebuild a pipeline with safe changes.

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

Also here: the two hooks ``gpuwhy fix --input`` installs in a script, on
``DatasetV2.__init__`` (where the user wrote each dataset) and on
``OwnedIterator._create_iterator`` (which datasets the script iterated,
iterator_ops.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.tfapi.patching import Patch
from gpuwhy.tfapi.tfdata.classes import dataset_class, is_sequential_interleave, is_sequential_map
from gpuwhy.tfapi.tfdata.elements import cardinality, element_bytes
from gpuwhy.tfapi.tfdata.functions import FunctionInfo, function_info, user_function_site

__all__ = [
    "AUTOTUNE",
    "FunctionInfo",
    "RebuildError",
    "Stage",
    "cardinality",
    "element_bytes",
    "creation_site",
    "function_info",
    "install_creation_sites",
    "install_iterator_capture",
    "make_cache",
    "make_parallel_interleave",
    "make_parallel_map",
    "make_prefetch",
    "read_chain",
    "rebuild",
    "reproducibility",
    "tfrecord_parallel_reads",
    "user_dataset",
    "with_options",
]

AUTOTUNE = -1


class RebuildError(Exception):
    """This stage cannot be rebuilt faithfully on a new input; the message says why."""


# -- reading the chain -------------------------------------------------------------------


def _kind(name: str) -> str | None:
    return dataset_class(name).kind


def _is_source(name: str) -> bool:
    """A source the fix planner knows (reads no dataset of the user's)."""
    row = dataset_class(name)
    return row.source and row.kind is not None


def _reproducible(name: str) -> bool:
    row = dataset_class(name)
    return row.kind is not None and row.reproducible


@dataclass
class Stage:
    """One transformation of the user's pipeline, as written (one Python dataset object)."""

    dataset: Any
    kind: str  # map, batch, shuffle ... or "opaque"
    type_name: str  # TF's Python class
    input: Stage | None = None  # None: the bottom of what gpuwhy rebuilds
    functions: tuple[FunctionInfo, ...] = ()
    rebuildable: bool = True
    why_not: str | None = None  # why it cannot be rebuilt
    site: str | None = None  # file:line where the user created it
    params: dict = field(default_factory=dict)  # what it was written with

    @property
    def sequential_map(self) -> bool:
        return is_sequential_map(self.type_name, self.params.get("num_parallel_calls"))

    @property
    def sequential_interleave(self) -> bool:
        return is_sequential_interleave(self.type_name)

    @property
    def written_sequential(self) -> bool:
        """A map written without ``num_parallel_calls`` (not ``num_parallel_calls=1``)."""
        return is_sequential_map(self.type_name) and self.kind == "map"

    @property
    def random(self) -> bool:
        """Its elements (or their order) differ from pass to pass by design."""
        if self.type_name in ("_ShuffleDataset", "_RandomDataset"):
            return True
        if self.params.get("deterministic") == "false":
            return True
        return any(f.random for f in self.functions)

    @property
    def python(self) -> bool:
        return any(f.python and not f.python_declared_pure for f in self.functions)

    def describe(self) -> str:
        """``map(parse)``, ``batch(32)``: the transformation as the user wrote it."""
        fn = self.functions[0].name if self.functions else None
        p = self.params
        if self.kind in ("map", "filter", "flat_map", "interleave", "take_while") and fn:
            return f"{self.kind}({fn})"
        if self.kind in ("batch", "padded_batch") and "batch_size" in p:
            return f"{self.kind}({p['batch_size']})"
        if self.kind in ("shuffle", "prefetch") and "buffer_size" in p:
            size = "AUTOTUNE" if p["buffer_size"] == AUTOTUNE else p["buffer_size"]
            return f"{self.kind}({size})"
        if self.kind in ("repeat", "take", "skip") and "count" in p:
            return (
                f"{self.kind}({'' if p['count'] == -1 and self.kind == 'repeat' else p['count']})"
            )
        if self.kind == "tfrecord":
            return "TFRecordDataset(...)"
        return f"{self.kind}(...)" if self.kind != "opaque" else self.type_name


def read_chain(dataset: Any, *, max_stages: int = 200) -> list[Stage]:
    """The pipeline from its bottom (first) to ``dataset`` (last).

    Single-input transformations are followed down; a source, a multi-input dataset
    (zip, concatenate) or an unknown class ends the chain as its bottom stage, which is
    never rebuilt.
    """
    stages: list[Stage] = []
    current = dataset
    while current is not None and len(stages) < max_stages:
        stage = _read_stage(current)
        stages.append(stage)
        if stage.kind == "opaque" or _is_source(stage.type_name):
            break
        current = _single_input(current)
    stages.reverse()
    for below, above in zip(stages, stages[1:]):
        above.input = below
    bottom = stages[0]
    if not _is_source(bottom.type_name) and bottom.rebuildable:
        bottom.rebuildable = False  # cut by max_stages or a multi-input stage
        bottom.why_not = "gpuwhy does not look below it"
    return stages


def _single_input(ds: Any) -> Any:
    """The one input a transformation reads, seen through TF's internal wrappers."""
    name = type(ds).__name__
    if name == "_UnbatchDataset":
        # unbatch() = _UnbatchDataset(_RestructuredDataset(input.map(normalize)))
        restructured = getattr(ds, "_input_dataset", None)
        normalize = getattr(restructured, "_input_dataset", None)
        if (
            type(restructured).__name__ == "_RestructuredDataset"
            and type(normalize).__name__ == "_MapDataset"
        ):
            return getattr(normalize, "_input_dataset", None)
        return None
    if name in ("_ZipDataset", "_ConcatenateDataset") or _is_source(name):
        return None
    return getattr(ds, "_input_dataset", None)


def _read_stage(ds: Any) -> Stage:
    name = type(ds).__name__
    site = creation_site(ds)
    kind = _kind(name)
    functions = tuple(_functions_of(ds))
    if kind is None:
        return Stage(
            ds,
            "opaque",
            name,
            functions=functions,
            rebuildable=False,
            why_not=f"gpuwhy does not know how to rebuild a {name}",
            site=site,
        )
    params = _params(ds, name)
    stage = Stage(ds, kind, name, functions=functions, site=site, params=params)
    if (
        any(f.python for f in functions)
        and name == "_FlatMapDataset"
        and any("GeneratorDataset" in f.ops for f in functions)
    ):
        stage.kind = "generator"  # Dataset.from_generator = flat_map over a generator
    why = _why_not_rebuildable(ds, name, params)
    if why:
        stage.rebuildable, stage.why_not = False, why
    return stage


def _functions_of(ds: Any) -> list[FunctionInfo]:
    try:
        wrappers = ds._functions()
    except Exception:  # noqa: BLE001 - an unknown class without _functions
        return []
    return [function_info(w) for w in wrappers]


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(value.numpy())
        except Exception:  # noqa: BLE001 - a symbolic tensor
            return None


def _params(ds: Any, name: str) -> dict:
    p: dict[str, Any] = {}
    for attr, key in (
        ("_num_parallel_calls", "num_parallel_calls"),
        ("_batch_size", "batch_size"),
        ("_buffer_size", "buffer_size"),
        ("_count", "count"),
        ("_cycle_length", "cycle_length"),
        ("_block_length", "block_length"),
        ("_num_shards", "num_shards"),
        ("_index", "index"),
    ):
        if hasattr(ds, attr) and name not in (
            "TFRecordDatasetV2",
            "TextLineDatasetV2",
            "FixedLengthRecordDatasetV2",
        ):
            p[key] = _int(getattr(ds, attr))
    if hasattr(ds, "_drop_remainder"):
        p["drop_remainder"] = bool(_int(ds._drop_remainder))
    if hasattr(ds, "_deterministic"):
        p["deterministic"] = ds._deterministic
    if hasattr(ds, "_reshuffle_each_iteration"):
        p["reshuffle_each_iteration"] = bool(ds._reshuffle_each_iteration)
    if hasattr(ds, "_seed"):
        p["seed"], p["seed2"] = _int(ds._seed), _int(getattr(ds, "_seed2", 0))
    if name == "CacheDataset":
        try:
            p["filename"] = ds._filename.numpy().decode()
        except Exception:  # noqa: BLE001
            p["filename"] = None
    if name == "TFRecordDatasetV2":
        p["num_parallel_reads"] = (
            _int(ds._num_parallel_reads) if ds._num_parallel_reads is not None else None
        )
        p["files"] = cardinality(ds._filenames)
    if name == "_MapDataset":
        p["synchronous"] = bool(getattr(ds, "_force_synchronous", False))
    return p


def _why_not_rebuildable(ds: Any, name: str, p: dict) -> str | None:
    if _is_source(name):
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


# -- reproducibility and size ------------------------------------------------------------


def reproducibility(dataset: Any, *, assume_pure: bool = False, _depth: int = 0) -> str | None:
    """None when two passes over ``dataset`` give the same elements in the same order by
    construction; otherwise the reason (the first stage that draws random numbers,
    shuffles, calls Python or is unknown)."""
    if _depth > 200:
        return "the pipeline is too deep to judge"
    name = type(dataset).__name__
    if not _reproducible(name):
        what = {
            "_ShuffleDataset": "reshuffles on every pass",
            "_RandomDataset": "draws random numbers",
            "_GeneratorDataset": "runs a Python generator",
            "_IgnoreErrorsDataset": "ignores errors",
        }.get(name, "is a stage gpuwhy does not know")
        return f"{_where(dataset)} {what}"
    if getattr(dataset, "_deterministic", None) == "false":
        return f"{_where(dataset)} is parallel with deterministic=False"
    for info in _functions_of(dataset):
        if "GeneratorDataset" in info.python and not assume_pure:
            site = creation_site(dataset)
            return f"the from_generator{' at ' + site if site else ''} runs a Python generator"
        if info.random:
            return f"{_where(dataset)} draws random numbers ({', '.join(info.random)})"
        if info.python and not (assume_pure or info.python_declared_pure):
            return f"{_where(dataset)} calls Python ({', '.join(info.python)})"
        if not info.readable:
            return f"{_where(dataset)} runs a function gpuwhy cannot read"
        if info.unsafe_stateful:
            return (
                f"{_where(dataset)} runs stateful ops ({', '.join(info.unsafe_stateful)}) "
                "whose results may change from pass to pass"
            )
        if "ReadVariableOp" in info.ops:
            # safe to run in parallel (a read), not to freeze: the program may change the
            # variable between epochs (a schedule, a curriculum)
            return f"{_where(dataset)} reads a tf.Variable, which may change between epochs"
    try:
        inputs = dataset._inputs()
    except Exception:  # noqa: BLE001
        return f"{_where(dataset)} has inputs gpuwhy cannot read"
    for inp in inputs:
        reason = reproducibility(inp, assume_pure=assume_pure, _depth=_depth + 1)
        if reason:
            return reason
    return None


def _where(ds: Any) -> str:
    """``the map(augment) at train.py:12``."""
    name = _kind(type(ds).__name__) or type(ds).__name__
    wrappers = []
    try:
        wrappers = ds._functions()
    except Exception:  # noqa: BLE001
        pass
    if wrappers:
        name += f"({user_function_site(getattr(wrappers[0], '_func', None))[0]})"
    site = creation_site(ds)
    return f"the {name}" + (f" at {site}" if site else "")


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
        num_parallel_calls if num_parallel_calls is not None else _int(ds._num_parallel_calls),
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
            _int(ds._cycle_length),
            _int(ds._block_length),
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
        _int(ds._cycle_length),
        _int(ds._block_length),
        name=ds._name,
    )


def _batch(ds, new, **over):
    from tensorflow.python.data.ops import batch_op

    return batch_op._BatchDataset(
        new,
        _int(ds._batch_size),
        bool(_int(ds._drop_remainder)),
        name=ds._name,
    )


def _parallel_batch(ds, new, **over):
    from tensorflow.python.data.ops import batch_op

    return batch_op._ParallelBatchDataset(
        new,
        _int(ds._batch_size),
        bool(_int(ds._drop_remainder)),
        _int(ds._num_parallel_calls),
        _deterministic_arg(ds._deterministic),
        name=ds._name,
    )


def _padded_batch(ds, new, **over):
    from tensorflow.python.data.ops import padded_batch_op

    return padded_batch_op._PaddedBatchDataset(
        new,
        _int(ds._batch_size),
        ds._padded_shapes,
        ds._padding_values,
        bool(_int(ds._drop_remainder)),
        name=ds._name,
    )


def _prefetch(ds, new, **over):
    from tensorflow.python.data.ops import prefetch_op

    return prefetch_op._PrefetchDataset(new, _int(ds._buffer_size), name=ds._name)


def _shuffle(ds, new, **over):
    """Same (seed, seed2) as the original, or refuse: a different seed pair would give a
    different order than the user's (random_seed.get_seed maps an op seed to the pair
    (global seed or DEFAULT_GRAPH_SEED, op seed); seed 0 is 'no seed')."""
    from tensorflow.python.data.ops import shuffle_op

    seed, seed2 = _int(ds._seed), _int(ds._seed2)
    rebuilt = shuffle_op._ShuffleDataset(
        new,
        _int(ds._buffer_size),
        seed=None if seed == 0 else seed2,
        reshuffle_each_iteration=bool(ds._reshuffle_each_iteration),
        name=ds._name,
    )
    if (_int(rebuilt._seed), _int(rebuilt._seed2)) != (seed, seed2):
        raise RebuildError(
            "its shuffle seeds cannot be reproduced (the global seed changed since it was built)"
        )
    return rebuilt


def _repeat(ds, new, **over):
    from tensorflow.python.data.ops import repeat_op

    return repeat_op._RepeatDataset(new, _int(ds._count), name=ds._name)


def _take(ds, new, **over):
    from tensorflow.python.data.ops import take_op

    return take_op._TakeDataset(new, _int(ds._count), name=ds._name)


def _skip(ds, new, **over):
    from tensorflow.python.data.ops import skip_op

    return skip_op._SkipDataset(new, _int(ds._count), name=ds._name)


def _shard(ds, new, **over):
    from tensorflow.python.data.ops import shard_op

    return shard_op._ShardDataset(new, _int(ds._num_shards), _int(ds._index), name=ds._name)


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


# -- hooks for `gpuwhy fix --input` ------------------------------------------------------


def _origin(dataset: Any) -> tuple[str | None, bool] | None:
    """(user's file:line, made by a library) as gpuwhy.tfapi.tfdata.written's origin hook
    recorded it at creation, or None."""
    from gpuwhy.tfapi.tfdata.written import origin

    try:
        found = origin(dataset)
    except Exception:  # noqa: BLE001
        return None
    return None if found is None else (found.location, bool(found.by_library))


def creation_site(dataset: Any) -> str | None:
    """file:line where the user's code created ``dataset`` (None: not recorded, or made by
    a library such as Keras)."""
    found = _origin(dataset)
    return None if found is None or found[1] else found[0]


def made_by_user(dataset: Any) -> bool | None:
    """True: created by the user's code; False: by a library; None: not recorded."""
    found = _origin(dataset)
    return None if found is None else not found[1]


def install_creation_sites() -> list[Patch]:
    """Record, for every dataset created from now on, where the user created it (the
    origin hooks of gpuwhy.tfapi.tfdata.written, shared with ``gpuwhy run``)."""
    from gpuwhy.tfapi.tfdata.written import install_origin_hooks

    return install_origin_hooks()


def install_iterator_capture(seen: Callable[[Any, str | None], None]) -> list[Patch]:
    """Call ``seen(dataset, where it is iterated)`` for each eager dataset an iterator is
    created on (every ``iter(ds)``, ``for x in ds``, and Keras' epoch iterators), before
    TF builds the iterator; a listener on the one creation hook of iterators.py."""
    from gpuwhy.tfapi.frames import user_location
    from gpuwhy.tfapi.tfdata.iterators import on_iterator_created

    def before(_iterator: Any, dataset: Any) -> None:
        seen(dataset, user_location(skip=2))

    return [on_iterator_created(before=before)]


def user_dataset(dataset: Any) -> Any | None:
    """The dataset the user built, below what libraries wrapped around it (Keras' and
    tf.distribute's options or rebatch stages). None when a library built all of it
    (Keras making a dataset from NumPy arrays)."""
    current = dataset
    for _ in range(64):
        if current is None:
            return None
        who = made_by_user(current)
        if who is None or who:
            return current
        current = _single_input(current)
    return None
