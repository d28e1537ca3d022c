"""Where TensorFlow really placed each node of a function call (eager run metadata).

``context.enable_run_metadata()`` makes the eager runtime record, per function
call, the partition graphs it executed; each node there carries the device the
placer chose. That is the structured form of what
``tf.debugging.set_log_device_placement(True)`` prints, readable in-process
and on any device. Private API (``tensorflow.python.eager.context``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["placed_devices"]


def placed_devices(function: Any, args: tuple, kwargs: dict | None = None) -> dict[str, str]:
    """Run ``function(*args)`` once; return node name -> device name for every node it ran."""
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx.enable_run_metadata()
    try:
        function(*args, **(kwargs or {}))
        metadata = ctx.export_run_metadata()
    finally:
        ctx.disable_run_metadata()
    devices: dict[str, str] = {}
    for function_graph in metadata.function_graphs:
        for partition in function_graph.partition_graphs:
            for node in partition.node:
                devices[node.name] = node.device
    return devices
