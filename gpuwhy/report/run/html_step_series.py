"""The timeline of the records that are not one watched run: a profiler capture's steps
one by one (each a bar: the GPU's kernels, then its idle time by what the host was doing
meanwhile) and a merge's workers (each worker's median step and input wait per window,
on one axis), so that every kind of report shows its steps over time, as a run's does
(html_timeline.py), under the picture of its step."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import CaptureFacts, WorkersFacts
from gpuwhy.report.run.html_charts import Figure, figure, label
from gpuwhy.report.run.step_split import LOOKS
from gpuwhy.report.step_picture import COLOURS, OTHER

WORKER_COLOURS = ("#1565c0", "#c62828", "#2e7d32", "#6a1b9a", "#ef6c00", "#00838f", "#5d4037")


def captured_steps(capture: CaptureFacts) -> Figure | None:
    """One bar per captured step at its start, as long as the step: the GPU's busy time
    (the union of its kernels), then its idle time, coloured by the host activity that
    covered most of it (the capture reader's ``host``); None without steps."""
    steps = [s for s in capture.steps if s.duration_s > 0]
    if not steps:
        return None
    x = [round((s.start_s + s.duration_s / 2) * 1000, 3) for s in steps]
    width = [round(s.duration_s * 1000 * 0.9, 3) for s in steps]
    data: list[dict[str, Any]] = []
    if capture.devices:
        data.append(
            _bars(x, width, [s.busy_s * 1000 for s in steps], "GPU computing (kernels)", "gpu")
        )
    idle = [
        (s.idle_s if s.idle_s is not None else max(s.duration_s - s.busy_s, 0.0)) * 1000
        for s in steps
    ]
    hosts = sorted({s.host or "untraced" for s in steps}, key=_activity_order)
    for host in hosts:
        values = [v if (s.host or "untraced") == host else 0.0 for s, v in zip(steps, idle)]
        words = LOOKS[host][0] if host in LOOKS else host
        name = f"GPU idle, the host {words}" if capture.devices else f"the host: {words}"
        data.append(_bars(x, width, values, name, host))
    layout = {
        "barmode": "stack",
        "height": 340,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "xaxis": {"title": {"text": "ms since the capture started"}},
        "yaxis": {"title": {"text": "ms in the step"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": 1.12, "traceorder": "normal"},
        "bargap": 0,
    }
    return figure(data, layout)


def _activity_order(host: str) -> int:
    order = ("input", "compile", "synchronisation", "compute", "python", "dispatch", "untraced")
    return order.index(host) if host in order else len(order)


def _bars(
    x: list[float], width: list[float], y: list[float], name: str, part: str
) -> dict[str, Any]:
    return {
        "type": "bar",
        "x": x,
        "y": [round(v, 3) for v in y],
        "width": width,
        "name": label(name),
        "marker": {"color": COLOURS.get(part, OTHER)},
        "hovertemplate": label(name) + ": %{y:.2f} ms<extra></extra>",
    }


def worker_steps(workers: WorkersFacts) -> Figure | None:
    """Each worker's median step per window of its timeline (the line) and its input
    wait per step there (dotted, where timed), on one axis: a straggler's steps sit above
    the others', and its wait says whether its input is why. None where no worker's
    record kept its windows."""
    data: list[dict[str, Any]] = []
    drawn = [w for w in workers.workers if w.windows]
    for i, w in enumerate(drawn):
        colour = WORKER_COLOURS[i % len(WORKER_COLOURS)]
        windows = [s for s in w.windows if s.steps and s.p50_s is not None]
        x = [round(s.start_s, 3) for s in windows]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": x,
                "y": [round((s.p50_s or 0.0) * 1000, 3) for s in windows],
                "name": label(f"{w.name} median step"),
                "line": {"color": colour, "shape": "hv"},
                "hovertemplate": label(w.name) + ": median step %{y:.1f} ms<extra></extra>",
            }
        )
        timed = [s for s in windows if s.input_wait_s is not None]
        if timed:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": [round(s.start_s, 3) for s in timed],
                    "y": [round((s.input_wait_s or 0.0) / s.steps * 1000, 3) for s in timed],
                    "name": label(f"{w.name} input wait per step"),
                    "line": {"color": colour, "dash": "dot", "shape": "hv"},
                    "hovertemplate": label(w.name)
                    + ": waits %{y:.1f} ms a step for input<extra></extra>",
                }
            )
    if not data:
        return None
    layout = {
        "height": 360,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 50},
        "xaxis": {"title": {"text": "seconds since each worker's run started"}},
        "yaxis": {"title": {"text": "ms per step"}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return figure(data, layout)
