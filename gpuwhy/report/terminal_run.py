"""Terminal sections of a watched run: the program, its steps, eager ops, tf.functions and
the GPU samples. Formatting only; every number comes from the facts."""

from __future__ import annotations

import statistics

from rich.console import Group
from rich.text import Text

from gpuwhy.facts import (
    EagerFacts,
    Facts,
    GpuSamplesFacts,
    GpuSeries,
    PipelineFacts,
    PipelineStage,
    StepFacts,
    TfDataFacts,
    TracingFacts,
)
from gpuwhy.report.layout import Rows, table
from gpuwhy.rules.input.common import bottleneck

MiB = 1024 * 1024


def run_section(facts: Facts, verbose: bool) -> Group | None:
    program = facts.program
    if program is None:
        return None
    rows = Rows()
    ended = {
        "completed": "completed",
        "exception": f"raised {program.error}",
        "interrupted": "interrupted (Ctrl-C)",
        "terminated": "terminated (SIGTERM)",
        "exit": f"exited with status {program.exit_code}",
    }.get(program.ended, program.ended)
    rows.add_row("Program", f"{' '.join(program.command)}: {ended} after {program.seconds:.1f} s")
    if facts.steps is not None:
        rows.add_row("Steps", steps_line(facts.steps))
    elif program.tensorflow_imported:
        rows.add_row(
            "Steps",
            "none found (no Keras fit, no loop over a tf.data iterator, "
            "no repeated tf.function or apply_gradients calls)",
        )
    if facts.tfdata is not None:
        for n, pipeline in enumerate(_shown_pipelines(facts.tfdata)):
            rows.add_row("Input" if n == 0 else "", pipeline_line(pipeline))
    if facts.eager is not None and program.tensorflow_imported:
        rows.add_row("Eager ops", eager_line(facts.eager))
    if facts.tracing is not None and facts.tracing.functions:
        rows.add_row("tf.functions", tracing_line(facts.tracing))
    if facts.gpu_samples is not None:
        rows.add_row("GPU samples", gpu_line(facts.gpu_samples))
    lines: list = [Text("Run", style="bold underline"), *rows.lines]
    for note in program.notes:
        lines.append(Text(f"  note: {note}", style="dim"))
    if verbose:
        lines.extend(_verbose_tables(facts))
    return Group(*lines)


def steps_line(steps: StepFacts) -> str:
    text = f"{steps.count:,} by {steps.marker}"
    if steps.median_s is not None:
        text += f"; median {_ms(steps.median_s)}, p90 {_ms(steps.p90_s)}"
    if steps.warmup:
        text += f" (first {steps.warmup} left out as warm-up)"
    if steps.steps_per_call > 1:
        text += f"; {steps.steps_per_call} steps per call"
    if steps.input_wait_fraction is not None:
        text += (
            f"; waiting for input {steps.input_wait_fraction:.0%} of step time "
            f"(median {_ms(steps.input_wait_median_s)} per step"
            + (f", by {steps.input_wait_source}" if steps.input_wait_source else "")
            + ")"
        )
    else:
        text += "; input wait not measured for this kind of loop"
    return text


MAX_PIPELINES = 3


def _shown_pipelines(tfdata: TfDataFacts) -> list[PipelineFacts]:
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
        text += "; runs as " + " → ".join(_stage_name(s) for s in p.stages)
    stage = bottleneck(p)  # None too when a saved record's index is out of range
    if stage is not None:
        text += f"; slowest stage {_stage_label(stage)}"
        if stage.self_time_per_element_s is not None:
            text += f" ({_ms(stage.self_time_per_element_s)} per element"
            text += (
                f", {stage.parallelism} threads)"
                if stage.parallelism and stage.parallelism > 1
                else ", sequential)"
            )
    if p.model_error:
        text += f"; TF's per-stage timers unavailable: {p.model_error}"
    return text


def _stage_name(stage: PipelineStage) -> str:
    return stage.name + ("*" if not stage.written_as and stage.kind == "prefetch" else "")


def _stage_label(stage: PipelineStage) -> str:
    from gpuwhy.verdict import stage_label

    return stage_label(stage)


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


