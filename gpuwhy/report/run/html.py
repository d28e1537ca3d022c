"""The HTML report: one self-contained file that opens offline (``--html OUT``).

Users' clusters often have no internet, so nothing is fetched when the file opens:
Plotly's JavaScript (from the installed ``plotly`` package) and the styles are inlined,
and the charts' data sits in the page as JSON. The page follows the terminal report's
order: the verdict first with a picture of the step beside it (step_bars.py: the answer,
drawn, on the first screen), then the run on one time axis, then the findings ranked
(evidence, file:line, the fix with a copy button), the input pipeline, measured fixes, the
placement, eager ops and tf.functions, and the environment. A section without data is
left out or says why.

Every number printed comes from the facts or from the full series (``downsample.stats``);
only the charts are downsampled, so a run of 100,000 steps and an hour of GPU samples
still opens quickly.

Its memory is the same at any run length and small (all of gpuwhy within
64 MB of plain python): the charts are plain dicts (html_charts.py), and ``write`` sends
the page to its file as jinja renders it, piece by piece, with plotly.js copied from
plotly's package file in blocks (plotly_files.py), never held whole.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any

import gpuwhy.report.run.html_charts as charts
from gpuwhy.derived.cache_passes import cache_read_once, one_element_passes
from gpuwhy.derived.stage import derived
from gpuwhy.facts import (
    Facts,
    FixTried,
    InputFixFacts,
    PipelineFacts,
    PipelineRate,
    ProjectionFacts,
    TfDataFacts,
    WorkersFacts,
)
from gpuwhy.finding import SEVERITY_RANK, Finding
from gpuwhy.fixes.trial_text import projected_text, ran_text, speed_text, trial_heading
from gpuwhy.formatting import MiB, byte_size, consumer_words, duration, elements_words, when
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.downsample import MAX_POINTS
from gpuwhy.report.locations import nowrap_locations
from gpuwhy.report.plotly_files import plotly_js, plotly_js_blocks
from gpuwhy.report.run.html_sections import (
    eager_view,
    environment_view,
    finding_view,
    gpu_table,
    no_gpu_reason,
    parallelism_text,
    placement_view,
    ran_tensorflow,
    rate_text,
    run_view,
    step_rows,
    tracing_view,
)
from gpuwhy.report.run.html_step_series import captured_steps, worker_steps
from gpuwhy.report.run.html_timeline import finding_marks, timeline
from gpuwhy.report.run.step_bars import busy_caption, run_bars
from gpuwhy.report.run.summary import projection_lines
from gpuwhy.report.run.workers import HEADER, input_wait_note, worker_notes, worker_rows
from gpuwhy.report.shared_fixes import same_fix_as
from gpuwhy.report.step_picture import Bar, svg
from gpuwhy.verdict import gpu_usable, verdict


class HtmlRenderer(Renderer):
    """``--html PATH`` and ``-f html``: the page, from the record alone."""

    name = "html"
    file_extension = "html"
    for_terminal = False

    def __init__(
        self,
        verbose: bool = False,
        color: bool = False,
        width: int | None = None,
        max_points: int = MAX_POINTS,
    ):
        super().__init__(verbose=verbose, color=color, width=width)
        self.max_points = max_points

    def render(self, record: Record) -> str:
        """The page as one string (plotly.js alone is 9.6 MB of it): ``write`` is what
        ``--html`` and ``-f html`` use."""
        return render_page(self._pieces(record))

    def write(self, record: Record, out: IO[bytes]) -> None:
        """The page into ``out`` as jinja renders it, plotly.js copied in blocks."""
        write_page(self._pieces(record), out)

    def _pieces(self, record: Record) -> Iterator[str]:
        return page_pieces("report.html.j2", _Page(self.max_points).context(record))


def page_pieces(template: str, context: dict[str, Any]) -> Iterator[str]:
    """A page of templates/ as jinja renders it, in order, with the one piece
    ``PLOTLY_JS`` where plotly.js goes (its ``<script>`` is around it): the run report's
    and ``gpuwhy diff``'s (diff_html.py)."""
    for chunk in _template(template).generate(**context):
        before, marker, after = chunk.partition(PLOTLY_JS)
        if not marker:
            yield chunk
            continue
        yield from (before, PLOTLY_JS, after)


