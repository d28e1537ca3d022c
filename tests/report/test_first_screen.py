"""The first screen of a run's and a capture's HTML report in headless Chromium at
1400x1000, offline: the verdict in two lines, the picture of the step in the viewport
beside it, no snake_case evidence key, nothing fetched (the diff page's is in
test_diff_html.py)."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.modes.capture import diagnose_capture
from gpuwhy.record import Record
from tests.report.first_screen import check_first_screen, record_keys
from tests.report.test_html import write_html

H100 = Path(__file__).parents[1] / "data" / "xplane" / "h100_slow_input"


def test_the_demos_first_screen_is_its_verdict_and_its_step_drawn(slow_training_run, open_report):
    record = Record.load(slow_training_run["json"])
    keys = record_keys(record)
    assert "input_wait_fraction" in keys
    opened = open_report(slow_training_run["html"])
    visible = check_first_screen(opened, keys)
    assert "this run (measured)" in visible and "waiting for input" in visible
    said = opened.page.inner_text("h1.verdict")
    assert "slowest stage" in said and said.count("examples/slow_training.py:36") == 1


def test_a_captures_first_screen_is_its_verdict_and_its_captured_steps(open_report, tmp_path):
    record = diagnose_capture(H100)
    path = write_html(record, tmp_path / "capture.html")
    visible = check_first_screen(open_report(path), record_keys(record))
    assert "captured steps (measured)" in visible
    assert "GPU computing (kernels)" in visible and "waiting for input" in visible
