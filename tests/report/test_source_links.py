"""A finding's file:line is one click from its source: the HTML pages link each location
whose file is on this machine (its file:// URL, or the editor GPUWHY_EDITOR names), and
leave a location whose file is not here unlinked; checked as written and in Chromium."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import unquote, urlparse

import pytest

from gpuwhy.finding import Finding
from gpuwhy.report.locations import nowrap_locations, source_link
from tests.report import builders as rb
from tests.report.test_html import write_html


@pytest.fixture
def program(tmp_path, monkeypatch):
    """A program's folder, the working directory (where gpuwhy writes its report)."""
    (tmp_path / "train.py").write_text("import tensorflow as tf\n" * 40)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GPUWHY_EDITOR", raising=False)
    return tmp_path


def test_a_location_links_to_its_file_at_its_line(program):
    url = source_link("train.py:36")
    assert url == (program / "train.py").resolve().as_uri() + "#L36"
    assert source_link("train.py:36:8") == url  # a column where given: the line's
    assert source_link("missing.py:3") is None
    assert source_link(f"{program / 'train.py'}:2", cwd="/") is not None  # absolute


@pytest.mark.parametrize(
    ("editor", "expected"),
    [
        ("vscode", "vscode://file{path}:36"),
        ("PyCharm", "pycharm://open?file={path}&line=36"),
        ("myeditor://open?f={path}&l={line}", "myeditor://open?f={path}&l=36"),
    ],
)
def test_gpuwhy_editor_links_into_an_editor(program, monkeypatch, editor, expected):
    monkeypatch.setenv("GPUWHY_EDITOR", editor)
    path = str((program / "train.py").resolve())
    assert source_link("train.py:36") == expected.format(path=path)


def test_an_unknown_editor_name_falls_back_to_the_file(program, monkeypatch):
    monkeypatch.setenv("GPUWHY_EDITOR", "notepad")
    assert source_link("train.py:36", cwd=str(program)).startswith("file://")


def test_text_around_locations_stays_escaped_and_each_location_is_its_own_link(program):
    html = str(nowrap_locations("<b> at train.py:3 and train.py:9, not lost.py:1"))
    assert html.startswith('&lt;b&gt; at <a class="loc" href="file://')
    assert html.count('<a class="loc"') == 2
    assert '<span class="loc">lost.py:1</span>' in html


def test_the_cards_location_opens_its_source_in_the_browser(program, open_report):
    record = rb.watched_run()
    finding = Finding(
        "input.bound",
        "high",
        "Steps wait for input 60% of the time",
        location="train.py:36",
        evidence={"slowest_stage": "MapAndBatch(load at train.py:30)", "elsewhere": "x.py:3"},
    )
    record = replace(record, findings=[finding])
    page = open_report(write_html(record, program / "report.html")).page
    link = page.locator("#findings .where a.loc")
    assert link.count() == 1 and link.inner_text() == "train.py:36"
    href = link.get_attribute("href") or ""
    target = urlparse(href)
    assert target.scheme == "file" and target.fragment == "L36"
    assert unquote(target.path) == str((program / "train.py").resolve())
    box = link.bounding_box()
    assert box is not None and box["height"] < 30  # on one line
    # the evidence's locations too; one whose file is not here is said, not linked
    evidence = page.locator("#findings ul.evidence-text")
    assert evidence.locator("a.loc", has_text="train.py:30").count() == 1
    assert evidence.locator("a.loc", has_text="x.py:3").count() == 0
    assert evidence.locator("span.loc", has_text="x.py:3").count() == 1
    link.click()  # a file:// page opened from a file:// page: the source, at its line
    page.wait_for_url(href)
    assert "import tensorflow as tf" in page.inner_text("body")


def test_a_path_breaks_only_after_a_slash_and_a_number_keeps_its_unit(program):
    html = str(
        nowrap_locations(
            "profiler capture runs/2026_11_27/plugins/vm.xplane.pb, every 86.5 ms, 3 steps, "
            "5 MB/s, input/output"
        )
    )
    assert '<span class="path">runs/<wbr>2026_11_27/<wbr>plugins/<wbr>vm.xplane.pb</span>' in html
    assert "86.5\xa0ms" in html and "5\xa0MB/s" in html and "3 steps" in html
    assert "input/output" in html  # words with one slash are no path
