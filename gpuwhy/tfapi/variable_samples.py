"""A few elements of each trainable variable alive in the process: what a training loop
computed, for a fix trial to compare where the loop prints nothing and has no Keras logs.

Variables are found on the heap (``gc``), the way no API lists every ``tf.Variable`` of a
program: Keras' models, optimizers' models and bare ``tf.Variable`` alike. Each is read
through a gather of at most :data:`PER_VARIABLE` elements at fixed places, never copied
whole (an embedding of a gigabyte costs what a bias costs). Variables of one name and
shape (replicas of a mirrored variable, unnamed ``tf.Variable``) are summed element by
element, so the order the heap lists them in does not matter. Private API:
``resource_variable_ops.BaseResourceVariable``.
"""

from __future__ import annotations

import gc
import math
import weakref

from gpuwhy.tfapi.op_callbacks import unseen

MAX_VARIABLES = 64  # (name, shape) groups read, in name order
PER_VARIABLE = 8  # elements read from each, evenly spaced


class VariableReader:
    """Reads the samples; the heap is walked once, before the loop's first step where the
    variables exist by then, else at the first read (a walk pauses the program: reads
    between its timed steps cost a few small ops), and the variables are held weakly."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, tuple[int, ...]], list] | None = None

    def prepare(self) -> None:
        """Walk the heap now (before the loop's timed steps: its first ``next()``)."""
        self._groups = _variables_on_heap()

    def samples(self) -> dict[str, float]:
        """``{"name[shape]#i": value}`` for the first :data:`MAX_VARIABLES` groups; empty
        where TensorFlow is not executing eagerly (inside a trace) or has no variables.
        gpuwhy's own ops: the eager op counter does not see them."""
        import tensorflow as tf

        if not tf.executing_eagerly():
            return {}
        groups = self._groups
        if not groups:  # not walked yet, or no variable then (a model built late)
            groups = self._groups = _variables_on_heap()
        out: dict[str, float] = {}
        with unseen():
            for (name, shape), refs in sorted(groups.items())[:MAX_VARIABLES]:
                variables = [v for v in (r() for r in refs) if v is not None]
                out.update(_group_samples(tf, name, shape, variables))
        return out


def _variables_on_heap() -> dict[tuple[str, tuple[int, ...]], list]:
    """Weak references to every trainable variable of a known shape, by (name, shape)."""
    from tensorflow.python.ops.resource_variable_ops import BaseResourceVariable

    groups: dict[tuple[str, tuple[int, ...]], list] = {}
    for obj in gc.get_objects():
        if isinstance(obj, BaseResourceVariable) and obj.trainable:
            shape = obj.shape
            if shape.rank is None or None in shape.as_list():
                continue
            try:
                ref = weakref.ref(obj)
            except TypeError:
                continue
            groups.setdefault((obj.name, tuple(shape.as_list())), []).append(ref)
    return groups


def _group_samples(tf, name: str, shape: tuple[int, ...], variables: list) -> dict[str, float]:
    """The group's elements at :data:`PER_VARIABLE` fixed places, summed over it."""
    size = math.prod(shape)
    if size == 0 or not variables:
        return {}
    count = min(PER_VARIABLE, size)
    places = [(k * size) // count for k in range(count)]
    totals = [0.0] * len(places)
    try:
        with tf.init_scope():
            for variable in variables:
                flat = tf.reshape(variable.read_value(), [-1])
                values = tf.gather(flat, places).numpy().astype(float).tolist()
                totals = [a + b for a, b in zip(totals, values)]
    except Exception:  # noqa: BLE001 - a variable that cannot be read here (another device's)
        return {}
    label = f"{name}{list(shape)}"
    return {f"{label}#{place}": total for place, total in zip(places, totals)}
