"""The HTML report's charts of one section each (the input pipeline's stages, the measured
fixes before and after) and what every chart shares: escaping user strings for Plotly and
writing a figure into the page. The run's timeline, the one chart with rows, a shared time
axis and downsampled series, has its own module (``html_timeline.py``).

A figure is the plain ``{"data": [...], "layout": {...}}`` that plotly.js reads, written
here as plotly.graph_objects would write it (its template included), without importing
plotly's Python side: its validators alone cost about 30 MB at the end of every run
(plotly_files.py). What they checked as the report was written, that every property
name exists so that a typo cannot fail silently in a browser, a test now checks against
the installed plotly's schema (tests/report/test_html_charts.py): each chart of records
that take every branch here, passed through ``plotly.graph_objects.Figure``, is accepted
and comes back unchanged.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from gpuwhy.facts import PipelineFacts, ProjectionFacts
from gpuwhy.formatting import duration
from gpuwhy.report.plotly_files import template

BOTTLENECK = "#d62728"
STAGE = "#9ab0c8"
CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}

Figure = dict[str, Any]  # {"data": [trace, ...], "layout": {...}}


def figure(data: list[dict[str, Any]], layout: dict[str, Any], look: str = "plotly") -> Figure:
    """A figure as plotly.graph_objects writes it: ``look`` is its template, the default
    one ("plotly") unless a chart asks for another."""
    return {"data": data, "layout": {**layout, "template": template(look)}}


def figure_json(fig: Figure) -> str:
    """The figure as JSON for a ``<script type="application/json">`` block. Every ``<`` is
    written as ``\\u003c`` (the same string to JSON.parse), so no name in the data can
    close the script element or open a comment. A number that is not finite is written
    null, as plotly's own encoder writes it (JSON has no NaN)."""
    page = {"data": fig["data"], "layout": fig["layout"], "config": CONFIG}
    try:
        text = json.dumps(page, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(page), separators=(",", ":"))
    return text.replace("<", "\\u003c")


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def label(text: str) -> str:
    """Plotly reads trace names and hover text as a small HTML subset: user strings are
    escaped so that ``<lambda>`` stays text."""
    return html.escape(text, quote=False)


# -- the input pipeline ----------------------------------------------------------------


def pipeline(p: PipelineFacts) -> Figure | None:
    """How fast each stage alone could feed the model (elements per second at the root),
    the bottleneck in red and what the model actually got as a line. Stages without that
    figure are drawn by their self time instead."""
    if not p.stages:
        return None
    by_rate = any(s.root_elements_per_s for s in p.stages)
    names = [
        label(
            f"{i + 1}. {s.name}"
            + (f" ({' + '.join(s.written_as)})" if s.written_as else " (added by TF)")
        )
        for i, s in enumerate(p.stages)
    ]
    values = [(s.root_elements_per_s if by_rate else s.self_time_s) for s in p.stages]
    colours = [BOTTLENECK if i == p.bottleneck else STAGE for i in range(len(p.stages))]
    hover = []
    for s in p.stages:
        parts = [f"self time {s.self_time_s:,.3f} s over {s.elements:,} elements"]
        if s.self_time_per_element_s is not None:
            parts.append(f"{s.self_time_per_element_s * 1000:,.3f} ms per element")
        if s.parallelism is not None:
            parts.append(f"parallelism {s.parallelism}")
        if s.function:
            parts.append(
                f"runs {s.function}" + (f" ({s.function_location})" if s.function_location else "")
            )
        hover.append(label("; ".join(parts)))
    bars = {
        "type": "bar",
        "x": [v if v is not None else 0 for v in values],
        "y": names,
        "orientation": "h",
        "marker": {"color": colours},
        "customdata": hover,
        "hovertemplate": "%{x:,.1f}"
        + (" elements/s" if by_rate else " s")
        + "<br>%{customdata}<extra></extra>",
    }
    known = [v for v in values if v]
    log = by_rate and bool(known) and max(known) / max(min(known), 1e-12) > 100
    xaxis: dict[str, Any] = {"type": "log"} if log else {}
    layout: dict[str, Any] = {}
    if by_rate and p.throughput_per_s:
        x = p.throughput_per_s
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": x,
                "x1": x,
                "y0": 0,
                "y1": 1,
                "line": {"color": "#333333", "dash": "dash"},
            }
        ]
        # an annotation on a log axis takes its log10 position, a shape does not
        layout["annotations"] = [
            {
                "x": math.log10(x) if log else x,
                "xref": "x",
                "y": 1,
                "yref": "paper",
                "yanchor": "bottom",
                "showarrow": False,
                "text": f"the model got {p.throughput_per_s:,.1f}/s",
            }
        ]
    xaxis["title"] = {
        "text": "elements per second this stage alone could deliver to the model"
        if by_rate
        else "self time (s, all threads)"
    }
    layout.update(
        xaxis=xaxis,
        yaxis={"autorange": "reversed"},
        height=120 + 34 * len(p.stages),
        showlegend=False,
        margin={"l": 10, "r": 20, "t": 30, "b": 50},
    )
    return figure([bars], layout, "plotly_white")


# -- before / after --------------------------------------------------------------------


