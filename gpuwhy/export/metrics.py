"""The metrics gpuwhy publishes, and how a run's facts and findings become their values.

``METRICS`` is the one list of names, types, labels and meanings: docs/metrics.md's table
is checked against it, and a test compares a live endpoint scraped by a real Prometheus
with it. Names are stable: a dashboard or an alert written against them keeps working.

Every series carries the job's labels (identity.JOB_LABELS); per-GPU series add
dcgm-exporter's GPU labels, so ``gpuwhy_gpu_busy_ratio * on(Hostname, gpu)
group_left DCGM_FI_DEV_GPU_UTIL`` joins. A GPU's state now (its clock-event reasons, its
PCIe link, temperature, power, SM clock: the sampler's last reading) goes out under
dcgm-exporter's own field names and units, so a dashboard or alert written for
dcgm-exporter reads them from a job that has no dcgm-exporter beside it. Label sets are bounded: findings by the
catalogue (one gauge per active finding id), functions by ``MAX_FUNCTIONS`` over the
whole run (:func:`named_functions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuwhy.collect.identity import GPU_LABELS
from gpuwhy.collect.step_histogram import StepHistogram
from gpuwhy.derived.gpu_busy import busy_column
from gpuwhy.facts import Facts
from gpuwhy.projection.cost import training_function

MAX_FUNCTIONS = 20  # traced functions with their own series; the rest share "(other)"
OTHER_FUNCTIONS = "(other)"


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str  # gauge | counter | histogram (Prometheus types)
    labels: tuple[str, ...]  # beyond the job's labels
    help: str


METRICS = (
    Metric("gpuwhy_run_info", "gauge", ("mode", "command", "version"),
           "1 while gpuwhy watches this job: what it runs (mode run or watch)"),
    Metric("gpuwhy_run_seconds", "gauge", (), "seconds since gpuwhy started the job"),
    Metric("gpuwhy_steps_total", "counter", (),
           "training steps measured (Keras batches, tf.data loop steps, optimizer steps)"),
    Metric("gpuwhy_step_seconds", "histogram", (),
           "duration of each training step after its loop's warm-up"),
    Metric("gpuwhy_input_wait_ratio", "gauge", (),
           "share of step time spent waiting for the input pipeline, over the run so far"),
    Metric("gpuwhy_gpu_busy_ratio", "gauge", GPU_LABELS,
           "share of time each GPU ran the program's work since the last update, from its best "
           "integrating source (GPM graphics utilisation, DCGM GR engine, the driver's samples)"),
    Metric("gpuwhy_eager_ops_per_step", "gauge", (),
           "ops dispatched eagerly from Python per training step (sampled steps)"),
    Metric("gpuwhy_tf_function_traces_total", "counter", ("function",),
           "tf.function traces (retracing) per function"),
    Metric("gpuwhy_host_device_copies_per_step", "gauge", (),
           "host<->device copies per call of the training function (placement audit, "
           "set when the run ends)"),
    Metric("gpuwhy_collective_ratio", "gauge", (),
           "share of the training step spent in collective ops (all-reduce, a wait for a "
           "late peer included), measured on a few steps under TF's profiler"),
    Metric("gpuwhy_finding", "gauge", ("id", "severity"),
           "1 for each finding active now (gpuwhy explain ID says what it is)"),
    Metric("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", GPU_LABELS,
           "NVML's clock-event reasons of each GPU now, the bitmask (0x1 idle, 0x4 SW power "
           "cap, 0x8 HW slowdown, 0x10 sync boost, 0x20 SW thermal, 0x40 HW thermal, 0x80 HW "
           "power brake)"),
    Metric("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", GPU_LABELS,
           "PCIe generation of each GPU's link now (an idle link downshifts)"),
    Metric("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", GPU_LABELS,
           "PCIe lanes of each GPU's link now"),
    Metric("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "gauge", GPU_LABELS,
           "PCIe replays (link errors) of each GPU, NVML's cumulative count (dcgm-exporter "
           "types it counter; rate() reads it the same)"),
    Metric("DCGM_FI_DEV_GPU_TEMP", "gauge", GPU_LABELS, "GPU temperature now (in C)"),
    Metric("DCGM_FI_DEV_POWER_USAGE", "gauge", GPU_LABELS, "power draw now (in W)"),
    Metric("DCGM_FI_DEV_SM_CLOCK", "gauge", GPU_LABELS, "SM clock now (in MHz)"),
)  # fmt: skip
# dcgm-exporter's name -> the GpuLatest field it publishes (the sampler's last reading)
GPU_NOW = {
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "clocks_event_reasons",
    "DCGM_FI_DEV_PCIE_LINK_GEN": "pcie_gen",
    "DCGM_FI_DEV_PCIE_LINK_WIDTH": "pcie_width",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "pcie_replay_counter",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz",
}


def metric(name: str) -> Metric:
    return next(m for m in METRICS if m.name == name)


@dataclass(frozen=True)
class Values:
    """What one update publishes, read from a run's facts and findings (pure data, so
    the reading is tested on small facts objects)."""

    run_s: float
    steps: int | None = None
    # every step published so far (the totals: the series' cumulative buckets)
    step_seconds: StepHistogram = field(default_factory=StepHistogram)
    input_wait_ratio: float | None = None
    gpu_busy: tuple[tuple[dict[str, str], float], ...] = ()  # (GPU labels, ratio)
    eager_ops_per_step: float | None = None
    traces: tuple[tuple[str, int], ...] = ()  # (function, traces so far)
    copies_per_step: float | None = None
    collective_ratio: float | None = None
    findings: tuple[tuple[str, str], ...] = ()  # (id, severity)
    gpu_now: tuple[tuple[str, dict[str, str], float], ...] = ()  # (GPU_NOW name, labels, value)


def values(
    facts: Facts,
    findings: Iterable[tuple[str, str]],
    run_s: float,
    step_seconds: StepHistogram | None = None,
    busy_before: Mapping[int, tuple[float, int]] | None = None,
    named: frozenset[str] | None = None,
) -> Values:
    """The values of ``facts`` (times in seconds since the run started): GPU busy is the
    mean of the samples taken since ``busy_before`` (the last update's
    :func:`busy_sums`; None: all of them); ``step_seconds`` the steps published so far;
    ``named`` the functions with a series of their own (:func:`named_functions`; None:
    the most traced now). :class:`~gpuwhy.export.live.LiveMetrics` keeps all three."""
    steps = facts.steps
    return Values(
        run_s=run_s,
        steps=steps.count if steps is not None else None,
        step_seconds=step_seconds.copy() if step_seconds is not None else StepHistogram(),
        input_wait_ratio=steps.input_wait_fraction if steps is not None else None,
        gpu_busy=tuple(_gpu_busy(facts, busy_before or {})),
        eager_ops_per_step=facts.eager.per_step if facts.eager is not None else None,
        traces=tuple(_traces(facts, named_functions(facts) if named is None else named)),
        copies_per_step=_copies(facts),
        collective_ratio=facts.distribute.collective_share if facts.distribute else None,
        findings=tuple(dict.fromkeys(findings)),
        gpu_now=tuple(_gpu_now(facts)),
    )


def busy_sums(facts: Facts) -> dict[int, tuple[float, int]]:
    """Per GPU index, its busy samples so far (the series derived/gpu_busy.py reads: GPM
    graphics utilisation, else the driver's own samples ...): their sum and how many had a value.
    Exact however the sampler's windows merged (each window's mean weighted by its known
    samples is its sum), and read from a bounded number of windows."""
    samples = facts.gpu_samples
    if samples is None:
        return {}
    sums = {}
    for gpu in samples.gpus:
        name = busy_column(gpu)
        values, known = getattr(gpu, name), gpu.column(name).known
        total = sum(v * k for v, k in zip(values, known) if k and v is not None)
        sums[gpu.index] = (total, sum(k for v, k in zip(values, known) if v is not None))
    return sums


def _gpu_busy(
    facts: Facts, before: Mapping[int, tuple[float, int]]
) -> list[tuple[dict[str, str], float]]:
    """Per GPU, the mean of its samples since ``before``: the difference of the sums, so
    exactly the samples taken since, whatever the width of the sampler's windows (in a
    long run one window spans minutes: the newest one would mix older samples in)."""
    labels = _gpu_labels(facts)
    busy = []
    for index, (total, n) in busy_sums(facts).items():
        total_before, n_before = before.get(index, (0.0, 0))
        if n > n_before:
            busy.append((labels[index], (total - total_before) / (n - n_before)))
    return busy


def _gpu_labels(facts: Facts) -> dict[int, dict[str, str]]:
    """dcgm-exporter's labels of each sampled GPU, by NVML index."""
    uuids = {d.index: d.uuid or "" for d in facts.devices or ()}
    gpus = facts.gpu_samples.gpus if facts.gpu_samples else ()
    return {
        g.index: {"gpu": str(g.index), "UUID": uuids.get(g.index, ""), "modelName": g.name}
        for g in gpus
    }


