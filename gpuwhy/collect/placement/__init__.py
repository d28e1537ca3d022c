"""Placement audit: where each op of a traced function runs on a GPU machine, and why.

collect -> facts: :func:`audit_functions` flattens each concrete function with
its nested bodies (``graph``), replays TensorFlow's placer with the GPU
kernel registry (``placer``), finds the host<->device copies (``copies``) and
reads the matmuls and convolutions (``tensor_ops``). The result is a
:class:`~gpuwhy.facts.PlacementFacts`; deciding what is a problem is left to
the rules in ``gpuwhy/rules/placement`` and ``gpuwhy/rules/tensorcore``.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuwhy.collect.placement.copies import Crossing, crossings
from gpuwhy.collect.placement.graph import FlatGraph, flatten
from gpuwhy.collect.placement.index_inputs import float_indices, named
from gpuwhy.collect.placement.kernels import kernel_work
from gpuwhy.collect.placement.names import DT_STRING, DT_VARIANT, dtype_name, qualified
from gpuwhy.collect.placement.placer import PlacedGraph, place
from gpuwhy.collect.placement.tensor_ops import tensor_ops
from gpuwhy.collect.placement.verify import verify_placement
from gpuwhy.facts import (
    AuditedFunction,
    FloatIndex,
    HostDeviceCopy,
    OpGroup,
    PlacementCheck,
    PlacementFacts,
    TensorOp,
    is_input_boundary,
)
from gpuwhy.source_calls import floatx_calls
from gpuwhy.tfapi import graph_ops, precision
from gpuwhy.tfapi.kernel_registry import KernelRegistry

__all__ = ["AuditTarget", "AuditedGraph", "audit_functions"]

MAX_EXAMPLES = 5
# placement reasons whose groups say whether a library made them (OpGroup.by_library)
_LIBRARY_CHECKED = frozenset({"forced-cpu", "no-gpu-kernel", "no-gpu-kernel-for-dtype"})
DT_DOUBLE = 2
MAX_COPIES = 500  # the largest ones are kept; counts stay exact in the functions' totals


@dataclass
class AuditTarget:
    """One traced function to audit, with what only the caller knows about it."""

    label: str
    function: Any  # a ConcreteFunction
    location: str | None = None  # where the Python function is defined
    example_args: tuple | None = None  # for --verify: arguments to run it with
    example_kwargs: dict | None = None
    note: str | None = None  # what the audit could not know (e.g. Keras' XLA default on a GPU)
    # tf.functions run inside it that a GPU machine compiles with XLA, though this trace
    # does not (Keras' per-batch step under jit_compile="auto", traced without a GPU)
    xla_bodies: tuple[str, ...] = ()
    model: Any = None  # the Keras model whose train/test/predict step this is


class AuditedGraph:
    """One function's placement, kept for ``--verify`` and the verbose tables."""

    def __init__(
        self, target: AuditTarget, placed: PlacedGraph, copies: list[Crossing], jit: bool
    ) -> None:
        self.target = target
        self.jit = jit
        self.label = target.label
        self.function = target.function
        self.placed = placed
        self.copies = copies


