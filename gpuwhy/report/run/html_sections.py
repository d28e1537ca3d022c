"""The HTML report's sections that have no chart (findings, the run, GPU tables, placement,
eager ops, tf.functions, environment), each a plain dict for the template, and the small
number formats the page uses. Every number comes from the facts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpuwhy.collect.inprocess.eager import eager_line
from gpuwhy.collect.inprocess.functions import calls_column
from gpuwhy.collect.registry import shown_rows
from gpuwhy.facts import (
    PLACEMENT_REASONS,
    EagerFacts,
    EnvironmentFacts,
    Facts,
    GpuBusy,
    GpuDevice,
    GpuSamplesFacts,
    GpuSeries,
    PlacementFacts,
    StallFacts,
    StepFacts,
    TracingFacts,
)
from gpuwhy.finding import Finding
from gpuwhy.fixes.tried import tried_line
from gpuwhy.formatting import GiB, MiB, byte_size, duration, wait_in_time
from gpuwhy.report.downsample import stats, window_stats
from gpuwhy.report.run.evidence_phrases import phrased
from gpuwhy.report.run.evidence_text import (
    cell,
    column_title,
    is_log,
    is_table,
    sentence,
    words,
)
from gpuwhy.report.run.html_timeline import whole_run_note
from gpuwhy.report.run.summary import (
    code_language,
    eager_site_rows,
    finding_causes,
    missing_library,
    op_group_cells,
    placement_where,
    program_notes,
    tensorflow_line,
)

NO_DRIVER_ERRORS = ("LibraryNotFound", "DriverNotLoaded")


def finding_view(
    number: int, f: Finding, of: str = "step", target: str | None = None
) -> dict[str, Any]:
    """A finding as a card: what, where, how much of the step (``of``: of the run, for
    a record without steps) it costs, the fix, the evidence in sentences with units
    (and its tables, their columns in words); the evidence as recorded, under its
    machine keys, goes in a collapsed block."""
    causes = finding_causes(f.evidence)
    shown = {k: v for k, v in f.evidence.items() if not (k == "causes" and causes)}
    prose, said = phrased(shown)
    return {
        "number": number,
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "location": f.location,
        "cost": step_cost(f.gain_value, of),
        "causes": causes or [],
        "sentences": prose
        + [
            s
            for k, v in shown.items()
            if k not in said and not is_table(v) and not is_log(k, v)
            if (s := sentence(k, v)) is not None
        ],
        "tables": [_evidence_table(k, v) for k, v in shown.items() if is_table(v)],
        "logs": [
            {"title": words(k), "text": "\n".join(v)} for k, v in shown.items() if is_log(k, v)
        ],
        "evidence": [evidence_item(k, v) for k, v in shown.items()],
        "fix": f.fix.rstrip() if f.fix else None,
        "fix_html": highlight(f.fix.rstrip()) if f.fix else None,
        "gain": f.estimated_gain,
        "tried": tried_line(f.id, target=target) if f.fix else None,
    }


def step_cost(gain: float | None, of: str = "step") -> str | None:
    """How much of the step a finding costs, from the share its fix could win back
    (``Finding.gain_value``, a fraction of step time; of the run's time in a recording
    without steps, ``of="run"``); None where no rule sized it."""
    if gain is None or gain <= 0:
        return None
    if gain < 0.01:
        return f"under 1% of the {of}"
    return f"up to {gain:.0%} of the {of}"


def _evidence_table(key: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A list of records in the evidence (ops, stages, sites) as the card shows it: its
    columns in words, each cell in its column's unit."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return {
        "title": words(key),
        "columns": [column_title(c) for c in columns],
        "rows": [[cell(c, row.get(c)) for c in columns] for row in rows],
    }


def evidence_item(key: str, value: Any) -> dict[str, Any]:
    """One evidence entry: a table for a list of dicts, lines for a log, text otherwise."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        columns = list(dict.fromkeys(k for row in value for k in row))
        return {
            "key": key,
            "kind": "table",
            "columns": columns,
            "rows": [[value_text(row.get(c)) for c in columns] for row in value],
        }
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, str) for v in value)
        and (key.endswith("log") or any(len(v) > 80 for v in value))
    ):
        return {"key": key, "kind": "lines", "text": "\n".join(value)}
    return {"key": key, "kind": "text", "text": value_text(value)}


