"""``gpuwhy diff`` as HTML (gpuwhy/report/diff/html.py): two real records of a TF program
before and after its input pipeline was fixed (here AFTER is the slow one: a regression),
compared by the command, and the page opened in a real headless Chromium with the network
blocked (tests/report/conftest.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.comparison import (
    AlignedWindow,
    Change,
    Comparison,
    EnvironmentChange,
    FindingChange,
    RunSide,
)
from gpuwhy.formatting import duration
from gpuwhy.modes.diff import diff
from gpuwhy.report.diff.html import aligned_timeline, render_comparison_html
from gpuwhy.report.diff.terminal import (
    part_row,
    projected_line,
    render_comparison,
    verdict_mark,
)
from tests.report.first_screen import check_first_screen

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = "benchmarks/workloads/input_bound.py"
FIGURE = re.compile(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', re.S)
TRACES = """() => document.querySelector('#timeline .plot').data.map(
    t => ({name: t.name, xaxis: t.xaxis, points: t.y.filter(v => v !== null).length,
           x0: t.x[0]}))"""


def gpuwhy(*args: str, stdout: int = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=ROOT,
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict[str, Path]:
    """`gpuwhy run --json` on the input-bound workload with its pipeline fixed (BEFORE)
    and as written (AFTER, about 4x slower a step), then `gpuwhy diff --html --json`
    (about 40 s in all). The fixed pipeline caches its first epoch: 12 epochs keep that
    slow one within a quarter of the run, the run's own shape rather than its level
    wandering (3 epochs made a loaded host's first third look like noise wide enough to
    hide the 4x)."""
    out = tmp_path_factory.mktemp("diff-html")
    paths = {name: out / f"{name}.json" for name in ("before", "after")}
    for name, extra in (("before", ["--fixed", "--epochs", "12"]), ("after", [])):
        proc = gpuwhy("run", "--json", str(paths[name]), WORKLOAD, *extra)
        assert proc.returncode in (0, 1), proc.stderr.decode()[-3000:]
    page = out / "diff.html"
    proc = gpuwhy(
        "diff",
        str(paths["before"]),
        str(paths["after"]),
        "--html",
        str(page),
        "--json",
        str(out / "diff.json"),
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return {**paths, "html": page, "json": out / "diff.json", "stdout": proc.stdout}


@pytest.fixture(scope="module")
def comparison(pair) -> Comparison:
    return diff(pair["before"], pair["after"])


def test_the_page_opens_offline_with_the_verdict_first(pair, comparison, open_report):
    opened = open_report(pair["html"])
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    assert comparison.step_time is not None and comparison.step_time.called == "slower"
    heading = page.locator("h1.verdict")
    mark, _ = verdict_mark(comparison)  # no mark at all where the host was contended
    assert mark == ("•" if comparison.confounded_by else "✗")
    assert heading.inner_text() == f"{mark}{comparison.verdict}"
    tone = "neutral" if comparison.confounded_by else "bad"
    assert tone in (heading.get_attribute("class") or "").split()
    assert comparison.verdict.startswith("AFTER is ") and "slower per step" in comparison.verdict
    # the terminal's first line says the same
    assert pair["stdout"].decode().splitlines()[0] == f"{mark} {comparison.verdict}"
    assert json.loads(pair["json"].read_text())["verdict"] == comparison.verdict


def test_both_timelines_are_drawn_on_one_x_axis(pair, comparison, open_report):
    opened = open_report(pair["html"])
    page = opened.page
    traces = {t["name"]: t for t in page.evaluate(TRACES)}
    before, after = comparison.timeline_before, comparison.timeline_after
    assert len(before) >= 2 and len(after) >= 5
    for side, windows in (("BEFORE", before), ("AFTER", after)):
        for what in ("median step", "mean step"):
            trace = traces[f"{side} {what}"]
            assert trace["points"] == len(windows)
            assert trace["xaxis"] == "x" and trace["x0"] == 0  # both from their first window
        wait = traces[f"{side} waiting for input"]  # a Python loop times next()
        timed = [w for w in windows if w.input_share is not None]
        assert wait["xaxis"] == "x2" and wait["points"] == len(timed) > 0
    assert not any(name.endswith("GPU busy") for name in traces)  # no GPU sampled here
    layout = page.evaluate("() => document.querySelector('#timeline .plot').layout")
    assert layout["xaxis"]["matches"] == "x2"  # the step row follows the shares' axis
    assert "first training window" in layout["xaxis2"]["title"]["text"]
    drawn = page.locator("#timeline .scatterlayer .trace")
    assert drawn.count() == len(traces) == 6
    assert page.locator("#timeline .cartesianlayer > .subplot").count() == 2
    # the median line is the windows' medians, in ms
    medians = page.evaluate(
        "() => document.querySelector('#timeline .plot').data"
        ".find(t => t.name === 'AFTER median step').y"
    )
    drawn_medians = [m for m in medians if m is not None]  # None: a gap breaks the line
    assert drawn_medians == [pytest.approx(w.p50_s * 1000) for w in after]


def test_the_step_time_interval_is_drawn_against_no_change(pair, comparison, open_report):
    page = open_report(pair["html"]).page
    step = comparison.step_time
    assert step is not None
    point = page.evaluate("() => document.querySelector('#step-time .plot').data[0]")
    assert point["x"] == [pytest.approx(step.estimate)]
    assert point["error_x"]["array"] == [pytest.approx(step.high - step.estimate)]
    assert point["error_x"]["arrayminus"] == [pytest.approx(step.estimate - step.low)]
    assert page.locator("#step-time .plot .main-svg").count() >= 1
    lines = page.locator("#step-time ul.lines li").all_inner_texts()
    assert lines[0].startswith("mean ") and f"{step.low:.3f}-{step.high:.3f}" in lines[0]


def test_the_parts_table_reads_as_the_terminal(pair, comparison, open_report):
    page = open_report(pair["html"]).page
    rows = page.locator("#parts-table tbody tr")
    assert rows.count() == len(comparison.parts)
    wait = next(p for p in comparison.parts if p.part == "input")
    assert wait.delta_s > 0  # about 4x the input wait: its interval may still cross zero
    cells = rows.nth(comparison.parts.index(wait)).locator("td").all_inner_texts()
    assert cells == [*part_row(wait), wait.measured_by]
    assert cells[0] == "waiting for input" and cells[4].endswith("%") is wait.called
    terminal = render_comparison(comparison)
    assert "  ".join(part_row(wait)[:3]) in re.sub(r" {2,}", "  ", terminal)
    not_called = [p for p in comparison.parts if not p.called]
    assert page.locator("#parts-table tr.not-called").count() == len(not_called)
    for p in not_called:
        assert part_row(p)[3].endswith(" ~")


@pytest.mark.parametrize("called", [True, False])
def test_a_part_is_dimmed_and_marked_exactly_when_its_change_is_not_called(
    pair, comparison, open_report, tmp_path, called
):
    """Whether the live pair's input row is called depends on its run's spread (a loaded
    host's first, uncached epoch can stretch the interval across zero): both states
    rendered from that same comparison."""
    index = next(i for i, p in enumerate(comparison.parts) if p.part == "input")
    parts = list(comparison.parts)
    changed = parts[index] = replace(parts[index], called=called)
    path = tmp_path / "parts.html"
    page = render_comparison_html(replace(comparison, parts=tuple(parts)))
    path.write_text(page, encoding="utf-8")
    row = open_report(path).page.locator("#parts-table tbody tr").nth(index)
    assert (row.get_attribute("class") == "not-called") is not called
    assert row.locator("td").nth(3).inner_text().endswith(" ~") is not called
    assert part_row(changed)[3].endswith(" ~") is not called
    assert row.locator("td").nth(4).inner_text().endswith("%") is called


def test_a_new_finding_is_shown_with_its_severity_and_location(pair, comparison, open_report):
    page = open_report(pair["html"]).page
    new = [f for f in comparison.findings if f.change == "new"]
    assert any(f.id == "input.sequential-map" for f in new)
    article = page.locator("#findings article", has_text="input.sequential-map")
    assert article.locator(".change.new").inner_text().lower() == "new"
    assert article.locator(".badge").inner_text().lower() == "high"
    assert f"- -> high · at {WORKLOAD}:" in article.locator(".where").inner_text()
    assert page.locator("#findings article").count() == len(comparison.findings)
    compared = [
        t.replace("\xa0", " ") for t in page.locator("#compared tbody tr").all_inner_texts()
    ]
    assert str(pair["before"]) in compared[0] and "every step after warm-up" in compared[0]


def test_the_pages_charts_are_what_plotly_graph_objects_writes(pair):
    import plotly.graph_objects as go
    import plotly.io as pio

    found = FIGURE.findall(pair["html"].read_text(encoding="utf-8"))
    assert len(found) == 2  # the interval, the timelines
    for dom_id, text in found:
        ours = json.loads(text)
        ours.pop("config")
        theirs = json.loads(pio.to_json(go.Figure(ours), validate=True))
        assert theirs == ours, dom_id


def test_html_on_a_pipe_is_the_html_file_and_refused_on_a_terminal(pair, tmp_path):
    import pty

    args = ("diff", str(pair["before"]), str(pair["after"]))
    piped = gpuwhy(*args, "-f", "html")
    assert piped.returncode == 0 and piped.stdout.startswith(b"<!DOCTYPE html>")
    written = gpuwhy(*args, "-f", "html", "-o", str(tmp_path / "o.html"))
    assert written.returncode == 0 and written.stdout == b""
    assert piped.stdout == (tmp_path / "o.html").read_bytes() == pair["html"].read_bytes()
    parent, child = pty.openpty()
    try:
        refused = gpuwhy(*args, "-f", "html", stdout=child)
    finally:
        os.close(child)
        os.close(parent)
    assert refused.returncode == 2
    assert b"-f html is meant for a file, not a terminal" in refused.stderr


# -- a comparison without steps: two `gpuwhy watch` records --------------------------------


def watched_pair() -> Comparison:
    side = RunSide(path="a.json", command="watch", created="2026-11-26T04:00:00+00:00", verdict="")
    return Comparison(
        verdict="The GPUs are busy higher in AFTER: 41% -> 78% (+30 to +44 points, 95%).",
        before=side,
        after=replace(side, path="b.json"),
        gpu_busy=Change("gpu_busy", 0.41, 0.78, 0.37, 0.30, 0.44, "higher", 0.07),
        findings=(FindingChange("gpu.idle", "gone", "high", None, "The GPU sat idle <50%"),),
        environment=(EnvironmentChange("GPU", "NVIDIA T4", "NVIDIA L4"),),
        notes=("BEFORE has fewer than 30 training steps after warm-up (or none)",),
    )


def test_a_watch_pair_has_gpu_busy_and_no_timeline(open_report, tmp_path):
    c = replace(
        watched_pair(),
        projected_step=Change("projected_step", 0.004, 0.003, 0.75, 0.7, 0.8, "faster", 0.0),
        projected_gpu="H100",
    )
    text = render_comparison_html(c)
    assert 'type="application/json"' not in text and len(text) < 100_000  # nor plotly.js
    path = tmp_path / "watch.html"
    path.write_text(text, encoding="utf-8")
    opened = open_report(path)
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    assert page.inner_text("h1.verdict") == f"•{c.verdict}"
    assert page.locator("#step-time").count() == 0 and page.locator(".plot").count() == 0
    assert "neither record has training windows" in page.inner_text("#timeline")
    assert page.inner_text("#gpu-busy p") == "41% -> 78% (+37 points, +30 to +44, 95%)"
    gone = page.locator("#findings article")
    assert gone.locator(".change.gone").count() == 1 and "<50%" in gone.inner_text()
    assert page.locator("#environment tbody tr").all_inner_texts() == ["GPU\tNVIDIA T4\tNVIDIA L4"]
    assert "Note: BEFORE has fewer than 30" in page.inner_text("#compared")
    assert page.inner_text("#projected h2") == "Projected onto H100"
    assert page.inner_text("#projected p").startswith(
        "4.0 ms -> 3.0 ms of the GPU's work a step (AFTER/BEFORE"
    )
    assert page.inner_text("#projected p") == projected_line(c.projected_step).strip()


def test_a_gap_in_a_runs_windows_breaks_its_lines():
    windows = [
        AlignedWindow(start_s=t, steps=10, p50_s=0.01, mean_s=0.012, input_share=0.2)
        for t in (0.0, 1.0, 2.0, 6.0, 7.0)
    ]
    fig = aligned_timeline(windows, ())
    assert fig is not None
    median = next(t for t in fig["data"] if t["name"] == "BEFORE median step")
    assert median["x"] == [0.0, 1.0, 2.0, 4.0, 6.0, 7.0]
    assert median["y"] == [10.0, 10.0, 10.0, None, 10.0, 10.0]
    assert {t["name"] for t in fig["data"]} == {
        "BEFORE median step",
        "BEFORE mean step",
        "BEFORE waiting for input",
    }


def test_gpu_busy_is_drawn_in_the_shares_row_as_plotly_writes_it():
    import plotly.graph_objects as go
    import plotly.io as pio

    before = [AlignedWindow(float(t), 50, 0.02, 0.021, None, 0.4) for t in range(30)]
    after = [AlignedWindow(float(t), 80, 0.0125, 0.013, None, 0.9) for t in range(30)]
    fig = aligned_timeline(before, after)
    assert fig is not None
    busy = {t["name"]: t for t in fig["data"] if t["name"].endswith("GPU busy")}
    assert set(busy) == {"BEFORE GPU busy", "AFTER GPU busy"}
    assert all(t["xaxis"] == "x2" and len(t["y"]) == 30 for t in busy.values())
    assert busy["AFTER GPU busy"]["y"][0] == 90.0
    assert not any("waiting for input" in t["name"] for t in fig["data"])  # not measured
    assert json.loads(pio.to_json(go.Figure(fig), validate=True)) == fig


def test_several_runs_a_side_list_each_run_s_step_and_say_which_run_is_drawn(open_report, tmp_path):
    pair = watched_pair()
    runs = dict(runs=3, run_paths=("1.json", "2.json", "3.json"), steps=300, basis="3 runs")
    c = replace(
        pair,
        before=replace(pair.before, **runs, run_step_s=(0.0101, 0.0099, 0.0104)),
        after=replace(pair.after, **runs, run_step_s=(0.0121, 0.0118, 0.0125)),
        spread="between runs",
        timeline_before=tuple(AlignedWindow(float(i), 100, 0.01, 0.0101) for i in range(3)),
        timeline_after=tuple(AlignedWindow(float(i), 80, 0.012, 0.0121) for i in range(3)),
    )
    path = tmp_path / "runs.html"
    path.write_text(render_comparison_html(c), encoding="utf-8")
    page = open_report(path).page
    assert "the one whose mean step is its side's median is drawn" in page.inner_text("#timeline")
    rows = page.locator("#compared tbody tr").all_inner_texts()
    compared = [t.replace("\xa0", " ") for t in rows]
    assert "the runs' mean steps 10.1 ms, 9.9 ms, 10.4 ms" in compared[0]
    assert "the runs' mean steps 12.1 ms, 11.8 ms, 12.5 ms" in compared[1]


def test_the_first_screen_is_the_verdict_and_both_steps_drawn(pair, comparison, open_report):
    visible = check_first_screen(open_report(pair["html"]), bars=2)
    assert "BEFORE (measured)" in visible and "AFTER (measured)" in visible
    assert comparison.step_time is not None
    assert f"mean step {duration(comparison.step_time.before)}" in visible
    assert f"mean step {duration(comparison.step_time.after)}" in visible


def test_the_parts_figures_keep_number_and_unit_on_one_line(pair, open_report):
    """A narrow window squeezes the table: "16.2 ms" never breaks between its number
    and its unit."""
    page = open_report(pair["html"], width=480).page
    assert page.locator("#parts-table td.figure").count() > 0
    broken = page.evaluate(
        "() => [...document.querySelectorAll('#parts-table td.figure')]"
        ".filter(td => { const r = document.createRange(); r.selectNodeContents(td);"
        " return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1; })"
        ".map(td => td.textContent)"
    )
    assert broken == []


def test_the_compared_table_breaks_no_date_and_a_path_only_after_a_slash(open_report, tmp_path):
    """A narrow window squeezes the Compared table: its dates stay whole, a record's
    long path breaks between its folders, never inside a name."""
    pair = watched_pair()
    deep = "/home/someone/experiments/resnet_baseline_2026/records/before_the_input_fix.json"
    c = replace(
        pair,
        before=replace(pair.before, path=deep, created="2026-11-30T02:41:35+00:00"),
        after=replace(pair.after, created="2026-11-30T03:04:42+00:00"),
    )
    path = tmp_path / "narrow.html"
    path.write_text(render_comparison_html(c), encoding="utf-8")
    page = open_report(path, width=560).page
    lines = page.evaluate(
        "() => [...document.querySelectorAll('#compared-table tbody tr')].map(tr => {"
        " const td = tr.children[1]; const r = document.createRange();"
        " const pieces = []; const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);"
        " let node; while ((node = walk.nextNode())) { for (let i = 0; i < node.length; i++) {"
        " r.setStart(node, i); r.setEnd(node, i + 1); pieces.push([Math.round(r.getBoundingClientRect().top), node.data[i]]); } }"
        " const rows = {}; for (const [top, ch] of pieces) rows[top] = (rows[top] || '') + ch;"
        " const created = tr.children[3]; const cr = document.createRange(); cr.selectNodeContents(created);"
        " return {path: Object.values(rows), created: created.textContent,"
        " createdLines: new Set([...cr.getClientRects()].map(x => Math.round(x.top))).size}; })"
    )
    before, after = lines
    assert before["created"] == "2026-11-30 02:41:35 UTC" and before["createdLines"] == 1
    assert after["created"] == "2026-11-30 03:04:42 UTC" and after["createdLines"] == 1
    assert len(before["path"]) > 1, before  # it had to break: between folders only
    assert "".join(before["path"]) == deep
    assert all(piece.endswith("/") for piece in before["path"][:-1]), before["path"]
