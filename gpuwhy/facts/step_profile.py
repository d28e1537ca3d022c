"""What a few profiled training steps gave, per step: the type the step profiler
(collect/inprocess/step_profile.py) fills, collective_time reads for the time in
collectives and the projection (projection/cpu_ops.py) reads for the time of the ops
that stay on the CPU."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeTime:
    node: str  # as run: an inlined function's nodes under their call node ("PartitionedCall/x")
    kernel: str  # the kernel's type as run ("StringToNumber", "_MklMatMul")
    seconds: float  # per step


@dataclass(frozen=True)
class StepProfile:
    """Per step (one call of ``function``) in the profiled calls."""

    function: str  # the tf.function's name ("train_step", "multi_step_on_iterator")
    steps: int  # complete calls in the trace
    step_s: float  # their mean duration, traced
    nodes: tuple[NodeTime, ...]  # the longest, per step
    nodes_left_out: int  # nodes ran but not kept: each no longer than the last kept
    kernels: tuple[tuple[str, float], ...]  # kernel type -> seconds per step, all
    # calls that ran collective ops: how many, their mean duration, the mean union of
    # their collective intervals, and (several local replicas) the mean time from the
    # first replica launching its collective to the last
    collective_steps: int = 0
    collective_call_s: float = 0.0
    collective_s: float = 0.0
    collective_wait_s: float | None = None
    # per call, its own cost beside its ops: Python's __call__ and the runtime's set-up
    # and hand-back, outside the span of its ops (None: no op of it on the host)
    call_overhead_s: float | None = None  # the median call's
    call_overhead_range_s: tuple[float, float] | None = None  # its quartiles (the least
    # and the most of fewer than four calls)

    @property
    def measured_by(self) -> str:
        return f"TF profiler host trace of {self.steps} step(s) of {self.function}"
