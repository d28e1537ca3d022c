"""What a reviewer found drawn wrong on the pages, in a real Chromium: a long path in a
finding's evidence running over the next column, the projection chart squashed to a strip
by its legend, the finding marks sitting on the timeline's legend (the diff's "16.2 ms"
broken across two lines: test_diff_html.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpuwhy.finding import Finding
from gpuwhy.modes.capture import diagnose_capture
from gpuwhy.record import Record
from gpuwhy.report.run.html_charts import projection
from tests import builders
from tests.report import builders as rb
from tests.report.test_html import figures, write_html

H100 = Path(__file__).parents[1] / "data" / "xplane" / "h100_slow_input"


def test_a_long_path_in_the_evidence_wraps_inside_its_column(open_report, tmp_path):
    record = diagnose_capture(H100)  # "Measured at: profiler capture /work/.../vm.xplane.pb"
    page = open_report(write_html(record, tmp_path / "capture.html")).page
    over = page.evaluate(
        "() => [...document.querySelectorAll('ul.evidence-text li')]"
        ".filter(li => li.scrollWidth > li.clientWidth + 1).map(li => li.textContent)"
    )
    assert over == []


def test_the_projection_chart_has_a_row_per_bar_and_its_legend_below():
    p = builders.projection(step=(0.010, 0.008, 0.014), parts=(0.003, 0.002, 0.001))
    p = replace(p, input_batch_s=0.09, input_batch_measured_s=0.097, host_s=0.008)
    layout = projection(p)["layout"]
    rows = len({trace["y"][0] for trace in projection(p)["data"]})
    assert rows == 4  # the step, the host's work, the input alone and as delivered
    assert layout["height"] >= 150 + 45 * rows
    assert layout["legend"]["orientation"] == "h" and layout["legend"]["y"] < 0


def test_the_projection_chart_s_bars_are_drawn_tall_enough_to_read(open_report, tmp_path):
    p = builders.projection(step=(0.010, 0.008, 0.014), parts=(0.003, 0.002, 0.001))
    p = replace(p, input_batch_s=0.09, input_batch_measured_s=0.097, host_s=0.008)
    record = Record.diagnose("run", replace(rb.watched_run().facts, projection=p))
    page = open_report(write_html(record, tmp_path / "run.html")).page
    bars = page.locator("#projection .plot .barlayer .point path")
    heights = [bars.nth(i).bounding_box()["height"] for i in range(bars.count())]
    assert heights and min(heights) >= 20, heights


def test_the_finding_marks_sit_inside_the_step_row_under_its_legend(tmp_path):
    record = rb.watched_run()
    drift = Finding("steps.drift", "high", "steps slowed", evidence={"at_s": 1.0})
    record = replace(record, findings=[*record.findings, drift])
    page = write_html(record, tmp_path / "run.html").read_text(encoding="utf-8")
    marks = [
        a
        for fig in figures(page).values()
        for a in fig["layout"].get("annotations", [])
        if a.get("text") == "▼"
    ]
    assert marks and all(a["yanchor"] == "top" for a in marks)


def test_a_record_without_steps_says_a_finding_costs_a_share_of_the_run(tmp_path):
    """A recording has no steps: its findings' cost is a share of the run, not of a
    step the page never shows."""
    from gpuwhy.facts import Facts

    idle = Finding("gpu.underutilized", "high", "GPU idle", gain_value=0.5)
    record = Record(command="watch", facts=Facts(), findings=[idle])
    page = write_html(record, tmp_path / "watch.html").read_text(encoding="utf-8")
    assert "up to 50% of the run" in page and "of the step" not in page


def test_a_captures_findings_cost_a_share_of_its_captured_step(tmp_path):
    """A capture timed its steps (the picture draws one): a finding's cost is a share
    of that step, as for a run."""
    page = write_html(diagnose_capture(H100), tmp_path / "capture.html").read_text("utf-8")
    assert "costs up to 96% of the step" in page and "of the run" not in page


def test_a_fix_two_cards_share_is_shown_once(tmp_path):
    """input.bound and input.python-function give the same fix for one stage: the second
    card points at the first's, as the terminal says "the same as finding 1's"."""
    fix = "dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE)"
    record = rb.watched_run()
    first = Finding("input.bound", "high", "Steps wait", fix=fix, gain_value=0.7)
    second = Finding("input.python-function", "high", "Stage runs Python", fix=fix, gain_value=0.6)
    record = replace(record, findings=[first, second])
    page = write_html(record, tmp_path / "run.html").read_text(encoding="utf-8")
    assert page.count('class="copy" data-copy="fix-') == 1
    assert 'Fix: the same as <a href="#finding-1">finding 1</a>\'s.' in page


def test_a_recording_s_timeline_is_no_step_timeline(tmp_path):
    """A GPU recording has no steps: its section is the timeline, not the steps'."""
    from gpuwhy.facts import Facts, ProgramFacts

    record = Record(command="watch", facts=Facts(program=ProgramFacts(command=("train",))))
    page = write_html(record, tmp_path / "watch.html").read_text(encoding="utf-8")
    assert "<h2>Timeline</h2>" in page and "Step timeline" not in page
    run = write_html(rb.watched_run(), tmp_path / "run.html").read_text(encoding="utf-8")
    assert "<h2>Step timeline</h2>" in run
