"""The HTML report: one self-contained file, opened in a real headless Chromium with the
network blocked (tests/report/conftest.py), and its numbers checked against the facts."""

from __future__ import annotations

import html as html_lib
import json
import re
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.facts import Facts, ProgramFacts, StepFacts
from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.report.downsample import MAX_POINTS, downsample, rounded, stats
from gpuwhy.report.run.html import HtmlRenderer, fix_measurements, page_verdict
from gpuwhy.report.run.step_split import step_split
from gpuwhy.verdict import verdict
from tests import builders as b
from tests.report import builders as rb

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r'<script type="application/json" data-figure="([^"]+)">(.*?)</script>', re.S)
MiB = 1024 * 1024


def write_html(record: Record, path: Path) -> Path:
    path.write_text(HtmlRenderer().render(record), encoding="utf-8")
    return path


def page_text(html: str) -> str:
    """A page's (or a section's) text as read: its tags out (a location is a link or a
    span within the text), its entities unescaped."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html)).replace("\xa0", " ")


def figures(text: str) -> dict[str, dict]:
    return {name: json.loads(data) for name, data in FIGURE.findall(text)}


def section(text: str, section_id: str) -> str:
    start = text.index(f'<section id="{section_id}">')
    return text[start : text.index("</section>", start)]


def stat_row(text: str, metric: str) -> list[str]:
    """The cells of one row of a GPU statistics table."""
    row = re.search(r"<tr><td>" + re.escape(html_lib.escape(metric)) + r"</td>(.*?)</tr>", text)
    assert row, f"no row {metric!r}"
    return re.findall(r"<td>(.*?)</td>", row.group(1))


# -- downsampling: short series untouched, long ones bucketed, statistics exact -----------------


def test_short_series_are_drawn_as_they_are():
    t, v = [0.0, 0.1, 0.2], [1.0, None, 3.0]
    d = downsample(t, v, max_points=3)
    assert (
        not d.bucketed and d.t == (0.0, 0.1, 0.2) and d.mean == d.low == d.high == (1.0, None, 3.0)
    )


def test_long_series_are_bucketed_and_the_band_keeps_every_spike():
    t = [i * 0.1 for i in range(36_000)]
    v = [float(i % 7) for i in range(36_000)]
    v[12_345] = 1000.0
    d = downsample(t, v, max_points=2000)
    assert d.bucketed and len(d.t) <= 2000 and d.samples == 36_000
    assert max(d.high) == 1000.0 and min(d.low) == 0.0
    assert all(lo <= m <= hi for lo, m, hi in zip(d.low, d.mean, d.high))
    assert d.t == tuple(sorted(d.t)) and d.t[0] >= t[0] and d.t[-1] <= t[-1]


def test_series_cut_on_one_grid_stack_point_for_point():
    t = [i * 0.01 for i in range(10_000)]
    waits = [0.01] * 10_000
    rest = [0.03 if i % 3 else None for i in range(10_000)]  # gaps do not move the grid
    span = (t[0], t[-1])
    a, b_ = downsample(t, waits, 500, span), downsample(t, rest, 500, span)
    assert a.t == b_.t


def test_buckets_whose_samples_are_all_unknown_break_the_line():
    t = list(range(10))
    v = [1.0, 1.0, None, None, None, None, 2.0, 2.0, 2.0, 2.0]
    d = downsample(t, v, max_points=5)
    assert d.mean == (1.0, None, None, 2.0, 2.0)


def test_stats_are_exact_over_the_full_series():
    s = stats([3.0, None, 1.0, 2.0, 10.0])
    assert (s.count, s.mean, s.median, s.low, s.high, s.argmax) == (4, 4.0, 2.5, 1.0, 10.0, 4)
    assert stats([None, None]).count == 0
    assert rounded([123456.0, 0.000123456, None, 0.0]) == [123500.0, 0.0001235, None, 0.0]


# -- the page's content, from the facts ------------------------------------------------------------

FULL = rb.watched_run()


def test_verdict_first_then_findings_ranked_each_with_location_and_fix():
    text = HtmlRenderer().render(FULL)
    first_heading = re.search(r"<h1[^>]*>(.*?)</h1>", text, re.S).group(1)
    # the record's verdict, less the clauses the picture under it draws
    said = page_verdict(FULL)
    assert html_lib.unescape(first_heading).endswith(f"</span>{said}")
    used = "while the program used it"  # the busy clause: under the picture, once
    assert used in FULL.verdict and used not in said
    caption = re.search(r'<figcaption class="busy"><strong>(.*?)</strong>', text)
    assert caption is not None and used in caption[1]
    ranked = sorted(FULL.findings, key=Finding.sort_key)
    assert len(ranked) >= 5
    shown = re.findall(r'<span class="id">([^<]+)</span>', text)
    assert shown == [f.id for f in ranked]
    findings = section(text, "findings")
    for f in ranked:
        if f.location:
            assert f"at {f.location}" in page_text(findings)
        if f.fix:  # the fix's text survives highlighting: tags removed, it reads the same
            assert f.fix.rstrip() in html_lib.unescape(re.sub(r"<[^>]+>", "", findings))
    assert findings.count('class="copy"') == sum(1 for f in ranked if f.fix)


def test_every_section_of_a_full_run():
    text = HtmlRenderer().render(rb.with_input_fixes(FULL))
    for section_id in (
        "findings",
        "run",
        "timeline",
        "input",
        "before-after",
        "placement",
        "eager",
        "environment",
    ):
        assert f'<section id="{section_id}">' in text
    pipeline = section(text, "input")
    said = page_text(pipeline)
    assert "Bottleneck:" in said and "MapAndBatch (map + batch at train.py:41)" in said
    assert pipeline.count('class="bottleneck"') == 1
    env = section(text, "environment")
    assert "CUDA 12.5.1, cuDNN 9" in env and "550.54.15" in env and "NVIDIA H100 80GB HBM3" in env
    assert "train_step" in section(text, "eager") and "AddV2" in section(text, "eager")
    kinds = {name: {t["type"] for t in fig["data"]} for name, fig in figures(text).items()}
    assert list(kinds.values()) == [
        {"scatter"},
        {"bar"},
        {"bar"},
    ]  # timeline, pipeline, before/after


def test_timeline_shares_one_time_axis_across_steps_and_gpu_rows():
    fig = next(iter(figures(HtmlRenderer().render(FULL)).values()))
    layout = fig["layout"]
    rows = sorted(k for k in layout if re.fullmatch(r"yaxis\d*", k))
    assert len(rows) == 4  # steps, GPU busy, memory, PCIe
    titles = [layout[r]["title"]["text"] for r in rows]
    assert titles[0].startswith("step time") and "PCIe" in titles[-1]
    for n in range(2, 5):
        assert layout[f"xaxis{n}"].get("matches") or layout["xaxis"].get("matches")
    names = {t.get("name") for t in fig["data"]}
    assert {
        "waiting for input",
        "rest of the step",
        "busy (SM activity)",  # the one busy figure (SM activity: no graphics utilisation)
        "tf.function traced",
    } <= names
    wait = next(t for t in fig["data"] if t.get("name") == "waiting for input")
    assert (
        len(wait["x"]) == len(FULL.facts.steps.starts) - FULL.facts.steps.warmup
    )  # short: every step


def test_keras_fit_steps_without_input_wait_are_drawn_as_one_series():
    steps = rb.steps(count=300)
    fit = StepFacts(
        source="keras-fit",
        marker="Model.fit at train.py:90",
        count=1200,
        warmup=4,
        median_s=steps.median_s,
        p90_s=steps.p90_s,
        total_s=steps.total_s,
        steps_per_call=4,
        run_s=steps.run_s,
        starts=steps.starts,
        durations=steps.durations,
        input_waits=(None,) * 300,
        phases=steps.phases,
    )
    text = HtmlRenderer().render(rb.watched_run(fit))
    fig = figures(text)["figure-1"]
    names = [t.get("name") for t in fig["data"]]
    assert "step time" in names and "waiting for input" not in names
    assert fig["layout"]["yaxis"]["title"]["text"] == "step time (ms per call of 4 steps)"
    assert "not measured for this kind of loop" in section(text, "timeline")
    assert "1,200, the first 4 left out as warm-up; 4 steps per call" in text
    warm = next(t for t in fig["data"] if t.get("name", "").startswith("warm-up"))
    assert len(warm["x"]) == 1  # 4 warm-up steps = the first call


def test_large_run_is_downsampled_for_drawing_while_the_statistics_stay_exact(tmp_path):
    record = rb.large_run()
    path = write_html(record, tmp_path / "large.html")
    text = path.read_text(encoding="utf-8")
    size = path.stat().st_size
    print(f"\nHTML report of 100,000 steps and 36,000 samples per GPU metric: {size / MiB:.2f} MiB")
    assert size < 8 * MiB
    fig = figures(text)["figure-1"]
    lengths = [len(t["x"]) for t in fig["data"] if "x" in t]
    assert max(lengths) <= MAX_POINTS and max(lengths) > MAX_POINTS // 2
    gpu = record.facts.gpu_samples.gpus[0]
    util = [u * 100 for u in gpu.sm_activity]  # the busy figure's series: SM activity
    exact = statistics.median(util)
    drawn_means = next(t for t in fig["data"] if t.get("name") == "busy (SM activity)")["y"]
    assert abs(statistics.median(drawn_means) - exact) > 5  # the drawn series would mislead
    mean, median, p90, top, count = stat_row(text, "SM activity (%)")
    number = lambda text: float(text.replace(",", ""))
    assert number(median) == pytest.approx(exact, abs=0.01) and count == "36,000"
    assert number(top) == pytest.approx(max(util), abs=0.01)
    assert number(mean) == pytest.approx(statistics.fmean(util), abs=0.01)
    memory = stat_row(text, "memory used, all processes (GiB)")
    assert memory[3] == "79.00"  # the single spike, exactly
    steps = record.facts.steps
    slowest = max(range(1, len(steps.durations)), key=lambda i: steps.durations[i])
    assert (
        f"{steps.durations[slowest] * 1000:,.1f} ms at {steps.starts[slowest]:,.2f} s "
        f"(call {slowest + 1:,})"
    ) in page_text(text)  # a number and its unit kept together (a no-break space)
    assert f"median {steps.median_s * 1000:,.1f} ms" in page_text(text)


def step_row(fig: dict) -> list[dict]:
    """The traces of the timeline's first row (the steps)."""
    return [t for t in fig["data"] if t.get("yaxis", "y") == "y" and "x" in t]