def _gpu_now(facts: Facts) -> list[tuple[str, dict[str, str], float]]:
    """Each GPU's last reading under dcgm-exporter's names; a value NVML did not give is
    left out (no series rather than a made-up zero)."""
    labels = _gpu_labels(facts)
    now = []
    for gpu in facts.gpu_samples.gpus if facts.gpu_samples else ():
        latest = gpu.latest
        if latest is None:
            continue
        for name, attribute in GPU_NOW.items():
            value = getattr(latest, attribute)
            if value is not None:
                now.append((name, labels[gpu.index], float(value)))
    return now


def named_functions(facts: Facts, named: frozenset[str] = frozenset()) -> frozenset[str]:
    """The functions whose traces get a series of their own: those ``named`` before, then
    the most traced of the others while fewer than ``MAX_FUNCTIONS`` are. A name keeps
    its series for the whole run, so the label values stay bounded however many
    functions a long run creates (a ``tf.function`` made anew every epoch), and a
    function's traces are never counted in its own series and in ``(other)`` too."""
    tracing = facts.tracing
    if tracing is None or len(named) >= MAX_FUNCTIONS:
        return named
    more = [f.name for f in sorted(tracing.functions, key=lambda f: -f.traces)]
    fresh = [name for name in dict.fromkeys(more) if name not in named]
    return named | frozenset(fresh[: MAX_FUNCTIONS - len(named)])


def _traces(facts: Facts, named: frozenset[str]) -> list[tuple[str, int]]:
    tracing = facts.tracing
    if tracing is None:
        return []
    counts: dict[str, int] = {}
    for function in sorted(tracing.functions, key=lambda f: -f.traces):
        name = function.name if function.name in named else OTHER_FUNCTIONS
        counts[name] = counts.get(name, 0) + function.traces
    return list(counts.items())


def _copies(facts: Facts) -> float | None:
    placement = facts.placement
    if placement is None or not placement.functions:
        return None

    function = training_function(placement)
    return None if function is None else float(function.input_copies + function.step_copies)
