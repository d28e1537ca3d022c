"""The host's own work in a projected step: what no GPU shortens.

A training step is more than its kernels. Each step the host also runs the loop that
calls the compiled step (Keras' ``fit`` loop and its callbacks, or the program's own
``for`` loop, the eager ops in it) and pays for each call of the compiled function its
own fixed cost (arguments bound and flattened, the function looked up, its executor made,
its outputs handed back). Both are measured here, on this host's CPU, and costed at the
same time on the target's host (``HOST_FACTOR``: its core assumed between twice as fast
as this one and half again as slow):

- **between calls**: the steps' mean time less the mean time inside calls of the
  projected function (steady calls: the ones that traced are left out) and less the
  wait for input where it happens outside the call (a Python loop's ``next()``; in Keras'
  fit the wait is inside the call). On this host the calls include the model's compute;
  outside them there is only the host's own work.
- **the call's own cost**: per call, from the few steps TF's profiler traced
  (collect/inprocess/step_profile.py): the whole call as Python made it, less the span
  of its ops. Not measured where the steps were not profiled (the note says why).

The GPU runs one step's kernels while the host prepares the next: at best the two
overlap (the step is the larger), at worst they add up (a step that reads its loss back
every step, a callback that converts it to a number): the projected step's band spans
both (step.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.derived.step_profile import StepProfile
from gpuwhy.facts import StepFacts, TracedFunction, TracingFacts
from gpuwhy.formatting import duration
from gpuwhy.projection.cost import Band
from gpuwhy.projection.cpu_ops import HOST_FACTOR


@dataclass(frozen=True)
class HostWork:
    """Per step, the host's own work on the target: measured parts and their band."""

    band: Band
    between_s: float | None  # per step, outside the calls and the input wait
    call_overhead_s: float | None  # per call of the compiled function
    calls_per_step: float
    note: str


def traced_function(tracing: TracingFacts | None, label: str) -> TracedFunction | None:
    """The tracing record of the projected function (``name (file:line)``)."""
    if tracing is None:
        return None
    for function in tracing.functions:
        shown = f"{function.name} ({function.location})" if function.location else function.name
        if label in (shown, function.name):
            return function
    return None


def between_calls(steps: StepFacts | None, function: TracedFunction | None) -> float | None:
    """Per step, the host's time outside calls of ``function`` and outside the wait for
    input: the steps' mean less the steady calls' mean time per step. None where the run
    has no steps after warm-up or no steady call."""
    if steps is None or function is None or function.calls <= 0 or steps.count <= 0:
        return None
    counted = steps.count - steps.warmup
    steady = function.calls - min(function.traces, function.calls)
    if counted <= 0 or steps.total_s <= 0 or steady <= 0:
        return None
    step_mean = steps.total_s / counted
    call_mean = steady_call_s(function) or 0.0
    outside_wait = (
        (steps.input_wait_fraction or 0.0) * step_mean
        if steps.input_wait_source == NEXT_TIMING
        else 0.0
    )
    return max(0.0, step_mean - outside_wait - function.calls / steps.count * call_mean)


def steady_call_s(function: TracedFunction | None) -> float | None:
    """The mean call of ``function`` that did not trace (None: no such call)."""
    if function is None:
        return None
    steady = function.calls - min(function.traces, function.calls)
    return max(0.0, function.call_s - function.traced_call_s) / steady if steady > 0 else None


def host_work(
    steps: StepFacts | None,
    tracing: TracingFacts | None,
    label: str,
    profile: StepProfile | None,
) -> HostWork | None:
    """The host's work per step for the projected function ``label``, where the run
    measured any of it (None: neither part measured)."""
    function = traced_function(tracing, label)
    between = between_calls(steps, function)
    name = label.split(" (", 1)[0]
    overhead = (
        profile.call_overhead_s
        if profile is not None and profile.function == name and profile.call_overhead_s
        else None
    )
    whole = steady_call_s(function)
    if overhead is not None and whole is not None and overhead > whole:
        # traced calls run slower: a call's own cost is never more than the whole call
        # measured untraced
        overhead = whole
    if between is None and overhead is None:
        return None
    per_step = (
        function.calls / steps.count
        if function is not None and steps is not None and steps.count and function.calls
        else 1.0
    )
    here = (between or 0.0) + (overhead or 0.0) * per_step
    low, _, high = HOST_FACTOR
    parts = []
    if between is not None:
        parts.append(
            f"{duration(between)} per step between its calls (the loop, callbacks, eager ops)"
        )
    if overhead is not None:
        parts.append(
            f"{duration(overhead)} per call of {name} outside its ops (Python's call and the "
            f"runtime's set-up; TF profiler trace of {profile.steps if profile else 0} calls)"
        )
    missing = []
    if between is None:
        missing.append("the time between its calls")
    if overhead is None:
        missing.append("the call's own cost (the steps were not profiled)")
    note = (
        "the host's own work, measured here: "
        + "; ".join(parts)
        + f"; costed at that time on the target's host ({low:g}x–{high:g}x), overlapping "
        "the GPU's work at best, added to it at worst"
        + (f"; not measured: {', '.join(missing)}" if missing else "")
    )
    return HostWork(
        band=Band(low * here, here, high * here),
        between_s=between,
        call_overhead_s=overhead,
        calls_per_step=per_step,
        note=note,
    )
