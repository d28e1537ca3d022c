"""The picture of the step beside every page's verdict (report/step_picture.py), from
small hand-made records: the parts' widths proportional to their shares, the projected
bar labelled projected with its band, one bar per side of a diff on one time axis, and
no bar where nothing was measured."""

import re
from dataclasses import replace

import pytest

from gpuwhy.comparison.model import Change, Comparison, PartChange, RunSide
from gpuwhy.facts import Facts, GpuSamplesFacts, ProgramFacts, WorkersFacts
from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.report.diff.html import render_comparison_html
from gpuwhy.report.diff.step_bars import diff_bars
from gpuwhy.report.run.html import HtmlRenderer
from gpuwhy.report.run.step_bars import projected_bar, run_bars, worker_bars
from gpuwhy.report.step_picture import BAR_W, Bar, Segment, segments, svg
from tests import builders
from tests.builders_workers import worker_run
from tests.derived.test_gpu_busy import series
from tests.report.test_step_split import capture, loop_facts

PART = re.compile(
    r'<rect class="part" data-part="(\w+)" data-share="([\d.]+)" x="([\d.]+)" '
    r'y="(\d+)" width="([\d.]+)"'
)


def parts_drawn(text: str) -> list[tuple[str, float, float]]:
    """(part, share, width) of every part drawn, in order."""
    return [(m[1], float(m[2]), float(m[5])) for m in PART.finditer(text)]


def test_the_parts_widths_are_proportional_to_their_shares():
    bar = Bar(
        "this run (measured)",
        "median step 10.0 ms",
        segments(
            [
                ("traced_step", "computing", 0.5, 0.005),
                ("input", "waiting for input", 0.4, 0.004),
                ("python", "host's Python", 0.1, 0.001),
            ]
        ),
    )
    drawn = svg([bar])
    assert drawn is not None and drawn.startswith("<svg") and "<script" not in drawn
    parts = parts_drawn(drawn)
    assert [p for p, _, _ in parts] == ["traced_step", "input", "python"]
    for _, share, width in parts:
        assert width == pytest.approx(share * BAR_W, abs=0.1)
    assert sum(w for _, _, w in parts) == pytest.approx(BAR_W, abs=0.3)
    assert "waiting for input 40% (4.0 ms)" in drawn  # the legend, in words with units
    assert "http" not in drawn.replace('xmlns="http://www.w3.org/2000/svg"', "")  # fetches nothing


def test_a_runs_picture_is_its_step_split():
    facts = loop_facts()
    (bar,) = run_bars(facts)
    assert bar.name == "this run (measured)" and bar.total == "median step 10.0 ms"
    assert {s.part: s.share for s in bar.segments} == pytest.approx(
        {"traced_step": 0.5, "input": 0.4, "python": 0.1}
    )
    assert bar.draws == "step"


def test_no_bar_where_nothing_was_measured():
    assert run_bars(Facts()) == []
    assert svg([]) is None
    assert svg([Bar("empty", "", ())]) is None
    # parts under half a percent are not drawn; a share nobody measured is never made up
    assert [
        s.part for s in segments([("input", "w", 0.001, None), ("rest", "r", 0.999, None)])
    ] == ["rest"]
    page = HtmlRenderer().render(Record(command="check", facts=Facts(), findings=[]))
    assert 'class="step-picture"' not in page


def test_the_projected_bar_is_labelled_projected_with_its_band():
    p = builders.projection(
        step=(0.010, 0.008, 0.014), parts=(0.003, 0.002, 0.001), input_wait_fraction=0.4
    )
    bar = projected_bar(p)
    assert bar.projected and bar.name == "A100 (projected)"
    assert bar.total == "step 10.0 ms (band 8.0 ms–14.0 ms)"
    shares = {s.part: s.share for s in bar.segments}
    # the input wait only where input.projected-bound reports it (the verdict's rule)
    assert "input" not in shares
    assert shares == pytest.approx({"tensor": 0.3, "kernels": 0.2, "copies": 0.1, "rest": 0.4})
    waits = Finding(id="input.projected-bound", severity="high", title="t", evidence={})
    paced = projected_bar(p, [waits])
    shares = {s.part: s.share for s in paced.segments}
    assert shares["input"] == pytest.approx(0.4)
    assert sum(shares.values()) == pytest.approx(1.0)
    # the wait is of the step its input paces (10 ms alone, 40% waiting: 16.7 ms), so the
    # step's own 3 ms of matmul/conv is 18% of it, never "40% (4.0 ms)" of a 10 ms step
    assert (
        paced.total
        == "step 16.7 ms, paced by its input (the step alone 10.0 ms (band 8.0 ms–14.0 ms))"
    )
    assert shares["tensor"] == pytest.approx(0.18)
    drawn = svg([bar])
    assert drawn is not None and "A100 (projected)" in drawn and "band 8.0 ms–14.0 ms" in drawn
    assert 'class="bar projected"' in drawn and "stroke-dasharray" in drawn