def test_a_long_run_is_drawn_whole_and_says_which_part_is_per_step():
    record = rb.long_run()
    steps = record.facts.steps
    text = HtmlRenderer().render(record)
    fig = figures(text)["figure-1"]
    xs = [x for t in step_row(fig) for x in t["x"] if x is not None]
    last_start = steps.last_steps[-1][0]
    assert min(xs) == steps.starts[0] and max(xs) >= last_start  # first step to last
    assert max(xs) - min(xs) >= 0.99 * (last_start + steps.last_steps[-1][1] - steps.starts[0])
    names = {t.get("name") for t in step_row(fig)}
    assert {"waiting for input", "rest of the step", "median step, per 32 s window"} <= names
    assert "p90 step, per 32 s window" in names
    assert any(n and n.startswith("slowest step in each 32 s window, up to") for n in names)
    median = next(t for t in step_row(fig) if t.get("name") == "median step, per 32 s window")
    assert None in median["y"]  # the 200 s without steps breaks the line
    before, after = median["y"][1], median["y"][-2]
    assert before < 45 and after > 55  # the slowdown after the pause, which the first steps miss
    last = [t for t in step_row(fig) if t.get("stackgroup") == "last"]
    assert sum(len(t["x"]) for t in last) == 2 * len(steps.last_steps)  # wait + rest, per step
    timeline = page_text(section(text, "timeline"))
    assert (
        "calls 1–5,000 one by one (drawn as at most 2,000 time buckets" in timeline
        and "in windows of 32 s: the median, p90 and slowest step of each, and its mean input "
        "wait; over their end, the last 512 calls one by one"
        in timeline
    )
    start, per_step = max(steps.slowest, key=lambda entry: entry[1])
    assert start > steps.starts[-1]  # beyond the steps kept one by one
    assert f"{per_step * 1000:,.1f} ms at {start:,.2f} s, the slowest of all 149,999" in timeline


