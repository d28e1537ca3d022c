"""TensorFlow's own peak GPU memory per device, read in the TensorFlow process.

nvidia-smi and NVML see TensorFlow's *pool*: by default the BFC allocator reserves nearly
all free memory at start, so "memory used" says nothing about how much the model needs.
The allocator's own statistics do: ``tf.config.experimental.get_memory_info(device)``
returns ``{"current", "peak"}`` bytes in use (``TFE_GetMemoryInfo``,
tensorflow/python/eager/context.py, ``Context.get_memory_info``).

That call runs ``ensure_initialized()`` first, which on a GPU machine creates the devices
and reserves their memory. Asking must never do that, so the function answers only when
the program already initialised TensorFlow's eager context (``context.context_safe()`` and
its private ``_initialized`` flag, same file), and never imports TensorFlow itself.

It never imports anything either: the timeline polls it from its own thread from the
program's start, and a thread that imports a TensorFlow module while the program's main
thread is still importing ``tensorflow`` deadlocks on the two threads' module locks
(Python then raises ``_DeadlockError`` in one of them, the program's own import when
unlucky). So it reads modules only once their import has finished (the module's spec
is no longer ``_initializing``: importlib/_bootstrap.py, ``_load_unlocked``).
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["imported", "runtime_context", "tf_gpus", "tf_memory_in_use", "tf_peak_memory"]


def runtime_context():
    """TF's eager context if the program started TF's runtime, else None (no side effect,
    no import: safe from any thread)."""
    if imported("tensorflow") is None:
        return None
    context = imported("tensorflow.python.eager.context")
    if context is None:
        return None
    ctx = context.context_safe()
    return ctx if ctx is not None and getattr(ctx, "_initialized", False) else None


def imported(name: str) -> ModuleType | None:
    """The module ``name`` if its import has finished, else None (never imports it)."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def tf_gpus() -> tuple[str, ...]:
    """The logical GPUs the program's TF runtime created; () when it never started."""
    ctx = runtime_context()
    return tuple(d.name for d in ctx.list_logical_devices("GPU")) if ctx is not None else ()


def tf_peak_memory() -> dict[str, int]:
    """``{"GPU:0": peak bytes, ...}`` for every logical GPU; ``{}`` without GPUs, when
    TensorFlow was not imported, or when its runtime never started."""
    return _memory_info("peak")


def tf_memory_in_use() -> dict[str, int]:
    """``{"GPU:0": bytes in use now, ...}``, as :func:`tf_peak_memory` (a timeline polls
    it: memory that creeps up on the device through a run)."""
    return _memory_info("current")


def _memory_info(key: str) -> dict[str, int]:
    ctx = runtime_context()
    if ctx is None:
        return {}
    values: dict[str, int] = {}
    for device in ctx.list_logical_devices("GPU"):  # initialised: no side effect
        name = device.name.rsplit("device:", 1)[-1]  # "/device:GPU:0" -> "GPU:0"
        try:
            values[name] = int(ctx.get_memory_info(name)[key])
        except (ValueError, KeyError, RuntimeError):  # a device whose allocator keeps no stats
            continue
    return values
