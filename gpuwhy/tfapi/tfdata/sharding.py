"""What TF's auto-shard rewrite will do to a dataset a multi-worker strategy distributes.

``tf.distribute`` wraps every distributed dataset in an ``AutoShardDataset``; when the
iterator is made, grappler's ``tf_auto_shard`` (core/grappler/optimizers/data/
auto_shard.cc) rewrites the pipeline's graph for each worker: FILE inserts a
``shard(num_workers, index)`` before the reader so that each worker reads its own files;
DATA inserts it at the end, so that every worker reads and preprocesses every element
and keeps 1/N; AUTO tries FILE and falls back to DATA when the
walk from the sink finds no reader; OFF does nothing. This module runs the same walk
over the same serialized graph (``dataset._as_serialized_graph()``), without making an
iterator (which would read the user's files), so the plan is known before the first
step and on any machine. The op lists are auto_shard.cc's; a TF that changes them is
one edit here.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

READER_OPS = (
    "ArrayRecordDataset",
    "FixedLengthRecordDataset",
    "RecordIODataset",
    "SSTableDataset",
    "TextLineDataset",
    "TFRecordDataset",
)
MULTIPLE_INPUT_OPS = ("ConcatenateDataset", "ZipDataset")
PASS_THROUGH_OPS = (
    "_Retval",
    "AssertNextDataset",
    "BatchDataset",
    "CacheDataset",
    "ExperimentalMapAndBatchDataset",
    "ExperimentalParseExampleDataset",
    "ExperimentalRebatchDataset",
    "FilterDataset",
    "FinalizeDataset",
    "Identity",
    "MapAndBatchDataset",
    "MapDataset",
    "MaxIntraOpParallelismDataset",
    "ModelDataset",
    "OptimizeDataset",
    "OptionsDataset",
    "PaddedBatchDataset",
    "ParallelBatchDataset",
    "ParallelMapDataset",
    "ParseExampleDataset",
    "PrefetchDataset",
    "PrivateThreadPoolDataset",
    "ReduceDataset",
    "RebatchDataset",
    "RepeatDataset",
    "ShardDataset",
    "ShuffleAndRepeatDataset",
    "ShuffleDataset",
    "SkipDataset",
    "TakeDataset",
    "WindowDataset",
)
FUNCTION_OPS = (
    "ExperimentalParallelInterleaveDataset",
    "FlatMapDataset",
    "InterleaveDataset",
    "LegacyParallelInterleaveDataset",
    "ParallelInterleaveDataset",
)
UNSHARDABLE_SOURCE_OPS = (
    "GeneratorDataset",
    "RangeDataset",
    "SparseTensorsSliceDataset",
    "TensorDataset",
    "TensorSliceDataset",
)
# transformations whose work every worker repeats on every element under DATA sharding
# (by the op TF runs; sources that read or generate count too): the collector picks
# them out of the chain as written
WORK_OPS = (
    "MapDataset",
    "ParallelMapDataset",
    "MapAndBatchDataset",
    "FilterDataset",
    "ParseExampleDataset",
    "GeneratorDataset",
    *FUNCTION_OPS,
    *READER_OPS,
)
# what a pipeline reads (for comparing workers): its sources, and the ops that keep a
# part of what flows through them (a per-pipeline selection when their arguments or
# predicate differ between workers)
SOURCE_OPS = (*READER_OPS, *UNSHARDABLE_SOURCE_OPS)
SELECTION_OPS = ("ShardDataset", "FilterDataset", "SkipDataset", "TakeDataset")
# a source whose elements no graph shows (a Python generator), or a selection made in
# Python: two workers' graphs may be alike while they read different data
OPAQUE_OPS = ("GeneratorDataset", "PyFunc", "PyFuncStateless", "EagerPyFunc")
MAX_FILES = 64  # file names kept per pipeline
_VERSION = re.compile(r"V\d+$")
MAX_DEPTH = 256


def matches(op: str, names: tuple[str, ...]) -> bool:
    """TF's MatchesAnyVersion: ``BatchDatasetV2`` is a ``BatchDataset``."""
    for name in names:
        if op == name or (op.startswith(name) and _VERSION.fullmatch(op[len(name) :])):
            return True
    return False


