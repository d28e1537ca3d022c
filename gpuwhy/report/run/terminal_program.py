"""Terminal sections of a watched run: the program, its steps, eager ops, tf.functions and
the GPU samples. Formatting only; every number comes from the facts."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from gpuwhy.collect.inprocess.functions import calls_column
from gpuwhy.collect.inprocess.pipelines import shown_pipelines, stage_name
from gpuwhy.collect.registry import shown_rows
from gpuwhy.facts import (
    Facts,
    PipelineStage,
)
from gpuwhy.formatting import duration
from gpuwhy.report.layout import Rows, table
from gpuwhy.report.run.summary import eager_site_rows, program_notes


def run_section(facts: Facts, verbose: bool) -> Group | None:
    """The "Run" block: each collector's rows (collect/registry.py), then the notes."""
    program = facts.program
    if program is None and facts.capture is None:
        return None
    rows = Rows()
    for key, text in shown_rows(facts, html=False):
        rows.add_row(key, text)
    title = "Run" if program is not None else "Capture (every figure measured by the profiler)"
    lines: list = [Text(title, style="bold underline"), *rows.lines]
    for note in program_notes(facts):
        lines.append(Text(f"  note: {note}", style="dim"))
    if verbose:
        lines.extend(_verbose_tables(facts))
    return Group(*lines)


def _verbose_tables(facts: Facts) -> list:
    lines: list = []
    eager = facts.eager
    if eager is not None and eager.sites:
        lines.append(Text(""))
        lines.append(Text("  Eager ops by source line (sampled steps)", style="bold"))
        rows: list[tuple[str, ...]] = list(eager_site_rows(eager))
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
        for pipeline in shown_pipelines(facts.tfdata, facts.steps):
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
                    ("▶ " if i == pipeline.bottleneck else "  ") + stage_name(st),
                    "+".join(st.written_as) or "-",
                    f"{st.elements:,}",
                    duration(st.self_time_per_element_s, microseconds=True),
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
                fn.name + (" [XLA]" if fn.jit_compile else ""),
                calls_column(fn),
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
