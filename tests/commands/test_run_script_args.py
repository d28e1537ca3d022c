"""``gpuwhy run SCRIPT ARGS``: everything after SCRIPT is the script's, as with
``python SCRIPT ARGS`` (real subprocesses, a script that needs no TensorFlow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW_ARGS = "import sys\nprint(sys.argv[1:])\n"


def run_script(tmp_path: Path, *script_args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "show_args.py"
    script.write_text(SHOW_ARGS)
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--no-audit", str(script), *script_args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.parametrize(
    "script_args",
    [
        ("--json", "out.json"),  # gpuwhy's own options, after SCRIPT: the script's
        ("--capture", "3", "--capture-dir", "x"),
        ("--fail-on", "high", "-v"),
        ("--raise-after-training",),
    ],
    ids=lambda a: " ".join(a),
)
def test_the_scripts_arguments_reach_the_script(tmp_path, script_args):
    result = run_script(tmp_path, *script_args)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{list(script_args)}\n"
    assert not (tmp_path / "out.json").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "script_args",
    [("--out", "results"), ("--fail",), ("--metrics",)],
    ids=lambda a: " ".join(a),
)
def test_a_script_argument_that_abbreviates_gpuwhys_options_reaches_the_script(
    tmp_path, script_args
):
    result = run_script(tmp_path, *script_args)
    assert "ambiguous option" not in result.stderr, result.stderr.splitlines()[-1]
    assert result.returncode == 0
    assert result.stdout == f"{list(script_args)}\n"