def test_a_short_run_draws_no_windows():
    fig = figures(HtmlRenderer().render(FULL))["figure-1"]
    assert not any("window" in (t.get("name") or "") for t in fig["data"])
    assert not any(t.get("stackgroup") == "last" or "legendgroup" in t for t in step_row(fig))


def test_sections_without_data_say_why():
    record = rb.watched_run(samples=rb.NO_DRIVER_SAMPLES, tfdata=None, placement=None)
    text = HtmlRenderer().render(record)
    assert "No GPU sampled: no NVIDIA driver here (NVML: LibraryNotFound)." in text
    assert "No tf.data facts in this record" in text
    assert '<section id="placement">' not in text and '<section id="before-after">' not in text
    fig = next(iter(figures(text).values()))
    assert len([k for k in fig["layout"] if re.fullmatch(r"yaxis\d*", k)]) == 1  # steps only
    no_steps = HtmlRenderer().render(rb.watched_run(steps=None))
    assert "No training steps found" in no_steps
    watched = rb.watched_run(
        steps=None, tfdata=None, program=ProgramFacts(command=("./run_jax.sh",))
    )
    other_program = HtmlRenderer().render(watched)  # gpuwhy watch: any program, no TF facts
    assert "No training steps found" not in other_program
    assert (
        '<section id="input">' not in other_program and '<section id="timeline">' in other_program
    )


