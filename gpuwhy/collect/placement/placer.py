"""Predict TensorFlow's placement of a flattened function on a one-GPU machine.

TensorFlow's own placer (common_runtime/placer.cc, colocation_graph.cc) puts
everything on the CPU when no GPU exists, so gpuwhy replays its decisions
with the GPU kernel registry instead:

1. Supported devices per node: the CPU, plus the GPU when
   ``FindKernelDef`` finds a GPU kernel for the node's op and dtypes.
2. Colocation groups (``ColocationGraph::ColocateAllNodes``): nodes named in
   a ``_class: loc:@x`` attr, and every node that takes a resource input is
   colocated with the op producing the resource (``ColocateResourceOrRefEdge``).
3. A group's devices are the intersection of its members' (``Member::
   MergeSupportedDevices``); a resource created outside the function (a
   variable captured by a tf.function) pins its group to where the variable
   lives.
4. A requested device (``tf.device``) is kept when a kernel exists for it;
   otherwise soft placement (on by default in TF2) drops the request. With no
   request the GPU wins over the CPU (device priority).
5. The placer's heuristics (placer.cc ``Placer::Run``): a generator node (no
   inputs, one output, such as a Const) goes where all its consumers go
   (heuristic A); Shape/Size/Rank and a pass-through Identity go where their
   input is (heuristic B).
6. Memory types (framework/memory_types.cc ``MemoryTypesForNode``): on the
   GPU, the kernel's ``HostMemory`` args, ``_input_hostmem``/``_output_hostmem``
   indices and ``DataTypeAlwaysOnHost`` dtypes (string, resource) stay in host
   memory. int32 is *not* forced to the host when a kernel exists: GPU int32
   kernels declare HostMemory themselves. A GPU op whose arguments are all in host memory (Shape, int32
   shape arithmetic) computes on the host by design and costs no copy. An edge between
   an int32 kernel in device memory (BitwiseAnd) and one in host memory (Less<int32>)
   is a real copy in a graph step: grappler's pin_to_host_optimizer, which would move
   such small int32 ops to the host, runs only when a user turns it on
   (meta_optimizer.cc: BOTH_ARE_ON); inside an XLA cluster there is none.
7. Ops kept on the host by design (iterators, resource handles, summaries, checkpoint
   files, the log: ``host_by_design``) lack a GPU kernel on purpose: their reason is
   ``host-by-design``, not ``no-gpu-kernel``.

Every decision carries a reason code (``facts.PLACEMENT_REASONS``) so the report can
say *why*.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuwhy.collect.placement.graph import DT_RESOURCE, FlatGraph, Node
from gpuwhy.facts import is_input_boundary
from gpuwhy.tfapi.graph_ops import PYTHON_OPS
from gpuwhy.tfapi.kernel_registry import GpuKernel, KernelRegistry, op_def

__all__ = ["HOST_ONLY_DTYPES", "PlacedGraph", "place"]

DT_INT32 = 3
DT_STRING = 7
DT_VARIANT = 21
# DataTypeAlwaysOnHost (framework/types.cc): strings and resources never live
# in device memory; MTypeFromDType adds int32 (framework/memory_types.cc).
HOST_ONLY_DTYPES = frozenset({DT_STRING, DT_RESOURCE, DT_STRING + 100, DT_RESOURCE + 100})


_METADATA_OPS = frozenset({"Shape", "Size", "Rank"})  # NC_METADATA in graph/graph.cc
# IsExemptFromResourceInputColocation (REGISTER_INPUT_COLOCATION_EXEMPTION).
_RESOURCE_COLOCATION_EXEMPT = frozenset(
    {
        "IdentityN",
        "PartitionedCall",
        "StatefulPartitionedCall",
        "FlatMapDataset",
        "InterleaveDataset",
        "ParallelInterleaveDatasetV4",
        "MapAndBatchDataset",
        "GroupByWindowDataset",
        "ScanDataset",
        "RpcServerRegister",
    }
)
# Resources that live in host memory whatever the machine: tables, iterators, datasets, mutexes.
_HOST_RESOURCE_PREFIXES = (
    "Lookup",
    "Iterator",
    "AnonymousIterator",
    "MakeIterator",
    "Mutex",
    "InitializeTable",
    "Optional",
    "Dataset",
    "DeleteIterator",
)

# Handles to host-side state: no tensor data of the step is in them.
_HANDLE_DTYPES = frozenset({DT_RESOURCE, DT_VARIANT, DT_RESOURCE + 100, DT_VARIANT + 100})
# Logging ops (core/ops/logging_ops.cc): they exist to write to the host's log, and
# tf.print's formatting with them.
_LOGGING_OPS = frozenset({"Print", "PrintV2", "StringFormat", "Assert", "Timestamp"})

_VARIABLE_CONSUMERS = frozenset(
    {
        "ReadVariableOp",
        "AssignVariableOp",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "VarIsInitializedOp",
        "VariableShape",
        "DestroyResourceOp",
    }
)


@dataclass
class PlacedGraph:
    """Per node id: device type, reason code, and host/device memory per tensor."""

    flat: FlatGraph
    device: list[str]
    reason: list[str]
    in_host: list[list[bool]]
    out_host: list[list[bool]]
    colocated_with: dict[int, int] = field(default_factory=dict)  # node -> member that decided

    def computes_on(self, node_id: int) -> str:
        """ "GPU", "CPU" or "host" (GPU-placed, every argument in host memory)."""
        return "host" if self.reason[node_id] == "gpu-host-memory" else self.device[node_id]


class _UnionFind:
    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _is_variable_consumer(op: str) -> bool:
    return (
        op in _VARIABLE_CONSUMERS
        or op.startswith(("ResourceApply", "ResourceSparseApply", "ResourceScatter"))
        or op
        in (
            "ResourceGather",
            "ResourceGatherNd",
            "ResourceStridedSliceAssign",
        )
    )


def _variable_dtype(consumer: Node) -> int | None:
    attrs = consumer.node_def.attr
    for name in ("dtype", "T"):
        if name in attrs and attrs[name].type:
            return attrs[name].type
    return None


def place(flat: FlatGraph, registry: KernelRegistry) -> PlacedGraph:
    """TensorFlow's placement of ``flat`` replayed with the GPU kernel registry, in the
    placer's order (the module's docstring numbers the steps)."""
    nodes = flat.nodes
    accel = registry.device_type  # "GPU"; "CPU" only to check the replay against TF's CPU placement
    device = [""] * len(nodes)
    reason = [""] * len(nodes)
    kernels = _kernels(nodes, registry)
    consumers = _consumers(nodes)
    pinned = _place_arguments(flat, consumers, registry, accel, device, reason)
    groups = _colocation_groups(nodes)
    colocated_with: dict[int, int] = {}
    for group in groups:
        _place_group(group, nodes, kernels, pinned, device, reason, colocated_with, accel)
    alone = {group[0] for group in groups if len(group) == 1}
    for node in nodes:
        if node.role == "op" and not node.requested and node.id in alone:
            _follow_neighbours(node, nodes, consumers, device, reason, colocated_with, accel)
    # XLA compiles jit functions as one cluster on the device: TF's per-op placement
    # and memory types do not apply inside (only its inputs and outputs cross).
    for node in nodes:
        if node.jit and node.role == "op":
            device[node.id] = accel
            reason[node.id] = "xla"
    in_host: list[list[bool]] = [[]] * len(nodes)
    out_host: list[list[bool]] = [[]] * len(nodes)
    for node in nodes:
        if node.role != "call":
            in_host[node.id], out_host[node.id] = _memory_types(
                node, kernels.get(node.id), device[node.id]
            )
            on_host = _all_in_host_memory(
                node, reason[node.id], in_host[node.id], out_host[node.id]
            )
            if device[node.id] != "CPU" and on_host:
                reason[node.id] = "gpu-host-memory"
    return PlacedGraph(flat, device, reason, in_host, out_host, colocated_with)


def _kernels(nodes: list[Node], registry: KernelRegistry) -> dict[int, GpuKernel]:
    """Step 1: each op's GPU kernel, looked up in one quiet batch of distinct keys."""
    keys: dict[int, tuple] = {}
    wanted: dict[tuple, object] = {}
    for node in nodes:
        if node.role != "op":
            continue
        key = registry.key(node.node_def)
        if key is not None:
            keys[node.id] = key
            wanted.setdefault(key, node.node_def)
    registry.lookup_many(wanted)
    return {node_id: registry.cached(key) for node_id, key in keys.items()}


