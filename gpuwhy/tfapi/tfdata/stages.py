"""The user's tf.data pipeline as ``gpuwhy fix`` sees it: one :class:`Stage` per Python
dataset object, read from the private attributes TF keeps (``_input_dataset``,
``_map_func``, ``_num_parallel_calls``, ``_deterministic``, ``_batch_size`` ...), with its
functions judged (functions.py), whether its elements are the same every pass, and
which dataset the user built below what libraries wrapped around it.

Also here: the two hooks ``gpuwhy fix --input`` installs in a script, on
``DatasetV2.__init__`` (where the user wrote each dataset, dataset_chain.py's origin hooks)
and on iterator creation (which datasets the script iterated, iterators.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.patching import Patch
from gpuwhy.tfapi.tfdata.classes import (
    CLASSES,
    dataset_class,
    is_sequential_interleave,
    is_sequential_map,
)
from gpuwhy.tfapi.tfdata.dataset_args import AUTOTUNE, int_value
from gpuwhy.tfapi.tfdata.dataset_size import cardinality
from gpuwhy.tfapi.tfdata.functions import FunctionInfo, function_info, user_function_site
from gpuwhy.tfapi.tfdata.iterators import on_iterator_created
from gpuwhy.tfapi.tfdata.origins import install_origin_hooks, origin
from gpuwhy.tfapi.tfdata.rewrite import why_not_rebuildable


def _kind(name: str) -> str | None:
    return dataset_class(name).kind


def _is_source(name: str) -> bool:
    """A source the fix planner knows (reads no dataset of the user's)."""
    row = dataset_class(name)
    return row.source and row.kind is not None


def _reproducible(name: str) -> bool:
    """A class in TF's table that gives the same elements every pass (a known class the
    fix planner cannot rebuild, such as a parallel filter, included)."""
    row = dataset_class(name)
    return (row.kind is not None or name in CLASSES) and row.reproducible


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
        return is_sequential_map(self.type_name)

    @property
    def random(self) -> bool:
        """Its elements (or their order) differ from pass to pass by design."""
        if self.type_name == "_RandomDataset" or (
            self.type_name == "_ShuffleDataset" and not _shuffled_once(self.dataset)
        ):
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
    why = why_not_rebuildable(ds, name, params)
    if why:
        stage.rebuildable, stage.why_not = False, why
    return stage


def _functions_of(ds: Any) -> list[FunctionInfo]:
    try:
        wrappers = ds._functions()
    except Exception:  # noqa: BLE001 - an unknown class without _functions
        return []
    return [function_info(w) for w in wrappers]


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
            p[key] = int_value(getattr(ds, attr))
    if hasattr(ds, "_drop_remainder"):
        p["drop_remainder"] = bool(int_value(ds._drop_remainder))
    if hasattr(ds, "_deterministic"):
        p["deterministic"] = ds._deterministic
    if hasattr(ds, "_reshuffle_each_iteration"):
        p["reshuffle_each_iteration"] = bool(ds._reshuffle_each_iteration)
    if hasattr(ds, "_seed"):
        p["seed"], p["seed2"] = int_value(ds._seed), int_value(getattr(ds, "_seed2", 0))
    if name == "CacheDataset":
        try:
            p["filename"] = ds._filename.numpy().decode()
        except Exception:  # noqa: BLE001
            p["filename"] = None
    if name == "TFRecordDatasetV2":
        p["num_parallel_reads"] = (
            int_value(ds._num_parallel_reads) if ds._num_parallel_reads is not None else None
        )
        p["files"] = cardinality(ds._filenames)
    if name == "_MapDataset":
        p["synchronous"] = bool(getattr(ds, "_force_synchronous", False))
    return p


# -- reproducibility and size ------------------------------------------------------------


def reproducibility(dataset: Any, *, assume_pure: bool = False, _depth: int = 0) -> str | None:
    """None when two passes over ``dataset`` give the same elements in the same order by
    construction; otherwise the reason (the first stage that draws random numbers,
    shuffles, calls Python or is unknown)."""
    if _depth > 200:
        return "the pipeline is too deep to judge"
    reason = varies_between_passes(dataset, assume_pure=assume_pure)
    if reason:
        return reason
    try:
        inputs = dataset._inputs()
    except Exception:  # noqa: BLE001
        return f"{_where(dataset)} has inputs gpuwhy cannot read"
    for inp in inputs:
        reason = reproducibility(inp, assume_pure=assume_pure, _depth=_depth + 1)
        if reason:
            return reason
    return None


def _shuffled_once(dataset: Any) -> bool:
    """A shuffle written with ``reshuffle_each_iteration=False``: one order, the same on
    every pass (shuffle_op.py keeps the flag as ``_reshuffle_each_iteration``)."""
    return (
        type(dataset).__name__ == "_ShuffleDataset"
        and getattr(dataset, "_reshuffle_each_iteration", True) is False
    )


def varies_between_passes(dataset: Any, *, assume_pure: bool = False) -> str | None:
    """Why this one transformation (its inputs aside) may give other elements, or another
    order, on another pass over the same input; None when it cannot.

    The one definition of what a cache may freeze: ``gpuwhy fix`` places its cache by
    it, and ``gpuwhy run`` records it per stage for input.no-cache and the decode fix.
    Stateful ops that only read (a lookup table, ``Assert``, ``tf.print``) keep the
    elements the same; random ops, Python that is not declared pure (numpy_function
    with ``stateful=False``), a generator, a shuffle, a tf.Variable (the program may
    change it between epochs) and writing ops do not."""
    name = type(dataset).__name__
    if not _reproducible(name) and not _shuffled_once(dataset):
        what = {
            "_ShuffleDataset": "reshuffles on every pass",
            "_ShuffleAndRepeatDataset": "reshuffles on every pass",
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


def _origin(dataset: Any) -> tuple[str | None, bool] | None:
    """(user's file:line, made by a library) as gpuwhy.tfapi.tfdata.origins' hook
    recorded it at creation, or None."""
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


def creation_caller(dataset: Any) -> str | None:
    """Where the user's code called the function that created ``dataset`` (its first
    caller: ``configure_for_performance(train_ds)``, which tells the training pipeline
    from the validation one the same helper built), or None (made at the top level)."""
    try:
        found = origin(dataset)
    except Exception:  # noqa: BLE001
        return None
    return found.callers[0] if found is not None and found.callers else None


def made_by_user(dataset: Any) -> bool | None:
    """True: created by the user's code; False: by a library; None: not recorded."""
    found = _origin(dataset)
    return None if found is None else not found[1]


def install_creation_sites() -> list[Patch]:
    """Record, for every dataset created from now on, where the user created it (the
    origin hooks of gpuwhy.tfapi.tfdata.origins, shared with ``gpuwhy run``)."""
    return install_origin_hooks()


def install_iterator_capture(seen: Callable[[Any, str | None], None]) -> list[Patch]:
    """Call ``seen(dataset, where it is iterated)`` for each eager dataset an iterator is
    created on (every ``iter(ds)``, ``for x in ds``, and Keras' epoch iterators), before
    TF builds the iterator; a listener on the one creation hook of iterators.py."""

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
