"""A tf.data pipeline as TF runs it: the iterators a program creates, and their model.

Every eager iterator over a dataset is an ``OwnedIterator``
(``tensorflow/python/data/ops/iterator_ops.py``): ``for x in dataset``, ``iter()``,
``as_numpy_iterator()``, and Keras 3's ``fit``/``evaluate``/``predict``, whose
``EpochIterator._enumerate_iterator`` (``keras/src/trainers/epoch_iterator.py``) calls
``iter()`` on the dataset the user passed (Keras' default strategy hands the dataset
back unchanged from ``experimental_distribute_dataset``). Each one is built by
``OwnedIterator._create_iterator(dataset)``, so wrapping that one method sees them all,
off the per-element path; ``next()`` is never touched here. An iterator created inside
a ``tf.function`` is a graph op, not an eager iterator, and is not reported.
Distributed iterators over several devices (``OwnedMultiDeviceIterator``) iterate
per-device generator datasets whose model is not the user's pipeline; they are
recognised by :func:`is_distributed_part` and left out.

With autotune on (the default), TF keeps an analytical model of every iterator's
pipeline *after* its own rewrites, and ``get_model_proto``
(``tensorflow/python/data/experimental/ops/iterator_model_ops.py``, an
``IteratorGetModelProto`` op) serialises it (``Node::ToProto`` in
``tensorflow/core/framework/model.cc``): per node the elements it produced, its
*self* processing time in nanoseconds summed over all its threads, the parallelism
and buffer parameters (``state_value`` is what the running pipeline follows,
``value`` the optimiser's latest choice), and the consumer's ``gap_times`` in
microseconds (time between two ``GetNext`` calls, the latest 100, gaps over 10 s
dropped). A node's counters are cumulative over the life of that node, which is not
always the iterator's: the nodes under a ``repeat`` are made anew for every pass (with
new ids), an interleave's per-element datasets come and go, and an input's nodes leave
the model once that input is exhausted. Reading costs a
fraction of a millisecond; with autotune off TF keeps no model and raises
``NotFoundError``, turned here into :class:`ModelUnavailable`.

``__del__`` is added to ``OwnedIterator`` (it has none in TF 2.16-2.21) while the
hooks are installed, so the model can be read one last time while the iterator still
exists: TF itself ran eager ops from an iterator finaliser until 2.4
(``IteratorResourceDeleter``). Nothing here keeps an iterator alive: tf.data's
threads prefetch for as long as one lives.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.graph_ops import is_library_file, relative
from gpuwhy.tfapi.patching import Patch
from gpuwhy.tfapi.tfdata.iterators import on_iterator_created

__all__ = [
    "AUTOTUNE_OFF",
    "ModelUnavailable",
    "RunModel",
    "RunNode",
    "consumer_label",
    "in_fit",
    "install_iterator_hooks",
    "is_distributed_part",
    "parse_model",
    "prepare",
    "read_model",
    "root_elements",
]

ROOT = "Root"
ZIP = "Zip"  # the node of a ZipDataset (zip, enumerate)
_MAX_NODES = 500  # nodes followed along the main chain
_KERAS_METHODS = {"fit": "keras-fit", "evaluate": "keras-evaluate", "predict": "keras-predict"}
_KERAS_MARKS = (f"{os.sep}keras{os.sep}", f"{os.sep}tf_keras{os.sep}")
_MAX_CONSUMER_FRAMES = 60
# decorators' inner functions: not what the user called
_WRAPPERS = frozenset({"error_handler", "wrapper", "new_func", "wrapped", "inner"})
_TF_DATA_MARK = os.path.join(f"{os.sep}tensorflow", "python", "data", "")


AUTOTUNE_OFF = (
    "autotune is off for this dataset (options.autotune.enabled=False), "
    "so TF keeps no per-stage model"
)


class ModelUnavailable(Exception):
    """TF keeps no model for this iterator: autotune is off for its dataset, it is not
    an eager ``OwnedIterator``, or the TF version has no ``get_model_proto``."""


@dataclass(frozen=True)
class RunNode:
    """One node of TF's model of a running pipeline."""

    name: str  # Map, ParallelMapV2, MapAndBatch, Prefetch, TFRecord, Root ...
    node_class: str  # KNOWN_RATIO, ASYNC_KNOWN_RATIO, INTERLEAVE_MANY ...
    num_elements: int = 0  # elements it produced
    processing_time_s: float = 0.0  # its self time, all threads together
    parallelism: int | None = None
    buffer_size: int | None = None
    buffered_elements: int = 0
    ratio: float = 1.0  # input elements per output element, as TF models it
    inner: tuple[RunNode, ...] = ()  # dynamic inputs (interleave/flat_map), side inputs, Impl
    inner_elements: int | None = None  # elements the inner inputs' top nodes produced
    id: int = 0  # TF's node id: a new id at the same place is a new instance
    bytes_produced: int = 0  # bytes of the elements it produced (TF's resource counters)

    @property
    def asynchronous(self) -> bool:
        """Runs on threads of its own, ahead of its consumer (TF's ASYNC_* classes)."""
        return self.node_class.startswith("ASYNC")

    @property
    def total_time_s(self) -> float:
        """Self time plus that of the inner nodes it runs.

        TF removes an interleave's or flat_map's inner nodes when their dataset ends
        (one reader per file), so the inner nodes present cover only the live ones:
        their time is scaled from the elements they produced to all the elements this
        node produced (a zip's side input produces as many: no scaling)."""
        inner = sum(n.processing_time_s for n in self.inner)
        if inner and self.inner_elements and self.num_elements > self.inner_elements:
            inner *= self.num_elements / self.inner_elements
        return self.processing_time_s + inner


