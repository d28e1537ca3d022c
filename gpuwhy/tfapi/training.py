"""Whether a traced function trains: its graph (nested function bodies included) has a
backward pass.

What tells a training loop from a validation loop when both call tf.functions at the
same pace: ``tape.gradient`` inside a ``tf.function`` adds ops under ``gradient_tape/``
(``gradients/`` for ``tf.gradients``), and the gradient kernels of convolutions and
pooling are ``*Backprop*`` ops; a ``test_step`` has neither.
"""

from __future__ import annotations

from typing import Any

__all__ = ["has_backward_pass", "traced_before"]

_MARKS = ("gradient_tape/", "gradients/")


def _backward(name: str, op: str) -> bool:
    return "Backprop" in op or any(mark in name for mark in _MARKS)


def has_backward_pass(concrete: Any) -> bool | None:
    """True where ``concrete``'s graph or a function it calls computes gradients; None
    where the graph cannot be read."""
    try:
        graph = concrete.graph
        if any(_backward(op.name, op.type) for op in graph.get_operations()):
            return True
        library = graph.as_graph_def().library
    except Exception:  # noqa: BLE001 - a graph we cannot read: unknown
        return None
    return any(_backward(node.name, node.op) for fn in library.function for node in fn.node_def)


def traced_before(function: Any) -> list[Any]:
    """The ConcreteFunctions a ``tf.function`` holds from traces made before gpuwhy
    watched it (a notebook cell run again: its functions were traced by the first run);
    empty where there are none or TF's private ``_list_all_concrete_functions`` is gone."""
    try:
        return list(function._list_all_concrete_functions())
    except Exception:  # noqa: BLE001 - a TF without it: nothing known
        return []
