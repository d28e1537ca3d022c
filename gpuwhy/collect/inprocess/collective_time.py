"""Measured time in collectives: one reading of the few profiled training steps
(gpuwhy.collect.inprocess.step_profile).

Once the training function has traced its all-reduce, the step profile samples a few
of its calls under TF's profiler. Each call is a step; the union of the collective
ops' intervals in it (CollectiveReduceV2 and the executor around it, NcclAllReduce ...)
is its time in collectives, any wait for a late peer included; with several replicas in
this process and one collective each per step, the time from the first replica
launching it to the last is the wait (not transfer). The share is taken within the
trace (both sides traced alike).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.collect.inprocess.step_profile import is_collective
from gpuwhy.facts.step_profile import StepProfile

__all__ = ["CollectiveTime", "collective_time", "is_collective"]


@dataclass(frozen=True)
class CollectiveTime:
    per_step_s: float
    share: float  # of the traced step (the training function's call)
    steps: int
    wait_s: float | None  # of per_step_s: first replica's launch to the last one's
    measured_by: str


def collective_time(profile: StepProfile) -> CollectiveTime | None:
    """The profile's calls that ran collectives: their time in them; None without one."""
    if not profile.collective_steps or not profile.collective_call_s:
        return None
    return CollectiveTime(
        per_step_s=profile.collective_s,
        share=profile.collective_s / profile.collective_call_s,
        steps=profile.collective_steps,
        wait_s=profile.collective_wait_s,
        measured_by=(
            f"TF profiler host trace of {profile.collective_steps} step(s) of "
            f"{profile.function}: the union of its collective ops' intervals, any wait for "
            "a late peer included"
        ),
    )


def not_measured(profile: StepProfile | None, function: str, reason: str | None) -> str:
    """The note where the time in collectives of ``function`` was not measured."""
    if profile is None:
        return f"collective time not measured: {reason or 'the steps were not profiled'}"
    if profile.function != function:
        return (
            f"collective time not measured: the profiled steps were of {profile.function}, "
            f"not {function}"
        )
    return (
        f"collective time not measured: no complete call of {function} with "
        "collective ops in the profiled steps (a reduction by copies and AddN, "
        "ReductionToOneDevice or HierarchicalCopyAllReduce, is not told apart "
        "from the model's ops)"
    )
