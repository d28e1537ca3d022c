"""The program's precision settings and the local GPU, as TensorFlow reports them.

Tensor cores run float16/bfloat16 always, and float32 only as TF32 (Ampere and
newer, on unless ``tf.config.experimental.enable_tensor_float_32_execution(False)``).
Keras' global mixed-precision policy and XLA's ``jit_compile`` change which
kernels run, so the tensorcore rules need all three. Keras is read only when
the program already imported it: importing it here would cost seconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = ["jit_compile", "keras_policy", "local_gpu", "tf32_enabled"]


def tf32_enabled() -> bool | None:
    try:
        import tensorflow as tf

        return bool(tf.config.experimental.tensor_float_32_execution_enabled())
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
        return None


def keras_policy() -> str | None:
    """Keras' global dtype policy name ("mixed_float16"), None when Keras is not in use."""
    return _from_keras(lambda keras: keras.mixed_precision.global_policy().name)


def keras_floatx() -> str | None:
    """Keras' global float type ("float32", or "float64" after ``set_floatx``), None
    when Keras is not in use."""
    return _from_keras(lambda keras: keras.backend.floatx())


def _from_keras(read: Callable[[Any], Any]) -> str | None:
    """``read(keras)`` of the first Keras the program imported (keras, then tf_keras), as
    text; None where none is imported or reading it fails in every one."""
    for module_name in ("keras", "tf_keras"):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        try:
            return str(read(module))
        except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
            continue
    return None


def local_gpu() -> tuple[str, tuple[int, int] | None] | None:
    """(name, compute capability) of the first GPU TensorFlow sees here, None without one."""
    try:
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        if not gpus:
            return None
        details = tf.config.experimental.get_device_details(gpus[0])
        capability = details.get("compute_capability")
        return (
            str(details.get("device_name", gpus[0].name)),
            tuple(capability) if capability else None,
        )
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
        return None


def jit_compile(function: Any) -> bool:
    """Whether a concrete function is compiled by XLA (``tf.function(jit_compile=True)``)."""
    try:
        attrs = function._inference_function.attributes  # AtomicFunction attrs
    except AttributeError:
        try:
            attrs = function.function_def.attr
        except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
            return False
    value = attrs.get("_XlaMustCompile") if hasattr(attrs, "get") else None
    return bool(getattr(value, "b", value)) if value is not None else False
