"""The one-line text of each fact section, shown the same by every renderer: the
terminal report and the HTML report both say "Steps  96 by next() ...; median 91.7 ms"
from these functions, never from each other's private helpers."""

from __future__ import annotations

import json
from typing import Any

from gpuwhy.derived.pipeline import bottleneck
from gpuwhy.facts import (
    DistributedInput,
    DistributeFacts,
    EagerFacts,
    GpuSamplesFacts,
    OpGroup,
    PipelineFacts,
    PipelineStage,
    PlacementFacts,
    ProjectionFacts,
    StallFacts,
    StepFacts,
    TfDataFacts,
    TracedFunction,
    TracingFacts,
)
from gpuwhy.formatting import MiB, duration, stage_label


def steps_line(steps: StepFacts) -> str:
    text = f"{steps.count:,} by {steps.marker}"
    if steps.median_s is not None:
        text += f"; median {duration(steps.median_s)}, p90 {duration(steps.p90_s)}"
    if steps.warmup and steps.later_warmup:
        later = sum(1 for i in steps.later_warmup if i < len(steps.starts))
        spc = max(steps.steps_per_call, 1)
        first = max(steps.warmup - later * spc, 0)
        text += (
            f" ({steps.warmup} left out as warm-up: {first} at the start, {later} at the "
            "start of a later fit or loop)"
        )
    elif steps.warmup:
        text += f" (first {steps.warmup} left out as warm-up)"
    if steps.steps_per_call > 1:
        text += f"; {steps.steps_per_call} steps per call"
    if steps.input_wait_fraction is not None:
        text += (
            f"; waiting for input {steps.input_wait_fraction:.0%} of step time "
            f"(median {duration(steps.input_wait_median_s)} per step"
            + (f", by {steps.input_wait_source}" if steps.input_wait_source else "")
            + ")"
        )
    else:
        text += "; input wait not measured for this kind of loop"
    return text


MAX_PIPELINES = 3


def shown_pipelines(tfdata: TfDataFacts) -> list[PipelineFacts]:
    """The pipelines that gave the most elements (evaluate/predict come after training)."""
    order = {"keras-fit": 0, "python-loop": 0}
    return sorted(tfdata.pipelines, key=lambda p: (order.get(p.consumer, 1), -p.elements))[
        :MAX_PIPELINES
    ]


def pipeline_line(p: PipelineFacts) -> str:
    """One pipeline: what read it, how fast, what TF ran, and its slowest stage."""
    where = f" built at {p.location}" if p.location else ""
    text = f"tf.data pipeline{where}, read by {p.consumer}: {p.elements:,} elements"
    if p.iterators > 1:
        text += f" over {p.iterators} iterators"
    if p.throughput_per_s:
        text += f", {p.throughput_per_s:,.1f}/s"
    if p.stages:
        text += "; runs as " + " → ".join(stage_name(s) for s in p.stages)
    stage = bottleneck(p)  # None too when a saved record's index is out of range
    if stage is not None:
        text += f"; slowest stage {stage_label(stage)}"
        if stage.self_time_per_element_s is not None:
            text += f" ({duration(stage.self_time_per_element_s)} per element"
            text += (
                f", {stage.parallelism} threads)"
                if stage.parallelism and stage.parallelism > 1
                else ", sequential)"
            )
    if p.model_error:
        text += f"; TF's per-stage timers unavailable: {p.model_error}"
    return text


def stage_name(stage: PipelineStage) -> str:
    return stage.name + ("*" if not stage.written_as and stage.kind == "prefetch" else "")


def eager_line(eager: EagerFacts) -> str:
    if eager.sampled_steps and eager.per_step is not None:
        text = f"{eager.per_step:,.0f} per step over {eager.sampled_steps} sampled steps"
        if eager.dispatch_fraction is not None:
            text += f", about {eager.dispatch_fraction:.0%} of step time spent issuing them"
    else:
        text = f"{eager.ops:,} counted" + (
            f" ({eager.outside_steps:,} outside steps)" if eager.outside_steps else ""
        )
    if eager.sites:
        top = eager.sites[0]
        text += f"; most from {top.op} at {top.location or '?'}"
    return text