def render_page(pieces: Iterable[str]) -> str:
    return "".join(plotly_js() if piece is PLOTLY_JS else piece for piece in pieces)


def write_page(pieces: Iterable[str], out: IO[bytes]) -> None:
    for piece in pieces:
        if piece is PLOTLY_JS:
            for block in plotly_js_blocks():
                out.write(block)
        else:
            out.write(piece.encode("utf-8"))


# Where the template puts plotly.js: no text of the record can be this, as every user
# string reaches the page escaped (a "<" in a chart's JSON is written \u003c).
PLOTLY_JS = "<!--gpuwhy:plotly.js-->"


def fix_measurements(fixes: InputFixFacts | None) -> list[dict[str, Any]]:
    """The measured pipelines of ``gpuwhy fix`` (facts ``input_fixes``) as before/after
    rows, each measurement ``{"elements_per_s", "low", "high"}`` (median and the slowest
    and fastest timed pass): a refused rewrite has no "after"; a change that gained
    nothing keeps its measurement but no code to paste."""
    if fixes is None:
        return []

    def measured(rate: PipelineRate | None) -> dict[str, float] | None:
        if rate is None:
            return None
        return {
            "elements_per_s": rate.median,
            "low": min(rate.min, rate.median),
            "high": max(rate.max, rate.median),
        }

    return [
        {
            "name": f.dataset,
            "before": measured(f.before),
            "after": None if f.refused else measured(f.after),
            "ideal": measured(f.ideal),
            "fix": "\n".join(c.code for c in f.changes)
            if f.changes
            and not f.refused
            and f.worth_it
            and not cache_read_once(f)
            and not one_element_passes(f)
            else None,
        }
        for f in fixes.fixes
        if f.before is not None and f.before.median > 0
    ]


# -- the page ----------------------------------------------------------------------------


class Figures:
    """A page's charts: each figure's JSON under the id of the ``<div>`` it is drawn in
    (templates/scripts.html.j2 draws them)."""

    def __init__(self) -> None:
        self.figures: list[tuple[str, str]] = []

    def figure(self, fig: charts.Figure | None) -> str | None:
        if fig is None:
            return None
        dom_id = f"figure-{len(self.figures) + 1}"
        self.figures.append((dom_id, charts.figure_json(fig)))
        return dom_id


