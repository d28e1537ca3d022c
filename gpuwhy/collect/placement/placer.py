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
    nodes = flat.nodes
    count = len(nodes)
    accel = registry.device_type  # "GPU"; "CPU" only to check the replay against TF's CPU placement
    device = [""] * count
    reason = [""] * count

    # 1. Kernel lookups, one quiet batch of distinct keys.
    keys: list[tuple | None] = [None] * count
    wanted: dict[tuple, object] = {}
    for node in nodes:
        if node.role != "op":
            continue
        key = registry.key(node.node_def)
        keys[node.id] = key
        if key is not None and key not in wanted:
            wanted[key] = node.node_def
    registry.lookup_many(wanted)
    kernels: dict[int, GpuKernel] = {}
    for node in nodes:
        key = keys[node.id]
        if key is not None:
            kernels[node.id] = registry.cached(key)

    consumers: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for node in nodes:
        for index, ref in enumerate(node.inputs):
            if ref is not None:
                consumers[ref[0]].append((node.id, index))

    # 2. Where the function's own inputs live.
    pinned: dict[int, str] = {}
    for node in nodes:
        if node.role != "arg":
            continue
        dtype = node.out_types[0] if node.out_types else 0
        if dtype == DT_RESOURCE:
            device[node.id] = _resource_device(node, consumers, nodes, registry)
            reason[node.id] = "captured"
            pinned[node.id] = device[node.id]
        elif node.name in flat.captured:
            # int32 and strings sit in host memory; captured variants are datasets.
            device[node.id] = (
                "CPU" if dtype in HOST_ONLY_DTYPES or dtype in (DT_INT32, DT_VARIANT) else accel
            )
            reason[node.id] = "captured"
        else:
            device[node.id] = "CPU"
            reason[node.id] = "input"

    # 3. Colocation groups.
    groups = _UnionFind(count)
    scoped = {(n.call_chain, n.function, n.name): n.id for n in nodes if n.role != "call"}
    for node in nodes:
        if node.role != "op":
            continue
        for other in node.colocate_with:
            target = scoped.get((node.call_chain, node.function, other))
            if target is not None:
                groups.union(target, node.id)
        for index, ref in enumerate(node.inputs):
            if (
                ref is not None
                and index < len(node.in_types)
                and node.in_types[index] == DT_RESOURCE
                and nodes[ref[0]].role != "call"
                and node.op not in _RESOURCE_COLOCATION_EXEMPT
            ):
                groups.union(ref[0], node.id)
    members: dict[int, list[int]] = {}
    for node in nodes:
        if node.role != "call":
            members.setdefault(groups.find(node.id), []).append(node.id)

    # 4. Each group's device.
    colocated_with: dict[int, int] = {}
    for group in members.values():
        _place_group(group, nodes, kernels, pinned, device, reason, colocated_with, accel)

    # 5. Placer heuristics, in node order (placer.cc, Placer::Run).
    for node in nodes:
        if node.role != "op" or node.requested or len(members.get(groups.find(node.id), ())) != 1:
            continue
        if node.op in _METADATA_OPS or (node.op == "Identity" and len(consumers[node.id]) == 1):
            # Heuristic B: Shape/Size/Rank and pass-through Identity go with their input.
            ref = node.inputs[0] if node.inputs else None
            if ref is not None and nodes[ref[0]].role != "call":
                source_device = device[ref[0]]
                if source_device == "CPU" and device[node.id] == accel != "CPU":
                    device[node.id] = "CPU"
                    reason[node.id] = "follows-input"
                    colocated_with[node.id] = ref[0]
        elif not node.inputs and len(node.out_types) == 1 and node.out_types[0] != DT_RESOURCE:
            # Heuristic A: a generator goes where all its consumers go.
            placed = {device[c] for c, _ in consumers[node.id] if nodes[c].role == "op"}
            if placed == {"CPU"} and device[node.id] == accel != "CPU":
                device[node.id] = "CPU"
                reason[node.id] = "follows-consumer"
                colocated_with[node.id] = consumers[node.id][0][0]

    # XLA compiles jit functions as one cluster on the device: TF's per-op placement
    # and memory types do not apply inside (only its inputs and outputs cross).
    for node in nodes:
        if node.jit and node.role == "op":
            device[node.id] = accel
            reason[node.id] = "xla"

    # 6. Memory types.
    in_host: list[list[bool]] = [[]] * count
    out_host: list[list[bool]] = [[]] * count
    for node in nodes:
        if node.role == "call":
            continue
        if device[node.id] == "CPU":
            in_host[node.id] = [True] * len(node.in_types)
            out_host[node.id] = [True] * len(node.out_types)
            continue
        if node.jit and node.role == "op":
            in_host[node.id] = [False] * len(node.in_types)
            out_host[node.id] = [False] * len(node.out_types)
            continue
        kernel = kernels.get(node.id)
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
            outs = (
                [node.out_types[0] in HOST_ONLY_DTYPES or node.out_types[0] == DT_INT32]
                if node.out_types
                else []
            )
        attrs = node.node_def.attr
        for name, flags in (("_input_hostmem", ins), ("_output_hostmem", outs)):
            if name in attrs:
                for index in attrs[name].list.i:
                    if 0 <= index < len(flags):
                        flags[index] = True
        in_host[node.id] = ins
        out_host[node.id] = outs
        if (
            node.role == "op"
            and reason[node.id] == "gpu"
            and (ins or outs)
            and all(ins)
            and all(outs)
        ):
            reason[node.id] = "gpu-host-memory"
    return PlacedGraph(flat, device, reason, in_host, out_host, colocated_with)


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
