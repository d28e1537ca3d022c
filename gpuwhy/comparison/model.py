"""What `gpuwhy diff` found between two records: frozen dataclasses, the contract between
the comparison (gpuwhy/comparison/) and its renderers (report/diff/). Its JSON is
``to_dict`` of :class:`Comparison` (the facts' codec); gpuwhy/schema/diff.schema.json is
generated from these classes by tools/generate_schema.py.

Every change carries its 95 % interval. A difference is *called* only when the interval
of the runs' spread leaves no-change out: "same" is a verdict too, with the smallest
change these runs could have shown. With several runs a side the spread is the runs'
between each other (between_runs.py); with one a side, each run's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DIFF_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RunSide:
    """One of the two records, as the comparison read it."""

    path: str
    command: str  # run | watch | merge | audit
    created: str
    verdict: str
    steps: int = 0  # training steps after warm-up that were compared
    units: int = 0  # the windows (or blocks of steps) they were resampled by
    basis: str | None = None  # "steps kept one by one, in blocks of 40" | "1 s windows"
    seconds: float = 0.0  # training time compared
    # several records a side: each one's path and mean time per step (its level)
    runs: int = 1
    run_paths: tuple[str, ...] = ()
    run_step_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class Change:
    """One measure of both runs with the interval of AFTER / BEFORE (ratios) or AFTER -
    BEFORE (shares, in points)."""

    measure: str  # step_time | example_time | gpu_busy | projected_step | cpu_per_step | fast_steps
    before: float  # seconds per step; a share for gpu_busy
    after: float
    estimate: float  # AFTER / BEFORE (a share: AFTER - BEFORE)
    low: float  # 95 % interval of the estimate
    high: float
    called: str  # faster | slower | same | higher | lower
    detectable: float  # the smallest change these runs show: the interval's half-width
    median_before: float | None = None  # step time: the medians, for people
    median_after: float | None = None


@dataclass(frozen=True)
class PartChange:
    """One part of a step in both runs, split the way the record splits it, per step."""

    part: str  # input | tracing | traced_step | eager | python | rest | collectives
    label: str  # "waiting for input"
    before_s: float  # seconds per step
    after_s: float
    delta_s: float  # after - before
    # its 95 % interval (None: measured once per run, or too few windows for a spread)
    low_s: float | None
    high_s: float | None
    share: float | None  # of the step-time change (None when the step time did not change)
    called: bool  # the interval leaves zero out (no interval: a quarter of the change)
    measured_by: str  # how the record measured it: "next() timing", "estimated from ..."


@dataclass(frozen=True)
class FindingChange:
    """A finding that appeared, disappeared or changed severity between the records."""

    id: str
    change: str  # new | gone | worse | better
    severity_before: str | None
    severity_after: str | None
    title: str  # AFTER's title (BEFORE's when gone)
    location: str | None = None


@dataclass(frozen=True)
class EnvironmentChange:
    """Something the two runs did not share: a version, the GPU, the batch, a policy."""

    what: str  # "TensorFlow", "GPU", "batch size", "mixed precision", "XLA"
    before: str | None
    after: str | None


@dataclass(frozen=True)
class AlignedWindow:
    """One window of a run's training, from its first counted step: the HTML's two
    timelines drawn on one axis."""

    start_s: float  # from the run's first step after warm-up
    steps: int
    p50_s: float | None
    mean_s: float
    input_share: float | None = None
    gpu_busy: float | None = None


@dataclass(frozen=True)
class Comparison:
    """``gpuwhy diff BEFORE AFTER``: the verdict, where the time went, the findings and
    environment that changed, and both timelines."""

    verdict: str
    before: RunSide
    after: RunSide
    step_time: Change | None = None
    # the program's own CPU time per step (several runs a side): the machine's load moves
    # it less; it calls a step-time change its interval leaves open when both point the
    # same way (gpuwhy/comparison/work.py)
    cpu_time: Change | None = None
    # the runs' fastest steps (the tenth percentile of each run's step time, several
    # runs a side): the machine's noise lengthens some steps and leaves these; read as
    # cpu_time is (gpuwhy/comparison/work.py)
    fast_steps: Change | None = None
    # the batch size differs: the time per example (the step's over its batch), which
    # the verdict and the gate's step condition then read
    example_time: Change | None = None
    batches: tuple[int, int] | None = None
    gpu_busy: Change | None = None
    # --target: the step projected onto the same GPU from each record's traced graph
    # (a prediction: low/high are AFTER's band over BEFORE's middle, not a spread)
    projected_step: Change | None = None
    projected_gpu: str | None = None
    parts: tuple[PartChange, ...] = ()
    findings: tuple[FindingChange, ...] = ()
    # findings new, gone, worse or better in the records whose measure only crossed its
    # threshold: the other side's runs reach them too with it a fifth looser
    # (gpuwhy/comparison/near_threshold.py); not in ``findings``
    findings_near_threshold: tuple[FindingChange, ...] = ()
    environment: tuple[EnvironmentChange, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be compared, and why
    # why a called step-time change may be the machine's rather than the program's (the
    # host's other processes took a different share of its CPU): the gate does not fail
    # on such a change, and says why
    confounded_by: str | None = None
    timeline_before: tuple[AlignedWindow, ...] = ()
    timeline_after: tuple[AlignedWindow, ...] = ()
    # how the intervals were made: "between runs" (several runs a side: their variation
    # estimated from the runs) or "within runs" (one a side: each run's own spread)
    spread: str = "within runs"
    schema: int = field(default=DIFF_SCHEMA_VERSION)
