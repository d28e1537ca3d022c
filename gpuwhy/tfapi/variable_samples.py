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

MAX_VARIABLES = 64  # (name, shape) groups read, in name order
PER_VARIABLE = 8  # elements read from each, evenly spaced


def samples() -> dict[str, float]:
    """``{"name[shape]#i": value}`` for the first :data:`MAX_VARIABLES` groups; empty
    where TensorFlow is not executing eagerly (inside a trace) or has no variables."""
    import tensorflow as tf
    from tensorflow.python.ops.resource_variable_ops import BaseResourceVariable

    if not tf.executing_eagerly():
        return {}
    groups: dict[tuple[str, tuple[int, ...]], list] = {}
    for obj in gc.get_objects():
        if isinstance(obj, BaseResourceVariable) and obj.trainable:
            shape = obj.shape
            if shape.rank is None or None in shape.as_list():
                continue
            groups.setdefault((obj.name, tuple(shape.as_list())), []).append(obj)
    out: dict[str, float] = {}
    for (name, shape), variables in sorted(groups.items())[:MAX_VARIABLES]:
        size = math.prod(shape)
        if size == 0:
            continue
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
            continue
        label = f"{name}{list(shape)}"
        for place, total in zip(places, totals):
            out[f"{label}#{place}"] = total
    return out