def optimizations(rows: Sequence[dict[str, Any]]) -> Figure | None:
    """Grouped bars per measured fix: before, after and (when known) the ideal, with the
    spread of the repeats (``low``..``high``) as error bars."""
    if not rows:
        return None
    data = []
    for key, colour in (("before", "#bab0ac"), ("after", "#54a24b"), ("ideal", "#72b7b2")):
        xs, ys, plus, minus = [], [], [], []
        for row in rows:
            value = row.get(key)
            if value is None:
                continue
            xs.append(label(row["name"]))
            ys.append(value["elements_per_s"])
            plus.append(value["high"] - value["elements_per_s"])
            minus.append(value["elements_per_s"] - value["low"])
        if xs:
            data.append(
                {
                    "type": "bar",
                    "name": key,
                    "x": xs,
                    "y": ys,
                    "marker": {"color": colour},
                    "error_y": {
                        "type": "data",
                        "symmetric": False,
                        "array": plus,
                        "arrayminus": minus,
                        "visible": any(plus) or any(minus),
                    },
                    "hovertemplate": "%{y:,.1f} elements/s",
                }
            )
    layout = {
        "barmode": "group",
        "height": 360,
        "yaxis": {"title": {"text": "elements per second"}},
        "margin": {"l": 70, "r": 20, "t": 30, "b": 60},
    }
    return figure(data, layout, "plotly_white")


def projection(p: ProjectionFacts) -> Figure:
    """Where the projected step's time goes, stacked (middle estimates, milliseconds),
    the step's band as an error bar, and the time the input pipeline needs per batch on
    this host beside it: a bar longer than the step is a GPU waiting for input."""
    parts = [
        ("matmul/conv", p.tensor_s, "#4c78a8"),
        ("other kernels", p.kernels_s, "#72b7b2"),
        ("copies", p.copies_s, "#eeca3b"),
    ]
    if p.cpu_ops_s:  # ops that stay on the CPU, at their time measured on this host
        parts.append(("CPU ops (measured here)", p.cpu_ops_s, "#9d755d"))
    step_label = label(f"step on {p.gpu} (projected)")
    data: list[dict[str, Any]] = [
        _bar(name, seconds, step_label, colour, f"{name}: %{{x:,.3f}} ms<extra></extra>")
        for name, seconds, colour in parts
    ]
    data.append(
        {
            "type": "scatter",
            "name": "step band",
            "x": [p.step_s * 1000],
            "y": [step_label],
            "mode": "markers",
            "marker": {"color": "#333333", "size": 6},
            "error_x": {
                "type": "data",
                "symmetric": False,
                "array": [(p.step_high_s - p.step_s) * 1000],
                "arrayminus": [(p.step_s - p.step_low_s) * 1000],
            },
            "hovertemplate": "step %{x:,.3f} ms (band shown)<extra></extra>",
        }
    )
    if p.host_s:
        name = "the host's own work (measured on this host)"
        hover = f"{name}: %{{x:,.3f}} ms per step<extra></extra>"
        data.append(_bar(name, p.host_s, label(name), "#b279a2", hover))
    elif p.eager_s:
        name = "Python issuing eager ops (this host)"
        hover = f"{name}: %{{x:,.3f}} ms per step<extra></extra>"
        data.append(_bar(name, p.eager_s, label(name), "#b279a2", hover))
    inputs: tuple[tuple[str, float | None], ...] = (
        ("input alone (this host)", p.input_batch_s),
        ("input as delivered (this host)", p.input_batch_measured_s),
    )
    for name, per_batch in inputs:
        if per_batch:
            hover = f"{name}: %{{x:,.3f}} ms per batch<extra></extra>"
            data.append(_bar(name, per_batch, label(name), "#e45756", hover))
    rows = len({trace["y"][0] for trace in data})
    layout = {
        "barmode": "stack",
        "xaxis": {"title": {"text": "milliseconds per step / per batch"}},
        "yaxis": {"automargin": True},
        # a row per bar and the legend under the plot: beside it, eight entries took
        # the plot's height and left its bars a strip 25 px tall
        "height": 150 + 45 * rows,
        "margin": {"t": 10, "b": 10},
        "legend": {"orientation": "h", "y": -0.35, "yanchor": "top"},
        # said beside its band: next to the host's or the input's bar, a step's kernels
        # of a fraction of a millisecond are too short to see
        "annotations": [
            {
                "x": p.step_high_s * 1000,
                "y": step_label,
                "xanchor": "left",
                "showarrow": False,
                "text": label(_step_words(p, [s for _, s, _ in parts])),
            }
        ],
    }
    return figure(data, layout)


def _step_words(p: ProjectionFacts, parts: list[float]) -> str:
    """``  step 7.0 ms (3.5 ms–10.8 ms); its GPU parts 0.2 ms``: the projected step and
    what of it the bars to its left draw."""
    device = sum(parts)
    return (
        f"   step {duration(p.step_s)} ({duration(p.step_low_s)}–{duration(p.step_high_s)});"
        f" its GPU parts {duration(device, microseconds=True)}"
    )


def _bar(name: str, seconds: float, row: str, colour: str, hover: str) -> dict[str, Any]:
    """One horizontal bar of the projection, in milliseconds."""
    return {
        "type": "bar",
        "name": name,
        "x": [seconds * 1000],
        "y": [row],
        "orientation": "h",
        "marker": {"color": colour},
        "hovertemplate": hover,
    }
