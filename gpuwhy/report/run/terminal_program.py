"""Terminal sections of a watched run: the program, its steps, eager ops, tf.functions and
the GPU samples. Formatting only; every number comes from the facts."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from gpuwhy.facts import (
    Facts,
    PipelineStage,
)
from gpuwhy.formatting import duration, how_it_ended
from gpuwhy.report.layout import Rows, table
from gpuwhy.report.run.summary import (
    calls_text,
    distribute_line,
    eager_line,
    eager_site_rows,
    gpu_line,
    pipeline_line,
    shown_pipelines,
    stage_name,
    stalls_line,
    steps_line,
    tracing_line,
)


def run_section(facts: Facts, verbose: bool) -> Group | None:
    program = facts.program
    if program is None:
        return None
    rows = Rows()
    ended = how_it_ended(program)
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
        for n, pipeline in enumerate(shown_pipelines(facts.tfdata)):
            rows.add_row("Input" if n == 0 else "", pipeline_line(pipeline))
    if facts.eager is not None and program.tensorflow_imported:
        rows.add_row("Eager ops", eager_line(facts.eager))
    if facts.tracing is not None and facts.tracing.functions:
        rows.add_row("tf.functions", tracing_line(facts.tracing))
    stalls = stalls_line(facts.stalls) if facts.stalls is not None else None
    if stalls:
        rows.add_row("Stalls", stalls)
    if facts.distribute is not None:
        rows.add_row("Distribute", distribute_line(facts.distribute))
    if facts.gpu_samples is not None:
        rows.add_row("GPU samples", gpu_line(facts.gpu_samples))
    lines: list = [Text("Run", style="bold underline"), *rows.lines]
    for note in program.notes:
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
        for pipeline in shown_pipelines(facts.tfdata):
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
                    duration(st.self_time_per_element_s),
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
                calls_text(fn).removesuffix(" calls"),
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
