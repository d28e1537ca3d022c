"""How many times each op of a placed function runs per call: once, except in a while
loop, whose body runs once per iteration.

TF 2's while loops (while_v2, what ``tf.while_loop``, AutoGraph's loops over
``tf.range`` and Keras' RNN layers build) carry two counters as their first loop
variables: the iterations run so far (a constant 0 at the start) and
``maximum_iterations`` (-1 for none). Where ``maximum_iterations`` is fixed in the
graph (Keras' RNN: the sequence length of the input's static shape), the body runs at
most that many times; a loop whose condition ends it sooner is then costed high, and
one with no such bound is costed at one iteration. The gradient of a loop is a loop
with the same ``maximum_iterations``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuwhy.collect.placement.graph import FlatGraph, Node
from gpuwhy.facts import KernelWork, PlacementFacts
from gpuwhy.projection.cost import rnn_layer
from gpuwhy.tfapi import graph_ops

__all__ = ["Loops", "loops", "with_time_steps"]

LOOP_OPS = frozenset({"While", "StatelessWhile"})


@dataclass(frozen=True)
class Loops:
    """The while loops of a flattened function, by the call chain of their bodies."""

    trips: dict[tuple[str, ...], int | None]  # body call chain -> iterations, None unknown

    def runs(self, node: Node) -> int:
        """Times ``node`` runs per call: the known iterations of every loop around it."""
        total = 1
        for depth in range(1, len(node.call_chain) + 1):
            trips = self.trips.get(node.call_chain[:depth])
            if trips:
                total *= trips
        return total

    def loop(self, node: Node) -> str | None:
        """The outermost while loop around ``node`` (its While op's name), if any."""
        for depth in range(1, len(node.call_chain) + 1):
            if node.call_chain[:depth] in self.trips:
                return node.call_chain[depth - 1]
        return None

    def unbounded(self, node: Node) -> bool:
        """In a loop whose iterations the graph does not fix (costed once)."""
        return any(
            self.trips.get(node.call_chain[:depth], 0) is None
            for depth in range(1, len(node.call_chain) + 1)
        )


def loops(flat: FlatGraph) -> Loops:
    """Every while loop of ``flat`` and its iterations, where the graph fixes them."""
    trips: dict[tuple[str, ...], int | None] = {}
    for node in flat.nodes:
        if node.op in LOOP_OPS and node.role == "call":
            trips[(*node.call_chain, node.name)] = _iterations(flat, node)
    return Loops(trips)


def _iterations(flat: FlatGraph, loop: Node) -> int | None:
    if len(loop.inputs) < 2:
        return None
    counter, bound = (_value(flat, ref) for ref in loop.inputs[:2])
    if counter != 0 or bound is None or bound < 0:  # not while_v2's counters, or no bound
        return None
    return bound


def _value(flat: FlatGraph, ref: tuple[int, int] | None) -> int | None:
    if ref is None:
        return None
    producer = flat.nodes[ref[0]]
    graph = graph_ops.body_graph(flat.graphs, producer.function)
    return None if graph is None else graph_ops.static_int(graph, producer.name, ref[1])


def with_time_steps(placement: PlacementFacts, steps: dict[str, int]) -> PlacementFacts:
    """``placement`` with the iterations of the RNN loops the graph left unknown taken
    from the model (``steps``: Keras layer name -> its input's time steps,
    tfapi.keras_hooks.rnn_time_steps): their matmuls run that many times, their kernels'
    counts and bytes (counted once) that many times over."""
    if not steps:
        return placement
    names = tuple(steps)

    def known(loop: str | None) -> int | None:
        layer = rnn_layer(loop, names) if loop else None
        return steps[layer] if layer else None

    unknown = {op.loop for op in placement.tensor_ops if op.loop and op.runs is None}
    trips = {loop: n for loop in unknown if (n := known(loop))}
    if not trips:
        return placement
    ops = tuple(
        dataclasses.replace(op, runs=trips[op.loop]) if op.runs is None and op.loop in trips else op
        for op in placement.tensor_ops
    )
    functions = tuple(
        dataclasses.replace(
            function,
            kernels=tuple(
                _times(k, trips[k.loop]) if k.loop in trips else k for k in function.kernels
            ),
        )
        for function in placement.functions
    )
    return dataclasses.replace(placement, tensor_ops=ops, functions=functions)


def _times(kernels: KernelWork, n: int) -> KernelWork:
    return dataclasses.replace(
        kernels,
        count=kernels.count * n,
        bytes=kernels.bytes * n,
        sized=kernels.sized * n,
        float32_bytes=kernels.float32_bytes * n,
        runs=n,
    )
