"""A capture's HTML report (``gpuwhy report CAPTURE --html``) in a real browser, offline:
the verdict first, the findings, and the capture's block with its measured rows."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.modes.capture import diagnose_capture
from tests.report.test_html import page_text, section, write_html

H100 = Path(__file__).parents[1] / "data" / "xplane" / "h100_slow_input"


def test_the_h100_captures_page_opens_offline_with_its_verdict_and_capture_block(
    open_report, tmp_path
):
    record = diagnose_capture(H100)
    path = write_html(record, tmp_path / "capture.html")
    run = page_text(section(path.read_text(), "run"))
    assert "Capture (every figure measured by the profiler)" in run
    assert "20 from the GPU's repeating work (jit_train_step)" in run
    assert "slow (xplane_capture.py:14)" in run
    opened = open_report(path)
    assert opened.errors == [] and opened.fetched == []
    page = opened.page
    verdict = page.locator("h1, .verdict").first.inner_text()
    assert "GPU busy 3% of 20 captured steps" in verdict
    assert page.locator("#run h2").inner_text() == "Capture (every figure measured by the profiler)"
    assert page.get_by_text("input.bound").count() >= 1
