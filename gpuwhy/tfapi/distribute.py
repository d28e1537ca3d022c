"""tf.distribute's private parts, read in one place: which strategies a program made,
how each reduces across devices, and which datasets it distributed.

``install(on_strategy, on_distributed)`` wraps ``StrategyBase.__init__`` (every strategy
class ends there) and the two ways a custom loop distributes a dataset. ``describe``
reads one strategy object. A TF version that moved these raises here, and only here.
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable
from typing import Any

from gpuwhy.tfapi.frames import frame_values, user_location
from gpuwhy.tfapi.graph_ops import is_library_file
from gpuwhy.tfapi.patching import Patch, mark_wrapped
from gpuwhy.tfapi.tfdata.dataset_args import int_value
from gpuwhy.tfapi.tfdata.origins import ORIGIN_ATTR

AUTO_SHARD = {-1: "OFF", 0: "AUTO", 1: "FILE", 2: "DATA", 3: "HINT"}
# classes users know by their public name (tf.distribute.MultiWorkerMirroredStrategy is
# the class CollectiveAllReduceStrategy)
PUBLIC_NAMES = {
    "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
    "CollectiveAllReduceStrategyV1": "MultiWorkerMirroredStrategy",
    "ParameterServerStrategyV2": "ParameterServerStrategy",
    "CentralStorageStrategyV1": "CentralStorageStrategy",
}


def install(
    on_strategy: Callable[[Any], None],
    on_distributed: Callable[[str, Any, Any, bool], None],
    on_run: Callable[[Any, Any, Any], None],
) -> list[Patch]:
    """``on_strategy(strategy)`` after each strategy is made; ``on_distributed(how,
    strategy, dataset, read_pipeline_id)`` when a loop (a custom one, or Keras fit's)
    distributes ``dataset`` (``how``: the method's name; for
    distribute_datasets_from_function, each dataset its function returns, and whether
    the function read its input context's ``input_pipeline_id``); ``on_run(strategy,
    fn, args)`` at each ``strategy.run``."""
    from tensorflow.python.distribute import distribute_lib

    base = distribute_lib.StrategyBase

    def make_init(original_init):
        @functools.wraps(original_init)
        def init(self, *args, **kwargs):
            original_init(self, *args, **kwargs)
            try:
                on_strategy(self)
            except Exception:  # noqa: BLE001 - never into the program
                pass

        return init

    def make_distribute(name):
        def make(original):
            @functools.wraps(original)
            def distribute(self, dataset_or_fn, *args, **kwargs):
                if name != "experimental_distribute_dataset":
                    # the function makes each worker's dataset: seen when TF calls it
                    dataset_or_fn = _seeing_datasets(dataset_or_fn, name, self, on_distributed)
                    return original(self, dataset_or_fn, *args, **kwargs)
                try:
                    on_distributed(name, self, dataset_or_fn, False)
                except Exception:  # noqa: BLE001 - never into the program
                    pass
                return original(self, dataset_or_fn, *args, **kwargs)

            return distribute

        return make

    def make_run(original):
        @functools.wraps(original)
        def run(self, fn, *args, **kwargs):
            try:
                on_run(self, fn, kwargs.get("args", args[0] if args else ()))
            except Exception:  # noqa: BLE001 - never into the program
                pass
            return original(self, fn, *args, **kwargs)

        return run

    patches = [Patch(base, "__init__", make_init), Patch(base, "run", make_run)]
    for name in ("experimental_distribute_dataset", "distribute_datasets_from_function"):
        patches.append(Patch(base, name, make_distribute(name)))
    patches.append(Patch(distribute_lib.InputContext, "input_pipeline_id", _noting_reads))
    return patches


class _Reading(threading.local):
    """Per thread: whether a dataset function runs now, and whether it read its input
    context's ``input_pipeline_id`` (the one thing a function that selects its own
    share per pipeline must read)."""

    active = False
    read = False


_READING = _Reading()


def _noting_reads(original: property) -> property:
    getter = original.fget
    assert getter is not None

    def input_pipeline_id(self):
        if _READING.active:
            _READING.read = True
        return getter(self)

    return property(mark_wrapped(input_pipeline_id, getter), doc=original.__doc__)


def _seeing_datasets(
    dataset_fn: Any,
    name: str,
    strategy: Any,
    on_distributed: Callable[[str, Any, Any, bool], None],
) -> Any:
    """``dataset_fn`` that also reports each dataset it returns, and whether it read
    its input context's pipeline id; the program's own function where it is not
    callable (TF then raises its own error)."""
    if not callable(dataset_fn):
        return dataset_fn

    def seen(*args, **kwargs):
        outer = (_READING.active, _READING.read)
        _READING.active, _READING.read = True, False
        try:
            dataset = dataset_fn(*args, **kwargs)
            read = _READING.read
        finally:
            _READING.active, _READING.read = outer
        try:
            on_distributed(name, strategy, dataset, read)
        except Exception:  # noqa: BLE001 - never into the program
            pass
        return dataset

    try:
        return functools.wraps(dataset_fn)(seen)
    except (AttributeError, TypeError):
        return seen


def describe(strategy: Any) -> dict[str, Any]:
    """What one strategy is: its class, replicas and devices, how it all-reduces, and its
    cluster (for multi-worker strategies)."""
    extended = strategy.extended
    described: dict[str, Any] = {
        "strategy": PUBLIC_NAMES.get(type(strategy).__name__, type(strategy).__name__),
        "replicas": int(strategy.num_replicas_in_sync),
        "devices": tuple(str(d) for d in getattr(extended, "worker_devices", ()) or ()),
        "cross_device": None,
        "communication": None,
    }
    cross = getattr(extended, "_cross_device_ops", None) or getattr(
        extended, "_inferred_cross_device_ops", None
    )
    described["cross_device_why"] = None
    if cross is not None:
        described["cross_device_why"] = _why(strategy, extended, cross)
        described["cross_device"] = type(cross).__name__
        algorithm = getattr(cross, "_all_reduce_alg", None) or getattr(cross, "reduction_alg", None)
        if isinstance(algorithm, str):
            described["cross_device"] += f" ({algorithm})"
    options = getattr(extended, "_communication_options", None)
    implementation = getattr(options, "implementation", None)
    if implementation is not None:
        described["communication"] = getattr(implementation, "name", str(implementation))
    resolver = (
        getattr(extended, "_cluster_resolver", None)
        or getattr(strategy, "cluster_resolver", None)
        or getattr(strategy, "_cluster_resolver", None)  # ParameterServerStrategy keeps it here
    )
    described.update(_cluster(resolver))
    return described


def _why(strategy: Any, extended: Any, cross: Any) -> str:
    """Who chose the cross-device ops: the program, or TF (and on what grounds)."""
    name = type(strategy).__name__
    if name.startswith("MirroredStrategy"):
        if cross is getattr(extended, "_collective_ops", None):
            return "TF's default for MirroredStrategy (collective ops: NCCL on GPUs where built in)"
        if getattr(extended, "_cross_device_ops", None) is cross:
            return "given to the strategy (cross_device_ops=...)"
        return "inferred by TF from the devices (no NCCL kernel or non-GPU devices: a fallback)"
    if name.startswith("CollectiveAllReduceStrategy"):
        return "MultiWorkerMirroredStrategy's collective ops (implementation per its options)"
    return f"{PUBLIC_NAMES.get(name, name)}'s own"


def _cluster(resolver: Any) -> dict[str, Any]:
    """Task type, index and the count of workers (and parameter servers)."""
    task_type = getattr(resolver, "task_type", None)
    task_id = getattr(resolver, "task_id", None)
    try:
        spec = resolver.cluster_spec().as_dict() if resolver is not None else {}
    except Exception:  # noqa: BLE001 - an unreachable resolver (Slurm outside a job)
        spec = {}
    if not spec:
        try:
            spec = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster") or {}
        except ValueError:
            spec = {}
    workers = [*_addresses(spec.get("chief")), *_addresses(spec.get("worker"))]
    return {
        "task_type": task_type,
        "task_index": int(task_id) if isinstance(task_id, int) else None,
        "workers": len(workers),
        "parameter_servers": len(_addresses(spec.get("ps"))),
        "hosts": tuple(workers),
    }


def _addresses(job: Any) -> list[str]:
    """A cluster spec job's task addresses (a list, or a dict by task index)."""
    if isinstance(job, dict):
        return [str(v) for v in job.values()]
    return [str(v) for v in job or ()]


