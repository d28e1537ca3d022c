"""The HTML report's timeline: step time (input wait stacked under the rest), trace
markers, Keras phases and each sampled GPU's activity, memory and PCIe traffic, in rows on
one time axis. Its own module because it is the one chart that lays out rows and legends
and draws long series: they go through ``downsample`` first, and every number printed
beside the chart comes from the full series (``html.py``). A long run's GPU series are
windows of samples (facts/gpu_samples.py) covering all of it: each is drawn at its middle,
its mean as the line and its lowest and highest sample as the band. Times are seconds since the run
started, the axis the facts share, so steps, traces and GPU samples line up. The rows are
laid out as plotly's ``make_subplots`` lays them out (``Rows``), in plain dicts
(html_charts.py says why).

A run longer than the steps the record keeps one by one (``StepFacts.all_kept`` False)
is drawn whole from what the record holds: its first steps one by one as a short run's,
then the timeline's windows (the median, the p90 and the slowest step of each, and the
mean input wait where every step's was timed), then its latest steps one by one. The
legend names the windows' width; the table under the chart (html_sections.step_rows)
says which steps are drawn how.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuwhy.derived.gpu_busy import busy_column, source_of
from gpuwhy.derived.step_timeline import later_spans
from gpuwhy.facts import GpuSamplesFacts, GpuSeries, StepFacts, StepSpan, TracingFacts
from gpuwhy.finding import Finding
from gpuwhy.formatting import GiB
from gpuwhy.report.downsample import MAX_POINTS, Downsampled, downsample, rounded
from gpuwhy.report.run.html_charts import Figure, figure, label

INPUT_WAIT = "#f58518"
COMPUTE = "#4c78a8"
GPU_COLOURS = (
    "#2ca02c",
    "#9467bd",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#7f7f7f",
    "#1f77b4",
)
MAX_PHASE_SHAPES = 200
MAX_TRACE_MARKERS = 500
MAX_FINDING_MARKS = 200
MARK_COLOUR = "#d62728"


def finding_marks(findings: Sequence[Finding]) -> list[tuple[float, str]]:
    """Moments findings point at, as (seconds since the run started, what happened):
    where a drift began (evidence ``at_s``) and each moment a finding lists (a list of
    objects with ``at_s``: a periodic stall's first stalls), each named by its
    finding's title."""
    marks: list[tuple[float, str]] = []
    for f in findings:
        text = f"{f.id}: {f.title}"
        at = f.evidence.get("at_s")
        if isinstance(at, (int, float)):
            marks.append((float(at), text))
        for value in f.evidence.values():
            if isinstance(value, list):
                marks.extend(
                    (float(item["at_s"]), text)
                    for item in value
                    if isinstance(item, dict) and isinstance(item.get("at_s"), (int, float))
                )
    return marks[:MAX_FINDING_MARKS]


def timeline(
    steps: StepFacts | None,
    samples: GpuSamplesFacts | None,
    tracing: TracingFacts | None,
    max_points: int = MAX_POINTS,
    marks: Sequence[tuple[float, str]] = (),
) -> Figure | None:
    """Step time (input wait stacked under the rest) and each sampled GPU's activity,
    memory and PCIe traffic, on one shared time axis, with the moments findings point
    at (``marks``: a drift's start, stalls) across every row. None when there is
    nothing to draw."""
    drawn_steps = (
        steps
        if steps is not None
        and (
            (len(steps.starts) > 0 and len(steps.durations) == len(steps.starts))
            or later_spans(steps)
        )
        else None
    )
    gpus = [g for g in (samples.gpus if samples is not None else ()) if g.t]
    has_pcie = any(_known(g.pcie_tx_bytes_per_s) or _known(g.pcie_rx_bytes_per_s) for g in gpus)
    rows: list[tuple[str, str]] = []
    if drawn_steps is not None:
        spc = drawn_steps.steps_per_call
        per_call = f" per call of {spc} steps" if spc > 1 else ""
        rows.append(("steps", f"step time (ms{per_call})"))
    if gpus:
        rows.append(("activity", "GPU busy (%)"))
        rows.append(("memory", "GPU memory (GiB)"))
        if has_pcie:
            rows.append(("pcie", "PCIe (MB/s)"))
    if not rows:
        return None
    heights = [0.46 if kind == "steps" else 0.2 for kind, _ in rows]
    fig = Rows([h / sum(heights) for h in heights], spacing=0.08)
    row_of = {kind: i + 1 for i, (kind, _) in enumerate(rows)}
    for i, (_, title) in enumerate(rows, 1):
        fig.yaxis(i).update(title={"text": title}, rangemode="tozero")
    if drawn_steps is not None:
        _step_traces(fig, row_of["steps"], drawn_steps, max_points)
        if tracing is not None:
            _trace_markers(fig, row_of["steps"], tracing)
    multi = len(gpus) > 1
    for n, gpu in enumerate(gpus):
        colour = GPU_COLOURS[n % len(GPU_COLOURS)]
        prefix = f"GPU {gpu.index} " if multi else ""
        group = f"gpu{gpu.index}"
        _band_line(
            fig,
            row_of["activity"],
            gpu,
            busy_column(gpu),
            f"{prefix}busy ({_busy_measure(gpu)})",
            colour,
            100.0,
            max_points,
            group,
        )
        if _known(gpu.sm_activity):
            _band_line(
                fig,
                row_of["activity"],
                gpu,
                "sm_activity",
                f"{prefix}SM activity",
                colour,
                100.0,
                max_points,
                group,
                dash="dot",
            )
        if _known(gpu.tensor_activity):
            _band_line(
                fig,
                row_of["activity"],
                gpu,
                "tensor_activity",
                f"{prefix}tensor-core activity",
                colour,
                100.0,
                max_points,
                group,
                dash="dash",
            )
        _band_line(
            fig,
            row_of["memory"],
            gpu,
            "memory_used_bytes",
            f"{prefix}memory used (all processes)",
            colour,
            1 / GiB,
            max_points,
            group,
        )
        if _known(gpu.own_memory_bytes):
            _band_line(
                fig,
                row_of["memory"],
                gpu,
                "own_memory_bytes",
                f"{prefix}memory of the watched program",
                colour,
                1 / GiB,
                max_points,
                group,
                dash="dot",
            )
        if gpu.memory_total_bytes:
            fig.hline(
                gpu.memory_total_bytes / GiB,
                row_of["memory"],
                line={"color": colour, "width": 1, "dash": "dash"},
                text=label(f"{prefix}total {gpu.memory_total_bytes / GiB:,.0f} GiB"),
            )
        if has_pcie:
            _band_line(
                fig,
                row_of["pcie"],
                gpu,
                "pcie_rx_bytes_per_s",
                f"{prefix}PCIe host → GPU",
                colour,
                1e-6,
                max_points,
                group,
            )
            _band_line(
                fig,
                row_of["pcie"],
                gpu,
                "pcie_tx_bytes_per_s",
                f"{prefix}PCIe GPU → host",
                colour,
                1e-6,
                max_points,
                group,
                dash="dot",
            )
    if gpus:
        fig.yaxis(row_of["activity"])["range"] = [0, 100]
    if drawn_steps is not None and drawn_steps.phases:
        _phases(fig, drawn_steps.phases, fig.top(1))
    if marks:
        _finding_marks(fig, marks, row_of.get("steps", 1))
    return finished(fig, len(rows), "seconds since the run started")


def finished(fig: Rows, rows: int, x_title: str) -> Figure:
    """Rows of charts laid out as the report draws them: the shared x axis named under
    the last row, a height per row, one legend per row; as the page's figure."""
    fig.xaxis(rows)["title"] = {"text": x_title}
    fig.layout.update(
        height=240 + 190 * rows,
        hovermode="x unified",
        margin={"l": 70, "r": 20, "t": 40, "b": 50},
    )
    legend_per_row(fig, rows)
    return figure(fig.data, fig.layout, "plotly_white")


class Rows:
    """Rows of charts on one shared x axis, as ``plotly.subplots.make_subplots(rows=n,
    cols=1, shared_xaxes=True, vertical_spacing=spacing, row_heights=weights)`` lays them
    out: row 1 at the top on axes x/y, row k on xk/yk, every x axis matching the bottom
    one, whose tick labels alone are shown. The domains are computed in plotly's order of
    operations, so they are the same floats."""

    def __init__(self, weights: Sequence[float], spacing: float) -> None:
        self.data: list[dict[str, Any]] = []
        self.layout: dict[str, Any] = {}
        n = len(weights)
        total = float(sum(weights))
        heights = [(1.0 - spacing * (n - 1)) * (w / total) for w in weights][::-1]
        for r in range(n):  # r = 0: the top row; plotly stacks them from the bottom
            below = n - 1 - r
            start = sum(heights[:below]) + below * spacing
            end = start + heights[-1 - r]
            self.layout[f"xaxis{_n(r + 1)}"] = {"anchor": f"y{_n(r + 1)}", "domain": [0.0, 1.0]}
            self.layout[f"yaxis{_n(r + 1)}"] = {
                "anchor": f"x{_n(r + 1)}",
                "domain": [max(0.0, start), min(1.0, end)],
            }
        for row in range(1, n):
            self.xaxis(row).update(matches=f"x{_n(n)}", showticklabels=False)

    def xaxis(self, row: int) -> dict[str, Any]:
        axis: dict[str, Any] = self.layout[f"xaxis{_n(row)}"]
        return axis

    def yaxis(self, row: int) -> dict[str, Any]:
        axis: dict[str, Any] = self.layout[f"yaxis{_n(row)}"]
        return axis

    def top(self, row: int) -> float:
        """Where the row's plot area ends, as a fraction of the figure's height."""
        top: float = self.yaxis(row)["domain"][1]
        return top

    def add(self, trace: dict[str, Any], row: int) -> None:
        self.data.append(
            {"type": "scatter", **trace, "xaxis": f"x{_n(row)}", "yaxis": f"y{_n(row)}"}
        )

    def shape(self, shape: dict[str, Any]) -> None:
        self.layout.setdefault("shapes", []).append(shape)

    def annotation(self, annotation: dict[str, Any]) -> None:
        self.layout.setdefault("annotations", []).append(annotation)

    def hline(self, y: float, row: int, line: dict[str, Any], text: str) -> None:
        """A line across the row at ``y``, named at its top left: ``add_hline(...,
        annotation_position="top left")``."""
        x, yref = f"x{_n(row)} domain", f"y{_n(row)}"
        self.shape(
            {
                "type": "line",
                "x0": 0,
                "x1": 1,
                "xref": x,
                "y0": y,
                "y1": y,
                "yref": yref,
                "line": line,
            }
        )
        self.annotation(
            {
                "showarrow": False,
                "text": text,
                "x": 0,
                "xanchor": "left",
                "xref": x,
                "y": y,
                "yanchor": "bottom",
                "yref": yref,
            }
        )


def _n(row: int) -> str:
    """The number in an axis' name: none for the first."""
    return "" if row == 1 else str(row)


def _step_traces(fig: Rows, row: int, steps: StepFacts, max_points: int) -> None:
    windows = later_spans(steps)
    long_run = bool(windows)  # steps beyond the kept ones: drawn in windows, then the last
    spc = max(steps.steps_per_call, 1)
    kept = len(steps.durations) == len(steps.starts)
    warm = min(len(steps.starts), round(steps.warmup / spc)) if steps.warmup and kept else 0
    starts, durations = (steps.starts[warm:], steps.durations[warm:]) if kept else ((), ())
    maybe = tuple(steps.input_waits[warm:]) if len(steps.input_waits) == len(steps.starts) else ()
    waits = [w for w in maybe if w is not None]
    measured = bool(waits) and len(waits) == len(maybe)
    top = None
    named: set[str] = set()  # legend entries the first steps drew
    if starts:
        shape = "linear" if len(starts) > max_points else "hv"
        total, layers = _stacked(starts, durations, waits if measured else None, max_points)
        for series, name, colour in layers:
            named.add(name)
            fig.add(
                {
                    "x": rounded(series.t, 7),
                    "y": rounded(series.mean),
                    "name": label(name),
                    "mode": "lines",
                    "line": {"color": colour, "width": 1, "shape": shape},
                    "stackgroup": "step",
                    "hovertemplate": "%{y:.1f} ms" + ("" if not series.bucketed else " (mean)"),
                    **({"legendgroup": name} if long_run else {}),
                },
                row,
            )
        if total.bucketed:
            fig.add(
                {
                    "x": rounded(total.t, 7),
                    "y": rounded(total.high),
                    "name": "slowest step in each bucket",
                    "mode": "lines",
                    "line": {"color": "#888888", "width": 0.8, "dash": "dot"},
                    "hovertemplate": "%{y:.1f} ms (slowest)",
                },
                row,
            )
        known = [v for v in total.high if v is not None]
        top = max(known) if known else None
    ceiling = None
    if long_run:
        warm_ms = [d * 1000 for d in steps.durations[:warm]]
        slowest = _window_traces(fig, row, steps, windows, warm_ms)
        drawn_tops = [top, slowest, _last_step_traces(fig, row, steps, max_points, named)]
        top = max((t for t in drawn_tops if t is not None), default=None)
        ceiling = _ceiling(steps, windows, [d * 1000 for d in durations], top)
        if ceiling is not None and top is not None:
            fig.yaxis(row)["range"] = [0, ceiling]
            dots = label(f"slowest step in each {window_width(steps)} window")
            for trace in fig.data:
                if trace.get("name") == dots:
                    trace["name"] = f"{dots}, up to {top:,.0f} ms: some off the scale"
    if warm:
        warm_ms = [d * 1000 for d in steps.durations[:warm]]
        off_scale = top is not None and max(warm_ms) > (ceiling or 1.5 * top)
        name = "warm-up steps (tracing)" + (
            f", up to {max(warm_ms):,.0f} ms: off the scale" if off_scale else ""
        )
        fig.add(
            {
                "x": rounded(steps.starts[:warm], 7),
                "y": rounded(warm_ms),
                "name": label(name),
                "mode": "markers",
                "marker": {"color": "#999999", "size": 7, "symbol": "diamond"},
                "hovertemplate": "%{y:.1f} ms (warm-up)",
            },
            row,
        )
        if off_scale and top is not None and ceiling is None:
            fig.yaxis(row)["range"] = [0, top * 1.1]


# A long run's step row is drawn up to CEILING_OVER_P90 times its highest p90 where its
# slowest steps reach beyond SPIKES_OVER_P90 times it: over hours every window holds a
# slow step (a collection, a checkpoint) and their dots would flatten the median to a
# line at zero. The legend says they go off the scale, and how far.
CEILING_OVER_P90 = 2.0
SPIKES_OVER_P90 = 3.0


def _ceiling(
    steps: StepFacts,
    spans: list[tuple[float, float, StepSpan]],
    kept_ms: Sequence[float],
    top: float | None,
) -> float | None:
    """The step row's height in a long run where single slow steps would set it, else
    None: the highest p90 (per call, ms) of the windows, the kept steps after warm-up
    and the last steps, times CEILING_OVER_P90."""
    spc = max(steps.steps_per_call, 1)
    p90s = [w.p90_s * 1000 * spc for _, _, w in spans if w.p90_s is not None]
    for series in (list(kept_ms), [d * 1000 for _, d, _ in steps.last_steps]):
        if series:
            ordered = sorted(series)
            p90s.append(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))])
    typical = max(p90s, default=None)
    if top is None or not typical or top <= SPIKES_OVER_P90 * typical:
        return None
    return CEILING_OVER_P90 * typical


