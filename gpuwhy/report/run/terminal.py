"""The terminal report (rich): the verdict on the first line, then the median step split
into its measured parts as one line of proportional bars (report/run/step_split.py), then
the findings ranked, each with its evidence and the fix as highlighted code, then the
environment.

Piped output gets no colour codes and no hard wrapping, so it can be grepped and pasted.
"""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console, Group
from rich.text import Text

from gpuwhy.facts import (
    PLACEMENT_REASONS,
    EnvironmentFacts,
    GpuDevice,
    PlacementFacts,
    WorkersFacts,
)
from gpuwhy.finding import NEAR_KEY, Finding
from gpuwhy.fixes.input_fix_text import input_fix_heading, input_fix_lines, input_fixes_intro
from gpuwhy.fixes.trial_text import trial_heading, trial_lines
from gpuwhy.fixes.tried import tried_line
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.layout import Rows as _Rows
from gpuwhy.report.layout import table as _table
from gpuwhy.report.run.step_split import split_line, step_split
from gpuwhy.report.run.summary import (
    code_language,
    finding_causes,
    missing_library,
    op_group_cells,
    placement_where,
    projection_lines,
    tensorflow_line,
)
from gpuwhy.report.run.terminal_program import run_section
from gpuwhy.report.run.workers import HEADER, input_wait_note, worker_notes, worker_rows
from gpuwhy.report.shared_fixes import same_fix_as
from gpuwhy.verdict import gpu_usable

SEVERITY_STYLE = {"high": "bold red", "medium": "yellow", "low": "cyan", "info": "dim"}
MiB = 1024 * 1024


# The default view: low and info findings in one line; of the others, this much evidence.
BRIEF_SEVERITIES = ("low", "info")
DETAILED_FINDINGS = 5  # the most severe, largest-gain ones; the others in one line each
EVIDENCE_LINES = 8
MIN_TABLE_ROWS = 2


