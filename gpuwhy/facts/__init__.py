"""Facts: the plain data that collectors produce and rules read.

Collectors never decide and rules never touch TensorFlow or NVML; this package is the
contract between them. Every section is a frozen dataclass made only of JSON-friendly
values, so a saved run record can be loaded on another machine and checked again with
the current rules (``gpuwhy report --recheck``) without filling anything from the
machine that loads it.

One module per section or group of related sections (environment.py: environment and
devices; steps.py: steps, eager and tracing; workers.py: task and workers; ...),
codec.py the JSON round trip, and here ``Facts``, all the sections of one run; every
name is imported from here (``from gpuwhy.facts import StepFacts``). The sections of a
watched run (``gpuwhy run``, ``gpuwhy.session()``, ``gpuwhy watch``) share one clock:
times are seconds since the run started (time.perf_counter() at start), so steps,
traces and GPU samples line up on one axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts.capture import (
    CaptureCopies,
    CaptureDevice,
    CaptureFacts,
    CaptureKernel,
    CaptureModule,
    CaptureStep,
    HostOp,
    HostShare,
    PythonFrame,
)
from gpuwhy.facts.codec import from_dict, to_dict
from gpuwhy.facts.distribute import DistributedInput, DistributeFacts, ReducedValue
from gpuwhy.facts.environment import (
    DriverFacts,
    EnvironmentFacts,
    GpuDevice,
    GpuProcess,
    LibraryProbe,
    TensorFlowFacts,
)
from gpuwhy.facts.fix_trials import FixTrialFacts, FixTried
from gpuwhy.facts.gpu_samples import (
    CLOCK_REASONS,
    SLOWDOWN_BITS,
    ClockReason,
    ClockReasonSeries,
    GpuBusy,
    GpuLatest,
    GpuSamplesFacts,
    GpuSeries,
    WindowSpread,
)
from gpuwhy.facts.input_fixes import InputFix, InputFixFacts, PipelineChange, PipelineRate
from gpuwhy.facts.placement import (
    KERAS_PREDICT_FUNCTIONS,
    KERAS_STEP_BODY,
    KERAS_STEP_FUNCTIONS,
    KERAS_TRAIN_FUNCTIONS,
    PLACEMENT_REASONS,
    AuditedFunction,
    Disagreement,
    FloatIndex,
    HostDeviceCopy,
    KernelWork,
    OpGroup,
    PlacementCheck,
    PlacementFacts,
    TensorOp,
    is_input_boundary,
)
from gpuwhy.facts.program import ProgramFacts
from gpuwhy.facts.projection import NvmlReading, ProjectionFacts, TargetFacts
from gpuwhy.facts.stalls import (
    Activity,
    LoopStalls,
    Stall,
    StallBeat,
    StallCause,
    StallFacts,
)
from gpuwhy.facts.step_profile import NodeTime, StepProfile
from gpuwhy.facts.steps import (
    EagerFacts,
    EagerOpSite,
    ReboundName,
    StepCode,
    StepFacts,
    StepLoop,
    StepSpan,
    StepTimeline,
    TracedFunction,
    TraceSignature,
    TracingFacts,
)
from gpuwhy.facts.tfdata import PipelineFacts, PipelineStage, TfDataFacts
from gpuwhy.facts.timeline import GpuWindow, GrowingObject, OpenFigures, RunTimeline, RunWindow
from gpuwhy.facts.workers import MergedFinding, TaskFacts, WorkerInput, WorkerRun, WorkersFacts

__all__ = [
    "CaptureCopies",
    "CaptureDevice",
    "CaptureFacts",
    "CaptureKernel",
    "CaptureModule",
    "CaptureStep",
    "HostOp",
    "HostShare",
    "PythonFrame",
    "Activity",
    "CLOCK_REASONS",
    "SLOWDOWN_BITS",
    "AuditedFunction",
    "ClockReason",
    "ClockReasonSeries",
    "Disagreement",
    "DistributeFacts",
    "DistributedInput",
    "DriverFacts",
    "EagerFacts",
    "EagerOpSite",
    "EnvironmentFacts",
    "Facts",
    "FloatIndex",
    "GpuDevice",
    "GpuBusy",
    "GpuLatest",
    "GpuProcess",
    "GpuSamplesFacts",
    "GpuWindow",
    "GpuSeries",
    "GrowingObject",
    "OpenFigures",
    "HostDeviceCopy",
    "InputFix",
    "InputFixFacts",
    "KernelWork",
    "LibraryProbe",
    "LoopStalls",
    "MergedFinding",
    "OpGroup",
    "PLACEMENT_REASONS",
    "PipelineChange",
    "PipelineFacts",
    "PipelineRate",
    "PipelineStage",
    "PlacementCheck",
    "PlacementFacts",
    "ProgramFacts",
    "NodeTime",
    "NvmlReading",
    "ProjectionFacts",
    "StepProfile",
    "TargetFacts",
    "ReboundName",
    "RunTimeline",
    "RunWindow",
    "ReducedValue",
    "Stall",
    "StallBeat",
    "StallCause",
    "StallFacts",
    "StepCode",
    "StepFacts",
    "StepLoop",
    "StepSpan",
    "StepTimeline",
    "TaskFacts",
    "TensorFlowFacts",
    "TensorOp",
    "TfDataFacts",
    "TraceSignature",
    "TracedFunction",
    "TracingFacts",
    "WindowSpread",
    "WorkerInput",
    "WorkerRun",
    "WorkersFacts",
    "FixTrialFacts",
    "FixTried",
    "from_dict",
    "KERAS_PREDICT_FUNCTIONS",
    "KERAS_STEP_BODY",
    "KERAS_STEP_FUNCTIONS",
    "KERAS_TRAIN_FUNCTIONS",
    "is_input_boundary",
    "to_dict",
]


@dataclass(frozen=True)
class Facts:
    """All fact sections of one run. A section is ``None`` when it was not collected;
    rules that need it are then skipped and listed as not checked."""

    environment: EnvironmentFacts | None = None
    devices: tuple[GpuDevice, ...] | None = None
    placement: PlacementFacts | None = None
    program: ProgramFacts | None = None
    steps: StepFacts | None = None
    eager: EagerFacts | None = None
    tracing: TracingFacts | None = None
    gpu_samples: GpuSamplesFacts | None = None
    tfdata: TfDataFacts | None = None
    input_fixes: InputFixFacts | None = None
    fixes_tried: tuple[FixTried, ...] | None = None
    fix_trial: FixTrialFacts | None = None
    target: TargetFacts | None = None
    # derived from ``target`` and the other sections (derived/stage.py); kept here only
    # by records written before the ``target`` section, and by facts made by hand
    projection: ProjectionFacts | None = None
    distribute: DistributeFacts | None = None
    task: TaskFacts | None = None
    workers: WorkersFacts | None = None
    timeline: RunTimeline | None = None
    stalls: StallFacts | None = None
    capture: CaptureFacts | None = None

    def has(self, section: str) -> bool:
        return getattr(self, section, None) is not None