def window_width(steps: StepFacts) -> str:
    """The timeline's window width as the legend and the table under the chart say it."""
    width = steps.timeline.width_s if steps.timeline is not None else 0.0
    return f"{width:,.0f} s" if width >= 10 else f"{width:,.3g} s"


def whole_run_note(steps: StepFacts, max_points: int) -> str | None:
    """What the step row of a long run draws, part by part, for the table under the
    chart; None where every step is kept (the chart draws them one by one)."""
    spans = later_spans(steps)
    if not spans:
        return None
    kept = len(steps.starts)
    parts = []
    if kept:
        bucketed = (
            f" (drawn as at most {max_points:,} time buckets: the mean of each, its slowest "
            "step dotted)"
            if kept > max_points
            else ""
        )
        parts.append(f"calls 1–{kept:,} one by one{bucketed}")
    waits = any(w.input_wait_s is not None for _, _, w in spans)
    parts.append(
        f"the steps from {spans[0][0]:,.1f} s to {spans[-1][1]:,.1f} s in windows of "
        f"{window_width(steps)}: the median, p90 and slowest step of each"
        + (", and its mean input wait" if waits else "")
    )
    if steps.last_steps:
        parts.append(
            f"over their end, the last {len(steps.last_steps):,} calls one by one (from "
            f"{steps.last_steps[0][0]:,.1f} s)"
        )
    return "; ".join(parts) + "; the statistics above cover every step"