def test_a_run_with_a_target_draws_both_bars_and_its_verdict_leaves_the_projection_to_them():
    facts = replace(
        loop_facts(),
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
        projection=builders.projection(step=(0.010, 0.008, 0.014), parts=(0.003, 0.002, 0.001)),
    )
    record = Record.diagnose("run", facts)
    assert "(projected)" in record.verdict  # the JSON's and terminal's verdict say it
    page = HtmlRenderer().render(record)
    h1 = re.search(r'<h1 class="verdict[^>]*>(.*?)</h1>', page, re.S)
    assert h1 is not None and "projected" not in h1[1] and "median 10.0 ms" not in h1[1]
    picture = page.split('<figure class="step-picture"')[1].split("</figure>")[0]
    assert 'data-bars="2"' in picture
    assert "this run (measured)" in picture and "A100 (projected)" in picture
    assert "median step 10.0 ms" in picture
    # the picture comes before the timeline, the timeline before the findings
    assert page.index("step-picture") < page.index('id="timeline"') < page.index('id="findings"')


def test_a_captures_bar_is_its_kernels_and_the_hosts_activities():
    (bar,) = run_bars(capture(0.25, {"input": 0.1, "dispatch": 0.04, "python": 0.01}))
    assert bar.name == "captured steps (measured)" and bar.draws is None
    assert {s.part: s.share for s in bar.segments} == pytest.approx(
        {"input": 0.5, "gpu": 0.25, "dispatch": 0.2, "python": 0.05}
    )


def test_workers_share_one_time_axis_and_a_wait_not_measured_is_not_drawn():
    workers = WorkersFacts(
        directory="runs",
        workers=(
            worker_run("worker-0", 0.100, 0.002),
            worker_run("worker-1", 0.150, 0.051),
            worker_run("worker-2", 0.100, None),
            worker_run("worker-3", 0.0, None, state="missing", median_s=None),
        ),
    )
    bars = worker_bars(workers)
    assert [b.name for b in bars] == [
        "worker-0 (measured)",
        "worker-1 (measured)",
        "worker-2 (measured)",
    ]
    assert [b.length for b in bars] == pytest.approx([2 / 3, 1.0, 2 / 3])
    assert {s.part: s.share for s in bars[1].segments} == pytest.approx(
        {"input": 0.34, "rest": 0.66}
    )
    assert [s.part for s in bars[2].segments] == ["rest"]  # its wait was not measured


def test_a_workers_bar_says_the_figures_of_the_workers_table():
    """A worker's mean step and mean wait (the table's "34% (51.0 ms)"), its median
    step in the caption: the bar never shows a share the table beside it does not."""
    from gpuwhy.report.run.workers import worker_rows

    w = worker_run("worker-1", 0.150, 0.051, median_s=0.120, input_wait_median_s=0.080)
    (bar,) = worker_bars(WorkersFacts(directory="runs", workers=(w,)))
    assert bar.total == "mean step 150.0 ms (median 120.0 ms)"
    wait = next(s for s in bar.segments if s.part == "input")
    assert wait.share == pytest.approx(0.34) and wait.seconds == pytest.approx(0.051)
    (row,) = worker_rows(WorkersFacts(directory="runs", workers=(w,)))
    assert "34% (51.0 ms)" in row


def comparison(before=0.100, after=0.060) -> Comparison:
    side = RunSide(path="x.json", command="run", created="", verdict="")
    return Comparison(
        verdict="AFTER is 40% faster per step",
        before=replace(side, path="before.json"),
        after=replace(side, path="after.json"),
        step_time=Change(
            "step_time",
            before,
            after,
            after / before,
            0.55,
            0.65,
            "faster",
            0.02,
            median_before=before,
            median_after=after,
        ),
        parts=(
            PartChange(
                "input",
                "waiting for input",
                0.050,
                0.010,
                -0.040,
                -0.045,
                -0.035,
                1.0,
                True,
                "next() timing",
            ),
            PartChange(
                "traced_step",
                "inside the traced step",
                0.040,
                0.040,
                0.0,
                None,
                None,
                None,
                False,
                "tf.function timer",
            ),
        ),
    )


