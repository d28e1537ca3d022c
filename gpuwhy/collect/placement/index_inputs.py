"""Float model inputs used as integer indices: token ids fed through a float ``Input``.

A Keras ``Input`` is float32 unless told otherwise, and token ids fed to it stay exact
in float32. Mixed precision breaks that: under ``mixed_float16`` every layer that
autocasts (a custom layer such as keras-io's ``TokenAndPositionEmbedding``, a Lambda)
casts its float inputs to float16, exact for integers up to 2048 only (bfloat16: 256),
and the embedding then looks up the wrong rows, or fails on an id rounded past the
table's end. The step's graph shows the pattern under any policy: a ``Cast`` from a
float type to an integer one, fed by the step's input (a function argument or tf.data's
iterator), whose result is the indices of a gather or a one-hot. Only shape ops may sit
between them: a value computed from the input (``tf.round(x * 10)``) is the program's
own arithmetic, not an id carried as a float.
"""

from __future__ import annotations

from gpuwhy.collect.placement.graph import FlatGraph
from gpuwhy.collect.placement.names import dtype_name
from gpuwhy.facts import FloatIndex, is_input_boundary
from gpuwhy.source_calls import float_input_calls
from gpuwhy.tfapi import graph_ops
from gpuwhy.tfapi.graph_ops import relative

# op type -> the input that holds the indices
INDEX_INPUTS = {
    "GatherV2": 1,
    "Gather": 1,
    "ResourceGather": 1,
    "GatherNd": 1,
    "ResourceGatherNd": 1,
    "OneHot": 0,
}
# ops that carry the whole input through (shape, identity). Not a slice: a column of a
# float feature input used as an index would make the fix's int32 truncate the others.
THROUGH = {"Identity", "IdentityN", "Cast", "Reshape", "ExpandDims", "Squeeze"}
FLOAT_TYPES = {1, 2, 14, 19}  # float32, float64, bfloat16, float16
# what an embedding lookup or a one-hot does to its ids before using them
INDEX_ARITHMETIC = {
    "SelectV2",
    "Select",
    "AddV2",
    "Add",
    "Less",
    "GreaterEqual",
    "Maximum",
    "Minimum",
    "ClipByValue",
    "FloorMod",
}
MAX_WALK = 32


def float_indices(flat: FlatGraph) -> list[FloatIndex]:
    """Each gather/one-hot of ``flat`` whose indices are the step's input cast from a float."""
    found: dict[str, FloatIndex] = {}
    for node in flat.nodes:
        at = INDEX_INPUTS.get(node.op)
        if node.role != "op" or at is None or at >= len(node.inputs):
            continue
        source = _float_source(flat, node.inputs[at])
        if source is None:
            continue
        cast, dtype = source
        graph = graph_ops.body_graph(flat.graphs, cast.function)
        location = graph_ops.creation_site(graph, cast.name) if graph is not None else None
        layer = _layer(node.name)
        found.setdefault(
            layer or node.name,
            FloatIndex(op=node.op, node=node.name, layer=layer, dtype=dtype, location=location),
        )
    return list(found.values())


def _float_source(flat: FlatGraph, ref: tuple[int, int] | None):
    """(the Cast node, the float dtype it casts from) where the indices at ``ref`` are,
    through index arithmetic (Keras' ``take`` wraps negative ids: ``where(i < 0, i + n,
    i)``), a Cast from a float type of the step's own input; else None."""
    seen: set[int] = set()
    todo = [ref]
    while todo and len(seen) < MAX_WALK:
        ref = todo.pop()
        if ref is None or ref[0] in seen:
            continue
        seen.add(ref[0])
        node = flat.nodes[ref[0]]
        if node.op == "Cast" and node.in_types and node.in_types[0] in FLOAT_TYPES:
            if node.inputs and _from_input(flat, node.inputs[0]):
                return node, dtype_name(node.in_types[0])
            continue
        if node.op in THROUGH:
            todo.append(node.inputs[0] if node.inputs else None)
        elif node.op in INDEX_ARITHMETIC:
            todo.extend(node.inputs)
    return None


def _from_input(flat: FlatGraph, ref: tuple[int, int] | None) -> bool:
    """``ref`` is the step's input (an argument that is not a captured variable, or the
    iterator's output) through shape ops and casts only."""
    for _ in range(MAX_WALK):
        if ref is None:
            return False
        node = flat.nodes[ref[0]]
        if node.role == "arg":
            return node.name not in flat.captured
        if is_input_boundary(node.op):
            return True
        if node.op not in THROUGH or not node.inputs:
            return False
        ref = node.inputs[0]
    return False


def _layer(name: str) -> str | None:
    """The Keras layer that made the op: the scope before the op's own name, without the
    model's (``functional_1/token_and_position_embedding/embedding/GatherV2`` ->
    ``token_and_position_embedding/embedding``)."""
    parts = name.split("/")[:-1]
    if len(parts) >= 2:
        parts = parts[1:]
    return "/".join(parts) or None


def named(indices: list[FloatIndex], files: list[str]) -> list[FloatIndex]:
    """``indices`` with the program's ``Input`` named, where its source leaves no doubt:
    one ``Input(...)`` call of a float dtype among ``files`` (the script and the files
    that made the casts). With several, which one feeds the ids is not read here: the
    fix then says what to change without naming it."""
    import dataclasses
    import os

    if not indices:
        return indices
    calls = {}
    for filename in dict.fromkeys(os.path.abspath(f) for f in files):
        for name, line, text in float_input_calls(filename):
            calls[(filename, line)] = (name, text)
    if len(calls) != 1:
        return indices
    ((filename, line), (name, text)), *_ = calls.items()
    where = relative(filename, line)
    return [
        dataclasses.replace(index, input_name=name, input_location=where, input_written=text)
        for index in indices
    ]
