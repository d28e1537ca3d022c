"""``gpuwhy diff`` as one HTML page (``--html OUT``, ``-f html -o OUT``) that opens offline,
built as the run report is (html.py): the same styles and table macros, plotly.js inlined,
the charts' data as JSON in the page, written to its file piece by piece.

It reads the same as the terminal (diff_terminal.py, whose words it reuses): the verdict
first, with BEFORE's and AFTER's step drawn beside it as two bars (diff/step_bars.py), then the step time with its 95 % interval drawn, then what the terminal cannot
show, the two runs' training on one time axis (each from its first training window after
warm-up, so the same moment of training lines up, not the same wall-clock time), then
the parts of the step, the step projected onto a GPU (``--target``), GPU busy, the
findings and environment that changed, and how each record was read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from gpuwhy.comparison.model import AlignedWindow, Change, Comparison, FindingChange, RunSide
from gpuwhy.formatting import when
from gpuwhy.report.diff.step_bars import diff_bars
from gpuwhy.report.diff.terminal import (
    busy_line,
    part_row,
    projected_line,
    severities,
    side_read,
    step_lines,
    verdict_mark,
)
from gpuwhy.report.run.html import PLOTLY_JS, Figures, page_pieces, render_page, write_page
from gpuwhy.report.run.html_charts import Figure, figure, label
from gpuwhy.report.run.html_timeline import COMPUTE, Rows, finished
from gpuwhy.report.step_picture import svg
from gpuwhy.version import __version__

SIDES = (("BEFORE", "#8c8c8c"), ("AFTER", COMPUTE))
CALLED_COLOUR = {"faster": "#2e7d32", "slower": "#c62828"}  # the page's --good and --bad
SAME_COLOUR = "#59636e"
TONE = {"faster": "good", "slower": "bad"}
X_TITLE = "seconds since each run's first training window after warm-up"
# The timeline's lines, per run: (row, what, its value in a window, how it is drawn)
SERIES: tuple[tuple[int, str, Callable[[AlignedWindow], float | None], dict[str, Any]], ...] = (
    (1, "median step", lambda w: _ms(w.p50_s), {"width": 2}),
    (1, "mean step", lambda w: _ms(w.mean_s), {"width": 1.2, "dash": "dot"}),
    (2, "waiting for input", lambda w: _pct(w.input_share), {"width": 1.5}),
    (2, "GPU busy", lambda w: _pct(w.gpu_busy), {"width": 1.5, "dash": "dash"}),
)


def render_comparison_html(c: Comparison) -> str:
    """The page as one string (plotly.js is most of it)."""
    return render_page(_pieces(c))


def write_comparison_html(c: Comparison, out: IO[bytes]) -> None:
    """The page into ``out`` as jinja renders it, plotly.js copied in blocks: what
    ``gpuwhy diff --html`` and ``-f html`` write."""
    write_page(_pieces(c), out)


def _pieces(c: Comparison) -> Iterator[str]:
    return page_pieces("diff.html.j2", context(c))


def context(c: Comparison) -> dict[str, Any]:
    """The template's context: plain strings, rows and figure JSON."""
    figures = Figures()
    mark, called = verdict_mark(c)
    timeline = aligned_timeline(c.timeline_before, c.timeline_after)
    return {
        "title": f"gpuwhy diff: {c.verdict}",
        "verdict": c.verdict,
        "mark": mark,
        "tone": TONE.get(called, "neutral"),
        "picture": _picture(c),
        "tool_version": __version__,
        "before": c.before,
        "after": c.after,
        "step": None
        if c.step_time is None
        else {
            "figure": figures.figure(ratio_interval(c.step_time)),
            "lines": [line.strip() for line in step_lines(c.step_time, c)],
        },
        "timeline": figures.figure(timeline),
        "timeline_notes": _timeline_notes(c),
        "parts": [{"cells": [*part_row(p), p.measured_by], "called": p.called} for p in c.parts],
        "projected": None
        if c.projected_step is None
        else {"gpu": c.projected_gpu, "line": projected_line(c.projected_step).strip()},
        "busy": busy_line(c.gpu_busy).strip() if c.gpu_busy is not None else None,
        "findings": [_finding_view(f) for f in c.findings],
        "environment": [(e.what, e.before or "-", e.after or "-") for e in c.environment],
        "compared": [_side_row("BEFORE", c.before), _side_row("AFTER", c.after)],
        "notes": list(c.notes),
        "figures": figures.figures,
        "plotly_js": PLOTLY_JS if figures.figures else "",
        "code_css": "",
    }


def _picture(c: Comparison) -> dict[str, Any] | None:
    """BEFORE's and AFTER's step as two bars beside the verdict (diff/step_bars.py), the
    GPU-busy change under them where both records measured one."""
    drawn = svg(diff_bars(c), "BEFORE's and AFTER's step, split into what gpuwhy measured")
    busy = (
        f"GPU busy {c.gpu_busy.before:.0%} → {c.gpu_busy.after:.0%}"
        if c.gpu_busy is not None
        else None
    )
    return None if drawn is None and busy is None else {"svg": drawn, "busy": busy}


def _finding_view(f: FindingChange) -> dict[str, Any]:
    return {
        "id": f.id,
        "change": f.change,
        "severity": f.severity_after or f.severity_before or "info",
        "severities": severities(f),
        "title": f.title,
        "location": f.location,
    }


