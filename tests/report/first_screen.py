"""What a page's first screen must show in headless Chromium at 1400x1000 (issue #48): the
verdict in at most two lines and the picture of the step wholly inside the viewport, no
evidence key written the machine's way (snake_case) in sight, nothing fetched. Shared by
the run, capture and diff pages' tests."""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.record import Record
from tests.report.test_html import VISIBLE_TEXT, snake_case_keys

WIDTH, HEIGHT = 1400, 1000
TWO_LINES = 250  # characters of a verdict that must fit two lines


def check_first_screen(opened: Any, keys: set[str] = frozenset(), bars: int = 1) -> str:
    """Asserts the first screen of a page opened by ``open_report``; returns its visible
    text."""
    page = opened.page
    assert opened.errors == [] and opened.fetched == []
    page.set_viewport_size({"width": WIDTH, "height": HEIGHT})
    page.evaluate("window.scrollTo(0, 0)")
    verdict = page.locator("h1.verdict")
    box = verdict.bounding_box()
    line = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('h1.verdict')).lineHeight)"
    )
    # two lines hold about 250 characters of the verdict at this width; a verdict with
    # more clauses (a loaded host's, an exit status) may take a third, never more
    text = verdict.inner_text()
    lines = 2 if len(text) <= TWO_LINES else 3
    assert box is not None and box["height"] <= lines * line + 1, (
        f"the verdict ({len(text)} characters) takes {box and box['height'] / line:.1f} lines"
    )
    picture = page.locator("svg.step-picture")
    assert picture.count() == 1
    drawn = picture.bounding_box()
    assert drawn is not None and drawn["width"] > 600
    assert 0 <= drawn["y"] and drawn["y"] + drawn["height"] <= HEIGHT
    assert drawn["x"] >= 0 and drawn["x"] + drawn["width"] <= WIDTH
    assert int(picture.get_attribute("data-bars") or 0) >= bars
    assert picture.locator("rect.part").count() >= bars
    visible = page.evaluate(VISIBLE_TEXT, [WIDTH, HEIGHT])
    shown = sorted(k for k in keys if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w])", visible))
    assert shown == [], f"evidence keys on the first screen: {shown}"
    return str(visible)


def record_keys(record: Record) -> set[str]:
    return snake_case_keys(record)
