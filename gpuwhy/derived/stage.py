"""The derivation stage: collect -> facts -> **derived** -> rules -> findings -> report.

A few values are derived from the facts and read by several layers: how busy each GPU
was, the pipeline the training steps read, the steps' wait and what it is, the step
projected onto the GPU ``--target`` named. Each is computed here and nowhere else, so
that one record cannot be read two ways (and a record rechecked, merged or compared is
projected by today's model from what its run measured). They are a named, ordered list
of derivations (after pyinstrument's processors), run once per record — live, replayed,
rechecked, merged, compared — and every reader takes the one result:
``derived(facts).gpu_busy``.

The stage sits above the parts it runs (derived/*, projection/*): they are pure
functions of their inputs, and the stage is what binds them to a record's facts.

The result belongs to the facts object it was derived from (kept beside it, never
inside it): facts built by hand in a test derive on first use, a record's facts derive
when the record is diagnosed. The record's JSON writes the published part
(:class:`Published`) in its own ``derived`` section, and the projection at its
top level, for readers of the file; loading a record derives again from its facts (the
facts are the source). Older records are migrated where they are read: their busy
blocks, kept inside ``gpu_samples``, are dropped (facts/codec.py ignores keys no
dataclass has), and a projection written before the ``target`` section is read as it
was projected (the profiled steps it was costed from were not kept).

Each derivation is a pure function of the facts and of the derivations before it; a
rule's option is never an input (a rule applies its threshold to what was derived, e.g.
:meth:`StepsWait.judged`).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gpuwhy.derived.capture import device_shares
from gpuwhy.derived.gpu_activity import program_gpus, usable
from gpuwhy.derived.gpu_busy import gpu_busy
from gpuwhy.derived.host_load import HostLoad, host_load
from gpuwhy.derived.input_wait import StepsWait, measured_wait
from gpuwhy.derived.pipeline import steps_pipeline
from gpuwhy.derived.step_windows import timeline_rows, training_spans
from gpuwhy.facts import (
    Facts,
    GpuBusy,
    GpuSeries,
    PipelineFacts,
    ProjectionFacts,
    RunWindow,
    StepSpan,
)
from gpuwhy.gpu_specs import UnknownGpuError
from gpuwhy.projection.host import UNPROFILED
from gpuwhy.projection.step import NothingToProject, projection_facts


@dataclass(frozen=True)
class Projected:
    """The training step projected onto the GPU ``--target`` named (projection/step.py),
    or, where it could not be (the GPU unknown, nothing to cost), why: for the program's
    notes."""

    projection: ProjectionFacts | None
    refused: str | None = None


@dataclass(frozen=True)
class Derived:
    """What the stage derived from one record's facts (see the module's docstring)."""

    # each sampled GPU's busy block, by its NVML index (derived/gpu_busy.py)
    gpu_busy: Mapping[int, GpuBusy]
    # the GPUs the program used with a busy share, busiest first (reliable ones first)
    program_busy: tuple[tuple[GpuSeries, GpuBusy], ...]
    # the pipeline the training steps read (derived/pipeline.py)
    steps_pipeline: PipelineFacts | None
    # the steps' measured wait and what it is, before any rule's threshold
    steps_wait: StepsWait | None
    # other processes' use of the host's cores over the run, before any threshold
    host_load: HostLoad | None
    # the phases of the steps: the main loop's timeline windows after its warm-up (the
    # drift, diff and merge read these), and the run timeline's row of each window
    training_spans: tuple[StepSpan, ...]
    timeline_rows: Mapping[int, RunWindow]
    # the training step projected onto the GPU ``--target`` named, or why not
    projected: Projected

    def busy_of(self, series: GpuSeries) -> GpuBusy | None:
        return self.gpu_busy.get(series.index)

    @property
    def projection(self) -> ProjectionFacts | None:
        return self.projected.projection

    @property
    def projection_refused(self) -> str | None:
        return self.projected.refused


@dataclass(frozen=True)
class Derivation:
    """One named step of the stage: ``derive(facts, earlier)`` -> its value, where
    ``earlier`` holds the values of the derivations before it, by name."""

    name: str
    derive: Callable[[Facts, Mapping[str, Any]], Any]
    what: str


def _gpu_busy(facts: Facts, earlier: Mapping[str, Any]) -> Mapping[int, GpuBusy]:
    """Each GPU's busy block; with ``run --capture`` and one GPU the program used, the
    captured steps' kernel share beside it (measured directly, at the run's pace)."""
    samples = facts.gpu_samples
    if not usable(samples):
        return MappingProxyType({})
    captured = device_shares(facts.capture, facts.steps.median_s if facts.steps else None)
    used = program_gpus(samples)
    if captured and len(used) == 1:  # the one GPU the program used
        captured = {used[0].index: next(iter(captured.values()))}
    elif len(samples.gpus) != 1:
        captured = {}
    blocks: dict[int, GpuBusy] = {}
    for series in samples.gpus:
        block = gpu_busy(series, facts.steps)
        if block is not None and series.index in captured:
            block = dataclasses.replace(
                block,
                kernels_share=round(captured[series.index], 4),
                kernels_steps=len(facts.capture.steps) if facts.capture else 0,
            )
        if block is not None:
            blocks[series.index] = block
    return MappingProxyType(blocks)


def _program_busy(
    facts: Facts, earlier: Mapping[str, Any]
) -> tuple[tuple[GpuSeries, GpuBusy], ...]:
    samples = facts.gpu_samples
    if not usable(samples):
        return ()
    busy: Mapping[int, GpuBusy] = earlier["gpu_busy"]
    blocks = [
        (series, busy[series.index])
        for series in program_gpus(samples)
        if series.index in busy and busy[series.index].share is not None
    ]
    return tuple(sorted(blocks, key=lambda sb: (not sb[1].reliable, -(sb[1].share or 0.0))))


def _steps_pipeline(facts: Facts, earlier: Mapping[str, Any]) -> PipelineFacts | None:
    return steps_pipeline(facts.tfdata, facts.steps)


def _steps_wait(facts: Facts, earlier: Mapping[str, Any]) -> StepsWait | None:
    return measured_wait(facts.steps, earlier["steps_pipeline"])


def _training_spans(facts: Facts, earlier: Mapping[str, Any]) -> tuple[StepSpan, ...]:
    steps = facts.steps
    if steps is None or steps.timeline is None:
        return ()
    return tuple(training_spans(steps))


def _timeline_rows(facts: Facts, earlier: Mapping[str, Any]) -> Mapping[int, RunWindow]:
    """The run timeline's windows by their index on the steps' timeline (the same
    width: a record whose two timelines differ has none)."""
    steps = facts.steps
    if steps is None or steps.timeline is None:
        return MappingProxyType({})
    return MappingProxyType(timeline_rows(facts, steps.timeline.width_s))


def _projected(facts: Facts, earlier: Mapping[str, Any]) -> Projected:
    """The step projected onto the target GPU from the ``target`` section and the
    others, or why it could not be; a record without that section (written before it,
    or facts made by hand) keeps the projection it holds."""
    target = facts.target
    if target is None:
        return Projected(facts.projection)
    try:
        return Projected(
            projection_facts(
                facts,
                target.requested,
                earlier["steps_pipeline"],
                facts.steps,
                facts.eager,
                profile=target.profile,
                unprofiled=target.unprofiled or UNPROFILED,
                peaks=target.peaks,
            )
        )
    except (UnknownGpuError, NothingToProject) as why:
        return Projected(None, f"no projection onto {target.requested}: {why}")


# The stage, in its order: each derivation may read the ones above it.
DERIVATIONS: tuple[Derivation, ...] = (
    Derivation("gpu_busy", _gpu_busy, "how busy each sampled GPU was"),
    Derivation("program_busy", _program_busy, "the GPUs the program used, busiest first"),
    Derivation("steps_pipeline", _steps_pipeline, "the pipeline the training steps read"),
    Derivation("steps_wait", _steps_wait, "the steps' measured wait and what it is"),
    Derivation("host_load", lambda facts, _: host_load(facts), "other processes' CPU load"),
    Derivation("training_spans", _training_spans, "the main loop's windows after warm-up"),
    Derivation("timeline_rows", _timeline_rows, "the run timeline's row of each step window"),
    Derivation("projected", _projected, "the step projected onto the --target GPU"),
)


def derive(facts: Facts) -> Derived:
    """Runs the stage over ``facts``: every derivation once, in order."""
    values: dict[str, Any] = {}
    for step in DERIVATIONS:
        values[step.name] = step.derive(facts, MappingProxyType(values))
    return Derived(**values)


# The stage's result, kept beside the facts object it came from (by identity: facts are
# frozen and compare by value, which is costly and not what is meant) until that object
# is gone.
_RESULTS: dict[int, Derived] = {}
_LOCK = threading.Lock()


def derived(facts: Facts) -> Derived:
    """The stage's result for these facts: derived once, on first use, then read."""
    key = id(facts)
    with _LOCK:
        found = _RESULTS.get(key)
    if found is not None:
        return found
    result = derive(facts)
    try:
        # the entry goes when the facts do: registered first, so that no entry is ever
        # left behind for another object to find under a reused id
        weakref.finalize(facts, _RESULTS.pop, key, None)
    except TypeError:  # facts of a kind that takes no weak reference: derived, not kept
        return result
    with _LOCK:
        return _RESULTS.setdefault(key, result)


# -- what the record's JSON writes ----------------------------------------------------------
@dataclass(frozen=True)
class GpuBusyOf:
    """One GPU's busy block, with the NVML index that names the GPU."""

    index: int
    busy: GpuBusy


@dataclass(frozen=True)
class Published:
    """The derived values a record's file keeps for its readers (its ``derived``
    section): written, never read back (loading derives again from the facts)."""

    gpu_busy: tuple[GpuBusyOf, ...] = ()
    # why ``--target`` gave no projection (the projection itself is the record's
    # top-level ``projection``, where readers of older records found it)
    projection_refused: str | None = None


def published(result: Derived) -> Published:
    return Published(
        gpu_busy=tuple(GpuBusyOf(i, b) for i, b in sorted(result.gpu_busy.items())),
        projection_refused=result.projection_refused,
    )