@dataclass(frozen=True)
class ShardPlan:
    """The policy TF will apply, and what it means for each worker."""

    applied: str  # FILE, DATA, OFF or HINT
    reason: str | None = None  # why AUTO fell back to DATA, in TF's words
    error: str | None = None  # FILE asked for and impossible: TF stops with this
    files: int | None = None  # FILE: the files divided among the workers (None: unknown)
    sharded_in_code: bool = False  # the pipeline already has a shard() of its own


@dataclass(frozen=True)
class Reads:
    """What one worker's pipeline reads, told without reading it: a digest of its
    sources' constant arguments (file names, in-memory slices, ranges) and of every
    selection (shard, filter, skip, take: their arguments and predicates) anywhere in
    its graph, functions included. Two workers with one digest read the same data; a
    digest differs where a worker reads other sources or keeps another part. None
    where the graph cannot tell (a generator, a Python predicate)."""

    digest: str | None
    files: tuple[str, ...] = ()  # file names its sources name (the first MAX_FILES;
    # none where nothing reads files: in-memory strings are data, not files)
    shards: bool = False  # a shard() anywhere: the chain, an interleave's function


class _NotFound(Exception):
    """auto_shard.cc's errors::NotFound: no file to shard by."""


class _Graph:
    def __init__(self, graph_def: Any) -> None:
        self.nodes = {n.name: n for n in graph_def.node}
        self.functions = {f.signature.name: f for f in graph_def.library.function}

    def input(self, node: Any, index: int = 0) -> Any:
        inputs = [i for i in node.input if not i.startswith("^")]
        if index >= len(inputs):
            return None
        return self.nodes.get(inputs[index].split(":")[0])

    def reader_in_function(self, node: Any, depth: int = 0) -> bool:
        """ReaderOpInFunction: the node's function makes a reader (nested flat_maps too)."""
        if "f" not in node.attr or depth > 8:
            return False
        function = self.functions.get(node.attr["f"].func.name)
        if function is None:
            return False
        for inner in function.node_def:
            if matches(inner.op, READER_OPS) and len(inner.input) > 0:
                return True
            if matches(inner.op, FUNCTION_OPS) and self.reader_in_function(inner, depth + 1):
                return True
        return False

    def files(self, node: Any) -> int | None:
        """Elements of the file-name dataset FILE sharding divides: a TensorSliceDataset
        over a constant list, through shuffles and other pass-through ops."""
        for _ in range(MAX_DEPTH):
            if node is None:
                return None
            if matches(node.op, ("TensorSliceDataset",)):
                const = self.input(node)
                if const is None or const.op != "Const":
                    return None
                dims = const.attr["value"].tensor.tensor_shape.dim
                return int(dims[0].size) if dims else None
            if not matches(node.op, PASS_THROUGH_OPS):
                return None
            node = self.input(node)
        return None

    def shard_by_file(self, node: Any, depth: int = 0) -> list[Any]:
        """RecursivelyHandleOp: the nodes whose input 0 FILE sharding divides."""
        if node is None or depth > MAX_DEPTH:
            raise _NotFound("Did not find a shardable source")
        op = node.op
        if op == "AssertCardinalityDataset":
            return self.shard_by_file(self.input(node), depth + 1)
        if matches(op, UNSHARDABLE_SOURCE_OPS):
            raise _NotFound(f"Found an unshardable source dataset: {_plain(op)}")
        if matches(op, MULTIPLE_INPUT_OPS):
            found: list[Any] = []
            for index in range(len(node.input)):
                source = self.input(node, index)
                if source is not None and "Dataset" in source.op:
                    found += self.shard_by_file(source, depth + 1)
            return found
        function_or_pass = matches(op, FUNCTION_OPS) or matches(op, PASS_THROUGH_OPS)
        if function_or_pass and self.reader_in_function(node):
            return [node]
        if matches(op, READER_OPS):
            return [node]
        if not function_or_pass:
            raise _NotFound(
                "Did not find a shardable source, walked to a node which is not a "
                f"dataset: {_plain(op)}"
            )
        return self.shard_by_file(self.input(node), depth + 1)

    def ops_from(self, sink: Any) -> list[str]:
        """The ops along the main input from the sink to the source."""
        ops = []
        node = sink
        for _ in range(MAX_DEPTH):
            if node is None or "Dataset" not in node.op and node.op not in ("_Retval", "Identity"):
                break
            ops.append(node.op)
            node = self.input(node)
        return ops