@pytest.mark.parametrize(
    "record",
    [
        Record.diagnose("run", Facts()),
        Record.diagnose(
            "audit", b.placement_facts(groups=[b.op_group("Mean", reason="forced-cpu")])
        ),
        rb.watched_run(
            steps=replace(rb.steps(count=50), starts=(), durations=(), input_waits=()),
            samples=rb.gpu_samples(replace(rb.gpu_series(samples=1), utilization=(None,))),
        ),
    ],
    ids=["empty", "audit", "no-series"],
)
def test_sparse_records_render(record):
    text = HtmlRenderer().render(record)
    assert page_verdict(record) in html_lib.unescape(
        re.search(r"<h1[^>]*>(.*?)</h1>", text, re.S).group(1)
    )
    for name, fig in figures(text).items():
        assert fig["data"], name


def test_a_check_record_has_no_run_sections_and_no_plotly():
    record = Record.diagnose("check", b.facts(tf=b.no_gpu_tf(), drv=b.NO_DRIVER, devices=()))
    text = HtmlRenderer().render(record)
    assert '<section id="timeline">' not in text and '<section id="run">' not in text
    assert "env.no-gpu" in text and '<section id="environment">' in text
    assert "plotly.js" not in text and len(text) < 200_000


def test_user_strings_cannot_break_out_of_the_page():
    evil = "</script><img src=x onerror=alert(1)>"
    finding = Finding(
        id="input.bound",
        severity="high",
        title=f"title {evil}",
        evidence={"stage": evil},
        fix=f"print('{evil}')",
        location="train.py:1",
    )
    p = rb.pipeline()
    stages = list(p.stages)
    stages[1] = replace(stages[1], function=evil, name=evil)
    record = rb.watched_run(
        tfdata=replace(rb.watched_run().facts.tfdata, pipelines=(replace(p, stages=tuple(stages)),))
    )
    record.findings.insert(0, finding)
    text = HtmlRenderer().render(record)
    assert "<img src=x" not in text
    assert text.count("</script>") == len(figures(text)) + 2  # figures, plotly.js, the page's own
    pipeline_fig = figures(text)["figure-2"]
    assert html_lib.escape(evil, quote=False) in json.dumps(pipeline_fig["data"][0]["y"])


