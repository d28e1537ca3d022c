"""A credential on the command line reaches the program and none of what gpuwhy writes
(issue #50, item 6): the record, the SARIF file, the HTML page, the terminal report,
``watch``'s recording, and a report of either read back. Real subprocesses, programs
that need no TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def gpuwhy(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=ENV,
    )


def test_run_masks_the_scripts_secret_arguments_in_every_output(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    outputs = ("--json", "out.json", "--html", "out.html", "-f", "sarif", "-o", "out.sarif")
    secrets = ("--api-key=SECRET123", "--hf-token", "SECRET456", "https://me:SECRET789@hub/x")
    result = gpuwhy(tmp_path, "run", "--no-audit", *outputs, str(script), *secrets)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{list(secrets)}\n"  # the script's sys.argv, unmasked
    written = {
        name: (tmp_path / name).read_text() for name in ("out.json", "out.html", "out.sarif")
    }
    for name, text in written.items():
        assert "SECRET" not in text, name
    assert (
        '"--api-key=***"' in written["out.json"] and '"https://me:***@hub/x"' in written["out.json"]
    )
    report = gpuwhy(tmp_path, "report", "out.json")
    assert "--api-key=*** --hf-token ***" in report.stdout, report.stdout
    assert "SECRET" not in report.stdout + report.stderr + result.stderr


def test_watch_masks_secrets_in_its_record_and_its_recording(tmp_path):
    program = "import os; print(os.environ['HF_TOKEN'])"
    command = ("env", "HF_TOKEN=SECRET123", sys.executable, "-c", program, "--token", "SECRET456")
    result = gpuwhy(tmp_path, "watch", "--json", "w.json", "--record", "r.jsonl", "--", *command)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "SECRET123\n"  # the program's environment, unmasked
    for name in ("w.json", "r.jsonl"):
        assert "SECRET" not in (tmp_path / name).read_text(), name
    assert "HF_TOKEN=***" in (tmp_path / "r.jsonl").read_text()
    replayed = gpuwhy(tmp_path, "report", "r.jsonl")
    assert replayed.returncode in (0, 1), replayed.stderr
    assert "HF_TOKEN=***" in replayed.stdout and "--token ***" in replayed.stdout
    assert "SECRET" not in replayed.stdout + result.stderr
