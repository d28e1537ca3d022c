"""How a command ends (gpuwhy/commands/reporting.py): which report goes where, checked
before the script runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuwhy.commands.output_paths import Output
from gpuwhy.commands.reporting import _write_rendered
from gpuwhy.facts import Facts
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from tests.report import builders as rb


def test_a_web_page_format_is_refused_on_a_terminal_before_the_script_runs(tmp_path):
    import pty

    (tmp_path / "train.py").write_text("print('ran')\n")
    parent, child = pty.openpty()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpuwhy", "run", "-f", "html", "train.py"],
            stdout=subprocess.PIPE,
            stderr=child,
            cwd=tmp_path,
            timeout=120,
        )
        os.close(child)
        child = -1
        err = b""
        try:
            while chunk := os.read(parent, 4096):
                err += chunk
        except OSError:  # the terminal closed
            pass
    finally:
        if child >= 0:
            os.close(child)
        os.close(parent)
    assert out.returncode == 2 and out.stdout == b""  # the script did not run
    assert b"-f html is meant for a file, not a terminal" in err
    piped = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "-f", "html", "train.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert piped.returncode == 0 and piped.stdout == "ran\n"
    assert "<!DOCTYPE html>" in piped.stderr  # redirected: the page, as asked


def test_a_page_on_stdout_is_the_page_in_the_html_file(tmp_path):
    """``-f html`` on stdout and ``--html`` write the page the same way: in pieces, as
    UTF-8, never held whole (gpuwhy/report/run/html.py)."""
    (tmp_path / "run.json").write_text(rb.watched_run().to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", "run.json", "-f", "html", "--html", "r.html"],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # high findings
    assert proc.stdout.startswith(b"<!DOCTYPE html>")
    assert proc.stdout == (tmp_path / "r.html").read_bytes()


def test_a_report_that_fails_half_way_leaves_no_file_behind(tmp_path):
    class HalfWay(Renderer):  # a renderer (a plugin's, say) with a bug past its first bytes
        name, file_extension = "half-way", "txt"

        def write(self, record, out):
            out.write(b"the first half")
            raise RuntimeError("a bug in the second half")

    path = tmp_path / "report.txt"
    with pytest.raises(RuntimeError):
        _write_rendered(HalfWay(), Record.diagnose("check", Facts()), Output("-o", "r", str(path)))
    assert not path.exists()