def _window_traces(
    fig: Rows,
    row: int,
    steps: StepFacts,
    spans: list[tuple[float, float, StepSpan]],
    warm_ms: Sequence[float],
) -> float | None:
    """The windows after the kept steps: the median step as a line, the p90 as a dashed
    line, the slowest step as a dot, the mean input wait per step as an area where every
    step of the window timed it; a window without steps breaks the lines. Values per
    call where a call runs several steps (the windows' own are per step). Returns the
    highest value drawn, for the warm-up marks' scale."""
    spc = max(steps.steps_per_call, 1)
    width = steps.timeline.width_s if steps.timeline is not None else 0.0
    per = f"{window_width(steps)} window"
    x: list[float | None] = []
    columns: dict[str, list[float | None]] = {"p50": [], "p90": [], "max": [], "wait": []}
    previous = None
    for start, end, window in spans:
        if previous is not None and window.start_s > previous + width * 1.001:
            x.append((previous + width + window.start_s) / 2)  # no steps here: a break
            for values in columns.values():
                values.append(None)
        previous = window.start_s
        x.append((start + end) / 2)
        ms = 1000 * spc
        columns["p50"].append(None if window.p50_s is None else window.p50_s * ms)
        columns["p90"].append(None if window.p90_s is None else window.p90_s * ms)
        # a window's slowest step may be a warm-up step, drawn as such already
        warm_max = any(abs(window.max_s * ms - w) <= 0.01 * spc for w in warm_ms)
        no_timed = window.p50_s is None and not window.max_s  # steps only counted
        columns["max"].append(None if warm_max or no_timed else window.max_s * ms)
        columns["wait"].append(
            None
            if window.input_wait_s is None or not window.steps
            else window.input_wait_s / window.steps * ms
        )
    x_drawn = rounded(x, 7)
    if any(v is not None for v in columns["wait"]):
        fig.add(
            {
                "x": x_drawn,
                "y": rounded(columns["wait"]),
                "name": label(f"waiting for input, mean per {per}"),
                "mode": "lines",
                "line": {"color": INPUT_WAIT, "width": 1},
                "fill": "tozeroy",
                "fillcolor": _alpha(INPUT_WAIT, 0.35),
                "hovertemplate": "%{y:.1f} ms (mean wait)",
            },
            row,
        )
    looks = (
        ("p50", f"median step, per {per}", {"color": COMPUTE, "width": 1.5}, "median"),
        ("p90", f"p90 step, per {per}", {"color": COMPUTE, "width": 1, "dash": "dash"}, "p90"),
    )
    for key, name, line, what in looks:
        fig.add(
            {
                "x": x_drawn,
                "y": rounded(columns[key]),
                "name": label(name),
                "mode": "lines",
                "line": line,
                "hovertemplate": "%{y:.1f} ms (" + what + ")",
            },
            row,
        )
    fig.add(
        {
            "x": x_drawn,
            "y": rounded(columns["max"]),
            "name": label(f"slowest step in each {per}"),
            "mode": "markers",
            "marker": {"color": "#888888", "size": 4},
            "hovertemplate": "%{y:.1f} ms (slowest)",
        },
        row,
    )
    known = [v for key in ("p90", "max") for v in columns[key] if v is not None]
    return max(known) if known else None