def _side_row(name: str, side: RunSide) -> list[Any]:
    """A side of the Compared table: its record's path may break only after a ``/``, its
    date is said whole ("2026-11-30 02:41:35 UTC"), never broken inside a name or a
    date."""
    from markupsafe import Markup, escape  # with jinja2: only the HTML pages need it

    path = Markup(str(escape(side.path)).replace("/", "/<wbr>"))
    return [name, path, side.command, when(side.created), side_read(side), side.verdict]


def _timeline_notes(c: Comparison) -> list[str]:
    if not c.timeline_before and not c.timeline_after:
        return [
            "Nothing to draw: neither record has training windows after warm-up (a "
            "`gpuwhy watch` record has GPU samples but no steps)."
        ]
    notes = [
        f"{name} has no training windows after warm-up to draw."
        for name, windows in (("BEFORE", c.timeline_before), ("AFTER", c.timeline_after))
        if not windows
    ]
    if c.before.runs > 1 or c.after.runs > 1:
        notes.append(
            "Of several runs a side, the one whose mean step is its side's median is drawn "
            "(the runs' mean steps are under Compared)."
        )
    return notes


# -- charts ----------------------------------------------------------------------------------


def ratio_interval(step: Change) -> Figure:
    """AFTER / BEFORE step time as a point with its 95 % interval, against the line of no
    change: an interval that leaves 1 out is a change called."""
    colour = CALLED_COLOUR.get(step.called, SAME_COLOUR)
    row = "AFTER / BEFORE"
    data = [
        {
            "type": "scatter",
            "name": "step time, AFTER / BEFORE",
            "x": [step.estimate],
            "y": [row],
            "mode": "markers",
            "marker": {"color": colour, "size": 11},
            "error_x": {
                "type": "data",
                "symmetric": False,
                "array": [max(0.0, step.high - step.estimate)],
                "arrayminus": [max(0.0, step.estimate - step.low)],
                "color": colour,
                "thickness": 2.5,
                "width": 8,
            },
            "hovertemplate": f"%{{x:.3f}} (95% interval {step.low:.3f}-{step.high:.3f})"
            "<extra></extra>",
        }
    ]
    low, high = min(step.low, 1.0), max(step.high, 1.0)
    pad = max(high - low, 0.02) * 0.15
    layout = {
        "height": 170,
        "showlegend": False,
        "xaxis": {
            "title": {"text": "step time, AFTER / BEFORE (below 1: faster), 95% interval"},
            "range": [low - pad, high + pad],
        },
        "yaxis": {"showticklabels": False},
        "margin": {"l": 20, "r": 20, "t": 30, "b": 50},
        "shapes": [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": 1,
                "x1": 1,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#333333", "dash": "dash", "width": 1},
            }
        ],
        "annotations": [
            {
                "x": 1,
                "xref": "x",
                "y": 1,
                "yref": "paper",
                "yanchor": "bottom",
                "showarrow": False,
                "text": "no change",
            }
        ],
    }
    return figure(data, layout, "plotly_white")


def aligned_timeline(
    before: Sequence[AlignedWindow], after: Sequence[AlignedWindow]
) -> Figure | None:
    """BEFORE's and AFTER's training windows on one x axis: each window's median step as a
    line and its mean step dotted; under it, in a second row on the same axis, the share
    of the step spent waiting for input and the GPUs' busy share, where measured. None
    when neither run has a training window."""
    if not before and not after:
        return None
    both = (*before, *after)
    shares = any(w.input_share is not None or w.gpu_busy is not None for w in both)
    titles = ["step time (ms per step)", *(["% of the step / of the time"] if shares else [])]
    fig = Rows([0.62, 0.38] if shares else [1.0], spacing=0.08)
    for n, title in enumerate(titles, 1):
        fig.yaxis(n).update(title={"text": title}, rangemode="tozero")
    for (name, colour), windows in zip(SIDES, (before, after)):
        if not windows:
            continue
        gaps = _gaps(windows)
        x = _broken([w.start_s for w in windows], gaps, gap_value=True)
        for row, what, value, line in SERIES:
            values = [value(w) for w in windows]
            if row > len(titles) or all(v is None for v in values):
                continue
            fig.add(
                {
                    "x": x,
                    "y": _broken(values, gaps),
                    "name": label(f"{name} {what}"),
                    "mode": "lines+markers" if len(windows) < 20 else "lines",
                    "line": {"color": colour, **line},
                    "marker": {"color": colour, "size": 5},
                    "legendgroup": name,
                    "hovertemplate": "%{y:.1f} ms" if row == 1 else "%{y:.0f}%",
                },
                row,
            )
    if shares:
        fig.yaxis(2)["range"] = [0, 100]
    return finished(fig, len(titles), X_TITLE)


def _gaps(windows: Sequence[AlignedWindow]) -> set[int]:
    """The windows that follow a gap (no training steps there, or too few for a median):
    more than 1.5 times the run's window width, its smallest step between windows."""
    starts = [w.start_s for w in windows]
    width = min((b - a for a, b in zip(starts, starts[1:]) if b > a), default=0.0)
    return {i for i in range(1, len(starts)) if width and starts[i] - starts[i - 1] > 1.5 * width}


def _broken(values: Sequence[Any], gaps: set[int], gap_value: bool = False) -> list[Any]:
    """The values with a point before each gap's window that breaks the line: None, or
    for the x values the gap's middle."""
    out: list[Any] = []
    for i, value in enumerate(values):
        if i in gaps:
            out.append((values[i - 1] + value) / 2 if gap_value else None)
        out.append(value)
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 4)


def _pct(share: float | None) -> float | None:
    return None if share is None else round(share * 100, 2)