def run_view(facts: Facts) -> dict[str, Any] | None:
    """The "Run" block: each collector's rows (collect/registry.py), then the notes."""
    program = facts.program
    if program is None and facts.capture is None:
        return None
    rows = shown_rows(facts, html=True)
    if program is None:  # gpuwhy report CAPTURE
        return {
            "title": "Capture (every figure measured by the profiler)",
            "rows": rows,
            "notes": [],
        }
    return {"title": "Run", "rows": rows, "notes": program_notes(facts)}


def step_rows(
    steps: StepFacts, max_points: int, stalls: StallFacts | None = None
) -> list[tuple[str, str]]:
    """The step statistics: the collector's own (over every step after warm-up), the
    slowest step, and what the chart above draws of the steps, part by part."""
    rows = [
        ("Marked by", f"{steps.marker} ({steps.source})"),
        (
            "Steps",
            f"{steps.count:,}"
            + (
                f", the first {steps.warmup} left out as warm-up"
                if steps.warmup > 1
                else (", the first left out as warm-up" if steps.warmup else "")
            )
            + (f"; {steps.steps_per_call} steps per call" if steps.steps_per_call > 1 else ""),
        ),
    ]
    if steps.median_s is not None:
        rows.append(
            (
                "Step time",
                f"median {duration(steps.median_s, microseconds=True)}, p90 {duration(steps.p90_s, microseconds=True)}; "
                f"{steps.total_s:,.1f} s in steps of a {steps.run_s:,.1f} s run",
            )
        )
    if steps.input_wait_fraction is not None:
        rows.append(
            (
                "Waiting for input",
                f"{steps.input_wait_fraction:.1%} of step time" + wait_in_time(steps),
            )
        )
    else:
        rows.append(("Waiting for input", "not measured for this kind of loop"))
    spc = max(steps.steps_per_call, 1)
    slowest = slowest_step(steps, stalls)
    if slowest is not None:
        rows.append(("Slowest step", slowest))
    drawn = len(steps.starts)
    calls = math.ceil(steps.count / spc)
    whole_run = whole_run_note(steps, max_points)
    if whole_run is not None:
        rows.append(("Drawn", whole_run))
    elif drawn:
        text = (
            f"all {drawn:,} calls"
            if drawn >= calls
            else f"the first {drawn:,} of {calls:,} calls (the series kept in the record); "
            "the statistics above cover every step"
        )
        if drawn > max_points:
            text += (
                f"; drawn as at most {max_points:,} time buckets: the mean of each bucket, "
                "and its slowest step as a dotted line"
            )
        rows.append(("Drawn", text))
    return rows


def slowest_step(steps: StepFacts, stalls: StallFacts | None = None) -> str | None:
    """The slowest step after warm-up: over the whole run where the record has it
    (``slowest``, per step), else from the calls kept one by one, saying so when they
    are only the run's first ones; with the part of it gpuwhy's own pause held (a heap
    census), where the stalls say so: that part is not the program's."""
    spc = max(steps.steps_per_call, 1)
    if steps.slowest:
        start, per_step = max(steps.slowest, key=lambda entry: entry[1])
        return (
            f"{duration(per_step, microseconds=True)} at {start:,.2f} s, the slowest of all "
            f"{max(steps.count - steps.warmup, 0):,} steps after warm-up"
            + ("" if spc == 1 else f" (per step; {spc} steps per call)")
            + own_pause_words(stalls, start)
        )
    later = set(steps.later_warmup)
    warm = min(len(steps.starts), round(steps.warmup / spc) - len(later)) if steps.warmup else 0
    warm = max(warm, 0)
    kept = (
        [i for i in range(warm, len(steps.durations)) if i not in later]
        if len(steps.durations) == len(steps.starts)
        else []
    )
    s = stats([steps.durations[i] for i in kept])
    if not s.count or s.argmax is None:
        return None
    i = kept[s.argmax]
    return (
        f"{duration(s.high, microseconds=True)} at {steps.starts[i]:,.2f} s (call {i + 1:,})"
        + ("" if spc == 1 else f", {spc} steps per call")
        + ("" if steps.all_kept else f"; of the first {len(steps.starts):,} calls, kept one by one")
        + own_pause_words(stalls, steps.starts[i])
    )


# a stall is the step it names when their starts are this close (both from the run's start)
SAME_START_S = 1e-3


def own_pause_words(stalls: StallFacts | None, start_s: float) -> str:
    """ ", 297.9 ms of it gpuwhy's own pause (not the program's)" for the step that
    started at ``start_s`` where a stall of it overlapped gpuwhy's own work; else ""."""
    if stalls is None:
        return ""
    for loop in stalls.loops:
        for stall in (*loop.first, *loop.last):
            if abs(stall.start_s - start_s) > SAME_START_S:
                continue
            own = sum(seconds for kind, seconds in stall.causes if kind == "gpuwhy")
            if own > 0:
                return f", {duration(own)} of it gpuwhy's own pause (not the program's)"
    return ""