def _stacked(
    starts: Sequence[float],
    durations: Sequence[float],
    waits: Sequence[float] | None,
    max_points: int,
) -> tuple[Downsampled, list[tuple[Downsampled, str, str]]]:
    """Steps' time in ms, downsampled, and the layers to stack: the input wait under the
    rest of the step where every step timed it (``waits``), else the step time alone."""
    span = (min(starts), max(starts))
    total = downsample(starts, [d * 1000 for d in durations], max_points, span)
    if waits is None:
        return total, [(total, "step time", COMPUTE)]
    wait = downsample(starts, [w * 1000 for w in waits], max_points, span)
    rest = downsample(starts, [(d - w) * 1000 for d, w in zip(durations, waits)], max_points, span)
    return total, [(wait, "waiting for input", INPUT_WAIT), (rest, "rest of the step", COMPUTE)]


def _last_step_traces(
    fig: Rows, row: int, steps: StepFacts, max_points: int, named: set[str]
) -> float | None:
    """The run's latest steps one by one, drawn as the first ones are (their own stack,
    toggled with the first steps' legend entry of the same name, ``named``); returns the
    highest value drawn."""
    if not steps.last_steps:
        return None
    starts = [a for a, _, _ in steps.last_steps]
    durations = [d for _, d, _ in steps.last_steps]
    maybe = [w for _, _, w in steps.last_steps]
    waits = [w for w in maybe if w is not None]
    timed = waits if len(waits) == len(maybe) else None
    total, layers = _stacked(starts, durations, timed, max_points)
    shape = "linear" if total.bucketed else "hv"
    for series, name, colour in layers:
        fig.add(
            {
                "x": rounded(series.t, 7),
                "y": rounded(series.mean),
                "name": label(name),
                "mode": "lines",
                "line": {"color": colour, "width": 1, "shape": shape},
                "stackgroup": "last",
                "legendgroup": name,
                "showlegend": name not in named,
                "hovertemplate": "%{y:.1f} ms (one of the last steps)",
            },
            row,
        )
    known = [v for v in total.high if v is not None]
    return max(known) if known else None


