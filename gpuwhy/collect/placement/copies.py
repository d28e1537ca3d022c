"""The tensors that cross between host and GPU memory each time a function runs.

An edge crosses when its producer leaves the tensor in one memory (host: a CPU
op, or a GPU op's HostMemory output) and its consumer reads it from the other.
TF's graph partitioner inserts one Send/Recv pair per (tensor, destination
memory), reusing it for every consumer (graph/graph_partition.cc, the
``dup_recv`` cache), so edges are merged per produced tensor and direction.
Resource handles are never copied: ops using one are colocated with it.
An op whose every input is a constant is folded into a constant by grappler's constant
folding (on by default for every tf.function) before the graph is partitioned: the
edges into it are not copies (the int32 ``Const -> Cast`` pairs of Keras' optimizers).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.collect.placement.graph import DT_RESOURCE
from gpuwhy.collect.placement.placer import PlacedGraph
from gpuwhy.tfapi.kernel_registry import op_def

__all__ = ["Crossing", "crossings"]

# Ops constant folding leaves alone although their inputs are constants: stateful ones,
# and those whose output is a handle or a placeholder (grappler's IsFoldable).
_NOT_FOLDED = frozenset(
    {"Assert", "Print", "PrintV2", "Enter", "Merge", "Switch", "NextIteration", "Exit"}
)


@dataclass
class Crossing:
    src: int
    index: int
    direction: str  # to-device | to-host
    dst: int  # first consumer
    consumers: int
    dtype: int


def crossings(placed: PlacedGraph) -> list[Crossing]:
    nodes = placed.flat.nodes
    found: dict[tuple[int, int, str], Crossing] = {}
    for node in nodes:
        if node.role != "op":
            continue
        in_host = placed.in_host[node.id]
        folded: bool | None = None  # judged only for a node an edge crosses into
        for index, ref in enumerate(node.inputs):
            if ref is None:
                continue
            src, out = ref
            source = nodes[src]
            if source.role == "call" or out >= len(placed.out_host[src]) or index >= len(in_host):
                continue
            dtype = source.out_types[out] if out < len(source.out_types) else 0
            if dtype in (DT_RESOURCE, DT_RESOURCE + 100):
                continue
            src_host = placed.out_host[src][out]
            if src_host == in_host[index]:
                continue
            if folded is None:
                folded = _folded(node, nodes)
            if folded:
                break
            direction = "to-device" if src_host else "to-host"
            key = (src, out, direction)
            crossing = found.get(key)
            if crossing is None:
                found[key] = Crossing(src, out, direction, node.id, 1, dtype)
            else:
                crossing.consumers += 1
    return list(found.values())


def _folded(node, nodes) -> bool:
    """Every data input a Const, no control input, and the op itself a pure function of
    them: grappler's constant folding replaces it with a constant of its own."""
    if not node.inputs or node.controls or node.op in _NOT_FOLDED:
        return False
    if not all(ref is not None and nodes[ref[0]].op == "Const" for ref in node.inputs):
        return False
    definition = op_def(node.op)
    return definition is not None and not definition.is_stateful
