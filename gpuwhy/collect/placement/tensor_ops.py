"""The matmuls and convolutions of a placed function: what tensor cores would run.

For each MatMul/BatchMatMul/Conv/Einsum placed on the GPU: its dtype and the
dimensions tensor cores tile (m, n, k for matmuls; batch, input and output
channels for convolutions, forward and backward), read from static shapes.
Unknown dimensions stay None; the rules judge only what is known.
"""

from __future__ import annotations

from gpuwhy.collect.placement.loops import loops
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


# Ops whose output holds as many elements as their first input: a tensor they make
# has the size of the one they were given (a Dense layer on a sequence reshapes its
# [batch, time, features] input to [batch x time, features] for one MatMul).
_SAME_ELEMENTS = {"Reshape", "Identity", "IdentityN", "Cast", "StopGradient", "Snapshot",
                  "Transpose", "ConjugateTranspose"}  # fmt: skip


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

    def elements(self, name: str, index: int, depth: int = 0) -> int | None:
        """How many elements input ``index`` of ``name`` holds, where its shape is known
        or a reshape made it from a tensor whose shape is (batch filled in)."""
        raw = graph_ops.input_shape(self.graph, name, index)
        if raw is not None and None not in raw:
            return _product(raw)
        producer = graph_ops.input_producer(self.graph, name, index)
        if producer is not None and producer[0] in _SAME_ELEMENTS and depth < 6:
            found = self.elements(producer[1], 0, depth + 1)
            if found is not None:
                return found
        filled = self._fill(raw)
        return _product(filled) if filled is not None and None not in filled else None

    def _merged(self, reshape: str) -> tuple[int, ...] | None:
        """The output of op ``reshape`` read as its known input [d0, ..., dn] made
        [d0 x ... x dn-1, dn]: how a Dense layer (tf.tensordot) flattens a sequence for
        one MatMul."""
        source = self._fill(graph_ops.input_shape(self.graph, reshape, 0))
        if source is None or len(source) < 2 or None in source:
            return None
        leading = _product(source[:-1])
        return None if leading is None else (leading, source[-1])

    def operand(self, name: str, index: int, known: dict[int, int | None]):
        """Input ``index``'s shape with the sizes ``known`` (position: size) put in where
        the trace left them unknown, then one dimension still unknown solved from the
        element count; else the leading one read as the batch (never in a reshape's
        output, whose leading dimension may be the batch times more)."""
        raw = graph_ops.input_shape(self.graph, name, index)
        if raw is None:
            return None
        producer = graph_ops.input_producer(self.graph, name, index)
        reshape = producer[1] if producer is not None and producer[0] == "Reshape" else None
        shape = list(raw)
        for position, size in known.items():
            if size is not None and shape[position] is None:
                shape[position] = size
        if shape.count(None) > 1 and reshape is not None:
            merged = self._merged(reshape)
            if (
                merged is not None
                and len(merged) == len(shape)
                and all(d is None or d == m for d, m in zip(shape, merged))
            ):
                shape = list(merged)
        if shape.count(None) == 1:
            elements = self.elements(name, index)
            rest = _product(d for d in shape if d is not None)
            if elements and rest:
                shape[shape.index(None)] = elements // rest
        return tuple(shape) if reshape is not None else self._fill(tuple(shape))


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
    if node.op in _MATMULS:
        m, n, k, _ = _matmul(node, shapes)
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


def _transposed(node) -> tuple[bool, bool]:
    """Whether each operand is transposed: MatMul says it as ``transpose_a``/``_b``,
    BatchMatMul as ``adj_x``/``adj_y`` (absent: not transposed)."""
    attrs = node.node_def.attr

    def flag(name: str, alias: str) -> bool:
        if name in attrs:
            return attrs[name].b
        return attrs[alias].b if alias in attrs else False

    return flag("transpose_a", "adj_x"), flag("transpose_b", "adj_y")


def _matmul(node, shapes: Shapes) -> tuple[int | None, int | None, int | None, int | None]:
    """(m, n, k, batch) of a matmul: the contracted size read from whichever operand
    knows it, and an operand's other size from its element count where a reshape made
    it (a Dense layer over a sequence: [batch x time, features])."""
    name = node.name
    ta, tb = _transposed(node)
    ka, kb = (-2 if ta else -1), (-1 if tb else -2)
    ma, nb = (-1 if ta else -2), (-2 if tb else -1)
    a = graph_ops.input_shape(shapes.graph, name, 0)
    b = graph_ops.input_shape(shapes.graph, name, 1)
    out = graph_ops.output_shape(shapes.graph, name, 0)
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return None, None, None, None
    m, n = (out[-2], out[-1]) if out is not None and len(out) >= 2 else (None, None)
    for _ in range(2):  # what one operand solves, the other may need
        k = a[ka] if a[ka] is not None else b[kb]
        a = shapes.operand(name, 0, {ka: k, ma: m})
        k = a[ka] if a[ka] is not None else k
        b = shapes.operand(name, 1, {kb: k, nb: n})
        if a is None or b is None:
            return None, None, None, None
    k = a[ka] if a[ka] is not None else b[kb]
    return a[ma], b[nb], k, _broadcast_batch(a[:-2], b[:-2])


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
        core = _product(_matmul(node, shapes))
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
    if node.op in _MATMULS:  # [batch..., m, n], m read through a reshape where needed
        m, n, _, batch = _matmul(node, shapes)
        shape = (m, n, batch)
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
    and ``flops_batch`` says so; ``function`` names the audited function. An op in a
    while loop has the FLOPs of one iteration and runs ``runs`` times per call."""
    flat = placed.flat
    around = loops(flat)
    found = []
    for node in flat.nodes:
        if node.role != "op" or node.op not in TENSOR_OPS or placed.device[node.id] != "GPU":
            continue
        attrs = node.node_def.attr
        dtype = attrs["T"].type if "T" in attrs else (node.in_types[0] if node.in_types else 0)
        graph = graph_ops.body_graph(flat.graphs, node.function)
        # Conv2DBackpropInput is also Conv2DTranspose's forward op: not a gradient alone
        gradient = "BackpropFilter" in node.op or "gradient" in node.name.lower()
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
                runs=None if around.unbounded(node) else around.runs(node),
                loop=around.loop(node),
            )
        )
    return found
