"""What a tf.distribute strategy all-reduces, read where every training loop sends it.

Keras 3's optimizers (``fit`` and a custom loop's ``apply_gradients`` alike), tf_keras'
and a hand-written ``replica_ctx.all_reduce(...)`` all reach
``ReplicaContextBase.all_reduce`` with the per-replica values: under MirroredStrategy
(through ``merge_call`` and ``batch_reduce_to``) and under MultiWorkerMirroredStrategy
(straight to its collective ops) alike. That call is traced once per replica per
tf.function trace, so what it is given is what each step sends, in the dtype sent.

The values are gradients without names; Keras' ``BaseOptimizer.apply`` (every Keras 3
optimizer, LossScaleOptimizer's inner one included) says which variables they update,
in order. Private API (``tensorflow.python.distribute.distribute_lib``, keras.src).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.patching import Patch


@dataclass(frozen=True)
class Sent:
    """One value all-reduced: the variable it updates (else the tensor's op name)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str
    bytes: int | None  # None: a dimension unknown when traced (sparse gradients)
    sparse: bool = False


@dataclass(frozen=True)
class Reduction:
    """One ``all_reduce`` call as the first local replica traced it."""

    graph: str  # the outermost tf.function's graph name ("eager" outside one)
    graph_key: int  # id of the graph traced in (0: eager)
    values: tuple[Sent, ...]


_local = threading.local()


def install(on_reduce: Callable[[Reduction], None]) -> list[Patch]:
    """``on_reduce(reduction)`` at each all-reduce the first local replica makes."""
    from tensorflow.python.distribute import distribute_lib

    def make_all_reduce(original):
        def all_reduce(self, reduce_op, value, options=None):
            if not getattr(_local, "inside", False):
                try:
                    if getattr(self, "_local_replica_id", 0) == 0:
                        on_reduce(_reduction(value))
                except Exception:  # noqa: BLE001 - never into the program
                    pass
            _local.inside = True
            try:
                return original(self, reduce_op, value, options)
            finally:
                _local.inside = False

        return all_reduce

    patches = [Patch(distribute_lib.ReplicaContextBase, "all_reduce", make_all_reduce)]
    try:
        from keras.src.optimizers.base_optimizer import BaseOptimizer
    except Exception:  # noqa: BLE001 - no Keras 3: values keep their op names
        return patches

    def make_apply(original):
        def apply(self, grads, trainable_variables=None):
            stack = _stack()
            given = list(trainable_variables) if trainable_variables is not None else None
            stack.append(given if given is not None else self)
            try:
                return original(self, grads, trainable_variables)
            finally:
                stack.pop()

        return apply

    patches.append(Patch(BaseOptimizer, "apply", make_apply))
    return patches


def _stack() -> list:
    stack = getattr(_local, "applying", None)
    if stack is None:
        stack = _local.applying = []
    return stack


def _reduction(value: Any) -> Reduction:
    import tensorflow as tf
    from tensorflow.python.framework import func_graph, ops

    graph_name, key = "eager", 0
    if not tf.executing_eagerly():
        graph = ops.get_default_graph()
        key = id(graph)
        while isinstance(getattr(graph, "outer_graph", None), func_graph.FuncGraph):
            graph = graph.outer_graph
        graph_name = getattr(graph, "name", "graph")
    variables = _applying_variables()
    sent = []
    position = 0
    for item in tf.nest.flatten(value, expand_composites=False):
        sparse = isinstance(item, tf.IndexedSlices)
        tensor = item.values if sparse else item
        shape = tuple(tensor.shape.as_list()) if tensor.shape.rank is not None else ()
        dtype = tensor.dtype
        name, position = _variable_name(variables, position, shape)
        if name is None:
            name = _op_name(tensor)
        known = all(isinstance(d, int) for d in shape)
        count = 1
        for d in shape:
            count *= d if isinstance(d, int) else 1
        sent.append(
            Sent(
                name=name,
                shape=shape,
                dtype=dtype.name,
                bytes=count * dtype.size if known else None,
                sparse=sparse,
            )
        )
    return Reduction(graph=graph_name, graph_key=key, values=tuple(sent))


def _applying_variables() -> list:
    stack = getattr(_local, "applying", None)
    if not stack:
        return []
    top = stack[-1]
    if isinstance(top, list):
        return top
    return list(getattr(top, "_trainable_variables", None) or [])


def _variable_name(variables: list, position: int, shape: tuple) -> tuple[str | None, int]:
    """The next variable, from ``position`` on, of this gradient's shape (the optimizer
    all-reduces its gradients in its variables' order, leaving out missing ones)."""
    for index in range(position, len(variables)):
        variable = variables[index]
        try:
            if tuple(variable.shape) == shape:
                name = getattr(variable, "path", None) or getattr(variable, "name", None)
                return (str(name).removesuffix(":0") if name else None), index + 1
        except Exception:  # noqa: BLE001
            continue
    return None, position


def _op_name(tensor: Any) -> str:
    try:
        return str(tensor.op.name)
    except Exception:  # noqa: BLE001 - an eager tensor has no op
        return "value"
