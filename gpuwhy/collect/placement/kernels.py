"""The GPU kernels of a placed function other than its matmuls and convolutions, by op
type, with the bytes they write: what a GPU spends its time on besides tensor cores
(elementwise ops, reductions, normalisations run at memory bandwidth; tiny ones cost a
launch each). The projection onto a named GPU (gpuwhy/projection) reads these."""

from __future__ import annotations

from gpuwhy.collect.placement.loops import loops
from gpuwhy.collect.placement.placer import PlacedGraph
from gpuwhy.collect.placement.tensor_ops import TENSOR_OPS, Shapes
from gpuwhy.facts import KernelWork
from gpuwhy.tfapi import graph_ops

# Ops that launch no kernel of their own: metadata, aliases of their input, variable
# handles and reads (a read is a reference on the GPU), control flow bookkeeping.
NO_KERNEL = frozenset(
    {
        "Const", "HostConst", "Identity", "IdentityN", "NoOp", "Placeholder",
        "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "Shape", "ShapeN",
        "Size", "Rank", "Reshape", "ExpandDims", "Squeeze", "StopGradient",
        "PreventGradient", "Snapshot", "_Arg", "_Retval", "_Recv", "_Send",
        "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
        "ResourceGather", "AssignVariableOp",
    }
)  # fmt: skip


def kernel_work(placed: PlacedGraph, batch: int | None = None) -> tuple[KernelWork, ...]:
    """Per op type (and while loop): how many GPU kernels run per call, the bytes their
    outputs hold, and how many of those bytes are float32."""
    from tensorflow.python.framework import dtypes

    flat = placed.flat
    around = loops(flat)
    found: dict[tuple[str, str | None], list[int]] = {}
    for node in flat.nodes:
        if node.role != "op" or node.op in NO_KERNEL or node.op in TENSOR_OPS:
            continue
        if placed.computes_on(node.id) != "GPU":
            continue
        runs = around.runs(node)
        row = found.setdefault((node.op, around.loop(node)), [0, 0, 0, 0, 1])
        row[0] += runs
        row[4] = max(row[4], runs)
        sizes = _output_bytes(node, flat.graphs, batch, dtypes)
        if sizes is not None:
            row[1] += sizes[0] * runs
            row[2] += runs
            row[3] += sizes[1] * runs
    return tuple(
        KernelWork(
            op=op, count=count, bytes=total, sized=sized, float32_bytes=wide, loop=loop, runs=runs
        )
        for (op, loop), (count, total, sized, wide, runs) in sorted(
            found.items(), key=lambda kv: -kv[1][1]
        )
    )


def _output_bytes(node, graphs, batch: int | None, dtypes) -> tuple[int, int] | None:
    """(bytes of the node's outputs, of which float32), None where a shape is unknown."""
    graph = graph_ops.body_graph(graphs, node.function)
    if graph is None:
        return None
    shapes = Shapes(graph, batch)
    total = wide = 0
    for index, dtype in enumerate(node.out_types):
        shape = shapes.output(node.name, index)
        if shape is None and index > 0:
            continue  # scratch of no declared shape (FusedBatchNormV3's reserve spaces)
        if shape is None or any(d is None for d in shape):
            return None
        try:
            kind = dtypes.as_dtype(dtype)
        except (TypeError, ValueError):
            return None
        count = 1
        for d in shape:
            count *= d
        total += count * kind.size
        if kind == dtypes.float32:
            wide += count * kind.size
    return total, wide
