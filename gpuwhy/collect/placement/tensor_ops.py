"""The matmuls and convolutions of a placed function: what tensor cores would run.

For each MatMul/BatchMatMul/Conv/Einsum placed on the GPU: its dtype and the
dimensions tensor cores tile (m, n, k for matmuls; batch, input and output
channels for convolutions, forward and backward), read from static shapes.
Unknown dimensions stay None; the rules judge only what is known.
"""

from __future__ import annotations

from gpuwhy.collect.placement.names import dtype_name, qualified
from gpuwhy.collect.placement.placer import PlacedGraph
from gpuwhy.facts import TensorOp
from gpuwhy.tfapi import graph_ops

__all__ = ["TENSOR_OPS", "tensor_ops"]

_MATMULS = {"MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"}
# Depthwise convolutions are left out: cuDNN runs them on the ordinary cores whatever the dtype.
_CONVS_FORWARD = {"Conv2D", "Conv3D", "_FusedConv2D", "Conv"}
_CONVS_BACKPROP_INPUT = {"Conv2DBackpropInput", "Conv3DBackpropInputV2"}
_CONVS_BACKPROP_FILTER = {"Conv2DBackpropFilter", "Conv3DBackpropFilterV2"}
TENSOR_OPS = _MATMULS | _CONVS_FORWARD | _CONVS_BACKPROP_INPUT | _CONVS_BACKPROP_FILTER | {"Einsum"}


class Shapes:
    """Static shapes of one graph's ops; with ``batch``, an unknown leading dimension
    reads as that batch size (Keras traces ``fit`` with a None batch dimension, and a
    step's FLOPs then come from the batch size the run delivered)."""

    def __init__(self, graph, batch: int | None = None) -> None:
        self.graph, self.batch = graph, batch

    def _fill(self, shape):
        if shape is None or self.batch is None or not shape or shape[0] is not None:
            return shape
        return (self.batch, *shape[1:])

    def input(self, name: str, index: int):
        return self._fill(graph_ops.input_shape(self.graph, name, index))

    def output(self, name: str, index: int):
        return self._fill(graph_ops.output_shape(self.graph, name, index))


def _dim(shape, index):
    if shape is None:
        return None
    try:
        return shape[index]
    except IndexError:
        return None


def _channels_last(node) -> bool:
    attrs = node.node_def.attr
    if "data_format" not in attrs:
        return True
    layout = attrs["data_format"].s
    return not (layout.startswith(b"NC") or layout == b"CHANNELS_FIRST")


def _dims(node, shapes: Shapes) -> dict[str, int | None]:
    name = node.name
    attrs = node.node_def.attr
    if node.op in _MATMULS:
        a = shapes.input(name, 0)
        b = shapes.input(name, 1)
        ta = (
            attrs["transpose_a"].b
            if "transpose_a" in attrs
            else attrs["adj_x"].b
            if "adj_x" in attrs
            else False
        )
        tb = (
            attrs["transpose_b"].b
            if "transpose_b" in attrs
            else attrs["adj_y"].b
            if "adj_y" in attrs
            else False
        )
        m = _dim(a, -1 if ta else -2)
        k = _dim(a, -2 if ta else -1)
        n = _dim(b, -2 if tb else -1)
        return {"m": m, "n": n, "k": k}
    if node.op in _CONVS_FORWARD:
        x = shapes.input(name, 0)
        w = shapes.input(name, 1)
        channel = -1 if _channels_last(node) else 1
        return {"batch": _dim(x, 0), "in_channels": _dim(x, channel), "out_channels": _dim(w, -1)}
    if node.op in _CONVS_BACKPROP_INPUT:
        w = shapes.input(name, 1)
        dy = shapes.input(name, 2)
        return {"batch": _dim(dy, 0), "in_channels": _dim(w, -2), "out_channels": _dim(w, -1)}
    if node.op in _CONVS_BACKPROP_FILTER:
        x = shapes.input(name, 0)
        dy = shapes.input(name, 2)
        channel = -1 if _channels_last(node) else 1
        return {
            "batch": _dim(x, 0),
            "in_channels": _dim(x, channel),
            "out_channels": _dim(dy, channel),
        }
    return {}


def _product(values) -> int | None:
    total = 1
    for value in values:
        if value is None:
            return None
        total *= value
    return total


def _broadcast_batch(a: tuple, b: tuple) -> int | None:
    """Product of the broadcast batch dimensions of a batched matmul."""
    dims = []
    for index in range(1, max(len(a), len(b)) + 1):
        x = a[-index] if index <= len(a) else 1
        y = b[-index] if index <= len(b) else 1
        if x is None or y is None:
            return None
        dims.append(max(x, y))
    return _product(dims)