def audit_functions(
    targets: Iterable[AuditTarget],
    *,
    verify: bool = False,
    registry: KernelRegistry | None = None,
    batch: int | None = None,
    ignored_devices: frozenset[str] = frozenset(),
) -> tuple[PlacementFacts, list[AuditedGraph]]:
    """Audit traced functions for a one-GPU machine (or ``registry``'s device).
    ``batch``: the batch size the run delivered, for FLOPs a trace left unknown.
    ``ignored_devices``: device requests that are not the program's to keep (a strategy
    made over this machine's CPUs places its replicas there; on a GPU machine it would
    pick the GPUs)."""
    started = time.perf_counter()
    registry = registry or KernelRegistry()
    audited: list[AuditedGraph] = []
    # The walk allocates a few objects per node and frees none of them until the end:
    # the cyclic collector would rescan them all repeatedly (half the time on ResNet50).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for target in targets:
            jit = precision.jit_compile(target.function) or target.label in target.xla_bodies
            flat = flatten(
                target.label, target.function.graph, jit, ignored_devices, target.xla_bodies
            )
            placed = place(flat, registry)
            audited.append(AuditedGraph(target, placed, crossings(placed), jit))
    finally:
        if collecting:
            gc.enable()
    gpu = precision.local_gpu()
    ops = [_traced_ops(a, batch) for a in audited]
    facts = PlacementFacts(
        predicted=True,
        functions=tuple(
            _function_summary(a, batch, trains=_trains(found)) for a, found in zip(audited, ops)
        ),
        groups=_groups(audited),
        copies=_copies(audited, batch),
        tensor_ops=tuple(op for found in ops for op in found),
        tf32_enabled=precision.tf32_enabled(),
        mixed_precision_policy=precision.keras_policy(),
        compute_capability=gpu[1] if gpu else None,
        gpu_name=gpu[0] if gpu else None,
        verification=None,
        seconds=None,
        float_indices=_float_indices(audited),
    )
    facts = _with_floatx(facts, precision.keras_floatx())
    if verify:
        checks = [verify_placement(a, registry.device_type) for a in audited]
        check = _merge_checks(checks)
        # Seen, not predicted, once TF's own placement was compared node by node.
        facts = _replace(
            facts, verification=check, predicted=not (check.ran and registry.device_type == "GPU")
        )
    return _replace(facts, seconds=round(time.perf_counter() - started, 4)), audited


def _float_indices(audited: list[AuditedGraph]) -> tuple[FloatIndex, ...]:
    """Float inputs used as ids by any audited function, with the program's Input named
    from the script's source (``sys.argv[0]``: the user's script under ``gpuwhy run``)."""
    import sys

    found: dict[str, FloatIndex] = {}
    for a in audited:
        for index in float_indices(a.placed.flat):
            found.setdefault(index.layer or index.node, index)
    files = [f.rpartition(":")[0] for f in (i.location for i in found.values()) if f]
    if sys.argv and sys.argv[0].endswith(".py"):
        files.insert(0, sys.argv[0])
    return tuple(named(list(found.values()), files))


def _with_floatx(facts: PlacementFacts, floatx: str | None) -> PlacementFacts:
    """``facts`` with Keras' float type and, where it is float64, the program's
    ``set_floatx`` call that made it so: the line that made every layer's float64 ops,
    which the ops themselves place at the call that built the layers (``fit``). Read
    from the script (``sys.argv[0]``) and the files the float64 ops came from."""
    import os
    import sys

    if floatx != "float64":
        return _replace(facts, keras_floatx=floatx)
    files = [sys.argv[0]] if sys.argv and sys.argv[0].endswith(".py") else []
    files += [
        where.rpartition(":")[0]
        for group in facts.groups
        if "float64" in group.in_dtypes + group.out_dtypes
        for where in group.locations
    ]
    for filename in dict.fromkeys(os.path.abspath(f) for f in files if f):
        for line, written in floatx_calls(filename, floatx):
            return _replace(
                facts,
                keras_floatx=floatx,
                floatx_set_at=graph_ops.relative(filename, line),
                floatx_written=written,
            )
    return _replace(facts, keras_floatx=floatx)


def _traced_ops(audited: AuditedGraph, batch: int | None) -> list[TensorOp]:
    """The graph's matmuls and convolutions, each marked with whether its trace trains
    (has a backward pass): Keras' training and validation steps share a name and a
    place, and the projection costs the training one's."""
    import dataclasses

    found = list(tensor_ops(audited.placed, audited.jit, batch, _function_label(audited.target)))
    trains = _trains(found)
    return [dataclasses.replace(op, trains=trains) for op in found]


def _trains(ops: list[TensorOp]) -> bool | None:
    """A trace with a matmul or convolution in a backward pass trains; None without any
    matmul or convolution to tell by."""
    return any(op.gradient for op in ops) if ops else None


def _function_label(target: AuditTarget) -> str:
    return f"{target.label} ({target.location})" if target.location else target.label


def _replace(facts: PlacementFacts, **changes: Any) -> PlacementFacts:
    import dataclasses

    return dataclasses.replace(facts, **changes)


def _merge_checks(checks: list[PlacementCheck]) -> PlacementCheck:
    ran = [c for c in checks if c.ran]
    if not ran:
        return checks[0] if checks else PlacementCheck(ran=False, reason="no function to run")
    return PlacementCheck(
        ran=True,
        device=ran[0].device,
        nodes_compared=sum(c.nodes_compared for c in ran),
        disagreements=tuple(d for c in ran for d in c.disagreements),
    )