@dataclass(frozen=True)
class RunModel:
    """The main chain of a running pipeline, source first and ``Root`` last."""

    nodes: tuple[RunNode, ...]
    gap_times_s: tuple[float, ...] = ()

    @property
    def root_elements(self) -> int:
        """Elements the consumer got."""
        return self.nodes[-1].num_elements if self.nodes else 0  # Root, the last node

    @property
    def stages(self) -> tuple[RunNode, ...]:
        """The nodes without ``Root`` (a bookkeeping node of the iterator itself)."""
        return tuple(n for n in self.nodes if n.name != ROOT)


# -- reading the model ---------------------------------------------------------------


def prepare() -> None:
    """Import what :func:`read_model` needs, so that the first read is not slowed
    down by imports."""
    import importlib

    for module in (
        "tensorflow.core.framework.model_pb2",
        "tensorflow.python.data.experimental.ops.iterator_model_ops",
    ):
        try:
            importlib.import_module(module)
        except ImportError:  # read_model will say so, pipeline by pipeline
            pass


def read_model(iterator: Any, branches: tuple[int, ...] = ()) -> RunModel:
    """TF's model of ``iterator``'s pipeline now, its chain through each zip along the
    input ``branches`` names (see :func:`parse_model`). Raises :class:`ModelUnavailable`."""
    try:
        from tensorflow.python.data.experimental.ops import iterator_model_ops
        from tensorflow.python.framework import errors
    except ImportError as error:  # a TF without get_model_proto (before 2.16)
        raise ModelUnavailable(f"this TensorFlow has no get_model_proto: {error}") from error
    try:
        proto = iterator_model_ops.get_model_proto(iterator)
    except errors.NotFoundError as error:
        raise ModelUnavailable(AUTOTUNE_OFF) from error
    except (ValueError, TypeError) as error:
        raise ModelUnavailable(str(error)) from error
    return parse_model(proto, branches)


def root_elements(iterator: Any) -> int:
    """The elements ``iterator`` gave its reader so far: its model's output node
    (``Root``, which counts each ``GetNext`` that returned an element). Exact, whoever
    read them and whether gpuwhy timed the reads or not; a fraction of a millisecond.
    Raises :class:`ModelUnavailable` as :func:`read_model` does."""
    try:
        from tensorflow.python.data.experimental.ops import iterator_model_ops
        from tensorflow.python.framework import errors
    except ImportError as error:
        raise ModelUnavailable(f"this TensorFlow has no get_model_proto: {error}") from error
    try:
        proto = iterator_model_ops.get_model_proto(iterator)
    except errors.NotFoundError as error:
        raise ModelUnavailable("autotune is off for this dataset") from error
    except (ValueError, TypeError) as error:
        raise ModelUnavailable(str(error)) from error
    if proto.output not in proto.nodes:
        raise ModelUnavailable("the model has no output node yet")
    return int(proto.nodes[proto.output].num_elements)


def _class_name(value: int) -> str:
    from tensorflow.core.framework import model_pb2

    try:
        return model_pb2.NodeClass.Name(value)
    except ValueError:
        return "UNKNOWN"


