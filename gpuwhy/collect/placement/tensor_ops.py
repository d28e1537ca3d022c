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
_CONVS_FORWARD = {"Conv2D", "Conv3D", "_FusedConv2D", "Conv", "DepthwiseConv2dNative"}
_CONVS_BACKPROP_INPUT = {"Conv2DBackpropInput", "Conv3DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput"}
_CONVS_BACKPROP_FILTER = {"Conv2DBackpropFilter", "Conv3DBackpropFilterV2", "DepthwiseConv2dNativeBackpropFilter"}
TENSOR_OPS = _MATMULS | _CONVS_FORWARD | _CONVS_BACKPROP_INPUT | _CONVS_BACKPROP_FILTER | {"Einsum"}


def _dim(shape, index):
    if shape is None:
        return None
    try:
        return shape[index]
    except IndexError:
        return None


def _channels_last(node) -> bool:
    attrs = node.node_def.attr
    return not ("data_format" in attrs and attrs["data_format"].s.startswith(b"NC"))


def _dims(node, graph) -> dict[str, int | None]:
    name = node.name
    attrs = node.node_def.attr
    if node.op in _MATMULS:
        a = graph_ops.input_shape(graph, name, 0)
        b = graph_ops.input_shape(graph, name, 1)
        ta = attrs["transpose_a"].b if "transpose_a" in attrs else attrs["adj_x"].b if "adj_x" in attrs else False
        tb = attrs["transpose_b"].b if "transpose_b" in attrs else attrs["adj_y"].b if "adj_y" in attrs else False
        m = _dim(a, -1 if ta else -2)
        k = _dim(a, -2 if ta else -1)
        n = _dim(b, -2 if tb else -1)
        return {"m": m, "n": n, "k": k}
    if node.op in _CONVS_FORWARD:
        x = graph_ops.input_shape(graph, name, 0)
        w = graph_ops.input_shape(graph, name, 1)
        channel = -1 if _channels_last(node) else 1
        out = _dim(w, -1)
        if node.op == "DepthwiseConv2dNative":
            multiplier = _dim(w, -1)
            inp = _dim(w, -2)
            out = inp * multiplier if inp and multiplier else None
        return {"batch": _dim(x, 0), "in_channels": _dim(x, channel), "out_channels": out}
    if node.op in _CONVS_BACKPROP_INPUT:
        w = graph_ops.input_shape(graph, name, 1)
        dy = graph_ops.input_shape(graph, name, 2)
        return {"batch": _dim(dy, 0), "in_channels": _dim(w, -2), "out_channels": _dim(w, -1)}
    if node.op in _CONVS_BACKPROP_FILTER:
        x = graph_ops.input_shape(graph, name, 0)
        dy = graph_ops.input_shape(graph, name, 2)
        channel = -1 if _channels_last(node) else 1
        return {"batch": _dim(x, 0), "in_channels": _dim(x, channel), "out_channels": _dim(dy, channel)}
    return {}


def _product(values) -> int | None:
    total = 1
    for value in values:
        if value is None:
            return None
        total *= value
    return total


def _flops(node, graph) -> int | None:
    """2 x multiply-adds, from static shapes (None when a dimension is unknown)."""
    name = node.name
    op = node.op
    if op in _MATMULS:
        dims = _dims(node, graph)
        a = graph_ops.input_shape(graph, name, 0)
        b = graph_ops.input_shape(graph, name, 1)
        if a is None or b is None:
            return None
        batch_a = _product(a[:-2]) if len(a) > 2 else 1
        batch_b = _product(b[:-2]) if len(b) > 2 else 1
        batch = max(batch_a, batch_b) if batch_a is not None and batch_b is not None else None
        core = _product((dims["m"], dims["n"], dims["k"], batch))
        return 2 * core if core is not None else None
    if op in _CONVS_FORWARD:
        out = graph_ops.output_shape(graph, name, 0)
        w = graph_ops.input_shape(graph, name, 1)
        if out is None or w is None:
            return None
        per_output = _product(w[:-2]) if op == "DepthwiseConv2dNative" else _product(w[:-1])
    elif op in _CONVS_BACKPROP_INPUT:
        out = graph_ops.input_shape(graph, name, 2)
        w = graph_ops.input_shape(graph, name, 1)
        if out is None or w is None:
            return None
        per_output = _product(w[:-2]) if "Depthwise" in op else _product(w[:-1])
    elif op in _CONVS_BACKPROP_FILTER:
        out = graph_ops.input_shape(graph, name, 2)
        w = graph_ops.output_shape(graph, name, 0)
        if out is None or w is None:
            return None
        per_output = _product(w[:-2]) if "Depthwise" in op else _product(w[:-1])
    else:
        return None
    total = _product(out)
    return 2 * total * per_output if total is not None and per_output is not None else None


def _layer(name: str) -> str | None:
    """The name scope that created the op: the Keras layer for Keras models."""
    parts = [p for p in name.split("/")[:-1] if p]
    while parts and parts[-1] in ("MatMul", "BiasAdd", "Conv2D", "convolution", "Tensordot", "einsum", "Einsum"):
        parts.pop()
    return "/".join(parts) or None


def tensor_ops(placed: PlacedGraph, jit_compile: bool) -> list[TensorOp]:
    flat = placed.flat
    found = []
    for node in flat.nodes:
        if node.role != "op" or node.op not in TENSOR_OPS or placed.device[node.id] != "GPU":
            continue
        attrs = node.node_def.attr
        dtype = attrs["T"].type if "T" in attrs else (node.in_types[0] if node.in_types else 0)
        graph = graph_ops.body_graph(flat.graphs, node.function)
        gradient = "Backprop" in node.op or "gradient" in node.name.lower()
        found.append(
            TensorOp(
                node=qualified(flat, node.id),
                op=node.op,
                dtype=dtype_name(dtype),
                dims=_dims(node, graph) if graph is not None else {},
                layer=_layer(node.name),
                location=graph_ops.creation_site(graph, node.name),
                flops=_flops(node, graph) if graph is not None else None,
                in_loop=node.loop_depth > 0,
                jit_compile=jit_compile,
                gradient=gradient,
            )
        )
    return found