def _function_summary(
    audited: AuditedGraph, batch: int | None = None, trains: bool | None = None
) -> AuditedFunction:
    placed = audited.placed
    gpu = host = cpu = 0
    for node in placed.flat.nodes:
        if node.role != "op":
            continue
        where = placed.computes_on(node.id)
        if where == "GPU":
            gpu += 1
        elif where == "host":
            host += 1
        else:
            cpu += 1
    return AuditedFunction(
        name=audited.label,
        nodes=gpu + host + cpu,
        gpu=gpu,
        host=host,
        cpu=cpu,
        # its own jit_compile, or a body it calls (Keras' compile(jit_compile=True) makes
        # the per-batch function call an XLA-compiled step)
        jit_compile=audited.jit or any(n.jit for n in placed.flat.nodes if n.role == "op"),
        location=audited.target.location,
        input_copies=sum(1 for c in audited.copies if _is_input(placed.flat, c.src, c.index)),
        step_copies=sum(1 for c in audited.copies if not _is_input(placed.flat, c.src, c.index)),
        unaudited=tuple(placed.flat.unaudited),
        note=audited.target.note,
        kernels=kernel_work(placed, batch),
        trains=trains,
    )


_PASS_THROUGH = frozenset({"Identity", "IdentityN", "Snapshot"})


def _is_input(flat: FlatGraph, node_id: int, index: int = 0) -> bool:
    """The batch entering the step: a function argument, or tf.data's iterator output,
    also through the Identity ops a loop or a cond puts after the iterator (``for x in
    dataset`` inside a function reads it in a while loop's cond)."""
    nodes = flat.nodes
    for _ in range(64):
        node = nodes[node_id]
        if node.role == "arg" or is_input_boundary(node.op):
            return True
        if node.op not in _PASS_THROUGH or not node.inputs:
            return False
        ref = node.inputs[index if node.op == "IdentityN" and index < len(node.inputs) else 0]
        if ref is None:
            return False
        node_id, index = ref
    return False