def auto_shard_policy(dataset: Any) -> str | None:
    """The auto-shard policy the dataset's options ask for (TF applies it when it
    distributes the dataset across workers)."""
    try:
        policy = dataset.options().experimental_distribute.auto_shard_policy
    except Exception:  # noqa: BLE001
        return None
    return AUTO_SHARD.get(int(policy), str(policy))


KERAS_DEFAULT_BATCH = 32  # Model.fit(x, y) with arrays and no batch_size


def keras_fit_batch(limit: int = 64) -> tuple[int | None, str | None, int | None]:
    """Inside Keras' ``Model.fit`` given arrays (Keras makes and distributes the dataset
    itself, batching by ``batch_size``): (that batch size, the user's file and line of
    the fit call); Nones elsewhere, or where fit was given a dataset (its own batch
    counts). Reads fit's arguments off the stack."""
    import sys
    from types import FrameType

    frame: FrameType | None = sys._getframe(1)
    for _ in range(limit):
        if frame is None:
            break
        code = frame.f_code
        if (
            code.co_name == "fit"
            and is_library_file(code.co_filename)
            and (
                f"{os.sep}keras{os.sep}" in code.co_filename
                or f"{os.sep}tf_keras{os.sep}" in code.co_filename
            )
        ):
            given = frame_values(frame, ("x", "batch_size"))
            x = given.get("x")
            if x is None or "Dataset" in type(x).__name__ or hasattr(x, "element_spec"):
                return None, None, None
            size = given.get("batch_size")
            caller = frame.f_back
            while caller is not None and is_library_file(caller.f_code.co_filename):
                caller = caller.f_back
            if caller is None:
                return None, None, None
            batch = int(size) if isinstance(size, int) else KERAS_DEFAULT_BATCH
            return batch, caller.f_code.co_filename, caller.f_lineno
        frame = frame.f_back
    return None, None, None