class TerminalRenderer(Renderer):
    name = "terminal"
    file_extension = "txt"

    def render(self, record: Record) -> str:
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            force_terminal=self.color,
            no_color=not self.color,
            width=self.width or 100,
            soft_wrap=not self.color,
            highlight=False,
            emoji=False,
            force_jupyter=False,  # into the buffer, also in a notebook (rich would display it)
        )
        # a run's mark says whether TF can use a GPU; a fix trial's, whether a fix held
        trial = record.facts.fix_trial
        usable = (
            any(t.in_patch for t in record.facts.fixes_tried or ()) or None
            if trial is not None
            else gpu_usable(record.facts)
        )
        mark, style = {True: ("✓", "bold green"), False: ("✗", "bold red"), None: ("•", "bold")}[
            usable
        ]
        console.print(Text(f"{mark} {record.verdict}", style=style))
        # a merge's steps are each worker's, in its table below (the page's bars), never
        # the workers' windows pooled into one step no worker took
        split = step_split(record.facts) if record.facts.workers is None else None
        if split is not None and split.parts:
            console.print(split_line(split))
        if record.facts.workers is not None:
            console.print()
            console.print(_workers(record.facts.workers))
        tried_ids = {t.finding for t in record.facts.fixes_tried or ()}
        in_trial = record.facts.fix_trial is not None
        projection = record.derived.projection
        target = projection.requested if projection is not None else None
        if record.findings:
            console.print()

            def briefly(number: int, finding: Finding) -> bool:
                return not self.verbose and (
                    finding.severity in BRIEF_SEVERITIES or number > DETAILED_FINDINGS
                )

            # a finding another one's fix refers to ("input.no-cache gives the line")
            # keeps its own fix in view
            named = {
                other.id
                for n, f in enumerate(record.findings, 1)
                if not briefly(n, f) and f.fix
                for other in record.findings
                if other.id != f.id and other.id in f.fix
            }

            def brief(number: int, finding: Finding) -> bool:
                return briefly(number, finding) and finding.id not in named

            shared = same_fix_as(record.findings, lambda n, f: not brief(n, f))
            for number, (finding, same) in enumerate(zip(record.findings, shared), 1):
                console.print(
                    self._finding(
                        number,
                        finding,
                        brief(number, finding),
                        finding.id in tried_ids,
                        in_trial,
                        same,
                        target,
                    )
                )
            # the ones said in one line, as they were: low ones whatever their place
            short = [n for n, f in enumerate(record.findings, 1) if brief(n, f)]
            if short:
                console.print(
                    Text(
                        f"({'finding' if len(short) == 1 else 'findings'} {_runs(short)} in "
                        "one line; --verbose, or `gpuwhy explain ID`, for their evidence "
                        "and fix)",
                        style="dim",
                    )
                )
        fixes = record.facts.input_fixes
        if fixes is not None:
            console.print()
            console.print(Text("Input pipelines rewritten and measured", style="bold underline"))
            for line in input_fixes_intro(fixes):
                console.print(Text(line))
            for n, fix in enumerate(fixes.fixes, 1):
                console.print()
                console.print(Text(f"[{n}] {input_fix_heading(fix)}", style="bold"))
                console.print(Text("\n".join(input_fix_lines(fix))))
            for view in fixes.views:
                console.print()
                console.print(
                    Text(f"also iterated: a view of a dataset above ({view}): not optimised")
                )
        trial = record.facts.fix_trial
        if trial is not None:
            console.print()
            tried = len(record.facts.fixes_tried or ())
            console.print(Text(trial_heading(trial, tried), style="bold underline"))
            for line in trial_lines(record.facts.fixes_tried or (), trial):
                console.print(Text(line))
        run = run_section(record.facts, self.verbose) if fixes is None else None
        if run is not None:
            console.print()
            console.print(run)
        projection = record.derived.projection
        if projection is not None:
            console.print()
            console.print(
                Text(
                    f"Projected on {projection.gpu} (a projection from the traced graph and "
                    "published peaks, not a measurement"
                    + (
                        ""
                        if projection.calibrated
                        else "; this part of the model is not calibrated"
                    )
                    + ")",
                    style="bold underline",
                )
            )
            for line in projection_lines(projection):
                console.print(Text(f"  {line}"))
        placement = record.facts.placement
        if placement is not None:
            console.print()
            console.print(self._placement(placement))
        env = record.facts.environment
        if env is not None:
            console.print()
            console.print(self._environment(env, record.facts.devices or ()))
        # gpuwhy fix diagnoses nothing: which rules it did not run is not news there
        skipped = record.not_checked if record.command != "fix" else {}
        if skipped:
            planned = sum(1 for why in skipped.values() if why == "planned")
            console.print()
            console.print(
                Text(
                    f"Not checked: {len(skipped)} rules ({planned} planned, "
                    f"{len(skipped) - planned} without their facts in this command); "
                    "`gpuwhy rules` lists them.",
                    style="dim",
                )
            )
        return buffer.getvalue()

    # -- findings ---------------------------------------------------------------------
    def _finding(
        self,
        number: int,
        f: Finding,
        brief: bool = False,
        proven: bool = False,
        in_trial: bool = False,
        fix_of: int | None = None,
        target: str | None = None,
    ) -> Group:
        """A finding: its head line, then (high and medium, or --verbose) its causes,
        evidence, fix (or, ``fix_of``, the number of the finding above that printed the
        same fix) and gain. The default view keeps each finding short enough that a
        program with many findings still reads on one screen: low and info findings, and
        those after the first ``DETAILED_FINDINGS``, are their head line alone, and evidence is cut after ``EVIDENCE_LINES`` lines (a
        table keeps ``MIN_TABLE_ROWS`` rows at least), each cut saying what --verbose
        adds."""
        head = Text()
        head.append(f"{number}. ")
        head.append(f"{f.severity.upper():<6}", style=SEVERITY_STYLE[f.severity])
        head.append(f" {f.id}", style="bold")
        head.append(f"  {f.title}")
        if f.location:
            head.append(f"  at {f.location}", style="underline")
        parts: list[Any] = [head]
        if brief:
            return Group(*parts)
        near = f.evidence.get(NEAR_KEY)
        if near:  # said before the evidence: it qualifies the finding itself
            parts.append(Text(f"   near its line: {near}", style="italic"))
        causes = finding_causes(f.evidence)
        for i, (title, detail) in enumerate(causes or (), 1):
            line = Text(f"   cause {i}: ", style="bold")
            line.append(title)
            line.append(f" — {detail}", style="dim" if i > 1 else "")
            parts.append(line)
        items = [
            (key, value)
            for key, value in f.evidence.items()
            if not (
                (key == "causes" and causes)
                or (key == "tensorflow_log" and not self.verbose)
                or key == NEAR_KEY
                or value is None  # not measured: a "None" tells a reader nothing
            )
        ]
        budget = None if self.verbose else EVIDENCE_LINES
        for index, (key, value) in enumerate(items):
            if budget is not None and budget <= 0:
                parts.append(Text(f"   … {len(items) - index} more (--verbose)", style="dim"))
                break
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                rows = None if budget is None else max(MIN_TABLE_ROWS, budget - 1)
                parts.append(Text(f"   {key}:", style="dim"))
                for row in value[:rows]:
                    parts.append(Text(f"     · {_row_text(row, self.verbose)}", style="dim"))
                if rows is not None and len(value) > rows:
                    parts.append(Text(f"     · {len(value) - rows} more (--verbose)", style="dim"))
                if budget is not None:
                    budget -= 1 + min(rows or len(value), len(value))
                continue
            if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
                value = ", ".join(map(str, value)) if value else "-"
            parts.append(Text(f"   {key}: {_short(value)}", style="dim"))
            if budget is not None:
                budget -= 1
        if f.fix and fix_of is not None:  # one cause, two findings: its fix said once
            parts.append(Text(f"   fix: the same as finding {fix_of}'s above", style="bold"))
        elif f.fix:
            parts.append(Text("   fix:", style="bold"))
            parts.extend(self._code(f.fix, indent=5))
            tried = tried_line(f.id, proven, in_trial, target)
            if tried:
                parts.append(Text(f"   ({tried})", style="dim"))
        if f.estimated_gain:
            parts.append(Text(f"   expected gain: {f.estimated_gain}", style="green"))
        parts.append(Text(f"   more: gpuwhy explain {f.id}", style="dim"))
        return Group(*parts)

    def _code(self, code: str, indent: int) -> list[Text]:
        """Code as Text lines: highlighted on a terminal, never cropped or padded, so a
        long pip command survives copy and paste. ``rich.syntax`` (and Pygments, 14 ms
        of imports every watched program would wait for before its first line) is
        imported only where there is colour to highlight with."""
        if self.color:
            from rich.syntax import Syntax

            text = Syntax(code, code_language(code), theme="ansi_dark").highlight(code)
        else:
            text = Text(code)
        text.rstrip()
        return [Text(" " * indent) + line for line in text.split("\n")]

    # -- placement --------------------------------------------------------------------
    def _placement(self, placement: PlacementFacts) -> Group:
        """Op groups (500 ops of one kind read as one line) and the host<->device copies.

        Without --verbose only what is not plainly on the GPU is listed."""
        where = placement_where(placement)
        lines: list[Text] = [Text(f"Placement ({where})", style="bold underline")]
        for fn in placement.functions:
            jit = ", jit_compile" if fn.jit_compile else ""
            at = f" ({fn.location})" if fn.location else ""
            lines.append(
                Text(
                    f"  {fn.name}{at}: {fn.nodes:,} ops — {fn.gpu:,} GPU, {fn.host:,} host memory by design, "
                    f"{fn.cpu:,} CPU; copies per call: {fn.input_copies} input, {fn.step_copies} inside{jit}"
                )
            )
            if fn.note:
                lines.append(Text(f"    note: {fn.note}", style="dim"))
            for body in fn.unaudited:
                lines.append(Text(f"    not audited: {body}", style="dim"))
        groups = [g for g in placement.groups if self.verbose or g.computes_on == "CPU"]
        copies = [
            c for c in placement.copies if self.verbose or (c.kind == "step" and c.sizeable())
        ]
        shown = copies[: None if self.verbose else 12]
        if groups:
            header: tuple[str, ...] = (
                "op",
                "dtypes",
                "device",
                "computes",
                "count",
                "reason",
                "created at",
            )
            rows: list[tuple[str, ...]] = [op_group_cells(g, locations=2) for g in groups]
            lines.append(Text(""))
            lines.extend(_table(header, rows, indent=2))
            for code in dict.fromkeys(g.reason for g in groups):
                lines.append(Text(f"    {code}: {PLACEMENT_REASONS.get(code, '')}", style="dim"))
        if copies:
            lines.append(Text(""))
            lines.append(
                Text(
                    "  Host<->device copies per call"
                    + (
                        ""
                        if self.verbose
                        else " (inside the function, 1 KiB or more or of unknown size)"
                    ),
                    style="bold",
                )
            )
            header = ("direction", "tensor", "dtype", "shape", "bytes", "caused by")
            rows = [
                (
                    c.direction + (" (loop)" if c.in_loop else ""),
                    f"{c.src} -> {c.dst_op}",
                    c.dtype,
                    "?"
                    if c.shape is None
                    else "[" + ",".join("?" if d is None else str(d) for d in c.shape) + "]",
                    "?" if c.bytes is None else f"{c.bytes:,}",
                    (f"{c.cause} at {c.location}" if c.location else str(c.cause))
                    + (f" ({c.cause_reason})" if c.cause_reason else ""),
                )
                for c in shown
            ]
            lines.extend(_table(header, rows, indent=2))
            legend = {g.reason for g in groups}
            for code in dict.fromkeys(c.cause_reason for c in shown if c.cause_reason):
                if code not in legend:  # why the op that makes a copy is where it is
                    lines.append(
                        Text(f"    {code}: {PLACEMENT_REASONS.get(code, '')}", style="dim")
                    )
            if not self.verbose and len(copies) > 12:
                lines.append(Text(f"  … {len(copies) - 12} more (--verbose)", style="dim"))
        check = placement.verification
        if check is not None:
            lines.append(Text(""))
            if check.ran:
                lines.append(
                    Text(
                        f"  Verified on {check.device}: {check.nodes_compared:,} nodes compared, "
                        f"{len(check.disagreements)} placed differently than predicted"
                    )
                )
                for d in check.disagreements[: None if self.verbose else 10]:
                    lines.append(
                        Text(
                            f"    {d.node} ({d.op}): predicted {d.predicted}, placed on {d.actual}",
                            style="yellow",
                        )
                    )
            else:
                lines.append(Text(f"  Not verified: {check.reason}", style="dim"))
        return Group(*lines)

    # -- environment ------------------------------------------------------------------
    def _environment(self, env: EnvironmentFacts, devices: tuple[GpuDevice, ...]) -> Group:
        table = _Rows()
        where = (
            f"{env.platform} {env.machine}"
            + (" (WSL)" if env.wsl else "")
            + (" (container)" if env.driver and env.driver.in_container else "")
        )
        table.add_row("Python", f"{env.python_version}  {env.python_executable}  [{where}]")
        tf = env.tensorflow
        if tf is not None:
            table.add_row("TensorFlow", tensorflow_line(tf))
            if tf.build and tf.build.get("is_cuda_build"):
                table.add_row(
                    "Build needs",
                    f"CUDA {tf.build.get('cuda_version')}, cuDNN "
                    f"{tf.build.get('cudnn_version')}, code for "
                    f"{', '.join(tf.build.get('cuda_compute_capabilities') or [])}",
                )
            if tf.libraries:
                loaded = [lib for lib in tf.libraries if lib.loaded]
                missing = [lib.wanted for lib in tf.libraries if not lib.loaded]
                table.add_row(
                    "CUDA libraries",
                    f"{len(loaded)}/{len(tf.libraries)} load"
                    + (f"; missing: {', '.join(missing)}" if missing else ""),
                )
        d = env.driver
        if d is not None:
            if d.nvml_ok:
                table.add_row(
                    "Driver",
                    f"{d.driver_version} (supports CUDA {d.cuda_driver_version}),"
                    f" {d.device_count} GPU(s)",
                )
            else:
                table.add_row(
                    "Driver",
                    f"none: NVML {d.nvml_error}; {d.libcuda_error or 'libcuda.so.1 loads'}",
                )
        for dev in devices:
            mem = (
                (
                    f"{(dev.memory_used_bytes or 0) / MiB:,.0f}/{(dev.memory_total_bytes or 0) / MiB:,.0f}"
                    " MiB used before the run"
                )
                if dev.memory_total_bytes
                else ""
            )
            table.add_row(
                f"GPU {dev.index}",
                f"{dev.name}, compute capability "
                f"{dev.compute_capability}, {mem}, {len(dev.processes)} other process(es)",
            )
        if env.env_vars:
            shown = {
                k: v
                for k, v in env.env_vars.items()
                if self.verbose or k not in ("LD_LIBRARY_PATH", "TF_CPP_MIN_LOG_LEVEL")
            }
            if shown:
                table.add_row("Settings", "  ".join(f"{k}={v}" for k, v in shown.items()))
        if self.verbose and tf is not None:
            for lib in tf.libraries:
                table.add_row(
                    f"  {lib.wanted}", lib.path or "" if lib.loaded else missing_library(lib)
                )
            for line in tf.log_lines:
                table.add_row("  TF log", line)
        return Group(Text("Environment", style="bold underline"), *table.lines)


def _workers(workers: WorkersFacts) -> Group:
    """gpuwhy merge: one row per task of the cluster, then what is wrong with a record."""
    lines = [Text(f"Workers ({workers.directory})", style="bold underline")]
    lines.extend(_table(HEADER, worker_rows(workers), indent=2))
    for note in [input_wait_note(workers), *worker_notes(workers)]:
        if note:
            lines.append(Text(f"  note: {note}", style="dim"))
    return Group(*lines)


def _row_text(row: dict[str, Any], verbose: bool) -> str:
    parts = []
    for key, value in row.items():
        if key == "examples" and not verbose:
            continue
        if isinstance(value, list):
            value = ", ".join(map(str, value[: None if verbose else 3])) + (
                "" if verbose or len(value) <= 3 else f" (+{len(value) - 3})"
            )
        parts.append(f"{key}={value}")
    return "  ".join(parts)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _runs(numbers: list[int]) -> str:
    """1, 2, 3, 5 as "1-3 and 5": the findings' numbers in runs."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs]
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