def _parameters(node: Any) -> dict[str, float]:
    values = {}
    for parameter in node.parameters:
        # state_value is what the running pipeline follows; a parameter without a
        # shared state (cycle_length of a non-tunable interleave) has only a value.
        values[parameter.name] = (
            parameter.state_value if parameter.state_value > 0 else parameter.value
        )
    return values


def _all_inner(name: str) -> bool:
    # The legacy parallel interleave (TFRecordDataset(num_parallel_reads=...)) does not
    # model its input: all its inputs are the per-file readers.
    return name.startswith("LegacyParallelInterleave")


def _node(
    proto_node: Any, inner: tuple[RunNode, ...] = (), inner_elements: int | None = None
) -> RunNode:
    params = _parameters(proto_node)
    parallelism = params.get("parallelism")
    if parallelism is None and _all_inner(proto_node.name):
        parallelism = params.get("cycle_length")
    buffer = params.get("buffer_size", params.get("max_buffered_elements"))
    return RunNode(
        name=proto_node.name,
        node_class=_class_name(proto_node.node_class),
        num_elements=int(proto_node.num_elements),
        processing_time_s=proto_node.processing_time / 1e9,
        parallelism=None if parallelism is None else max(1, int(round(parallelism))),
        buffer_size=None if buffer is None else int(round(buffer)),
        buffered_elements=int(proto_node.buffered_elements),
        ratio=float(proto_node.ratio),
        inner=inner,
        inner_elements=inner_elements,
        id=int(proto_node.id),
        bytes_produced=int(getattr(proto_node, "bytes_produced", 0) or 0),
    )


def _aggregate(nodes: dict, roots: list[int], singles: tuple[int, ...] = ()) -> tuple[RunNode, ...]:
    """The ``singles`` and every node in the subtrees under ``roots``, summed by name
    (an interleave makes one reader per file; what matters is what they cost together)."""
    by_name: dict[str, list] = {}
    order = [(i, False) for i in singles] + [(i, True) for i in roots]
    stack = list(reversed(order))
    seen = 0
    while stack and seen < _MAX_NODES:
        key, recurse = stack.pop()
        node = nodes.get(key)
        if node is None:
            continue
        seen += 1
        single = _node(node)
        entry = by_name.get(single.name)
        if entry is None:
            by_name[single.name] = [
                single.node_class,
                single.num_elements,
                single.processing_time_s,
                single.parallelism,
                single.buffer_size,
                single.buffered_elements,
                single.ratio,
            ]
        else:
            entry[1] += single.num_elements
            entry[2] += single.processing_time_s
            if single.parallelism is not None:
                entry[3] = max(entry[3] or 0, single.parallelism)
            entry[5] += single.buffered_elements
        if recurse:
            stack.extend((i, True) for i in reversed(list(node.inputs)))
    return tuple(
        RunNode(name, c, e, t, p, b, be, r) for name, (c, e, t, p, b, be, r) in by_name.items()
    )


def parse_model(proto: Any, branches: tuple[int, ...] = ()) -> RunModel:
    """A ``ModelProto`` as plain data: the chain from ``output`` along ``inputs[0]``,
    except at a ``Zip``, where it follows the input ``branches`` names (one index per
    zip, from the output down: the user's pipeline rather than the counter
    ``ds.enumerate()`` zips in front of it; gpuwhy.tfapi.tfdata.dataset_chain.zip_branches);
    the other inputs of a node (interleave/flat_map's per-element datasets, zip's
    other datasets) become its ``inner`` nodes, summed by name, and a ``*Impl`` node on
    the chain (``MemoryCacheImpl`` under ``MemoryCache``) joins its parent's."""
    nodes = dict(proto.nodes)
    chain: list[RunNode] = []
    current = nodes.get(proto.output)
    pending: list | None = None  # [chain node, side input ids, folded Impl ids]
    zips = iter(branches)

    def close(entry: list) -> None:
        side = entry[1]
        produced = sum(int(nodes[i].num_elements) for i in side if i in nodes) if side else None
        chain.append(_node(entry[0], _aggregate(nodes, side, tuple(entry[2])), produced))

    for _ in range(_MAX_NODES):
        if current is None:
            break
        inputs = list(current.inputs)
        if _all_inner(current.name):
            main, side = None, inputs
        else:
            chosen = next(zips, 0) if current.name == ZIP else 0
            chosen = chosen if chosen < len(inputs) else 0
            main = inputs[chosen] if inputs else None
            side = inputs[:chosen] + inputs[chosen + 1 :]
        if current.name.endswith("Impl") and pending is not None:
            pending[1].extend(side)
            pending[2].append(current.id)
        else:
            if pending is not None:
                close(pending)
            pending = [current, list(side), []]
        current = nodes.get(main) if main is not None else None
    if pending is not None:
        close(pending)
    chain.reverse()
    gaps = tuple(g / 1e6 for g in proto.gap_times)
    return RunModel(nodes=tuple(chain), gap_times_s=gaps)


