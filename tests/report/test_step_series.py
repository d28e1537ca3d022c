"""Every kind of report shows its steps over time: a profiler capture's steps one by one
(the GPU's kernels, then its idle time by what the host did) and a merge's workers (each
one's median step and input wait per window), checked as drawn in Chromium."""

from __future__ import annotations

import json
from pathlib import Path

from gpuwhy.modes.capture import diagnose_capture
from gpuwhy.modes.merge import merge
from gpuwhy.report.run.html import _Page
from gpuwhy.report.run.html_step_series import captured_steps, worker_steps
from tests.builders_workers import INPUT_BOUND, save, worker_record
from tests.report.test_html import MAX_POINTS, write_html

H100 = Path(__file__).parents[1] / "data" / "xplane" / "h100_slow_input"
CLUSTER = ("chief-0", "worker-0", "worker-1")


def merged(tmp_path: Path, timeline: bool = True):
    kept = dict(cluster=CLUSTER, timeline=timeline)
    save(tmp_path, worker_record("chief-0", 0.15, 0.001, **kept))
    save(tmp_path, worker_record("worker-0", 0.15, 0.002, **kept))
    save(tmp_path, worker_record("worker-1", 0.15, 0.051, findings=(INPUT_BOUND,), **kept))
    return merge(str(tmp_path))


def test_a_captures_steps_are_bars_of_their_kernels_and_their_idle_time():
    capture = diagnose_capture(H100).facts.capture
    assert capture is not None
    fig = captured_steps(capture)
    assert fig is not None
    names = [t["name"] for t in fig["data"]]
    assert names[0] == "GPU computing (kernels)"
    assert "GPU idle, the host waiting for input" in names
    steps = len([s for s in capture.steps if s.duration_s > 0])
    for trace in fig["data"]:
        assert len(trace["x"]) == len(trace["y"]) == steps
    # each step's bars add up to the step: kernels, then its idle time by the host
    totals = [sum(t["y"][i] for t in fig["data"]) for i in range(steps)]
    for total, step in zip(totals, (s for s in capture.steps if s.duration_s > 0)):
        assert abs(total - step.duration_s * 1000) <= 0.05 * step.duration_s * 1000 + 0.01


def test_a_merge_draws_each_workers_step_and_wait(tmp_path):
    record = merged(tmp_path)
    assert record.facts.workers is not None
    fig = worker_steps(record.facts.workers)
    assert fig is not None
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "chief-0 median step",
        "chief-0 input wait per step",
        "worker-0 median step",
        "worker-0 input wait per step",
        "worker-1 median step",
        "worker-1 input wait per step",
    ]
    wait = fig["data"][-1]["y"]
    assert wait and all(abs(w - 51.0) < 0.01 for w in wait)


def test_a_merge_of_records_without_windows_has_no_timeline(tmp_path):
    record = merged(tmp_path, timeline=False)
    page = _Page(MAX_POINTS)
    assert page.context(record)["timeline"] is None


def test_the_capture_and_merge_pages_draw_their_timelines(open_report, tmp_path):
    for name, record in (
        ("capture", diagnose_capture(H100)),
        ("merge", merged(tmp_path / "workers")),
    ):
        opened = open_report(write_html(record, tmp_path / f"{name}.html"))
        page = opened.page
        assert opened.errors == [] and opened.fetched == []
        assert page.locator("nav a[href='#timeline']").count() == 1
        plot = page.locator("#timeline .plot")
        assert plot.locator(".main-svg").count() >= 1, name
        drawn = plot.locator(".barlayer .point" if name == "capture" else ".scatterlayer .trace")
        assert drawn.count() >= (20 if name == "capture" else 6), name
        note = page.locator("#timeline p.note").first.inner_text()
        assert ("captured step" if name == "capture" else "Each worker's") in note


def test_their_charts_are_what_plotly_graph_objects_writes(tmp_path):
    import plotly.graph_objects as go
    import plotly.io as pio

    for record in (diagnose_capture(H100), merged(tmp_path)):
        page = _Page(MAX_POINTS)
        page.context(record)
        for dom_id, text in page.figures:
            ours = json.loads(text)
            ours.pop("config")
            theirs = json.loads(pio.to_json(go.Figure(ours), validate=True))
            assert theirs == ours, dom_id
