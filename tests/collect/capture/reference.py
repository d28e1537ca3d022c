"""An independent reading of the committed XProf captures (tests/data/xplane/) with
TensorFlow's own parser (``tensorflow.tsl.profiler.protobuf.xplane_pb2``) and nothing of
gpuwhy: what the capture reader's tests compare gpuwhy's reading with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "data" / "xplane"
H100 = DATA / "h100_slow_input"
TF_CPU = DATA / "tf_cpu"
TF_NAMES = (
    "keras_fit_slow_generator",
    "keras_fit_tensorboard_callback",
    "custom_loop_step_markers",
    "eager_python_loop",
)
JAX_CPU_ARRAYS = DATA / "jax_cpu" / "keras_fit_numpy_arrays"
# every committed capture, by a short name: h100_slow_input, the four tf_cpu ones and
# the JAX one made without a GPU
CAPTURES = {
    "h100_slow_input": next(H100.rglob("*.xplane.pb")),
    **{name: next((TF_CPU / name).rglob("*.xplane.pb")) for name in TF_NAMES},
    "jax_cpu_keras_fit_numpy_arrays": next(JAX_CPU_ARRAYS.rglob("*.xplane.pb")),
}


def xplane_pb2() -> Any:
    """TensorFlow's compiled xplane.proto (importing it imports TensorFlow)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from tensorflow.tsl.profiler.protobuf import xplane_pb2 as module

    return module


def parse(path: Path) -> Any:
    """The XSpace at ``path``, parsed whole by TensorFlow's message class."""
    space = xplane_pb2().XSpace()
    space.ParseFromString(Path(path).read_bytes())
    return space


def plane(space: Any, name: str) -> Any:
    (found,) = [p for p in space.planes if p.name == name]
    return found


def starts_ps(line: Any) -> np.ndarray:
    """Each event's start in ps on the capture's clock: the line's timestamp plus its offset."""
    return np.array([line.timestamp_ns * 1000 + e.offset_ps for e in line.events], np.int64)


def durations_ps(line: Any) -> np.ndarray:
    return np.array([e.duration_ps for e in line.events], np.int64)


def metadata_ids(line: Any) -> np.ndarray:
    return np.array([e.metadata_id for e in line.events], np.int64)


def line_name(line: Any) -> str:
    return line.display_name or line.name or f"line {line.id}"


def event_name(xplane: Any, event: Any) -> str:
    return xplane.event_metadata[event.metadata_id].name


def stats(xplane: Any, stat_list: Any) -> dict[str, Any]:
    """Stats by their metadata's name (those whose metadata the plane has); a
    ``ref_value`` read as the name of the stat metadata it refers to."""
    out: dict[str, Any] = {}
    for stat in stat_list:
        kind = stat.WhichOneof("value")
        if kind is None or stat.metadata_id not in xplane.stat_metadata:
            continue
        value = getattr(stat, kind)
        if kind == "ref_value":
            value = xplane.stat_metadata[value].name
        elif kind == "bytes_value":
            value = bytes(value)
        out[xplane.stat_metadata[stat.metadata_id].name] = value
    return out


def event_stats(xplane: Any, event: Any) -> dict[str, Any]:
    """An event's stats with its metadata's (its own win), as XProf reads them."""
    return {
        **stats(xplane, xplane.event_metadata[event.metadata_id].stats),
        **stats(xplane, event.stats),
    }


def union_total(pairs: list[tuple[int, int]]) -> int:
    """The length of the union of ``[start, end)`` pairs, by a sort and a sweep."""
    total, current = 0, None
    for start, end in sorted(pairs):
        if current is None or start > current[1]:
            if current is not None:
                total += current[1] - current[0]
            current = [start, end]
        else:
            current[1] = max(current[1], end)
    if current is not None:
        total += current[1] - current[0]
    return total


def clipped_total(pairs: list[tuple[int, int]], start: int, end: int) -> int:
    """The union of ``pairs`` inside ``[start, end)``."""
    inside = [(max(s, start), min(e, end)) for s, e in pairs if e > start and s < end]
    return union_total(inside)