# -- iterators -----------------------------------------------------------------------


def is_distributed_part(dataset: Any) -> bool:
    """A per-device dataset of a multi-device distributed iterator
    (``multi_device_iterator_ops._ReincarnatedPerDeviceGenerator``, under the options
    ``tf.distribute`` puts on it)."""
    for _ in range(4):
        if dataset is None:
            return False
        if type(dataset).__module__.endswith("multi_device_iterator_ops"):
            return True
        dataset = getattr(dataset, "_input_dataset", None) or getattr(dataset, "_dataset", None)
    return False


def install_iterator_hooks(
    on_iterator: Callable[[Any, Any], None], on_iterator_end: Callable[[Any], None] | None = None
) -> list[Patch]:
    """Call ``on_iterator(iterator, dataset)`` after each eager ``OwnedIterator`` is
    built (the creating stack still there for :func:`consumer_label`), and
    ``on_iterator_end(iterator)`` when one is about to be freed; listeners on the one
    creation hook of iterators.py. Undo the returned patches to stop listening."""

    return [on_iterator_created(after=on_iterator, end=on_iterator_end)]


def in_fit(frame: Any = None) -> bool:
    """Whether Keras' ``fit`` is on the stack now: an iterator ``evaluate`` makes there
    reads fit's ``validation_data`` (Keras 3's fit calls ``self.evaluate``)."""
    frame = frame if frame is not None else sys._getframe(1)
    for _ in range(_MAX_CONSUMER_FRAMES * 2):
        if frame is None:
            return False
        code = frame.f_code
        if code.co_name == "fit" and any(m in code.co_filename for m in _KERAS_MARKS):
            return True
        frame = frame.f_back
    return False


def reader(frame: Any = None) -> tuple[str | None, str | None]:
    """Where the user's code created an iterator now: (its ``file:line``, the library
    function it called that iterates, such as ``PreprocessingLayer.adapt``, or None
    where the user's own code iterates: a ``for`` loop, ``next(iter(ds))``)."""
    frame = frame if frame is not None else sys._getframe(1)
    via = None
    for _ in range(_MAX_CONSUMER_FRAMES):
        if frame is None:
            return None, None
        code = frame.f_code
        if not is_library_file(code.co_filename):
            return relative(code.co_filename, frame.f_lineno), via
        if (
            _TF_DATA_MARK not in code.co_filename
            and not code.co_name.startswith("_")
            and code.co_name not in _WRAPPERS
        ):
            via = getattr(code, "co_qualname", code.co_name)
        frame = frame.f_back
    return None, None


def consumer_label(frame: Any = None) -> str:
    """Who creates an iterator now: ``keras-fit``/``keras-evaluate``/``keras-predict``
    when Keras' ``fit``/``evaluate``/``predict`` creates it (the innermost one wins:
    validation inside ``fit`` runs ``evaluate``), else ``python-loop``, including a loop
    the user's own code (a callback) runs inside ``fit``."""

    frame = frame if frame is not None else sys._getframe(1)
    probe = frame
    for _ in range(_MAX_CONSUMER_FRAMES):  # judge from tf.data's frames up, not the listener's
        if probe is None:
            break
        if _TF_DATA_MARK in probe.f_code.co_filename:
            frame = probe
            break
        probe = probe.f_back
    for _ in range(_MAX_CONSUMER_FRAMES):
        if frame is None:
            break
        code = frame.f_code
        filename = code.co_filename
        if any(mark in filename for mark in _KERAS_MARKS):
            label = _KERAS_METHODS.get(code.co_name)
            if label is not None:
                return label
        elif not is_library_file(filename):
            return "python-loop"  # the user's code asked for it
        frame = frame.f_back
    return "python-loop"