def _trace_markers(fig: Rows, row: int, tracing: TracingFacts) -> None:
    """Each recorded tf.function trace as a mark on the step row's floor: retracing shows
    as marks under the slow steps it causes."""
    xs, texts = [], []
    traces = sum(fn.traces for fn in tracing.functions if not fn.library)
    for fn in tracing.functions:
        if fn.library:
            continue
        for sig in fn.signatures:
            args = ", ".join(f"{name}: {spec}" for name, spec in sig.args)
            took = f", {sig.seconds * 1000:,.0f} ms" if sig.seconds is not None else ""
            by = f" from {sig.caller}" if sig.caller else ""
            xs.append(round(sig.at_s, 6))
            texts.append(label(f"{fn.name} traced{took}{by} ({args})"))
    if not xs:
        return
    xs, texts = xs[:MAX_TRACE_MARKERS], texts[:MAX_TRACE_MARKERS]
    # the traces the record kept one by one (the first ones): said where there were more
    name = "tf.function traced"
    if traces > len(xs):
        name += f" (the first {len(xs)} of {traces:,} traces)"
    fig.add(
        {
            "x": xs,
            "y": [0] * len(xs),
            "name": name,
            "mode": "markers",
            "marker": {"symbol": "triangle-up", "size": 10, "color": "#e45756"},
            "text": texts,
            "hovertemplate": "%{text}<extra></extra>",
        },
        row,
    )