def test_measured_fixes_are_drawn_only_when_measured():
    rows = fix_measurements(rb.INPUT_FIXES)
    assert [r["name"] for r in rows] == ["map: num_parallel_calls=AUTOTUNE", "prefetch", "cache"]
    assert rows[0]["before"] == {"elements_per_s": 25.1, "low": 24.3, "high": 25.9}
    assert rows[0]["fix"] == "ds = ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)"
    assert rows[1]["fix"] is None  # no change to paste
    text = HtmlRenderer().render(rb.with_input_fixes(FULL))
    ba = section(text, "before-after")
    assert "3.52×" in ba and "25.1 ± 0.8" in ba and "1.10×" in ba
    assert "97.0 (90.0–99.5)" in ba and "1.86×" in ba  # the slowest and fastest pass
    after = next(t for t in figures(text)["figure-3"]["data"] if t["name"] == "after")
    assert after["error_y"]["array"][2] == 1.0 and after["error_y"]["arrayminus"][2] == 10.0
    assert '<section id="before-after">' not in HtmlRenderer().render(FULL)


def test_report_command_writes_html_with_the_records_measured_fixes(tmp_path):
    record = rb.with_input_fixes(FULL)
    data = record.to_dict()
    record_path = tmp_path / "run.json"
    record_path.write_text(json.dumps(data))
    out = tmp_path / "sub" / "run.html"
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", str(record_path), "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # high findings: exit 1, as without --html
    assert record.verdict in proc.stdout.splitlines()[0]
    text = out.read_text(encoding="utf-8")
    assert '<section id="before-after">' in text and "map: num_parallel_calls=AUTOTUNE" in text


def test_run_with_an_unwritable_html_path_fails_before_the_script_runs(tmp_path):
    script = tmp_path / "script.py"
    marker = tmp_path / "ran"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--html",
            str(tmp_path / "script.py" / "dir" / "r.html"),
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "cannot write" in proc.stderr and not marker.exists()


# -- in a real browser, offline --------------------------------------------------------------------


def test_real_run_report_opens_offline_with_its_charts_drawn(
    slow_training_run, open_report, tmp_path
):
    record = Record.load(slow_training_run["json"])
    opened = open_report(slow_training_run["html"])
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    # the page's verdict leaves the median step to the bar drawn beside it
    assert page.inner_text("h1.verdict").endswith(page_verdict(record))
    assert page_verdict(record) == verdict(record.facts, record.findings, drawn=("step",))
    # the median step, or the mean where a loaded host's long steps pull it far off
    split = step_split(record.facts)
    assert split is not None
    statistic = split.statistic
    assert f"{statistic} step" in (page.locator("svg.step-picture").text_content() or "")
    timeline = page.locator("#timeline .plot")
    assert timeline.locator(".main-svg").count() >= 1
    assert timeline.locator(".scatterlayer .trace").count() >= 3  # input wait, rest, warm-up
    assert page.locator("#timeline").inner_text().count("No GPU sampled") == 1
    assert page.locator("#findings article").count() == len(record.findings)
    page.screenshot(path=str(tmp_path / "slow_training_report.png"), full_page=True)
    assert (tmp_path / "slow_training_report.png").stat().st_size > 10_000