class _Page(Figures):
    """Builds the template's context: plain strings, rows and figure JSON, nothing else."""

    def __init__(self, max_points: int) -> None:
        super().__init__()
        self.max_points = max_points

    def context(self, record: Record) -> dict[str, Any]:
        facts = record.facts
        projection = record.derived.projection
        usable = gpu_usable(facts)
        mark, tone = {True: ("✓", "good"), False: ("✗", "bad"), None: ("•", "neutral")}[usable]
        findings = sorted(record.findings, key=Finding.sort_key)
        bars = run_bars(facts, findings)
        picture = picture_view(bars, facts)
        sections = {
            "picture": picture,
            "workers": _workers_view(facts.workers),
            "findings": _cards(
                findings,
                of="step" if _has_steps(facts) else "run",
                target=projection.requested if projection is not None else None,
            ),
            "run": run_view(facts),
            "timeline": self.timeline_view(facts, findings),
            "pipelines": self.tfdata_view(facts.tfdata)
            if facts.tfdata is not None or ran_tensorflow(facts)
            else None,
            "optimizations": self.optimizations_view(fix_measurements(record.facts.input_fixes)),
            "fixes_tried": fixes_tried_view(facts),
            "projection": self.projection_view(projection),
            "placement": placement_view(facts.placement),
            "eager": eager_view(facts.eager),
            "tracing": tracing_view(facts.tracing),
            "environment": environment_view(facts.environment, facts.devices or ()),
        }
        severities = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITY_RANK}
        return {
            "title": f"gpuwhy: {record.verdict}",
            "verdict": verdict(facts, record.findings, drawn(bars, picture)),
            "mark": mark,
            "tone": tone,
            "command": record.command,
            "created": record.created,
            "tool_version": record.tool_version,
            "program": " ".join(facts.program.command) if facts.program else None,
            "severities": {k: v for k, v in severities.items() if v},
            "not_checked": sorted(record.not_checked.items()),
            **sections,
            "figures": self.figures,
            "plotly_js": PLOTLY_JS if self.figures else "",
            "code_css": _code_css(),
        }

    # -- projection -------------------------------------------------------------------
    def projection_view(self, projection: ProjectionFacts | None) -> dict[str, Any] | None:
        if projection is None:
            return None
        return {
            "gpu": projection.gpu,
            "figure": self.figure(charts.projection(projection)),
            "lines": projection_lines(projection),
            "calibrated": projection.calibrated,
        }

    # -- timeline ---------------------------------------------------------------------
    def timeline_view(
        self, facts: Facts, findings: Sequence[Finding] = ()
    ) -> dict[str, Any] | None:
        if facts.workers is not None:
            drawn = worker_steps(facts.workers)
            return None if drawn is None else self._series_view(drawn, WORKERS_NOTE)
        if facts.steps is None and facts.capture is not None:
            drawn = captured_steps(facts.capture)
            return None if drawn is None else self._series_view(drawn, CAPTURE_NOTE)
        if facts.program is None and facts.steps is None and facts.gpu_samples is None:
            return None  # not a watched run: `check` and `audit` records
        steps, samples = facts.steps, facts.gpu_samples
        fig = timeline(steps, samples, facts.tracing, self.max_points, finding_marks(findings))
        return {
            **self._series_view(fig),
            "steps": steps is not None,  # a GPU recording's: its samples alone
            "step_rows": step_rows(steps, self.max_points, facts.stalls)
            if steps is not None
            else None,
            "no_steps": None
            if steps is not None or not ran_tensorflow(facts)
            else (
                "No training steps found: no Keras fit, no loop over a tf.data iterator, no "
                "repeated tf.function or apply_gradients calls."
            ),
            "gpus": [gpu_table(g, samples, derived(facts).busy_of(g)) for g in samples.gpus if g.t]
            if samples
            else [],
            "no_gpu": no_gpu_reason(samples),
            "tf_peak": [
                (device, f"{peak / MiB:,.0f} MiB")
                for device, peak in (samples.tf_peak_memory_bytes.items() if samples else ())
            ],
        }

    def _series_view(self, fig: charts.Figure | None, note: str | None = None) -> dict[str, Any]:
        """The timeline section with its chart and nothing under it: a capture's or a
        merge's as it is (``note`` says what it draws), a run's to fill in."""
        return {
            "figure": self.figure(fig),
            "steps": True,
            "note": note,
            "step_rows": None,
            "no_steps": None,
            "no_gpu": None,
            "gpus": [],
            "tf_peak": [],
            "max_points": self.max_points,
        }

    # -- input pipeline ------------------------------------------------------------------
    def tfdata_view(self, tfdata: TfDataFacts | None) -> dict[str, Any]:
        if tfdata is None:
            return {
                "missing": "No tf.data facts in this record (recorded before the input "
                "pipeline doctor, or no tf.data pipeline was watched).",
                "host": [],
                "notes": [],
                "pipelines": [],
            }
        host = []
        if tfdata.host_cores is not None:
            host.append(("Host cores", f"{tfdata.host_cores}"))
        if tfdata.host_cpu_busy_fraction is not None:
            host.append(
                (
                    "Host CPU busy",
                    f"{tfdata.host_cpu_busy_fraction:.0%} of all cores (every process)",
                )
            )
        if tfdata.process_cpu_fraction is not None:
            host.append(("Program's CPU", f"{tfdata.process_cpu_fraction:.0%} of all cores"))
        return {
            "missing": None if tfdata.pipelines else "The program iterated no tf.data pipeline.",
            "host": host,
            "notes": list(tfdata.notes),
            "pipelines": [self.pipeline_view(p) for p in tfdata.pipelines],
        }

    def pipeline_view(self, p: PipelineFacts) -> dict[str, Any]:
        rows = [
            ("Built at", p.location or "?"),
            (
                "Read by",
                f"{consumer_words(p.consumer, False, p.read_at, p.read_via)}, "
                f"{p.iterators} iterator(s), {elements_words(p.elements, p.elements_known, p.elements_at_least)}",
            ),
        ]
        if p.throughput_per_s is not None:
            rows.append(
                ("The model got", f"{p.throughput_per_s:,.1f} elements/s over {p.consume_s:,.1f} s")
            )
        if p.gap_median_s is not None:
            rows.append(
                (
                    "Model time per element",
                    f"{duration(p.gap_median_s, microseconds=True)} (median, TF's own timer)",
                )
            )
        if p.wait_per_element_s is not None:
            rows.append(("Wait per element", duration(p.wait_per_element_s, microseconds=True)))
        rows.append(
            (
                "As written",
                ", ".join(
                    [
                        w
                        for w, on in (
                            ("prefetch at the end", p.prefetch_written),
                            ("cache", p.cache_written),
                        )
                        if on
                    ]
                    or ["no prefetch, no cache"]
                )
                + (
                    "; TF runs a prefetch at the end"
                    if p.prefetch_run and not p.prefetch_written
                    else ""
                )
                + ("" if p.autotune else "; autotune off"),
            )
        )
        if p.cardinality is not None:
            rows.append(("Elements per pass", f"{p.cardinality:,}"))
        if p.element_bytes is not None:
            rows.append(("Element size", byte_size(p.element_bytes)))
        bottleneck = None
        if p.bottleneck is not None and 0 <= p.bottleneck < len(p.stages):
            s = p.stages[p.bottleneck]
            bottleneck = (
                f"{s.name} ({' + '.join(s.written_as) or 'added by TF'}"
                + (f" at {s.location}" if s.location else "")
                + ")"
                + (
                    f", runs {s.function}"
                    + (f" ({s.function_location})" if s.function_location else "")
                    if s.function
                    else ""
                )
                + (
                    f": {duration(s.self_time_per_element_s, microseconds=True)} of its own per element"
                    if s.self_time_per_element_s is not None
                    else ""
                )
                + (
                    f", at most {s.root_elements_per_s:,.1f} elements/s to the model"
                    if s.root_elements_per_s is not None
                    else ""
                )
            )
        stages = []
        for i, s in enumerate(p.stages):
            flags = [
                f
                for f, on in (("Python", s.python), ("stateful", s.stateful), ("random", s.random))
                if on
            ] + list(s.codec_ops)
            stages.append(
                {
                    "bottleneck": i == p.bottleneck,
                    "cells": [
                        str(i + 1),
                        s.name,
                        s.kind,
                        " + ".join(s.written_as) or "added by TF",
                        s.location or "-",
                        (s.function or "-")
                        + (f" ({s.function_location})" if s.function_location else ""),
                        parallelism_text(s.parallelism, s.parallelism_written),
                        "-" if s.buffer_size is None else f"{s.buffer_size:,}",
                        f"{s.elements:,}",
                        f"{s.self_time_s:,.3f} s",
                        "-"
                        if s.self_time_per_element_s is None
                        else duration(s.self_time_per_element_s, microseconds=True),
                        "-" if s.root_elements_per_s is None else f"{s.root_elements_per_s:,.1f}",
                        ", ".join(flags) or "-",
                    ],
                }
            )
        return {
            "id": p.id,
            "rows": rows,
            "bottleneck": bottleneck,
            "figure": self.figure(charts.pipeline(p)),
            "stages": stages,
            "model_error": p.model_error,
        }

    # -- before / after ------------------------------------------------------------------
    def optimizations_view(self, measured: list[dict[str, Any]]) -> dict[str, Any] | None:
        if not measured:
            return None
        table = []
        for row in measured:
            before, after, ideal = row["before"], row.get("after"), row.get("ideal")
            table.append(
                [
                    row["name"],
                    rate_text(before),
                    rate_text(after),
                    rate_text(ideal),
                    f"{after['elements_per_s'] / before['elements_per_s']:,.2f}×"
                    if after and before["elements_per_s"]
                    else "-",
                ]
            )
        return {
            "figure": self.figure(charts.optimizations(measured)),
            "rows": table,
            "fixes": [(r["name"], r["fix"]) for r in measured if r.get("fix")],
        }