def _unique(values: Iterable[int]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for value in values:
        seen[dtype_name(value)] = None
    return tuple(seen)


def _groups(audited: list[AuditedGraph]) -> tuple[OpGroup, ...]:
    buckets: dict[tuple, dict[str, Any]] = {}
    for a in audited:
        placed = a.placed
        flat = placed.flat
        for node in flat.nodes:
            if node.role != "op":
                continue
            key = (
                node.op,
                _unique(node.in_types),
                _unique(node.out_types),
                placed.device[node.id],
                placed.computes_on(node.id),
                placed.reason[node.id],
                node.requested or None,
            )
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = {
                    "count": 0,
                    "in_loop": False,
                    "examples": [],
                    "colocated": None,
                }
            bucket["count"] += 1
            functions = bucket.setdefault("functions", {})
            label = _function_label(a.target)
            functions[label] = functions.get(label, 0) + 1
            bucket["in_loop"] = bucket["in_loop"] or node.loop_depth > 0
            if len(bucket["examples"]) < MAX_EXAMPLES:
                bucket["examples"].append((a, node.id))
            if placed.reason[node.id] in _LIBRARY_CHECKED and bucket.get("library", True):
                # whose tf.device, or whose op with no GPU kernel, this is: a library's
                # own (Keras layers, its loss-scale optimizer) or the user's
                graph = graph_ops.body_graph(flat.graphs, node.function)
                bucket["library"] = graph is not None and graph_ops.created_in_library(
                    graph, node.name
                )
            if bucket["colocated"] is None and node.id in placed.colocated_with:
                other = flat.nodes[placed.colocated_with[node.id]]
                bucket["colocated"] = f"{other.name} ({other.op})"
    groups = []
    for (op, ins, outs, dev, computes, reason, requested), bucket in buckets.items():
        locations: dict[str, None] = {}
        for a, node_id in bucket["examples"]:
            site = _site(a.placed.flat, node_id)
            if site:
                locations[site] = None
        sizes = _float64_sizes(bucket["examples"]) if "float64" in ins + outs else (None, None)
        groups.append(
            OpGroup(
                op=op,
                in_dtypes=ins,
                out_dtypes=outs,
                device=dev,
                computes_on=computes,
                reason=reason,
                count=bucket["count"],
                in_loop=bucket["in_loop"],
                examples=tuple(qualified(a.placed.flat, n) for a, n in bucket["examples"]),
                locations=tuple(locations),
                requested=requested,
                colocated_with=bucket["colocated"],
                by_library=bucket.get("library", False) is True,
                functions=tuple(bucket.get("functions", {})),
                function_counts=tuple(bucket.get("functions", {}).values()),
                float64_elements=sizes[0],
                float64_row_elements=sizes[1],
            )
        )
    groups.sort(key=lambda g: (g.computes_on == "GPU", g.computes_on == "host", -g.count, g.op))
    return tuple(groups)


def _float64_sizes(examples: list) -> tuple[int | None, int | None]:
    """The most values a float64 input or output of the example nodes holds (static
    shapes; None if one is unknown): float64 work is its size, a scalar costs nothing;
    and the same per row, each dimension not known (the batch's, in a traced step)
    counted once, so a one-hot label of ten classes holds 10 whatever the batch (None
    if a rank is unknown). One walk of the nodes for both."""
    shapes = []
    for a, node_id in examples:
        node = a.placed.flat.nodes[node_id]
        graph = graph_ops.body_graph(a.placed.flat.graphs, node.function)
        if graph is None:
            return None, None
        for kind, types in (("in", node.in_types), ("out", node.out_types)):
            for index, dtype in enumerate(types):
                if dtype != DT_DOUBLE:
                    continue
                shape = (graph_ops.input_shape if kind == "in" else graph_ops.output_shape)(
                    graph, node.name, index
                )
                if shape is None:
                    return None, None
                shapes.append(shape)
    rows = [math.prod(d for d in shape if d is not None) for shape in shapes]
    whole = [n if None not in shape else None for n, shape in zip(rows, shapes, strict=True)]
    known = None if None in whole else max((n for n in whole if n is not None), default=0)
    return known, max(rows, default=0)


def _site(flat: FlatGraph, node_id: int) -> str | None:
    node = flat.nodes[node_id]
    return graph_ops.creation_site(graph_ops.body_graph(flat.graphs, node.function), node.name)


def _copies(audited: list[AuditedGraph], batch: int | None = None) -> tuple[HostDeviceCopy, ...]:
    """Each function's copies; an input copy's unknown leading dimension is ``batch``
    (the batch size the run delivered), so the batch's bytes are known."""
    out = []
    for a in audited:
        flat = a.placed.flat
        nodes = flat.nodes
        for crossing in a.copies:
            src, dst = nodes[crossing.src], nodes[crossing.dst]
            kind = "input" if _is_input(flat, crossing.src, crossing.index) else "step"
            host_side = crossing.dst if crossing.direction == "to-host" else crossing.src
            if kind == "input":
                host_side = crossing.dst
            shape = graph_ops.output_shape(
                graph_ops.body_graph(flat.graphs, src.function), src.name, crossing.index
            )
            if kind == "input" and batch and shape and shape[0] is None:
                shape = (batch, *shape[1:])
            size = _bytes(shape, crossing.dtype)
            out.append(
                HostDeviceCopy(
                    direction=crossing.direction,
                    kind=kind,
                    src=qualified(flat, src.id),
                    src_op=src.op,
                    dst=qualified(flat, dst.id),
                    dst_op=dst.op,
                    dtype=dtype_name(crossing.dtype),
                    consumers=crossing.consumers,
                    shape=shape,
                    bytes=size,
                    in_loop=src.loop_depth > 0 or dst.loop_depth > 0,
                    location=_site(flat, host_side),
                    cause=qualified(flat, host_side),
                    cause_op=nodes[host_side].op,
                    cause_reason=a.placed.reason[host_side] or None,
                )
            )
    out.sort(key=lambda c: (c.kind != "step", -(c.bytes or 0)))
    return tuple(out[:MAX_COPIES])


def _bytes(shape: tuple | None, dtype: int) -> int | None:
    if shape is None or any(d is None for d in shape):
        return None
    from tensorflow.python.framework import dtypes

    try:
        size = dtypes.as_dtype(dtype).size
    except TypeError:
        return None
    if dtype in (DT_STRING, DT_VARIANT):  # the dtype's size is not the payload
        return None
    total = size
    for d in shape:
        total *= d
    return total