def is_default(strategy: Any) -> bool:
    """TF's default strategy (no ``tf.distribute`` in the program) or a one-device one."""
    return type(strategy).__name__.startswith("_Default")


def batch_of(dataset: Any) -> tuple[int | None, str | None, int | None]:
    """(batch size, file, line) of the last batch a dataset's chain applies: the global
    batch each step of a distributed loop takes; Nones where there is none."""

    seen = 0
    while dataset is not None and seen < 64:
        size = getattr(dataset, "_batch_size", None)
        if size is not None and "Batch" in type(dataset).__name__:
            value = int_value(size)
            origin = getattr(dataset, ORIGIN_ATTR, None)
            filename, line = (origin[0], origin[1]) if isinstance(origin, tuple) else (None, None)
            return value, filename, line
        dataset = getattr(dataset, "_input_dataset", None)
        seen += 1
    return None, None, None


def install_ps_variables(on_variable: Callable[[list[tuple[int, int]]], None]) -> list[Patch]:
    """``on_variable([(ps task, bytes), ...])`` for each variable ParameterServerStrategy
    creates (a partitioned one: one pair per shard), where it places it."""
    from tensorflow.python.distribute import parameter_server_strategy_v2 as pss

    def make(original):
        @functools.wraps(original)
        def create(self, next_creator, **kwargs):
            variable = original(self, next_creator, **kwargs)
            try:
                on_variable(ps_placement(variable))
            except Exception:  # noqa: BLE001 - never into the program
                pass
            return variable

        return create

    return [Patch(pss.ParameterServerStrategyV2Extended, "_create_variable", make)]