def test_a_diff_draws_before_and_after_as_two_bars_on_one_time_axis():
    before, after = diff_bars(comparison())
    assert before.name == "BEFORE (measured)" and after.name == "AFTER (measured)"
    assert before.length == 1.0 and after.length == pytest.approx(0.6)  # faster: shorter
    assert {s.part: s.seconds for s in before.segments} == pytest.approx(
        {"input": 0.050, "traced_step": 0.040, "rest": 0.010}
    )
    assert {s.part: s.share for s in after.segments} == pytest.approx(
        {"input": 1 / 6, "traced_step": 2 / 3, "rest": 1 / 6}
    )
    drawn = svg([before, after])
    assert drawn is not None and 'data-bars="2"' in drawn
    widths = {}
    for name, bar in (("BEFORE", before), ("AFTER", after)):
        block = drawn.split(f'data-name="{name} (measured)"')[1].split("</g>")[0]
        widths[name] = sum(w for _, _, w in parts_drawn(block))
    assert widths["AFTER"] / widths["BEFORE"] == pytest.approx(0.6, abs=0.01)
    page = render_comparison_html(comparison())
    assert page.count('<svg class="step-picture"') == 1
    assert page.index("step-picture") < page.index('id="step-time"')


def test_a_diff_without_a_step_time_draws_no_bars():
    assert diff_bars(replace(comparison(), step_time=None)) == []


def test_segments_overlapping_past_the_bar_are_scaled_to_fill_it():
    parts = segments([("input", "w", 0.7, None), ("traced_step", "c", 0.5, None)])
    assert sum(s.share for s in parts) == pytest.approx(1.0)
    assert parts[0] == Segment("input", "w", pytest.approx(0.7 / 1.2), None)


def test_a_page_inlines_plotly_js_once_and_the_picture_adds_a_few_kilobytes():
    """The size of issue #48: the picture is inline SVG, plotly.js (4.8 MB) once a page."""
    diff_page = render_comparison_html(comparison())
    assert diff_page.count("* plotly.js v") == 1
    facts = replace(
        loop_facts(),
        program=ProgramFacts(command=("train.py",), seconds=9.0, tensorflow_imported=True),
    )
    run_page = HtmlRenderer().render(Record.diagnose("run", facts))
    assert run_page.count("* plotly.js v") == 1
    for page in (diff_page, run_page):
        picture = page.split('<figure class="step-picture"')[1].split("</figure>")[0]
        assert len(picture.encode()) < 6_000


def test_the_gpu_busy_figure_is_under_the_picture_and_said_once():
    gpu = series(n=100, graphics_activity=lambda t: 0.6)
    facts = replace(
        loop_facts(),
        program=ProgramFacts(command=("train.py",), seconds=10.0, tensorflow_imported=True),
        gpu_samples=GpuSamplesFacts(hz=10, gpus=(gpu,)),
    )
    record = Record.diagnose("run", facts)
    assert "GPU busy 60%" in record.verdict  # the terminal's and JSON's verdict say it
    page = HtmlRenderer().render(record)
    h1 = re.search(r'<h1 class="verdict[^>]*>(.*?)</h1>', page, re.S)
    assert h1 is not None and "busy" not in h1[1]
    caption = re.search(r'<figcaption class="busy"><strong>(.*?)</strong>', page)
    assert caption is not None and caption[1].startswith("GPU busy 60% while the program used it")


def test_a_long_caption_wraps_in_the_names_column():
    """A projected step's caption ("step 85.3 ms, paced by its input (the step alone
    …)") is longer than the names' column: it wraps there, whole, rather than running
    under the bar where the first screen cut it."""
    from gpuwhy.report.step_picture import CHAR_W, NAME_W

    total = "step 85.3 ms, paced by its input (the step alone 7.0 ms (band 3.5 ms–10.8 ms))"
    bar = Bar("A100 (projected)", total, segments([("input", "waiting for input", 1.0, 0.08)]))
    drawn = svg([bar])
    assert drawn is not None
    lines = re.findall(r"<tspan[^>]*>([^<]*)</tspan>", drawn)
    assert len(lines) >= 2 and " ".join(lines) == total
    assert all(len(line) * CHAR_W <= NAME_W for line in lines)