GPU_METRICS = (
    # (title, field, scale, unit)
    ("busy: graphics engine (GPM / DCGM)", "graphics_activity", 100.0, "%"),
    ("busy: the driver's own samples", "driver_utilization", 100.0, "%"),
    ("busy: point readings (alias)", "utilization", 100.0, "%"),
    ("SM activity", "sm_activity", 100.0, "%"),
    ("SM occupancy", "sm_occupancy", 100.0, "%"),
    ("tensor-core activity", "tensor_activity", 100.0, "%"),
    ("memory used, all processes", "memory_used_bytes", 1 / GiB, "GiB"),
    ("memory of the watched program", "own_memory_bytes", 1 / GiB, "GiB"),
    ("PCIe host → GPU", "pcie_rx_bytes_per_s", 1e-6, "MB/s"),
    ("PCIe GPU → host", "pcie_tx_bytes_per_s", 1e-6, "MB/s"),
    ("SM clock", "sm_clock_mhz", 1.0, "MHz"),
    ("power", "power_w", 1.0, "W"),
)


def gpu_table(gpu: GpuSeries, samples: GpuSamplesFacts, block: GpuBusy | None) -> dict[str, Any]:
    """Exact statistics of every metric the GPU reported, over the full series."""
    rows = []
    for title, name, scale, unit in GPU_METRICS:
        spread = gpu.column(name)
        s = (
            window_stats(getattr(gpu, name), spread.known, spread.low, spread.high)
            if gpu.windowed
            else stats(getattr(gpu, name))
        )
        if not s.count:
            continue
        values = [(v or 0.0) * scale for v in (s.mean, s.median, s.p90, s.high)]  # set: count > 0
        rows.append([f"{title} ({unit})", *stat_row(values), f"{s.count:,}"])
    span = (gpu.ends()[-1] - gpu.t[0]) if gpu.sample_count() > 1 else 0.0
    head = (
        f"GPU {gpu.index}: {gpu.name}"
        + (f", {gpu.memory_total_bytes / GiB:,.0f} GiB" if gpu.memory_total_bytes else "")
        + f"; {gpu.sample_count():,} samples at {samples.hz:g} Hz over {span:,.1f} s"
        + (
            f", kept as {len(gpu.t):,} windows of {gpu.samples_per_window:,} samples "
            "(median and p90 of the window means)"
            if gpu.windowed
            else ""
        )
        + ("; GPM metrics read" if samples.gpm else "")
    )
    others = [
        f"pid {p.pid} {p.name or ''} ({byte_size(p.used_bytes)})".replace("  ", " ")
        for p in gpu.others
    ]
    return {"head": head, "rows": rows, "others": others, "busy": busy_sentence(block)}


def busy_sentence(block: GpuBusy | None) -> str | None:
    """A GPU's busy block (the derivation stage's) in words: its share and source, its
    steady work, and why a figure that cannot resolve the program is not given."""
    if block is None:
        return None
    if block.share is None:
        return f"none: {block.why}."
    if not block.reliable:
        return f"unknown — {block.measure} cannot resolve this program: {block.why}."
    text = f"{block.share:.0%} of the {block.span_s:,.1f} s the program used it ({block.why})"
    if block.steady_share is not None:
        text += (
            f"; {block.steady_share:.0%} in its {block.steady_span_s:,.1f} s of steady work, "
            f"{block.startup_s:,.1f} s of start-up and pauses"
        )
    if block.space_share is not None and block.time_share is not None:
        text += (
            f"; engaged {block.time_share:.0%} of the time, with "
            f"{block.space_share:.0%} of its SMs busy while it was"
        )
    return text + "."


def no_gpu_reason(samples: GpuSamplesFacts | None) -> str | None:
    if samples is None:
        return "No GPU sampled: this record has no GPU samples section."
    if samples.error in NO_DRIVER_ERRORS:
        return f"No GPU sampled: no NVIDIA driver here (NVML: {samples.error})."
    if samples.error:
        return f"No GPU sampled: {samples.error}."
    if not any(g.t for g in samples.gpus):
        return (
            "No GPU sampled: NVML saw no GPU."
            if not samples.gpus
            else "No GPU sampled: the run ended before the first sample."
        )
    return None


