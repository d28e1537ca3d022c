"""One variant's run: a fresh copy of the program's folder, the edits made there, a
bounded `gpuwhy run` in a child, stopped at its time limit if it does not end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuwhy.trial.source_edits import Edit
from gpuwhy.trial.variant_runs import run_variant
from gpuwhy.trial.workspace import make


def test_the_copy_mirrors_the_folder_and_writes_stay_in_it(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "big.bin").write_bytes(b"\0" * (5 << 20))
    (project / "helper.py").write_text("X = 1\n")
    script = project / "train.py"
    script.write_text("import helper\nopen('out.txt', 'w').write(str(helper.X))\nprint('done')\n")
    monkeypatch.chdir(project)
    parent = project / "runs"  # gpuwhy's own folder inside the tree: never copied into it
    parent.mkdir()
    ws = make(str(script), str(project), str(parent))
    assert ws.root == str(tmp_path)  # one level above: ../data resolves in the copy
    copy = Path(ws.mapped(str(project)))
    assert (copy / "helper.py").read_text() == "X = 1\n" and not (copy / "helper.py").is_symlink()
    assert (copy / "data" / "big.bin").is_symlink()  # large data is linked, not copied
    assert not (copy / "runs").exists()
    ws.write_edits([Edit(str(project / "helper.py"), 1, 4, 1, 5, "2")])
    assert (copy / "helper.py").read_text() == "X = 2\n"
    assert (project / "helper.py").read_text() == "X = 1\n"
    subprocess.run(
        [sys.executable, str(copy / "train.py")], cwd=copy, check=True, capture_output=True
    )
    assert (copy / "out.txt").read_text() == "2" and not (project / "out.txt").exists()


def test_an_edit_under_a_linked_folder_never_writes_through_the_link(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "lib").mkdir()
    (project / "lib" / "model.py").write_text("SIZE = 1\n")  # a sibling: linked in the copy
    script = project / "src" / "train.py"
    script.write_text("print(1)\n")
    monkeypatch.chdir(project / "src")
    parent = tmp_path / "runs"
    parent.mkdir()
    ws = make(str(script), str(project / "src"), str(parent))
    linked = Path(ws.mapped(str(project / "lib")))
    assert linked.is_symlink()
    ws.write_edits([Edit(str(project / "lib" / "model.py"), 1, 7, 1, 8, "2")])
    assert (project / "lib" / "model.py").read_text() == "SIZE = 1\n"  # the user's, as it was
    assert not linked.is_symlink() and (linked / "model.py").read_text() == "SIZE = 2\n"


def test_crlf_line_endings_are_kept(tmp_path, monkeypatch):
    script = tmp_path / "w.py"
    script.write_bytes(b"x = 1\r\ny = 2\r\n")
    monkeypatch.chdir(tmp_path)
    parent = tmp_path / "runs"
    parent.mkdir()
    ws = make(str(script), str(tmp_path), str(parent))
    ws.write_edits([Edit(str(script), 2, 4, 2, 5, "3")])
    assert Path(ws.mapped(str(script))).read_bytes() == b"x = 1\r\ny = 3\r\n"


def test_a_variant_that_never_ends_is_stopped_at_its_limit(tmp_path, monkeypatch):
    script = tmp_path / "hang.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(600)\n")
    monkeypatch.chdir(tmp_path)
    parent = tmp_path / "runs"
    parent.mkdir()
    run = run_variant("hang", str(script), [], [], parent=str(parent), bound_s=300, limit_s=8)
    assert run.timed_out and run.status is None
    assert "stopped" in (run.error or "")
    assert run.seconds < 40


def test_a_bounded_run_stops_the_program_and_reports_it(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(
        "import time\ntry:\n    for i in range(600):\n        time.sleep(0.05)\n"
        "except Exception:\n    print('swallowed')\nprint('after the loop')\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--stop-after",
            "1.5",
            "--json",
            "r.json",
            "long.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "swallowed" not in done.stdout and "after the loop" not in done.stdout
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["program"]["ended"] == "stopped" and 1.4 < record["program"]["seconds"] < 10
    assert "stopped at its time bound (run --stop-after, fix --bound)" in done.stderr
    os.remove(tmp_path / "r.json")
