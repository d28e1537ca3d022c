"""The host's own work in a projected step: what no GPU shortens.

A training step is more than its kernels. Each step the host also runs the loop that
calls the compiled step (Keras' ``fit`` loop and its callbacks, or the program's own
``for`` loop, the eager ops in it) and pays for each call of the compiled function its
own fixed cost (arguments bound and flattened, the function looked up, its executor made,
its outputs handed back). Both are measured here, on this host's CPU, and costed at the
same time on the target's host (``HOST_FACTOR``: its core assumed between twice as fast
as this one and half again as slow):

- **between calls**: where the wait for input is inside the call (Keras' fit) or not
  timed, the median time from one call's end to the next one's start, both timed
  (collect/inprocess/functions.py): measured directly, whichever steps were timed.
  Where a Python loop's ``next()`` waits outside the call, the typical (median) step
  less the mean steady call of the projected function (the calls that traced are left
  out; the median step leaves out a step that retraced, or that a collection paused)
  and less the typical wait for input (the wait taken out step by step). On this host
  the calls include the model's compute; outside them there is only the host's own
  work. Not measured where the function also runs outside the training steps (Keras'
  validation runs a function of the same name and place: their calls cannot be told
  apart).
- **the call's own cost**: per call, from the few steps TF's profiler traced
  (collect/inprocess/step_profile.py): the whole call as Python made it, less the span
  of its ops; the median call's, the band spanning the middle half of the calls. Not
  measured where
  the steps were not profiled (the note says why).

The GPU runs one step's kernels while the host prepares the next: at best the two
overlap (the step is the larger), at worst they add up (a step that reads its loss back
every step, a callback that converts it to a number): the projected step's band spans
both (step.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuwhy.derived.pipeline import NEXT_TIMING
from gpuwhy.facts import (
    KERAS_TRAIN_FUNCTIONS,
    StepFacts,
    StepLoop,
    TracedFunction,
    TracingFacts,
)
from gpuwhy.facts.step_profile import StepProfile
from gpuwhy.formatting import duration
from gpuwhy.projection.cost import Band
from gpuwhy.projection.cpu_ops import HOST_FACTOR

UNPROFILED = "the steps were not profiled"  # where nothing says why


@dataclass(frozen=True)
class HostWork:
    """Per step, the host's own work on the target: measured parts and their band."""

    band: Band
    between_s: float | None  # per step, outside the calls and the input wait
    call_overhead_s: float | None  # per call of the compiled function (the median call's)
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


def steady_call_s(function: TracedFunction | None) -> float | None:
    """The mean call of ``function`` that did not trace (None: no such call)."""
    if function is None:
        return None
    steady = function.calls - min(function.traces, function.calls)
    return max(0.0, function.call_s - function.traced_call_s) / steady if steady > 0 else None


EPOCH_END_CALLS = 3  # calls beyond the steps that are read as epochs' ends, at least
EPOCH_END_SHARE = 0.02  # ... or this share of the steps (one an epoch of 50 steps or more)


def called_outside_steps(steps: StepFacts | None, function: TracedFunction | None) -> bool:
    """The function also ran outside the training steps: more calls than steps, or a
    Keras step function standing for several (Keras' validation and prediction steps
    share the training function's name and place, steps_per_execution may hide them)."""
    if steps is None or function is None:
        return False
    keras = function.name in KERAS_TRAIN_FUNCTIONS and function.instances > 1
    # a few more calls than steps are each epoch's last call, which finds no data (fit
    # makes one an epoch: 117 calls for 3 epochs of 38 steps), not work beside the steps
    spare = max(EPOCH_END_CALLS, EPOCH_END_SHARE * steps.count)
    return keras or function.calls > steps.count + spare


def function_loop(steps: StepFacts | None, function: TracedFunction | None) -> StepLoop | None:
    """Of a run's several loops, the one whose steps call ``function``: the loop named
    after it (a loop of its calls), else the loop its first trace fell in (a tf.data loop
    calling it: the trace is its first step), where that loop's steps are about as many
    as its calls. None with one loop, or where none is found."""
    if steps is None or function is None or len(steps.loops) < 2:
        return None
    named = [
        loop
        for loop in steps.loops
        if loop.name == function.name or loop.name.startswith(f"{function.name} (")
    ]
    if len(named) == 1:
        return named[0]
    if not function.signatures:
        return None
    traced = function.signatures[0].at_s
    for loop in steps.loops:
        end = loop.last_s if loop.last_s is not None else float("inf")
        if loop.first_s - 1e-6 <= traced <= end:
            spare = max(EPOCH_END_CALLS, EPOCH_END_SHARE * loop.count)
            return loop if loop.count - spare <= function.calls <= loop.count + spare else None
    return None


MIN_GAPS = 20  # timed call-to-call spans from which their median is the time between calls