def _finding_marks(fig: Rows, marks: Sequence[tuple[float, str]], row: int) -> None:
    """A red dashed line across every row at each moment, and a mark just inside the top
    of the step row that names it on hover."""
    top = fig.top(row)
    for at, text in marks:
        fig.shape(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": at,
                "x1": at,
                "y0": 0,
                "y1": 1,
                "line": {"color": MARK_COLOUR, "width": 1.5, "dash": "dash"},
            }
        )
        fig.annotation(
            {
                "x": at,
                "xref": "x",
                "y": top,
                "yref": "paper",
                "text": "▼",
                "hovertext": label(text),
                "showarrow": False,
                # inside the row's top edge: above it, the marks sat on the row's legend
                "yanchor": "top",
                "font": {"size": 14, "color": MARK_COLOUR},
            }
        )


def _phases(fig: Rows, phases: Sequence[tuple[str, float, float]], top: float) -> None:
    """Evaluate / predict phases shaded and epoch starts as lines, once across every row
    (the x axes are matched), named at the top of the first row."""
    shapes = 0
    epochs = sum(1 for p in phases if p[0].startswith("epoch"))
    for name, start, end in phases:
        if shapes >= MAX_PHASE_SHAPES:
            break
        look: dict[str, Any]
        if name in ("evaluate", "predict"):  # a grey band over the phase
            look = {
                "type": "rect",
                "x1": end,
                "fillcolor": "#cccccc",
                "opacity": 0.25,
                "line": {"width": 0},
                "layer": "below",
            }
        elif name.startswith("epoch"):  # a dotted line where the epoch starts
            look = {
                "type": "line",
                "x1": start,
                "line": {"color": "#bbbbbb", "width": 1, "dash": "dot"},
            }
        else:
            continue
        fig.shape({"xref": "x", "yref": "paper", "x0": start, "y0": 0, "y1": 1, **look})
        shapes += 1
        if len(phases) <= 40 and (epochs <= 20 or not name.startswith("epoch")):
            fig.annotation(
                {
                    "x": start,
                    "xref": "x",
                    "y": top,
                    "yref": "paper",
                    "text": label(name),
                    "showarrow": False,
                    "xanchor": "left",
                    "yanchor": "top",
                    "font": {"size": 10, "color": "#777777"},
                }
            )