# -- formatting ------------------------------------------------------------------------------


def fixes_tried_view(facts: Facts) -> dict[str, Any] | None:
    """``gpuwhy fix SCRIPT``'s table: one row per fix tried, then the fixes together,
    the findings no fix was tried for, and the patch."""
    trial = facts.fix_trial
    if trial is None:
        return None
    rows = [fix_cells(t, planned=trial.runs_per_side) for t in facts.fixes_tried or ()]
    if trial.combined is not None:
        rows.append(fix_cells(trial.combined, together=True))
    return {
        "heading": trial_heading(trial, len(facts.fixes_tried or ())),
        "rows": rows,
        "not_tried": [f"{finding}: {why}" for finding, why in trial.not_tried],
        "original_error": trial.original_error,
        "patch": trial.patch,
        "notes": list(trial.notes),
    }


def fix_cells(t: FixTried, together: bool = False, planned: int | None = None) -> list[str]:
    if not t.ran:
        same, speed = "-", "-"
    else:
        agreed = f"yes (furthest: {t.difference})" if t.difference else "yes (no value differed)"
        same = {True: agreed, False: f"NO: {t.difference}", None: "not checked"}[t.same_results]
        speed = speed_text(t)
    verdict = "held" if t.held else "not kept"
    return [
        ("together: " if together else "") + t.fix,
        t.finding,
        ran_text(t, planned),
        same,
        speed,
        "measured" if not t.projected else projected_text(t),
        verdict
        + (", in the patch" if t.in_patch else "")
        + (f" (note: {t.note})" if t.note else ""),
    ]


