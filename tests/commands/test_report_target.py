"""``gpuwhy report RUN.json --target GPU``: a saved run projected onto a GPU after it
ran, from what its record kept, through the real command line; a record of a run
watched with --target keeps its profiled steps for another GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuwhy.facts import Facts, ProgramFacts, TargetFacts, TracingFacts
from gpuwhy.record import NOT_PROFILED, Record
from tests.builders_tfdata import fit_steps
from tests.derived.test_stage_projection import BIG
from tests.projection.test_host import _profile, train_step

ROOT = Path(__file__).parents[2]


def gpuwhy(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _saved(tmp_path: Path, target: TargetFacts | None) -> Path:
    facts = Facts(
        program=ProgramFacts(command=("python3", "train.py")),
        placement=BIG,
        tracing=TracingFacts(functions=(train_step(),)),
        steps=fit_steps(),
        target=target,
    )
    return Record.diagnose("run", facts).save(tmp_path / "run.json")


def test_a_run_watched_without_target_is_projected_from_its_record(tmp_path):
    path = _saved(tmp_path, None)
    out = gpuwhy("report", path, "--target", "H100", "-f", "json")
    assert out.returncode in (0, 1), out.stderr
    record = json.loads(out.stdout)
    assert record["projection"]["gpu"] == "H100" and record["target"]["requested"] == "H100"
    assert any(NOT_PROFILED in note for note in record["projection"]["notes"])
    # the rules ran again on the projection: none of them is "not checked" for want of it
    assert "input.projected-bound" not in record["not_checked"]
    terminal = gpuwhy("report", path, "--target", "H100")
    assert "on an H100 (projected)" in terminal.stdout.splitlines()[0]
    # the file itself is left as it was
    assert json.loads(path.read_text())["projection"] is None


def test_another_gpu_keeps_the_profiled_steps_of_the_run(tmp_path):
    path = _saved(tmp_path, TargetFacts("A100", profile=_profile(0.0004)))
    record = json.loads(gpuwhy("report", path, "--target", "T4", "-f", "json").stdout)
    assert record["projection"]["gpu"] == "T4"
    assert record["projection"]["call_overhead_s"] == 0.0004  # the A100 run's profile
    assert record["target"]["profile"]["function"] == "train_step"


def test_an_unknown_gpu_is_a_one_line_error(tmp_path):
    out = gpuwhy("report", _saved(tmp_path, None), "--target", "Voodoo 5")
    assert out.returncode == 2
    assert out.stderr.startswith("gpuwhy: error: no GPU named 'Voodoo 5'")
    assert len(out.stderr.strip().splitlines()) == 1