def ps_placement(variable: Any) -> list[tuple[int, int]]:
    """(parameter-server task, bytes) of a variable or of each of its shards."""
    import re

    placed = []
    for part in getattr(variable, "variables", None) or [variable]:
        found = re.search(r"/job:ps/(?:replica:\d+/)?task:(\d+)", str(getattr(part, "device", "")))
        if found is None:
            continue
        count = 1
        for dim in part.shape.as_list():
            count *= dim or 0
        placed.append((int(found.group(1)), count * part.dtype.size))
    return placed


class _Fetching(threading.local):
    """Per thread, during a timed read of a distributed iterator: the seconds spent
    fetching this worker's own elements (its per-worker iterators)."""

    active = False
    own = 0.0
    fetched = False


_FETCHING = _Fetching()


def install_iterator_timing(
    emit: Callable[[tuple[int, object, float, float, bool]], None],
) -> list[Patch]:
    """``emit((iterator id, the user's file:line, start, start + own wait, exhausted))``
    for each read of a distributed iterator from the user's Python loop: ``for x in
    dist_ds``, ``next(it)``, ``it.get_next()``, ``it.get_next_as_optional()``
    (``input_lib.DistributedIteratorBase``).

    The own wait is the time in this worker's own fetches (each
    ``_SingleWorkerDatasetIteratorBase`` read: its pipeline's batches for its replicas),
    not the whole call: for a finite dataset across workers the call also all-reduces
    whether every worker still has data (``_calculate_replicas_with_values``), which
    waits for the slowest worker's input, so every worker's ``next()`` lasts as long as
    the straggler's. Reads inside a tf.function (the step reading its iterator, Keras
    fit) build graph ops instead and are not timed; reads TF makes inside its own
    methods count once, at the user's."""
    import sys
    import time

    from tensorflow.python.distribute import input_lib
    from tensorflow.python.eager import context

    sites: dict[int, object] = {}

    def make(original):
        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if not context.executing_eagerly() or is_library_file(caller) or _FETCHING.active:
                return original(self, *args, **kwargs)  # in a graph, or TF's (Keras') own
            _FETCHING.active, _FETCHING.own, _FETCHING.fetched = True, 0.0, False
            start = time.perf_counter()
            exhausted = False
            try:
                return original(self, *args, **kwargs)
            except StopIteration:
                exhausted = True
                raise
            finally:
                end = time.perf_counter()
                own = _FETCHING.own if _FETCHING.fetched else end - start
                _FETCHING.active = False
                key = id(self)
                site = sites.get(key)
                if site is None:  # once per iterator: the loop that reads it
                    site = sites[key] = user_location(skip=2) or "?"
                try:
                    emit((key, site, start, start + own, exhausted))
                except Exception:  # noqa: BLE001 - never break the user's loop
                    pass
                if exhausted:
                    sites.pop(key, None)

        return mark_wrapped(read, original)

    def make_fetch(original):
        def fetch(self, *args, **kwargs):
            if not _FETCHING.active:
                return original(self, *args, **kwargs)
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                _FETCHING.own += time.perf_counter() - start
                _FETCHING.fetched = True

        return mark_wrapped(fetch, original)

    base = input_lib.DistributedIteratorBase
    worker = input_lib._SingleWorkerDatasetIteratorBase
    return [
        *(Patch(base, name, make) for name in ("__next__", "get_next", "get_next_as_optional")),
        *(
            Patch(worker, name, make_fetch)
            for name in ("get_next", "get_next_as_list", "get_next_as_optional_list")
        ),
    ]