def tracing_line(tracing: TracingFacts) -> str:
    parts = []
    for fn in sorted(tracing.functions, key=lambda f: (-f.traces, -f.calls))[:4]:
        where = f" ({fn.location})" if fn.location else ""
        parts.append(
            f"{fn.name}{where}: {fn.calls:,} calls, {fn.traces} trace"
            + ("s" if fn.traces != 1 else "")
            + (f" ({fn.trace_s:.1f} s)" if fn.trace_s >= 0.05 else "")
        )
    more = len(tracing.functions) - len(parts)
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def gpu_line(samples: GpuSamplesFacts) -> str:
    if samples.error in ("LibraryNotFound", "DriverNotLoaded"):
        return f"none: no NVIDIA driver here (NVML: {samples.error})"
    if samples.error:
        return f"none: {samples.error}"
    if not samples.gpus:
        return "none (no GPU)"
    parts = []
    for gpu in samples.gpus:
        util = _mean(gpu.utilization)
        text = f"GPU {gpu.index} {gpu.name}: {len(gpu.t)} samples at {samples.hz:g} Hz"
        if util is not None:
            text += f", busy {util:.0%} on average"
        sm = _mean(gpu.sm_activity)
        if sm is not None:
            text += f", SM activity {sm:.0%}"
        peak = _peak(gpu)
        if peak is not None and gpu.memory_total_bytes:
            text += f", peak memory {peak / MiB:,.0f} of {gpu.memory_total_bytes / MiB:,.0f} MiB"
        parts.append(text)
    for device, peak in samples.tf_peak_memory_bytes.items():
        parts.append(f"TensorFlow's peak on {device}: {peak / MiB:,.0f} MiB")
    return "; ".join(parts)


def _verbose_tables(facts: Facts) -> list:
    lines: list = []
    eager = facts.eager
    if eager is not None and eager.sites:
        lines.append(Text(""))
        lines.append(Text("  Eager ops by source line (sampled steps)", style="bold"))
        per = max(eager.sampled_steps, 1)
        rows = [
            (
                s.op,
                f"{s.count / per:,.1f}" if eager.sampled_steps else f"{s.count:,}",
                "?" if s.median_elements is None else f"{s.median_elements:,}",
                s.device or "?",
                s.location or "?",
            )
            for s in eager.sites
        ]
        lines.extend(
            table(
                (
                    "op",
                    "per step" if eager.sampled_steps else "count",
                    "elements",
                    "device",
                    "issued at",
                ),
                rows,
                indent=2,
            )
        )
    if facts.tfdata is not None:
        for pipeline in _shown_pipelines(facts.tfdata):
            if not pipeline.stages:
                continue
            lines.append(Text(""))
            lines.append(
                Text(
                    f"  Pipeline stages, as TF ran them ({pipeline.consumer}"
                    + (f", built at {pipeline.location}" if pipeline.location else "")
                    + "; * = added by TF)",
                    style="bold",
                )
            )
            rows = [
                (
                    ("▶ " if i == pipeline.bottleneck else "  ") + _stage_name(st),
                    "+".join(st.written_as) or "-",
                    f"{st.elements:,}",
                    _ms(st.self_time_per_element_s),
                    str(st.parallelism or "-"),
                    "?" if st.root_elements_per_s is None else f"{st.root_elements_per_s:,.1f}",
                    _stage_flags(st),
                    (
                        f"{st.function} at {st.function_location}"
                        if st.function_location
                        else st.location or "?"
                    ),
                )
                for i, st in enumerate(pipeline.stages)
            ]
            lines.extend(
                table(
                    (
                        "stage",
                        "written",
                        "elements",
                        "self/elem",
                        "threads",
                        "max out/s",
                        "notes",
                        "code",
                    ),
                    rows,
                    indent=2,
                )
            )
    tracing = facts.tracing
    if tracing is not None and tracing.functions:
        lines.append(Text(""))
        lines.append(Text("  tf.functions", style="bold"))
        rows = [
            (
                fn.name,
                f"{fn.calls:,}",
                f"{fn.call_s:.2f} s",
                str(fn.traces),
                f"{fn.trace_s:.2f} s",
                ", ".join(fn.changed_args) or "-",
                fn.location or "?",
            )
            for fn in tracing.functions
        ]
        lines.extend(
            table(
                ("function", "calls", "in calls", "traces", "tracing", "changed", "defined at"),
                rows,
                indent=2,
            )
        )
    return lines


def _stage_flags(stage: PipelineStage) -> str:
    flags = [
        name
        for name, on in (
            ("python", stage.python),
            ("stateful", stage.stateful),
            ("random", stage.random),
        )
        if on
    ]
    return ", ".join(flags + list(stage.codec_ops)) or "-"


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.1f} s"


def _mean(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else None


def _peak(gpu: GpuSeries) -> int | None:
    known = [v for v in gpu.memory_used_bytes if v is not None]
    return max(known) if known else None