def _einsum_flops(node, shapes: Shapes) -> int | None:
    """2 x the product of every index's size: an einsum's multiply-adds."""
    equation = node.node_def.attr["equation"].s.decode() if "equation" in node.node_def.attr else ""
    inputs_part = equation.split("->")[0]
    if not inputs_part or "." in inputs_part:
        return None  # ellipsis: sizes not tied to letters
    sizes: dict[str, int] = {}
    for index, term in enumerate(inputs_part.split(",")):
        shape = shapes.input(node.name, index)
        if shape is None or len(shape) != len(term):
            return None
        for letter, size in zip(term, shape):
            if size is None:
                return None
            sizes[letter] = size
    total = _product(sizes.values())
    return 2 * total if total is not None else None


def _flops(node, shapes: Shapes) -> int | None:
    """2 x multiply-adds, from static shapes (None when a dimension is unknown)."""
    name = node.name
    op = node.op
    if op in _MATMULS:
        dims = _dims(node, shapes)
        a = shapes.input(name, 0)
        b = shapes.input(name, 1)
        if a is None or b is None:
            return None
        batch = _broadcast_batch(a[:-2], b[:-2])
        core = _product((dims["m"], dims["n"], dims["k"], batch))
        return 2 * core if core is not None else None
    # (output-sized tensor, filter-shaped tensor) of the convolution, wherever the op has them
    if op in _CONVS_FORWARD:
        out, w = shapes.output(name, 0), shapes.input(name, 1)
    elif op in _CONVS_BACKPROP_INPUT:
        out, w = shapes.input(name, 2), shapes.input(name, 1)
    elif op in _CONVS_BACKPROP_FILTER:
        out, w = shapes.input(name, 2), shapes.output(name, 0)
    elif op == "Einsum":
        return _einsum_flops(node, shapes)
    else:
        return None
    if out is None or w is None:
        return None
    total, per_output = _product(out), _product(w[:-1])  # per output: kh x kw x in_channels
    return 2 * total * per_output if total is not None and per_output is not None else None


def _output_bytes(node, shapes: Shapes) -> int | None:
    """Bytes of the op's first output, from its static shape and dtype."""
    from tensorflow.python.framework import dtypes

    shape = shapes.output(node.name, 0)
    if shape is None or any(d is None for d in shape) or not node.out_types:
        return None
    try:
        size = dtypes.as_dtype(node.out_types[0]).size
    except (TypeError, ValueError):
        return None
    count = 1
    for d in shape:
        count *= d
    return count * size


def _layer(name: str) -> str | None:
    """The name scope that created the op: the Keras layer for Keras models."""
    parts = [p for p in name.split("/")[:-1] if p]
    while parts and parts[-1] in (
        "MatMul",
        "BiasAdd",
        "Conv2D",
        "convolution",
        "Tensordot",
        "einsum",
        "Einsum",
    ):
        parts.pop()
    return "/".join(parts) or None


def tensor_ops(
    placed: PlacedGraph,
    jit_compile: bool,
    batch: int | None = None,
    function: str | None = None,
) -> list[TensorOp]:
    """The function's tensor ops. Where a FLOP count needs a dimension the trace left
    unknown, ``batch`` (the batch size the run delivered) stands for the leading one,
    and ``flops_batch`` says so; ``function`` names the audited function."""
    flat = placed.flat
    found = []
    for node in flat.nodes:
        if node.role != "op" or node.op not in TENSOR_OPS or placed.device[node.id] != "GPU":
            continue
        attrs = node.node_def.attr
        dtype = attrs["T"].type if "T" in attrs else (node.in_types[0] if node.in_types else 0)
        graph = graph_ops.body_graph(flat.graphs, node.function)
        gradient = "Backprop" in node.op or "gradient" in node.name.lower()
        flops = flops_batch = output = None
        if graph is not None:
            shapes = Shapes(graph)
            flops = _flops(node, shapes)
            if flops is None and batch:
                shapes = Shapes(graph, batch)
                flops = _flops(node, shapes)
                flops_batch = batch if flops is not None else None
            output = _output_bytes(node, shapes)
        found.append(
            TensorOp(
                node=qualified(flat, node.id),
                op=node.op,
                dtype=dtype_name(dtype),
                dims=_dims(node, Shapes(graph)) if graph is not None else {},
                layer=_layer(node.name),
                location=graph_ops.creation_site(graph, node.name),
                flops=flops,
                in_loop=node.loop_depth > 0,
                jit_compile=jit_compile or node.jit,  # or in a body XLA compiles
                gradient=gradient,
                function=function,
                flops_batch=flops_batch,
                output_bytes=output,
            )
        )
    return found