def reads(dataset: Any, graph_def: Any = None) -> Reads:
    """What ``dataset`` reads, from its serialized graph (nothing is read or run);
    ``graph_def``: that graph, where it was serialized already."""
    return _Reading(graph_def if graph_def is not None else serialized_graph(dataset)).reads()


class _Reading:
    """The walk behind :func:`reads`: every node of the graph and of the functions it
    calls (names left out: TF numbers functions per process)."""

    def __init__(self, graph_def: Any) -> None:
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.top = list(graph_def.node)
        self.parts: list[str] = []
        self.files: list[str] = []
        self.opaque = False
        self.shards = False
        self.readers = False
        self._digests: dict[str, str] = {}

    def reads(self) -> Reads:
        self._walk(self.top, selecting=False)
        digest = None
        if not self.opaque:
            digest = hashlib.sha1("\n".join(sorted(self.parts)).encode()).hexdigest()[:16]
        return Reads(
            digest=digest,
            files=tuple(dict.fromkeys(self.files))[:MAX_FILES] if self.readers else (),
            shards=self.shards,
        )

    def _walk(self, nodes: list[Any], selecting: bool, depth: int = 0) -> None:
        """Each source and selection among ``nodes`` as a part of the digest; the
        functions they call walked too (an interleave's reader, a filter's predicate)."""
        by_name = {n.name: n for n in nodes}
        for node in nodes:
            op = node.op
            if matches(op, OPAQUE_OPS) and (selecting or matches(op, ("GeneratorDataset",))):
                self.opaque = True
            if matches(op, ("ShardDataset",)):
                self.shards = True
            if matches(op, READER_OPS):
                self.readers = True
            source = matches(op, SOURCE_OPS)
            selection = matches(op, SELECTION_OPS)
            if source or selection:
                consts = [self._const(by_name, name) for name in node.input]
                self.parts.append(f"{_plain(op)}({','.join(c for c in consts if c)})")
                if source:
                    self.files += self._names(by_name, node)
            for key in sorted(node.attr):
                function = node.attr[key].func.name
                if function and function in self.functions and depth < 8:
                    inner = self.functions[function]
                    if matches(op, ("FilterDataset",)):
                        self.parts.append(f"{_plain(op)}:{key}={self._body(inner, depth)}")
                    self._walk(list(inner.node_def), selecting or selection, depth + 1)

    def _const(self, by_name: dict[str, Any], name: str, depth: int = 0) -> str | None:
        """The digest of what an input is computed from: its constants and the ops
        between (a glob pattern through MatchingFiles, a list through Identity); None
        for a dataset or a function argument (the element flowing through)."""
        node = by_name.get(name.split(":")[0].lstrip("^"))
        if node is None or depth > 16 or "Dataset" in node.op:
            return None
        if node.op == "Const":
            return hashlib.sha1(node.attr["value"].tensor.SerializeToString()).hexdigest()[:12]
        inner = [self._const(by_name, i, depth + 1) for i in node.input if not i.startswith("^")]
        if node.op == "Identity" and len(inner) == 1:
            return inner[0]
        return f"{node.op}[{','.join(i or '' for i in inner)}]"

    def _names(self, by_name: dict[str, Any], node: Any) -> list[str]:
        """The strings of a source's constant inputs: the files it reads."""
        names: list[str] = []
        for name in node.input:
            const = by_name.get(name.split(":")[0].lstrip("^"))
            if const is not None and const.op == "Const":
                values = _strings(const.attr["value"].tensor)
                names += [v.decode(errors="replace") for v in values[: MAX_FILES - len(names)]]
        return [n for n in names if n]

    def _body(self, function: Any, depth: int) -> str:
        """A function's digest from its ops and constants (not its name)."""
        name = function.signature.name
        if name not in self._digests:
            parts = []
            for node in function.node_def:
                value = node.attr["value"].tensor.SerializeToString() if node.op == "Const" else b""
                inner = [
                    self._body(self.functions[a.func.name], depth + 1)
                    for _, a in sorted(node.attr.items())
                    if a.func.name in self.functions and depth < 8
                ]
                parts.append(f"{node.op}:{hashlib.sha1(value).hexdigest()[:12]}:{inner}")
            self._digests[name] = hashlib.sha1("|".join(sorted(parts)).encode()).hexdigest()[:12]
        return self._digests[name]


