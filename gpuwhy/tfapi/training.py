"""Whether a traced function trains: its graph (nested function bodies included) has a
backward pass.

What tells a training loop from a validation loop when both call tf.functions at the
same pace: ``tape.gradient`` inside a ``tf.function`` adds ops under ``gradient_tape/``
(``gradients/`` for ``tf.gradients``), and the weight gradients of convolutions are
``*BackpropFilter*`` ops; a ``test_step`` has neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "full_batch_trace",
    "has_backward_pass",
    "note_traced_update",
    "traced_before",
    "updates_weights",
]

_MARKS = ("gradient_tape/", "gradients/")
# The name scopes of the optimizers seen updating weights while a tf.function traced:
# Keras 3 names its update ops after the optimizer ("adam/AssignSubVariableOp"), ops
# other code makes too; under such a scope they are an optimizer's (few: one a model)
_UPDATE_SCOPES: set[str] = set()
_MAX_SCOPES = 64
# TF's optimizer kernels (tf_keras', tf.compat.v1's optimizers): an update wherever found
_APPLY_OPS = ("ResourceApply", "ResourceSparseApply")


def _backward(name: str, op: str) -> bool:
    """A gradient op: under a gradient scope, or a kernel's gradient of its weights.
    ``Conv2DBackpropInput`` alone is no backward pass: it is the forward op of
    ``Conv2DTranspose`` (a segmentation model's predict() read as a training step)."""
    return "BackpropFilter" in op or any(mark in name for mark in _MARKS)


def has_backward_pass(concrete: Any) -> bool | None:
    """True where ``concrete``'s graph or a function it calls computes gradients; None
    where the graph cannot be read."""
    return _any_op(concrete, _backward)


def _any_op(concrete: Any, test: Callable[[str, str], bool]) -> bool | None:
    """Whether ``test(name, type)`` holds for an op of ``concrete``'s graph or of a
    function it calls (their bodies, in its library); None where it cannot be read."""
    try:
        graph = concrete.graph
        if any(test(op.name, op.type) for op in graph.get_operations()):
            return True
        library = graph.as_graph_def().library
    except Exception:  # noqa: BLE001 - a graph we cannot read: unknown
        return None
    return any(test(node.name, node.op) for fn in library.function for node in fn.node_def)


def note_traced_update(scope: str | None) -> None:
    """An optimizer named ``scope`` updated weights inside a trace (the optimizer hook,
    keras_hooks.py, calls it where its update does not run eagerly)."""
    if scope and len(_UPDATE_SCOPES) < _MAX_SCOPES:
        _UPDATE_SCOPES.add(f"{scope}/")


def _update(name: str, op: str) -> bool:
    if op.startswith(_APPLY_OPS):
        return True
    return op.startswith("Assign") and any(
        name.startswith(scope) or f"/{scope}" in name for scope in _UPDATE_SCOPES
    )


def updates_weights(concrete: Any) -> bool | None:
    """True where ``concrete``'s graph (or a function it calls) applies an optimizer's
    update: a step that takes its gradients eagerly and applies them in a tf.function
    (``loop_step(grads)``: gpuwhy's own fix for a loop's eager ops) trains, though its
    graph has no backward pass. None where the graph cannot be read."""
    return _any_op(concrete, _update)


def traced_before(function: Any) -> list[Any]:
    """The ConcreteFunctions a ``tf.function`` holds from traces made before gpuwhy
    watched it (a notebook cell run again: its functions were traced by the first run);
    empty where there are none or TF's private ``_list_all_concrete_functions`` is gone."""
    try:
        return list(function._list_all_concrete_functions())
    except Exception:  # noqa: BLE001 - a TF without it: nothing known
        return []


def full_batch_trace(traces: list[Any]) -> Any:
    """The trace the step's calls mostly run: the latest, or an earlier one that differs
    from it only in its inputs' first dimension, where that is larger in every input.
    An epoch whose examples do not divide by the batch size ends with a smaller batch
    that traces the step again (60,000 at 64: a last batch of 32); that trace is the
    latest, and it runs once an epoch."""
    latest = traces[-1]
    key = _batch_key(latest)
    if key is None:
        return latest
    best, best_batch = latest, key[1]
    for trace in traces[:-1]:
        other = _batch_key(trace)
        if other is None or other[0] != key[0]:
            continue
        if all(a >= b for a, b in zip(other[1], best_batch)) and other[1] != best_batch:
            best, best_batch = trace, other[1]
    return best


def _batch_key(concrete: Any) -> tuple[tuple, tuple[float, ...]] | None:
    """(each tensor input's dtype and dimensions after the first, their first
    dimensions: None as the largest); None where the signature cannot be read."""
    try:
        import tensorflow as tf

        specs = [
            s
            for s in tf.nest.flatten(concrete.structured_input_signature)
            if isinstance(s, tf.TensorSpec)
        ]
        if not specs or any(s.shape.rank is None or s.shape.rank == 0 for s in specs):
            return None
        rest = tuple((s.dtype.name, tuple(s.shape.as_list()[1:])) for s in specs)
        first = tuple(
            float("inf") if s.shape.as_list()[0] is None else float(s.shape.as_list()[0])
            for s in specs
        )
    except Exception:  # noqa: BLE001 - the latest trace, as before
        return None
    return rest, first
