"""A few steps under TensorFlow's own profiler, in memory: the op kernels each step ran,
with their node names and durations.

``ProfilerSession.stop()`` (the pybind session behind ``tf.profiler.experimental``)
returns the host trace as a serialized ``Trace`` (trace_events.proto): one event per op
kernel run, per TF runtime call, on each thread. Nothing is written to disk. Private API
(``tensorflow.python.profiler.internal._pywrap_profiler``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# host tracer level 2: every op kernel (level 1 is only the user's TraceMe annotations)
OPTIONS = {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1}
FUNCTION_CALL = "EagerLocalExecute: "  # + the traced function's name: one call of it


@dataclass(frozen=True)
class Event:
    name: str  # op type ("CollectiveReduceV2") or runtime marker
    thread: tuple[int, int]  # (device, resource): one host thread
    start_ps: int
    duration_ps: int
    op: str = ""  # the node's name where the event carries it ("dense/MatMul"; the
    # nodes of an inlined function body under their call node's: "PartitionedCall/...")
    host: bool = True  # on the host's plane (not a GPU's)


def start(device: bool = True) -> Any:
    """A running profiler session; raises where another one runs (the program's own).
    ``device``: trace the GPUs' kernels too (CUPTI); without it, the host's events only
    (a far smaller trace where a GPU runs thousands of kernels a step)."""
    from tensorflow.python.profiler.internal import _pywrap_profiler

    session = _pywrap_profiler.ProfilerSession()
    session.start("", {**OPTIONS, "device_tracer_level": 1 if device else 0})
    return session


def stop(session: Any, keep: Any) -> list[Event]:
    """Stop ``session``; the events whose name ``keep(name)`` accepts, in time order."""
    from tensorflow.tsl.profiler.protobuf import trace_events_pb2

    trace = trace_events_pb2.Trace()
    trace.ParseFromString(session.stop())
    hosts = {d for d, device in trace.devices.items() if device.name.startswith("/host:")}
    events = [
        Event(
            name=e.name,
            thread=(e.device_id, e.resource_id),
            start_ps=e.timestamp_ps,
            duration_ps=e.duration_ps,
            op=_node(e.args.get("long_name", "") or e.args.get("name", ""), e.name),
            host=e.device_id in hosts or not hosts,
        )
        for e in trace.trace_events
        if keep(e.name)
    ]
    return sorted(events, key=lambda e: e.start_ps)


def _node(long_name: str, kernel: str) -> str:
    """An op kernel's event names it "<node name>:<kernel type>": the node name."""
    suffix = f":{kernel}"
    return long_name[: -len(suffix)] if long_name.endswith(suffix) else long_name