def _consumers(nodes: list[Node]) -> list[list[tuple[int, int]]]:
    """Per node, the (consumer, input index) pairs that read its outputs."""
    consumers: list[list[tuple[int, int]]] = [[] for _ in nodes]
    for node in nodes:
        for index, ref in enumerate(node.inputs):
            if ref is not None:
                consumers[ref[0]].append((node.id, index))
    return consumers


def _place_arguments(flat, consumers, registry, accel, device, reason) -> dict[int, str]:
    """Step 2: where the function's own inputs live; returns the arguments whose device
    pins their colocation group (captured resources)."""
    pinned: dict[int, str] = {}
    for node in flat.nodes:
        if node.role != "arg":
            continue
        dtype = node.out_types[0] if node.out_types else 0
        if dtype == DT_RESOURCE:
            device[node.id] = _resource_device(node, consumers, flat.nodes, registry)
            reason[node.id] = "captured"
            pinned[node.id] = device[node.id]
        elif node.name in flat.captured:
            # int32 and strings sit in host memory; captured variants are datasets.
            on_host = dtype in HOST_ONLY_DTYPES or dtype in (DT_INT32, DT_VARIANT)
            device[node.id] = "CPU" if on_host else accel
            reason[node.id] = "captured"
        else:
            device[node.id] = "CPU"
            reason[node.id] = "input"
    return pinned


