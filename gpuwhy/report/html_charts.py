"""The HTML report's charts of one section each (the input pipeline's stages, the measured
fixes before and after) and what every chart shares: escaping user strings for Plotly and
writing a figure into the page. The run's timeline, the one chart with rows, a shared time
axis and downsampled series, has its own module (``html_timeline.py``).

plotly.graph_objects validates every property name when the report is written, so a typo
fails here, not silently in a browser.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import Any

from gpuwhy.facts import PipelineFacts, ProjectionFacts

BOTTLENECK = "#d62728"
STAGE = "#9ab0c8"
CONFIG = {"displaylogo": False, "responsive": True, "scrollZoom": False}


def figure_json(fig) -> str:
    """The figure as JSON for a ``<script type="application/json">`` block. Every ``<`` is
    written as ``\\u003c`` (the same string to JSON.parse), so no name in the data can
    close the script element or open a comment."""
    from plotly.utils import PlotlyJSONEncoder

    data = fig.to_plotly_json()
    text = json.dumps(
        {"data": data["data"], "layout": data["layout"], "config": CONFIG},
        cls=PlotlyJSONEncoder,
        separators=(",", ":"),
    )
    return text.replace("<", "\\u003c")


def label(text: str) -> str:
    """Plotly reads trace names and hover text as a small HTML subset: user strings are
    escaped so that ``<lambda>`` stays text."""
    return html.escape(text, quote=False)


# -- the input pipeline ----------------------------------------------------------------


def pipeline(p: PipelineFacts):
    """How fast each stage alone could feed the model (elements per second at the root),
    the bottleneck in red and what the model actually got as a line. Stages without that
    figure are drawn by their self time instead."""
    import plotly.graph_objects as go

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
    fig = go.Figure(
        go.Bar(
            x=[v if v is not None else 0 for v in values],
            y=names,
            orientation="h",
            marker=dict(color=colours),
            customdata=hover,
            hovertemplate="%{x:,.1f}"
            + (" elements/s" if by_rate else " s")
            + "<br>%{customdata}<extra></extra>",
        )
    )
    known = [v for v in values if v]
    log = by_rate and bool(known) and max(known) / max(min(known), 1e-12) > 100
    if log:
        fig.update_xaxes(type="log")
    if by_rate and p.throughput_per_s:
        x = p.throughput_per_s
        fig.add_shape(
            type="line",
            xref="x",
            yref="paper",
            x0=x,
            x1=x,
            y0=0,
            y1=1,
            line=dict(color="#333333", dash="dash"),
        )
        # an annotation on a log axis takes its log10 position, a shape does not
        fig.add_annotation(
            x=math.log10(x) if log else x,
            xref="x",
            y=1,
            yref="paper",
            yanchor="bottom",
            showarrow=False,
            text=f"the model got {p.throughput_per_s:,.1f}/s",
        )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(
        title_text="elements per second this stage alone could deliver to the model"
        if by_rate
        else "self time (s, all threads)"
    )
    fig.update_layout(
        height=120 + 34 * len(p.stages),
        template="plotly_white",
        showlegend=False,
        margin=dict(l=10, r=20, t=30, b=50),
    )
    return fig


# -- before / after --------------------------------------------------------------------


def optimizations(rows: Sequence[dict[str, Any]]):
    """Grouped bars per measured fix: before, after and (when known) the ideal, with the
    spread of the repeats (``low``..``high``) as error bars."""
    import plotly.graph_objects as go

    if not rows:
        return None
    fig = go.Figure()
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
            fig.add_trace(
                go.Bar(
                    name=key,
                    x=xs,
                    y=ys,
                    marker_color=colour,
                    error_y=dict(
                        type="data",
                        symmetric=False,
                        array=plus,
                        arrayminus=minus,
                        visible=any(plus) or any(minus),
                    ),
                    hovertemplate="%{y:,.1f} elements/s",
                )
            )
    fig.update_layout(
        barmode="group",
        height=360,
        template="plotly_white",
        yaxis_title="elements per second",
        margin=dict(l=70, r=20, t=30, b=60),
    )
    return fig


def projection(p: ProjectionFacts):
    """Where the projected step's time goes, stacked (middle estimates, milliseconds),
    the step's band as an error bar, and the time the input pipeline needs per batch on
    this host beside it: a bar longer than the step is a GPU waiting for input."""
    import plotly.graph_objects as go

    parts = [
        ("matmul/conv", p.tensor_s, "#4c78a8"),
        ("other kernels", p.kernels_s, "#72b7b2"),
        ("copies", p.copies_s, "#eeca3b"),
    ]
    if p.cpu_ops_s:  # ops that stay on the CPU, at their time measured on this host
        parts.append(("CPU ops (measured here)", p.cpu_ops_s, "#9d755d"))
    step_label = label(f"step on {p.gpu} (projected)")
    fig = go.Figure()
    for name, seconds, colour in parts:
        fig.add_trace(
            go.Bar(
                name=name,
                x=[seconds * 1000],
                y=[step_label],
                orientation="h",
                marker=dict(color=colour),
                hovertemplate=f"{name}: %{{x:,.3f}} ms<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            name="step band",
            x=[p.step_s * 1000],
            y=[step_label],
            mode="markers",
            marker=dict(color="#333333", size=6),
            error_x=dict(
                type="data",
                symmetric=False,
                array=[(p.step_high_s - p.step_s) * 1000],
                arrayminus=[(p.step_s - p.step_low_s) * 1000],
            ),
            hovertemplate="step %{x:,.3f} ms (band shown)<extra></extra>",
        )
    )
    if p.eager_s:
        name = "Python issuing eager ops (this host)"
        fig.add_trace(
            go.Bar(
                name=name,
                x=[p.eager_s * 1000],
                y=[label(name)],
                orientation="h",
                marker=dict(color="#b279a2"),
                hovertemplate=f"{name}: %{{x:,.3f}} ms per step<extra></extra>",
            )
        )
    inputs: tuple[tuple[str, float | None], ...] = (
        ("input alone (this host)", p.input_batch_s),
        ("input as delivered (this host)", p.input_batch_measured_s),
    )
    for name, per_batch in inputs:
        if per_batch:
            fig.add_trace(
                go.Bar(
                    name=name,
                    x=[per_batch * 1000],
                    y=[label(name)],
                    orientation="h",
                    marker=dict(color="#e45756"),
                    hovertemplate=f"{name}: %{{x:,.3f}} ms per batch<extra></extra>",
                )
            )
    fig.update_layout(barmode="stack", xaxis_title="milliseconds per step / per batch")
    return fig