def distribute_line(distribute: DistributeFacts) -> str:
    """The strategy, how it reduces, and how the loops feed its replicas."""
    devices = ", ".join(d.rsplit("/", 1)[-1].removeprefix("device:") for d in distribute.devices)
    text = f"{distribute.strategy}, {distribute.replicas} replica(s)" + (
        f" ({devices})" if devices else ""
    )
    reduce = distribute.cross_device or ""
    if distribute.communication:
        reduce += f"{', ' if reduce else ''}collectives {distribute.communication}"
    if reduce:
        text += f"; all-reduce by {reduce}"
    if distribute.task_type is not None:
        text += f"; task {distribute.task_type} {distribute.task_index} of {distribute.workers} worker(s)"
    if distribute.parameter_servers:
        text += f", {distribute.parameter_servers} parameter server(s)"
    fed = []
    for given in distribute.inputs:
        fed.append(_distributed_input(given, distribute.replicas))
    if fed:
        text += "; distributed datasets: " + "; ".join(fed)
    elif distribute.runs:
        text += "; no dataset distributed"
    return text + _crossing(distribute)


def _distributed_input(given: DistributedInput, replicas: int) -> str:
    """One distributed dataset: its batch and how the workers divide it."""
    if given.how == "distribute_datasets_from_function":
        text = "from a dataset function" + (
            f" ({given.source} at {given.source_location})" if given.source_location else ""
        )
        if given.shard_applied is not None:
            text += ", sharded by its input context" if given.sharded_in_code else ", never sharded"
        return text
    text = (
        f"global batch {given.global_batch} ({given.global_batch / replicas:g} per replica)"
        if given.global_batch
        else "batch unknown"
    )
    text += f" at {given.location or '?'}"
    if given.shard_applied is not None:
        asked = given.auto_shard or "AUTO"
        text += f", auto-shard {asked}" + (
            f" -> {given.shard_applied}" if given.shard_applied != asked else ""
        )
        if given.shard_files is not None:
            text += f" over {given.shard_files} file(s)"
        if given.sharded_in_code:
            text += ", sharded in code"
    elif given.auto_shard:
        text += f", auto-shard {given.auto_shard}"
    return text


def _crossing(distribute: DistributeFacts) -> str:
    """What crosses devices each step: bytes all-reduced, the link, the predicted and the
    measured all-reduce time; the parameter servers' variable bytes."""
    text = ""
    if distribute.reduced_bytes is not None:
        text += (
            f"; all-reduces {distribute.reduced_bytes / 2**20:.2f} MiB a step in "
            f"{distribute.reduced_values} value(s)"
        )
        if distribute.link:
            text += f" over {distribute.link}"
        if distribute.allreduce_expected_s is not None:
            text += f", {distribute.allreduce_expected_s * 1000:.2f} ms predicted"
    if distribute.collective_step_s is not None and distribute.collective_share is not None:
        text += (
            f"; in collectives {distribute.collective_step_s * 1000:.2f} ms a step "
            f"({distribute.collective_share:.0%}, measured)"
        )
    if distribute.ps_bytes:
        text += (
            "; parameter servers hold "
            + ", ".join(f"{b / 2**20:.1f}" for b in distribute.ps_bytes)
            + " MiB"
        )
    return text


def calls_text(fn: TracedFunction) -> str:
    """ "10 calls"; for a function only ever run by another's graph (Keras'
    one_step_on_data inside multi_step_on_iterator), where it runs instead of "0 calls":
    its work is counted in that function's calls."""
    if fn.calls == 0 and fn.inside:
        return "runs inside " + ", ".join(fn.inside)
    return f"{fn.calls:,} calls"


def tracing_line(tracing: TracingFacts) -> str:
    parts = []
    for fn in sorted(tracing.functions, key=lambda f: (-f.traces, -f.calls))[:4]:
        where = f" ({fn.location})" if fn.location else ""
        xla = ", XLA-compiled" if fn.jit_compile else ""
        parts.append(
            f"{fn.name}{where}{xla}: {calls_text(fn)}, {fn.traces} trace"
            + ("s" if fn.traces != 1 else "")
            + (f" ({fn.trace_s:.1f} s)" if fn.trace_s >= 0.05 else "")
        )
    more = len(tracing.functions) - len(parts)
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


_ACTIVITY_WORDS = {"gc": "GC", "checkpoint": "checkpoint writes", "summary": "summary flushes",
                   "evaluate": "evaluate/predict"}  # fmt: skip