def between_calls(steps: StepFacts | None, function: TracedFunction | None) -> float | None:
    """Per step, the host's time outside calls of ``function`` and outside the wait for
    input. None where the run has no typical step or no steady call, or where the
    function also ran outside the steps.

    Where no wait is timed outside the calls, the median span between two timed calls
    in a row, per step: the direct reading. A difference of two near-equal times (a
    0.5 ms step less a 0.48 ms call) is at the mercy of which steps were timed: the
    calls the per-step hooks timed (the first ones, then a twentieth of each second of
    a steady loop) need not be the steps the median holds, and a few percent
    between them is the whole time between calls.

    Where ``next()`` waits outside the calls, that span holds the wait: the typical
    step less the steady calls' mean per step, the smallest of three readings of it.

    - the median step less the median outside wait: a step that retraced or that a
      collection paused does not count, but where the waits come in two kinds (an
      input that holds up every other step) the median step and the mean call are of
      different steps, and the difference is input read as host work (a 2 ms step
      beside a 240 ms pipeline read as 150 ms of the host's own work);
    - the mean step less the mean outside wait: the same steps as the calls' mean, so a
      wait inside the calls (Keras' fit) cancels, but a rare long step counts;
    - the median of each kept step less its own wait (a loop's ``next()``): the wait
      taken out step by step.

    Each can only read high (input or a pause taken as host work), never low: the
    smallest is the one with least of either in it."""
    call_mean = steady_call_s(function)
    if steps is None or function is None or steps.median_s is None or call_mean is None:
        return None
    if steps.count <= 0 or called_outside_steps(steps, function):
        return None
    next_timed = steps.input_wait_source == NEXT_TIMING
    if not next_timed and function.gaps >= MIN_GAPS and function.gap_median_s is not None:
        return function.gap_median_s * min(1.0, function.calls / steps.count)
    in_calls = function.calls / steps.count * call_mean
    outside_wait = (steps.input_wait_median_s or 0.0) if next_timed else 0.0
    readings = [steps.median_s - outside_wait]
    judged = steps.count - steps.warmup
    if judged > 0 and steps.total_s > 0:
        mean_wait = (steps.input_wait_fraction or 0.0) * steps.total_s if next_timed else 0.0
        readings.append((steps.total_s - mean_wait) / judged)
    if next_timed:
        outside = [
            d - w
            for d, w in zip(steps.durations[steps.warmup :], steps.input_waits[steps.warmup :])
            if w is not None
        ]
        if outside:
            readings.append(statistics.median(outside))
    return max(0.0, min(readings) - in_calls)


def host_work(
    steps: StepFacts | None,
    tracing: TracingFacts | None,
    label: str,
    profile: StepProfile | None,
    unprofiled: str = UNPROFILED,
) -> HostWork | None:
    """The host's work per step for the projected function ``label``, where the run
    measured any of it (None: neither part measured); ``unprofiled`` says why there is
    no ``profile``."""
    function = traced_function(tracing, label)
    between = between_calls(steps, function)
    name = label.split(" (", 1)[0]
    # a call whose ops span it whole has a measured cost of 0 (Keras' fit: its iterator's
    # ops start as the call does), not an unmeasured one
    measured = (
        profile is not None and profile.function == name and profile.call_overhead_s is not None
    )
    overhead = profile.call_overhead_s if measured and profile is not None else None
    least, most = (
        profile.call_overhead_range_s
        if measured and profile is not None and profile.call_overhead_range_s
        else (overhead or 0.0, overhead or 0.0)
    )
    whole = steady_call_s(function)
    if overhead is not None and whole is not None:
        # traced calls run slower: a call's own cost is never more than the whole call
        # measured untraced
        overhead, least, most = min(overhead, whole), min(least, whole), min(most, whole)
    if between is None and overhead is None:
        return None
    per_step = (
        min(1.0, function.calls / steps.count)
        if function is not None and steps is not None and steps.count and function.calls
        else 1.0
    )
    low_factor, _, high_factor = HOST_FACTOR
    outside = between or 0.0
    band = Band(
        low_factor * (outside + least * per_step),
        outside + (overhead or 0.0) * per_step,
        high_factor * (outside + most * per_step),
    )
    parts = []
    if between is not None:
        parts.append(
            f"{duration(between)} per step between its calls (the loop, callbacks, eager ops)"
        )
    if overhead is not None:
        low, high = duration(least), duration(most)
        spread = f", {low}–{high} over most calls" if low != high else ""
        parts.append(
            f"{duration(overhead)} per call of {name} outside its ops (Python's call and the "
            f"runtime's set-up; TF profiler trace of {profile.steps if profile else 0} "
            f"calls{spread})"
        )
    missing = []
    if between is None:
        missing.append(
            f"the time between its calls ({name} also ran outside the training steps, as a "
            "validation does: their calls cannot be told apart)"
            if called_outside_steps(steps, function)
            else "the time between its calls"
        )
    if overhead is None:
        why = (
            unprofiled
            if profile is None
            else f"the profiled calls were of {profile.function}"
            if profile.function != name
            else "the profiled calls measured none"
        )
        missing.append(f"the call's own cost ({why})")
    note = (
        "the host's own work, measured here: "
        + "; ".join(parts)
        + f"; costed at that time on the target's host ({low_factor:g}x–{high_factor:g}x), "
        "overlapping the GPU's work at best, added to it at worst"
        + (f"; not measured: {'; '.join(missing)}" if missing else "")
    )
    return HostWork(
        band=band,
        between_s=between,
        call_overhead_s=overhead,
        calls_per_step=per_step,
        note=note,
    )


def unmeasured_note(
    steps: StepFacts | None,
    tracing: TracingFacts | None,
    label: str,
    profile: StepProfile | None,
    unprofiled: str,
) -> str:
    """Said where neither part of the host's work was measured, with why."""
    function = traced_function(tracing, label)
    name = label.split(" (", 1)[0]
    if called_outside_steps(steps, function):
        between = (
            f"{name} also ran outside the training steps ({function.calls if function else 0:,} "
            f"calls for {steps.count if steps else 0:,} steps: a validation, or calls beside the loop)"
        )
    else:
        between = "no typical step or steady call to measure against"
    if profile is None:
        call = unprofiled
    elif profile.function != name:
        call = f"the profiled calls were of {profile.function}"
    else:
        call = "no op of its calls ran on the host while profiled"
    return (
        "the host's own work per step (the loop between calls, each call's own cost) is "
        f"not in the projection: not measured (between the calls: {between}; the call: "
        f"{call})"
    )