def placement_view(placement: PlacementFacts | None) -> dict[str, Any] | None:
    if placement is None:
        return None
    where = placement_where(placement)
    functions = [
        [
            fn.name,
            fn.location or "-",
            f"{fn.nodes:,}",
            f"{fn.gpu:,}",
            f"{fn.host:,}",
            f"{fn.cpu:,}",
            f"{fn.input_copies}",
            f"{fn.step_copies}",
            "yes" if fn.jit_compile else "no",
            "; ".join(([fn.note] if fn.note else []) + [f"not audited: {b}" for b in fn.unaudited])
            or "-",
        ]
        for fn in placement.functions
    ]
    groups = [
        {
            "off_gpu": g.computes_on == "CPU",
            "cells": [
                *op_group_cells(g),
                ", ".join(g.examples[:3]) or "-",
            ],
            "why": PLACEMENT_REASONS.get(g.reason, ""),
        }
        for g in placement.groups
    ]
    copies = [
        {
            "sizeable": c.kind == "step" and c.sizeable(),
            "cells": [
                c.direction + (" (loop)" if c.in_loop else ""),
                c.kind,
                c.src,
                c.dst_op,
                c.dtype,
                shape_text(c.shape),
                "?" if c.bytes is None else f"{c.bytes:,}",
                f"{c.consumers}",
                (c.cause or "-")
                + (f" at {c.location}" if c.location else "")
                + (f" ({c.cause_reason})" if c.cause_reason else ""),
            ],
        }
        for c in placement.copies
    ]
    tensor_ops = [
        [
            t.op,
            t.dtype,
            ", ".join(f"{k}={'?' if v is None else v}" for k, v in t.dims.items()),
            "?" if t.flops is None else f"{t.flops:,}",
            t.layer or "-",
            t.location or "-",
            ", ".join(
                w
                for w, on in (("loop", t.in_loop), ("jit", t.jit_compile), ("gradient", t.gradient))
                if on
            )
            or "-",
        ]
        for t in placement.tensor_ops
    ]
    settings = []
    if placement.mixed_precision_policy:
        settings.append(f"Keras mixed precision policy: {placement.mixed_precision_policy}")
    if placement.tf32_enabled is not None:
        settings.append(f"TF32: {'on' if placement.tf32_enabled else 'off'}")
    check = placement.verification
    verification = None
    if check is not None:
        verification = {
            "ran": check.ran,
            "reason": check.reason,
            "device": check.device,
            "compared": check.nodes_compared,
            "rows": [[d.node, d.op, d.predicted, d.actual] for d in check.disagreements],
        }
    return {
        "where": where,
        "functions": functions,
        "groups": groups,
        "copies": copies,
        "tensor_ops": tensor_ops,
        "settings": settings,
        "verification": verification,
    }


def eager_view(eager: EagerFacts | None) -> dict[str, Any] | None:
    if eager is None or (not eager.sites and not eager.ops):
        return None

    rows = [list(row) for row in eager_site_rows(eager)]
    return {
        "summary": eager_line(eager),
        "per_step": bool(eager.sampled_steps),
        "rows": rows,
        "note": eager.note,
        "counted_s": eager.counted_s,
    }


def tracing_view(tracing: TracingFacts | None) -> dict[str, Any] | None:
    if tracing is None or not tracing.functions:
        return None
    functions = []
    for fn in sorted(tracing.functions, key=lambda f: (f.library, -f.traces, -f.calls)):
        functions.append(
            {
                "cells": [
                    fn.name + (" (Keras/TF)" if fn.library else ""),
                    fn.location or "?",
                    calls_column(fn),
                    f"{fn.call_s:,.2f} s",
                    f"{fn.traces}",
                    f"{fn.trace_s:,.2f} s",
                    ", ".join(fn.changed_args) or "-",
                    "-" if fn.jit_compile is None else ("yes" if fn.jit_compile else "no"),
                    f"{fn.instances}",
                ],
                "signatures": [
                    [
                        f"{s.at_s:,.2f} s",
                        "-" if s.seconds is None else duration(s.seconds, microseconds=True),
                        ", ".join(f"{n}: {spec}" for n, spec in s.args),
                        s.caller or "?",
                    ]
                    for s in fn.signatures
                ],
            }
        )
    return {"functions": functions}