def stalls_line(stalls: StallFacts) -> str | None:
    """The loops' worst beats of stalls (``9 every 50 steps, 46.4 ms each: checkpoint at
    train.py:21, 9% of the loop``) and the time the activities took over the run; None
    where there is nothing to say."""
    parts = []
    beats = [(loop, beat) for loop in stalls.loops for beat in loop.beats if beat.count >= 3]
    for loop, beat in sorted(beats, key=lambda lb: -lb[1].lost_share)[:2]:
        regular = beat.every_steps and beat.period_fit is not None and beat.period_fit >= 0.6
        text = f"{beat.count:,} stalls" + (f" every {beat.every_steps:,} steps" if regular else "")
        text += f", {duration(beat.typical_stall_s)} each"
        cause = next((c for c in loop.causes if c.kind == beat.kind), None)
        if cause is None:
            text += ": nothing timed in them"
        else:
            what = f"GC ({cause.detail})" if cause.kind == "gc" else cause.detail or cause.kind
            text += f": {what}" + (f" at {cause.location}" if cause.location else "")
        between = " between steps" if loop.between_steps else ""
        parts.append(f"{text}{between}, {beat.lost_share:.0%} of the loop")
    for activity in stalls.activities:
        if activity.kind in _ACTIVITY_WORDS and activity.seconds >= 0.05:
            parts.append(
                f"{_ACTIVITY_WORDS[activity.kind]} {activity.seconds:,.2f} s in {activity.count:,}"
            )
    return "; ".join(parts) or None


def gpu_line(samples: GpuSamplesFacts) -> str:
    if samples.error in ("LibraryNotFound", "DriverNotLoaded"):
        return f"none: no NVIDIA driver here (NVML: {samples.error})"
    if samples.error:
        return f"none: {samples.error}"
    if not samples.gpus:
        return "none (no GPU)"
    parts = []
    for gpu in samples.gpus:
        util = gpu.mean("utilization")
        text = f"GPU {gpu.index} {gpu.name}: {gpu.sample_count()} samples at {samples.hz:g} Hz"
        if util is not None:
            text += f", busy {util:.0%} on average"
        sm = gpu.mean("sm_activity")
        if sm is not None:
            text += f", SM activity {sm:.0%}"
        peak = gpu.peak("memory_used_bytes")
        if peak is not None and gpu.memory_total_bytes:
            text += f", peak memory {peak / MiB:,.0f} of {gpu.memory_total_bytes / MiB:,.0f} MiB"
        parts.append(text)
    for device, peak in samples.tf_peak_memory_bytes.items():
        parts.append(f"TensorFlow's peak on {device}: {peak / MiB:,.0f} MiB")
    return "; ".join(parts)


def finding_causes(evidence: dict[str, Any]) -> list[tuple[str, str]] | None:
    """The ``causes`` of a finding as (title, detail) text, or None when its evidence has
    none in the shape rules write (a list of objects). Evidence is free-form in the
    schema, so a saved record may hold anything there: it is then shown as plain
    evidence rather than crash the report."""
    causes = evidence.get("causes")
    if not (isinstance(causes, list) and causes and all(isinstance(c, dict) for c in causes)):
        return None
    return [(_text(c.get("title", "")), _text(c.get("detail", ""))) for c in causes]