def test_copy_button_puts_the_fix_on_the_clipboard(slow_training_run, open_report):
    record = Record.load(slow_training_run["json"])
    first = next(f for f in sorted(record.findings, key=Finding.sort_key) if f.fix)
    page = open_report(slow_training_run["html"]).page
    button = page.locator("button.copy").first
    button.click()
    page.wait_for_function("() => document.querySelector('button.copy').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == first.fix.rstrip()


def test_placement_filter_shows_only_matching_rows(slow_training_run, open_report):
    page = open_report(slow_training_run["html"]).page
    rows = page.locator("#placement-groups tbody tr")
    total = rows.count()
    assert total > 5
    page.fill('input[data-filter="placement-groups"]', "float64")
    visible = [r for r in rows.all() if r.is_visible()]
    assert 0 < len(visible) < total
    assert all("float64" in r.inner_text() for r in visible)
    assert (
        page.inner_text('[data-count-for="placement-groups"]') == f"{len(visible)} of {total} rows"
    )
    page.fill('input[data-filter="placement-groups"]', "")
    assert sum(1 for r in rows.all() if r.is_visible()) == total


def test_every_chart_of_a_full_run_is_drawn(open_report, tmp_path):
    path = write_html(rb.with_input_fixes(FULL), tmp_path / "full.html")
    opened = open_report(path)
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    assert page.locator(".plot").count() == 3
    assert page.locator(".plot .main-svg").count() >= 3
    assert page.locator("#input .barlayer .trace").count() == 1
    assert page.locator("#before-after .barlayer .trace").count() == 3  # before, after, ideal
    assert page.locator("#timeline .plot .cartesianlayer > .subplot").count() == 4  # four rows
    assert "<lambda>" in page.locator("#input").inner_text()
    page.screenshot(path=str(tmp_path / "full_report.png"), full_page=True)


def test_a_large_run_opens_without_errors(open_report, tmp_path):
    path = write_html(rb.large_run(), tmp_path / "large.html")
    opened = open_report(path)
    assert opened.errors == [] and opened.fetched == []
    assert opened.page.locator("#timeline .scatterlayer .trace").count() >= 8


def test_a_long_run_opens_with_its_whole_run_on_the_axis(open_report, tmp_path):
    record = rb.long_run()
    steps = record.facts.steps
    opened = open_report(write_html(record, tmp_path / "long.html"))
    assert opened.errors == [] and opened.fetched == []
    low, high = opened.page.evaluate(
        "() => document.querySelector('#timeline .plot')._fullLayout.xaxis.range"
    )
    assert low <= steps.starts[0] and high >= steps.last_steps[-1][0]
    drawn = opened.page.locator("#timeline .subplot.xy .scatterlayer .trace")
    assert drawn.count() >= 8  # first steps, windows, last steps
    opened.page.screenshot(path=str(tmp_path / "long_report.png"), full_page=True)


def test_screenshot_tool_renders_a_record_to_png(slow_training_run, tmp_path, browser):
    """tools/screenshot_report.py (the README's pictures), in its own process: one
    thread cannot hold two playwright sessions."""
    png = tmp_path / "report.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "screenshot_report.py"),
            str(slow_training_run["json"]),
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_projection_is_drawn_in_a_real_browser_and_said_to_be_one(open_report, tmp_path):
    projection = b.projection(
        input_batch_s=0.004,
        input_batch_measured_s=0.014,
        input_wait_fraction=0.9,
        input_wait_low=0.8,
        input_wait_high=0.95,
    )
    record = Record.diagnose("run", replace(FULL.facts, projection=projection))
    path = write_html(record, tmp_path / "projected.html")
    text = path.read_text()
    part = section(text, "projection")
    assert "Projected on A100" in part and "not a measurement" in part
    assert "not calibrated" in part and "steps would wait 90% of the time" in html_lib.unescape(
        part
    )
    opened = open_report(path)
    assert opened.errors == [] and opened.fetched == []
    bars = opened.page.locator("#projection .plot .barlayer .trace")
    assert bars.count() == 5  # matmul/conv, other kernels, copies; the input twice


def test_ops_on_the_cpu_are_a_segment_of_the_projected_step(open_report, tmp_path):
    projection = b.projection(
        step=(0.0027, 0.0015, 0.004),
        cpu_ops_s=0.002,
        cpu_ops_low_s=0.001,
        cpu_ops_high_s=0.003,
        cpu_ops=2,
        cpu_ops_measured=2,
        cpu_ops_measured_by="TF profiler host trace of 4 step(s) of train_step",
    )
    record = Record.diagnose("run", replace(FULL.facts, projection=projection))
    path = write_html(record, tmp_path / "cpu-ops.html")
    part = page_text(section(path.read_text(), "projection"))
    assert "ops on the CPU 2.0 ms (measured here: 2 of 2)" in part
    opened = open_report(path)
    assert opened.errors == [] and opened.fetched == []
    bars = opened.page.locator("#projection .plot .barlayer .trace")
    assert bars.count() == 4  # matmul/conv, other kernels, copies, CPU ops
    assert opened.page.locator("#projection .legendtext", has_text="CPU ops").count() == 1


# -- findings as cards: what, where, its cost, the fix, the evidence in words -----------------

VISIBLE_TEXT = """([w, h]) => {
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!node.textContent.trim() || !parent || !parent.checkVisibility()) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) {
      if (r.width > 0 && r.bottom > 0 && r.right > 0 && r.top < h && r.left < w) {
        out.push(node.textContent);
        break;
      }
    }
  }
  return out.join("\\n");
}"""


def snake_case_keys(record: Record) -> set[str]:
    """Every evidence key of the record's findings (and its tables' columns) written
    the machine's way, with an underscore."""
    keys = set()
    for f in record.findings:
        for key, value in f.evidence.items():
            keys.add(key)
            if isinstance(value, list):
                keys.update(k for row in value if isinstance(row, dict) for k in row)
    return {k for k in keys if "_" in k}


def test_the_demos_first_screen_shows_no_snake_case_evidence_key(slow_training_run, open_report):
    record = Record.load(slow_training_run["json"])
    keys = snake_case_keys(record)
    assert "input_wait_fraction" in keys  # the demo's input.bound carries them
    page = open_report(slow_training_run["html"]).page
    page.set_viewport_size({"width": 1400, "height": 1000})
    visible = page.evaluate(VISIBLE_TEXT, [1400, 1000])
    assert "waiting for input" in visible  # the verdict and the picture of the step
    shown = sorted(k for k in keys if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", visible))
    assert shown == [], f"evidence keys on the first screen: {shown}"
    # nor on the first card's screen, under the timeline
    page.evaluate("document.getElementById('finding-1').scrollIntoView()")
    visible = page.evaluate(VISIBLE_TEXT, [1400, 1000])
    assert "input.bound" in visible and "Copy" in visible  # the first card is on screen
    shown = sorted(k for k in keys if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", visible))
    assert shown == [], f"evidence keys on the first card's screen: {shown}"
    # the keys are still in the page, as recorded, one click away
    raw = page.locator("#finding-1 details.raw-evidence")
    assert not raw.evaluate("d => d.open")
    raw.locator("summary").click()
    assert "input_wait_fraction" in raw.inner_text()


def test_a_card_says_where_what_it_costs_and_the_evidence_in_units():
    text = HtmlRenderer().render(FULL)
    ranked = sorted(FULL.findings, key=Finding.sort_key)
    first = next(f for f in ranked if f.gain_value and f.location)
    number = ranked.index(first) + 1
    card = section(text, "findings").split(f'id="finding-{number}">')[1].split("</article>")[0]
    shown, raw = card.split('<details class="raw-evidence">')
    assert f"costs up to {first.gain_value:.0%} of the step" in shown
    assert f"at {first.location}" in page_text(shown)
    shown_text = html_lib.unescape(re.sub(r"<[^>]+>", " ", shown))
    for key in first.evidence:
        if "_" in key:
            assert key not in shown_text, key  # in words above, as recorded below
            assert f"<dt>{key}</dt>" in raw


def test_file_and_line_stay_on_one_line_in_tables(slow_training_run, open_report):
    page = open_report(slow_training_run["html"], width=700).page
    locations = page.locator("#placement-groups .loc")
    assert locations.count() > 0
    for loc in locations.all()[:20]:
        box = loc.evaluate("e => e.getClientRects().length")
        assert box == 1, loc.inner_text()  # one box: never broken across lines
    assert locations.first.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