def page_verdict(record: Record) -> str:
    """The verdict as the page's heading says it, the clauses its picture draws left to
    the picture (verdict.verdict's ``drawn``)."""
    bars = run_bars(record.facts, sorted(record.findings, key=Finding.sort_key))
    picture = picture_view(bars, record.facts)
    return verdict(record.facts, record.findings, drawn(bars, picture))


def drawn(bars: Sequence[Bar], picture: dict[str, Any] | None) -> set[str]:
    """What the picture draws of the verdict: its bars' clauses and the busy figure."""
    clauses = {b.draws for b in bars if b.draws and b.segments}
    if picture is not None and picture["busy"]:
        clauses.add("busy")
    return clauses


def picture_view(bars: Sequence[Bar], facts: Facts) -> dict[str, Any] | None:
    """The first screen's picture under the verdict (step_bars.py): the SVG of the step's
    parts and the GPU-busy figure; None where the record measured no step and no GPU."""
    drawn = svg(bars, "The training step, split into what gpuwhy measured")
    busy = busy_caption(facts)
    if drawn is None and busy is None:
        return None
    return {"svg": drawn, "busy": busy}


def _workers_view(workers: WorkersFacts | None) -> dict[str, Any] | None:
    """gpuwhy merge: the per-worker table, as the terminal report has it."""
    if workers is None:
        return None
    notes = [input_wait_note(workers), *worker_notes(workers)]
    return {
        "directory": workers.directory,
        "columns": list(HEADER),
        "rows": worker_rows(workers),
        "notes": [n for n in notes if n],
    }


def _cards(findings: Sequence[Finding], of: str, target: str | None = None) -> list[dict[str, Any]]:
    """The findings' cards; a fix an earlier card holds in full is not repeated (the
    terminal prints it once too): the card points at that one."""
    return [
        {**finding_view(number, finding, of, target), "same_fix_as": first}
        for number, (finding, first) in enumerate(zip(findings, same_fix_as(findings)), 1)
    ]


WORKERS_NOTE = (
    "Each worker's median step per window of its run (the line) and its wait for input "
    "per step there (dotted, where timed), each on its own clock."
)
CAPTURE_NOTE = (
    "Each captured step as a bar as long as the step: the GPU's kernels, then its idle "
    "time, coloured by what the host did in most of it."
)


def _has_steps(facts: Facts) -> bool:
    """The record timed steps (a run's, a capture's): a finding's cost is a share of
    the step; else (a recording) of the run."""
    return facts.steps is not None or bool(facts.capture is not None and facts.capture.steps)


def _code_css() -> str:
    try:
        from pygments.formatters import HtmlFormatter
    except ImportError:  # pragma: no cover
        return ""
    return HtmlFormatter(style="friendly").get_style_defs(".code")


@functools.cache
def _template(name: str = "report.html.j2"):
    """Compiled once per process: compiling is half the time of rendering a page."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpuwhy.report", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["locs"] = nowrap_locations
    env.filters["when"] = when
    return env.get_template(name)
