"""How a command ends (gpuwhy/commands/reporting.py): which report goes where, checked
before the script runs."""

from __future__ import annotations

import os
import subprocess
import sys


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