def _colocation_groups(nodes: list[Node]) -> list[list[int]]:
    """Step 3: the nodes (calls aside) that must share a device, each group in node order:
    ``_class: loc:@x`` attrs and every resource input with the op that made it."""
    groups = _UnionFind(len(nodes))
    scoped = {(n.call_chain, n.function, n.name): n.id for n in nodes if n.role != "call"}
    for node in nodes:
        if node.role != "op":
            continue
        for other in node.colocate_with:
            target = scoped.get((node.call_chain, node.function, other))
            if target is not None:
                groups.union(target, node.id)
        for index, ref in enumerate(node.inputs):
            if ref is not None and _colocates_with_resource(node, index, nodes[ref[0]]):
                groups.union(ref[0], node.id)
    members: dict[int, list[int]] = {}
    for node in nodes:
        if node.role != "call":
            members.setdefault(groups.find(node.id), []).append(node.id)
    return list(members.values())


def _colocates_with_resource(node: Node, index: int, source: Node) -> bool:
    """Whether input ``index`` of ``node`` is a resource edge the placer colocates
    (``ColocateResourceOrRefEdge``): a call's output is inlined away first."""
    return (
        index < len(node.in_types)
        and node.in_types[index] == DT_RESOURCE
        and source.role != "call"
        and node.op not in _RESOURCE_COLOCATION_EXEMPT
    )


def _follow_neighbours(node, nodes, consumers, device, reason, colocated_with, accel) -> None:
    """Step 5, the placer's heuristics for an op alone in its group (placer.cc,
    Placer::Run): B, Shape/Size/Rank and a pass-through Identity go with their input;
    A, a generator goes where all its consumers go."""
    if device[node.id] != accel or accel == "CPU":
        return
    if node.op in _METADATA_OPS or (node.op == "Identity" and len(consumers[node.id]) == 1):
        ref = node.inputs[0] if node.inputs else None
        if ref is not None and nodes[ref[0]].role != "call" and device[ref[0]] == "CPU":
            device[node.id] = "CPU"
            reason[node.id] = "follows-input"
            colocated_with[node.id] = ref[0]
    elif not node.inputs and len(node.out_types) == 1 and node.out_types[0] != DT_RESOURCE:
        placed = {device[c] for c, _ in consumers[node.id] if nodes[c].role == "op"}
        if placed == {"CPU"}:
            device[node.id] = "CPU"
            reason[node.id] = "follows-consumer"
            colocated_with[node.id] = consumers[node.id][0][0]


def _memory_types(
    node: Node, kernel: GpuKernel | None, device: str
) -> tuple[list[bool], list[bool]]:
    """Step 6: per input and output of ``node``, whether the tensor is in host memory."""
    if device == "CPU":
        return [True] * len(node.in_types), [True] * len(node.out_types)
    if node.jit and node.role == "op":
        return [False] * len(node.in_types), [False] * len(node.out_types)
    host_args = kernel.host_memory_args if kernel is not None else frozenset()
    ins = [
        arg in host_args or dtype in HOST_ONLY_DTYPES
        for arg, dtype in zip(node.in_args, node.in_types)
    ]
    outs = [
        arg in host_args or dtype in HOST_ONLY_DTYPES
        for arg, dtype in zip(node.out_args, node.out_types)
    ]
    if node.role == "arg":
        first = node.out_types[0] if node.out_types else None
        outs = [first in HOST_ONLY_DTYPES or first == DT_INT32] if node.out_types else []
    attrs = node.node_def.attr
    for name, flags in (("_input_hostmem", ins), ("_output_hostmem", outs)):
        if name in attrs:
            for index in attrs[name].list.i:
                if 0 <= index < len(flags):
                    flags[index] = True
    return ins, outs


def _all_in_host_memory(node: Node, reason: str, ins: list[bool], outs: list[bool]) -> bool:
    """A GPU op whose every argument is in host memory computes on the host by design."""
    return node.role == "op" and reason == "gpu" and bool(ins or outs) and all(ins) and all(outs)