def _strings(tensor: Any) -> list[bytes]:
    """A string tensor's values: ``string_val``, or ``tensor_content`` (the lengths as
    varints, then the bytes: how TF serializes a list of file names)."""
    if tensor.dtype != 7:  # DT_STRING
        return []
    if tensor.string_val:
        return list(tensor.string_val)
    content = bytes(tensor.tensor_content)
    count = 1
    for dim in tensor.tensor_shape.dim:
        count *= dim.size
    lengths, at = [], 0
    for _ in range(min(count, MAX_FILES)):
        length, shift = 0, 0
        while at < len(content):
            byte = content[at]
            at += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        lengths.append(length)
    if count > MAX_FILES:  # the lengths of the rest, skipped to reach the bytes
        for _ in range(count - MAX_FILES):
            while at < len(content) and content[at] >= 0x80:
                at += 1
            at += 1
    values = []
    for length in lengths:
        values.append(content[at : at + length])
        at += length
    return values


def _plain(op: str) -> str:
    return _VERSION.sub("", op)


def serialized_graph(dataset: Any) -> Any:
    """The dataset's GraphDef as tf.data serializes it for the rewrite."""
    from tensorflow.core.framework import graph_pb2

    graph_def = graph_pb2.GraphDef()
    graph_def.ParseFromString(dataset._as_serialized_graph().numpy())
    return graph_def


def plan(dataset: Any, policy: str, workers: int, graph_def: Any = None) -> ShardPlan:
    """What ``tf_auto_shard`` does to ``dataset`` (as given to the strategy) with
    ``policy`` (AUTO, FILE, DATA, OFF, HINT) across ``workers``; ``graph_def``: its
    serialized graph, where it was serialized already."""
    graph = _Graph(graph_def if graph_def is not None else serialized_graph(dataset))
    sink = next((n for n in graph.nodes.values() if n.op == "_Retval"), None)
    ops = graph.ops_from(sink)
    in_code = any(matches(op, ("ShardDataset",)) for op in ops)
    if policy in ("OFF", "HINT") or workers < 2:
        return ShardPlan(applied=policy, sharded_in_code=in_code)
    if policy == "DATA":
        return ShardPlan(applied="DATA", sharded_in_code=in_code)
    try:
        found = graph.shard_by_file(sink)
    except _NotFound as e:
        if policy == "FILE":  # TF raises the same error when the iterator is made
            return ShardPlan(applied="FILE", error=str(e), sharded_in_code=in_code)
        return ShardPlan(applied="DATA", reason=str(e), sharded_in_code=in_code)
    counts = [graph.files(graph.input(node)) for node in found]
    files = None if not counts or None in counts else min(c for c in counts if c is not None)
    return ShardPlan(applied="FILE", files=files, sharded_in_code=in_code)