def legend_per_row(fig: Rows, rows: int) -> None:
    """Each row's legend just above that row, so a name sits beside its curves."""
    for trace in fig.data:
        axis = trace["yaxis"]
        n = 1 if axis == "y" else int(axis[1:])
        trace["legend"] = "legend" if n == 1 else f"legend{n}"
    for n in range(1, rows + 1):
        fig.layout["legend" if n == 1 else f"legend{n}"] = {
            "x": 0,
            "xanchor": "left",
            "y": fig.top(n),
            "yanchor": "bottom",
            "orientation": "h",
            "bgcolor": "rgba(255,255,255,0.8)",
            "font": {"size": 11},
        }


def _band_line(
    fig: Rows,
    row: int,
    gpu: GpuSeries,
    field: str,
    name: str,
    colour: str,
    scale: float,
    max_points: int,
    group: str,
    dash: str | None = None,
) -> None:
    """A series as its bucket means, with a min-max band when it was downsampled or
    kept in windows (a long run: each window's lowest and highest sample)."""
    values = getattr(gpu, field)
    if not _known(values):
        return
    t = gpu.centres()
    series = downsample(t, _scaled(values, scale), max_points)
    low, high, banded = series.low, series.high, series.bucketed
    if gpu.windowed:
        spread = gpu.column(field)
        low = downsample(t, _scaled(spread.low, scale), max_points).low
        high = downsample(t, _scaled(spread.high, scale), max_points).high
        banded = True
    group = f"{group}:{name}"  # the band toggles with its line; one entry per group
    x = rounded(series.t, 7)
    if banded:  # the band: an invisible upper edge, then the lower one filled up to it
        filled = {"fill": "tonexty", "fillcolor": _alpha(colour, 0.18)}
        for edge, fill in ((high, {}), (low, filled)):
            fig.add(
                {
                    "x": x,
                    "y": rounded(edge),
                    "mode": "lines",
                    "line": {"width": 0},
                    "showlegend": False,
                    "hoverinfo": "skip",
                    "legendgroup": group,
                    **fill,
                },
                row,
            )
    line = {"color": colour, "width": 1.3, **({"dash": dash} if dash else {})}
    fig.add(
        {
            "x": x,
            "y": rounded(series.mean),
            "name": label(name),
            "mode": "lines",
            "line": line,
            "legendgroup": group,
            "hovertemplate": "%{y:.3~f}" + (" (mean)" if banded else ""),
        },
        row,
    )


def _scaled(values, scale: float) -> list[float | None]:
    return [None if v is None else v * scale for v in values]


def _known(values) -> bool:
    return any(v is not None for v in values)


def _alpha(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _busy_measure(gpu: GpuSeries) -> str:
    found = source_of(gpu)
    return found.measure if found is not None else "point readings"
