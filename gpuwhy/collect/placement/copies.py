"""The tensors that cross between host and GPU memory each time a function runs.

An edge crosses when its producer leaves the tensor in one memory (host: a CPU
op, or a GPU op's HostMemory output) and its consumer reads it from the other.
TF's graph partitioner inserts one Send/Recv pair per (tensor, destination
memory), reusing it for every consumer (graph/graph_partition.cc, the
``dup_recv`` cache), so edges are merged per produced tensor and direction.
Resource handles are never copied: ops using one are colocated with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.collect.placement.graph import DT_RESOURCE
from gpuwhy.collect.placement.placer import PlacedGraph

__all__ = ["Crossing", "crossings"]


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
            direction = "to-device" if src_host else "to-host"
            key = (src, out, direction)
            crossing = found.get(key)
            if crossing is None:
                found[key] = Crossing(src, out, direction, node.id, 1, dtype)
            else:
                crossing.consumers += 1
    return list(found.values())