def environment_view(
    env: EnvironmentFacts | None, devices: Sequence[GpuDevice]
) -> dict[str, Any] | None:
    if env is None and not devices:
        return None
    rows: list[tuple[str, str]] = []
    libraries: list[list[str]] = []
    if env is not None:
        where = (
            f"{env.platform} {env.machine}"
            + (" (WSL)" if env.wsl else "")
            + (" (container)" if env.driver and env.driver.in_container else "")
        )
        rows.append(("Python", f"{env.python_version}  {env.python_executable}  [{where}]"))
        if env.cpu_count:
            rows.append(("CPU cores", f"{env.cpu_count}"))
        tf = env.tensorflow
        if tf is not None:
            rows.append(("TensorFlow", tensorflow_line(tf)))
            if tf.build and tf.build.get("is_cuda_build"):
                rows.append(
                    (
                        "Build needs",
                        f"CUDA {tf.build.get('cuda_version')}, cuDNN "
                        f"{tf.build.get('cudnn_version')}, code for "
                        f"{', '.join(tf.build.get('cuda_compute_capabilities') or [])}",
                    )
                )
            libraries = [
                [
                    lib.name,
                    lib.wanted,
                    "yes" if lib.loaded else "no",
                    (lib.path or "") if lib.loaded else missing_library(lib),
                ]
                for lib in tf.libraries
            ]
        d = env.driver
        if d is not None:
            rows.append(
                (
                    "Driver",
                    f"{d.driver_version} (supports CUDA {d.cuda_driver_version}), "
                    f"{d.device_count} GPU(s)"
                    if d.nvml_ok
                    else f"none: NVML {d.nvml_error}; {d.libcuda_error or 'libcuda.so.1 loads'}",
                )
            )
        if env.env_vars:
            rows.append(("Settings", "  ".join(f"{k}={v}" for k, v in env.env_vars.items())))
    gpus = [
        [
            str(dev.index),
            dev.name,
            dev.compute_capability or "?",
            "?" if not dev.memory_total_bytes else f"{dev.memory_total_bytes / MiB:,.0f} MiB",
            "?" if dev.memory_used_bytes is None else f"{dev.memory_used_bytes / MiB:,.0f} MiB",
            ", ".join(f"pid {p.pid} {p.name or ''}".strip() for p in dev.processes) or "-",
            dev.pci_bus_id or "?",
        ]
        for dev in devices
    ]
    log = list(env.tensorflow.log_lines) if env is not None and env.tensorflow else []
    return {"rows": rows, "libraries": libraries, "gpus": gpus, "log": log}


def ran_tensorflow(facts: Facts) -> bool:
    """A watched program that imported TensorFlow (``gpuwhy watch`` runs any program)."""
    return facts.program is not None and facts.program.tensorflow_imported


def value_text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number_text(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(value_text(v) for v in value) or "-"
    if isinstance(value, dict):
        return "; ".join(f"{k}: {value_text(v)}" for k, v in value.items()) or "-"
    return str(value)


def number_text(v: float) -> str:
    if not math.isfinite(v):
        return str(v)
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    if abs(v) >= 100:
        return f"{v:,.1f}"
    return f"{v:.4g}"


def stat_row(values: Sequence[float]) -> list[str]:
    """One row of statistics with the same decimals, set by its largest value."""
    top = max(abs(v) for v in values)
    decimals = 1 if top >= 100 else 2 if top >= 1 else 3
    return [f"{v:,.{decimals}f}" for v in values]


def shape_text(shape) -> str:
    if shape is None:
        return "?"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def parallelism_text(run: int | None, written: int | None) -> str:
    if run is None and written is None:
        return "-"
    text = "-" if run is None else f"{run}"
    if written is not None:
        text += f" (written: {'AUTOTUNE' if written == -1 else written})"
    return text


def rate_text(m: dict[str, float] | None) -> str:
    if m is None:
        return "-"
    rate, low, high = m["elements_per_s"], m["low"], m["high"]
    if low == high == rate:
        return f"{rate:,.1f}"
    if math.isclose(rate - low, high - rate, rel_tol=1e-6):
        return f"{rate:,.1f} ± {high - rate:,.1f}"
    return f"{rate:,.1f} ({low:,.1f}–{high:,.1f})"


def highlight(code: str) -> str:
    """The fix as highlighted HTML (Pygments, which rich already brings); its text content
    is the code itself, which is what the copy button copies."""
    from markupsafe import escape

    try:
        from pygments import highlight as _highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:  # pragma: no cover - pygments comes with rich
        return str(escape(code))

    return _highlight(
        code, get_lexer_by_name(code_language(code)), HtmlFormatter(nowrap=True)
    ).rstrip("\n")
