"""Measured time in collectives: a few training steps under TF's profiler, once a run.

Once the training function has traced its all-reduce and run ``WARMUP_CALLS`` more
tf.function calls, a background thread starts TF's profiler (host trace in memory,
gpuwhy.tfapi.profiler_trace) for ``SAMPLE_CALLS`` calls and stops it. From the trace:
each call of the training function (``EagerLocalExecute: __inference_<name>_N``) is a
step; the union of the collective ops' intervals in it (CollectiveReduceV2 and the
executor around it, NcclAllReduce ...) is its time in collectives, any wait for a late
peer included; with several replicas in this process and one collective each per step,
the time from the first replica launching it to the last is the wait (not transfer).

The profiler runs for those few steps only (they run slower while traced; the share
is taken within the trace, both sides traced alike). Skipped, with a note, where the
program uses TF's profiler itself (two sessions cannot run at once).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

WARMUP_CALLS = 3
SAMPLE_CALLS = 4
MAX_SAMPLE_S = 20.0  # the profiler is stopped by then whatever the steps
POLL_S = 0.02
LAUNCH = "CollectiveOpV2Kernel::Run"  # one replica launching one collective


def is_collective(name: str) -> bool:
    lower = name.lower()
    return "collective" in lower or "nccl" in lower


@dataclass(frozen=True)
class CollectiveTime:
    per_step_s: float
    share: float  # of the traced step (the training function's call)
    steps: int
    wait_s: float | None  # of per_step_s: first replica's launch to the last one's
    measured_by: str


class CollectiveSampler:
    """``calls()``: tf.function calls so far (the step clock); ``start_after(name,
    replicas)`` when the function ``name`` traced an all-reduce over ``replicas``
    local replicas."""

    def __init__(self, calls: Callable[[], int] | None) -> None:
        self._calls = calls
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.result: CollectiveTime | None = None
        self.note: str | None = None

    def start_after(self, function: str, local_replicas: int) -> None:
        if self._calls is None or function == "eager":
            return
        with self._lock:
            if self._thread is not None:
                return
            if _program_profiles():
                self.note = "collective time not measured: the program runs TF's profiler itself"
                self._thread = threading.Thread()  # never started: no second try
                return
            self._thread = threading.Thread(
                target=self._sample,
                args=(function, local_replicas),
                name="gpuwhy-collective-time",
                daemon=True,
            )
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(timeout=10.0)

    def _wait_for(self, calls: int, until: float) -> bool:
        assert self._calls is not None
        while not self._stop.is_set() and time.perf_counter() < until:
            if self._calls() >= calls:
                return True
            time.sleep(POLL_S)
        return self._calls() >= calls

    def _sample(self, function: str, local_replicas: int) -> None:
        from gpuwhy.tfapi import profiler_trace

        assert self._calls is not None
        try:
            if not self._wait_for(self._calls() + WARMUP_CALLS, float("inf")):
                self.note = "collective time not measured: the run ended before its steps warmed up"
                return
            try:
                session = profiler_trace.start()
            except Exception as e:  # noqa: BLE001 - another profiler session runs
                self.note = f"collective time not measured: TF's profiler would not start ({e})"
                return
            started = time.perf_counter()
            self._wait_for(self._calls() + SAMPLE_CALLS + 1, started + MAX_SAMPLE_S)
            events = profiler_trace.stop(
                session, lambda n: is_collective(n) or n.startswith(profiler_trace.FUNCTION_CALL)
            )
            self.result = analyse(events, function, local_replicas)
            if self.result is None:
                self.note = (
                    f"collective time not measured: no complete call of {function} with "
                    "collective ops in the profiled steps (a reduction by copies and AddN, "
                    "ReductionToOneDevice or HierarchicalCopyAllReduce, is not told apart "
                    "from the model's ops)"
                )
        except Exception as e:  # noqa: BLE001 - never into the program
            self.note = f"collective time not measured: {type(e).__name__}: {e}"


def analyse(events: list, function: str, local_replicas: int) -> CollectiveTime | None:
    """Per call of ``function`` in the trace: the union of its collective intervals."""
    from gpuwhy.tfapi.profiler_trace import FUNCTION_CALL

    prefix = f"{FUNCTION_CALL}__inference_{function}_"
    calls = [e for e in events if e.name.startswith(prefix)]
    collectives = [e for e in events if is_collective(e.name)]
    inside, step_s, waits = 0.0, 0.0, []
    counted = 0
    for call in calls:
        end = call.start_ps + call.duration_ps
        mine = [e for e in collectives if call.start_ps <= e.start_ps < end]
        if not mine:
            continue
        counted += 1
        step_s += call.duration_ps / 1e12
        inside += _union(mine, end) / 1e12
        launches = sorted(e.start_ps for e in mine if e.name == LAUNCH)
        if local_replicas > 1 and len(launches) == local_replicas:
            waits.append((launches[-1] - launches[0]) / 1e12)
    if not counted or not step_s:
        return None
    return CollectiveTime(
        per_step_s=inside / counted,
        share=inside / step_s,
        steps=counted,
        wait_s=sum(waits) / len(waits) if len(waits) == counted else None,
        measured_by=(
            f"TF profiler host trace of {counted} step(s) of {function}: the union of its "
            "collective ops' intervals, any wait for a late peer included"
        ),
    )


def _union(events: list, end_ps: int) -> int:
    total, reach = 0, None
    for e in sorted(events, key=lambda e: e.start_ps):
        start, stop = e.start_ps, min(e.start_ps + e.duration_ps, end_ps)
        if reach is None or start > reach:
            total += max(0, stop - start)
            reach = stop
        elif stop > reach:
            total += stop - reach
            reach = stop
    return total


def _program_profiles() -> bool:
    """The script names TF's profiler (tf.profiler, Keras' TensorBoard profile_batch)."""
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else None
    if not script:
        return False
    try:
        text = Path(script).read_text(errors="replace")
    except OSError:
        return False
    return "profiler" in text or "profile_batch" in text