def _resource_device(arg: Node, consumers, nodes, registry: KernelRegistry) -> str:
    """Where a captured resource lives: host resources on the CPU, variables where
    VarHandleOp has a kernel for their dtype (the eager placer's choice)."""
    # Only ops that run: a call node (If, While, PartitionedCall) is inlined away before
    # placement, and an If whose branches return nothing would read as a stateful op with
    # no output, "host by design" (the loss-scale optimizer's update branch).
    users = [nodes[c] for c, _ in consumers[arg.id] if nodes[c].role == "op"]
    if any(
        user.op.startswith(_HOST_RESOURCE_PREFIXES) or "Dataset" in user.op or host_by_design(user)
        for user in users
    ):
        return "CPU"  # host state: a table, an iterator, a summary writer
    for user in users:
        if _is_variable_consumer(user.op):
            dtype = _variable_dtype(user)
            if dtype is not None:
                return registry.device_type if _var_handle_kernel(registry, dtype).exists else "CPU"
    # Other state (tf.random.Generator's int64 state, custom resources): a variable-like
    # resource created eagerly on the default device.
    return registry.device_type


def _var_handle_kernel(registry: KernelRegistry, dtype: int) -> GpuKernel:
    from tensorflow.core.framework import node_def_pb2

    request = node_def_pb2.NodeDef(name="gpuwhy_var", op="VarHandleOp")
    request.attr["dtype"].type = dtype
    request.attr["shape"].shape.unknown_rank = True
    kernel = registry.lookup(request)
    assert kernel is not None
    return kernel


def host_by_design(node: Node) -> bool:
    """An op TensorFlow keeps on the host whatever the machine, for what it is, not for a
    missing kernel: tf.data's iterators and datasets; ops on handles only (an iterator,
    table or summary writer being made or freed: every input and output a resource or
    variant); stateful ops that return no tensor (they act on host state: a checkpoint
    file, a summary, the log); stateful ops that take only strings and handles (a
    checkpoint restore reads a file); the logging ops (tf.print, Assert). Python ops are
    not: they run the user's own code."""
    op = node.op
    if op in PYTHON_OPS or _is_variable_consumer(op):  # a host op, but the user's own code
        return False
    if op in _LOGGING_OPS or is_input_boundary(op) or "Iterator" in op or "Dataset" in op:
        return True
    types = node.in_types + node.out_types
    if types and all(t in _HANDLE_DTYPES for t in types):
        return True
    definition = op_def(op)
    if definition is None or not definition.is_stateful:
        return False
    if all(t in _HANDLE_DTYPES for t in node.out_types):
        return True
    return bool(node.in_types) and all(
        t in _HANDLE_DTYPES or t in (DT_STRING, DT_STRING + 100) for t in node.in_types
    )


def _place_group(group, nodes, kernels, pinned, device, reason, colocated_with, accel) -> None:
    def no_kernel_reason(member: int) -> str:
        kernel = kernels.get(member)
        if host_by_design(nodes[member]):
            return "host-by-design"
        return (
            "no-gpu-kernel-for-dtype"
            if kernel is not None and kernel.op_has_gpu_kernels
            else "no-gpu-kernel"
        )

    ops = [m for m in group if nodes[m].role == "op"]
    lacking = [m for m in ops if not (kernels.get(m) and kernels[m].exists)]
    pins = [pinned[m] for m in group if m in pinned]
    if pins:
        target = pins[0]
        for member in ops:
            device[member] = target
            if target == accel and member in lacking:
                device[member] = "CPU"  # what it needs; TF refuses rather than do it
                reason[member] = "resource-on-gpu-no-kernel"
            elif target != accel and member in lacking and host_by_design(nodes[member]):
                reason[member] = "host-by-design"  # a summary write on its host writer
            else:
                reason[member] = "gpu" if target == accel else "colocated"
                if target != accel:
                    colocated_with[member] = next(m for m in group if m in pinned)
        return
    if lacking:
        for member in ops:
            device[member] = "CPU"
            if member in lacking:
                reason[member] = no_kernel_reason(member)
            else:
                reason[member] = "colocated"
                colocated_with[member] = lacking[0]
        return
    requesting_cpu = [m for m in ops if nodes[m].requested == "CPU"]
    for member in ops:
        if requesting_cpu:
            device[member] = "CPU"
            if member in requesting_cpu:
                reason[member] = "forced-cpu"
            else:
                reason[member] = "colocated"
                colocated_with[member] = requesting_cpu[0]
        else:
            device[member] = accel
            reason[member] = "gpu"