def _text(value: Any) -> str:
    """A free-form evidence value as text: strings as they are, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def tensorflow_line(tf) -> str:
    if not tf.installed:
        return "not installed" + (f" ({tf.import_error})" if tf.import_error else "")
    if not tf.import_ok:
        return f"import failed: {tf.import_error}"
    build = tf.build or {}
    kind = (
        "CUDA build"
        if build.get("is_cuda_build")
        else ("ROCm build" if build.get("is_rocm_build") else "CPU-only build")
    )
    gpus = f"{len(tf.gpus)} GPU(s) listed" + (
        f", matmul ran on {tf.confirm_device}" if tf.confirm_device else ""
    )
    took = f"; import took {tf.import_seconds:.1f} s" if tf.import_seconds is not None else ""
    return f"{tf.version} from '{tf.distribution or '?'}', {kind}; {gpus}{took}"


def missing_library(lib) -> str:
    text = f"missing ({lib.pip_package})"
    if lib.other_versions:
        text += f"; other versions: {', '.join(lib.other_versions)}"
    if lib.error and "No such file or directory" not in lib.error:
        text += f"; {lib.error}"  # e.g. found but a dependency of it is missing
    return text


def code_language(code: str) -> str:
    return (
        "python"
        if any(t in code for t in ("import ", "tf.", "def ", "model."))
        and "pip install" not in code
        else "bash"
    )


def placement_where(placement: PlacementFacts) -> str:
    """Where the placement comes from: predicted for which GPU, or seen on one."""
    if placement.predicted:
        return (
            f"predicted for this machine's {placement.gpu_name}"
            if placement.gpu_name
            else "predicted for a GPU machine: no GPU here"
        )
    return f"seen on {placement.gpu_name or 'this GPU'}"


def eager_site_rows(eager: EagerFacts) -> list[tuple[str, str, str, str, str]]:
    """Eager ops by source line: op, count (per sampled step when steps were sampled),
    median elements, device, file:line."""
    per = max(eager.sampled_steps, 1)
    return [
        (
            s.op,
            f"{s.count / per:,.1f}" if eager.sampled_steps else f"{s.count:,}",
            "?" if s.median_elements is None else f"{s.median_elements:,}",
            s.device or "?",
            s.location or "?",
        )
        for s in eager.sites
    ]


def op_group_cells(group: OpGroup, locations: int | None = None) -> tuple[str, ...]:
    """One placement row: op, dtypes, device, where it computes, count, reason, and the
    lines that created it (the first ``locations`` of them, all when None)."""
    return (
        group.op,
        ", ".join(dict.fromkeys(group.in_dtypes + group.out_dtypes)) or "-",
        group.device,
        group.computes_on,
        f"{group.count:,}" + (" (loop)" if group.in_loop else ""),
        group.reason
        + (" by TF/Keras' own code" if group.by_library and group.reason == "forced-cpu" else "")
        + (f" with {group.colocated_with}" if group.colocated_with else ""),
        ", ".join(group.locations[:locations]) or "-",
    )


def projection_lines(projection: ProjectionFacts) -> list[str]:
    """The projection, said as one: the step's band and its parts, then the input."""
    band = f"{duration(projection.step_low_s)}–{duration(projection.step_high_s)}"
    eager = (
        f"Python issuing {projection.eager_ops_per_step:,.0f} eager ops "
        f"{duration(projection.eager_s, True)} (measured here)"
        if projection.eager_s and projection.eager_ops_per_step
        else None
    )
    if not projection.graph:
        lines = [
            f"step of {projection.function}: at least {duration(projection.step_s)} ({band}): "
            f"{eager}; the GPU work of its ops is unknown (no tf.function)"
        ]
    else:
        lines = [
            f"step of {projection.function}: {duration(projection.step_s)} ({band}): "
            f"matmul/conv {duration(projection.tensor_s, True)}, other kernels "
            f"{duration(projection.kernels_s, True)} ({projection.kernels:,}"
            + (
                f"; {duration(projection.launch_bound_s, True)} of it launches"
                if projection.launch_bound_s
                else ""
            )
            + "), copies "
            f"{duration(projection.copies_s, True)}"
            + (
                f", ops on the CPU {duration(projection.cpu_ops_s, True)} (measured here: "
                f"{projection.cpu_ops_measured} of {projection.cpu_ops})"
                if projection.cpu_ops_s
                else ""
            )
            + (f"; {eager}, overlapping the GPU's work" if eager else "")
            + (f"; batch {projection.batch} as run" if projection.batch else "")
        ]
    if projection.input_wait_fraction is not None:
        made = []
        if projection.input_batch_s is not None:
            made.append(f"{duration(projection.input_batch_s)} alone (TF's stage timers)")
        if projection.input_batch_measured_s is not None:
            made.append(
                f"{duration(projection.input_batch_measured_s)} as it delivered here beside "
                "the model"
            )
        low, high = projection.input_wait_low or 0.0, projection.input_wait_high or 0.0
        lines.append(
            f"input: the pipeline makes a batch in {' to '.join(made)} on this host "
            f"(measured): steps would wait {projection.input_wait_fraction:.0%} of the time "
            f"({low:.0%}–{high:.0%})"
        )
    if projection.measured_step_s:
        lines.append(
            f"measured here, on the {projection.gpu} itself: {duration(projection.measured_step_s)}"
            f" per step less its input wait (projected / measured "
            f"{projection.step_s / projection.measured_step_s:.2f})"
        )
    return lines + list(projection.notes[1:])
