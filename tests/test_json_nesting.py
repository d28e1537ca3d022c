"""A file nested too deeply to read is refused where it is read, in one line that names
it (issue #50, item 4), by every command that reads records: ``report`` (a record or a
recording), ``diff`` (and its ``--noise``), ``merge``. It was "internal error:
RecursionError", from the parser (thousands of levels) or from the schema's validation
and the renderers (hundreds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.cli import EXIT_ERROR, main
from gpuwhy.json_input import MAX_DEPTH, TooDeep, deeper_than, loads
from gpuwhy.record import Record, RecordError
from tests.report import builders as rb

ROOT = Path(__file__).resolve().parents[1]
DEPTHS = (MAX_DEPTH + 1, 500, 990, 5000, 100_000)


def nested(depth: int, kind: str = "list") -> str:
    """JSON text of ``depth`` arrays (or objects) one inside the other."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def record_with_evidence(levels: int) -> str:
    """A valid record whose first finding's evidence holds ``levels`` nested arrays (the
    record's own nesting, 4 levels, comes on top)."""
    data = rb.watched_run().to_dict()
    data["findings"][0]["evidence"]["deep"] = "@@"
    return json.dumps(data).replace('"@@"', nested(levels))


def refused(capsys, argv: list[str], path: Path) -> str:
    """``gpuwhy ARGV`` exits 2 with one line naming ``path`` as nested too deeply."""
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err, err
    assert err == f"gpuwhy: error: {path} is nested too deeply to be read " + (
        f"(arrays and objects more than {MAX_DEPTH} levels deep)\n"
    )
    return err


@pytest.mark.parametrize("kind", ["list", "object"])
@pytest.mark.parametrize("depth", DEPTHS)
def test_report_and_diff_refuse_a_deeply_nested_file_in_one_line(tmp_path, capsys, depth, kind):
    path = tmp_path / "deep.json"
    path.write_text(nested(depth, kind))
    good = tmp_path / "good.json"
    rb.watched_run().save(good)
    refused(capsys, ["report", str(path)], path)
    refused(capsys, ["diff", str(good), str(path)], path)


@pytest.mark.parametrize("levels", [MAX_DEPTH, 900])
def test_a_valid_record_with_deeply_nested_evidence_is_refused_by_every_reader(
    tmp_path, capsys, levels
):
    path = tmp_path / "run.json"
    path.write_text(record_with_evidence(levels))
    with pytest.raises(RecordError, match="nested too deeply"):
        Record.load(path)
    for fmt in ("terminal", "json", "html", "sarif"):
        refused(capsys, ["report", "-f", fmt, str(path)], path)
    merged = tmp_path / "workers"
    merged.mkdir()
    rb.watched_run().save(merged / "worker-0.json")
    (merged / "worker-1.json").write_text(path.read_text())
    assert main(["merge", str(merged)]) in (0, 1)
    out, err = capsys.readouterr()
    assert "internal error" not in err
    assert f"worker-1: unreadable (nested more than {MAX_DEPTH} levels deep)" in out


def test_a_record_at_the_bound_renders_in_every_format(tmp_path, capsys):
    """Nothing gpuwhy does with a record that passes the bound recurses too deep."""
    path = tmp_path / "run.json"
    path.write_text(record_with_evidence(MAX_DEPTH - 4))
    for fmt in ("terminal", "json", "html", "sarif"):
        assert main(["report", "-f", fmt, "-o", str(tmp_path / f"out.{fmt}"), str(path)]) in (0, 1)
        assert "error" not in capsys.readouterr().err
    assert main(["report", "--recheck", "-f", "json", str(path)]) in (0, 1)
    assert "error" not in capsys.readouterr().err


def test_a_recording_with_a_deeply_nested_line_names_the_line(tmp_path, capsys):
    lines = (ROOT / "tests/data/nvml/constructed_a100_healthy_link.jsonl").read_text()
    lines = lines.splitlines()
    path = tmp_path / "r.jsonl"
    deep = '{"kind": "tick", "gpus": ' + nested(5000) + "}"
    path.write_text("\n".join([*lines[:2], deep, *lines[2:]]) + "\n")
    assert main(["report", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"gpuwhy: error: {path}: line 3 is nested too deeply")
    assert err.count("\n") == 1
    path.write_text(nested(5000) + "\n" + "\n".join(lines) + "\n")  # the header line itself
    refused(capsys, ["report", str(path)], path)


def test_a_deeply_nested_calibration_is_one_line(tmp_path, capsys):
    good = tmp_path / "good.json"
    rb.watched_run().save(good)
    noise = tmp_path / "noise.json"
    noise.write_text(nested(5000))
    refused(capsys, ["diff", str(good), str(good), "--noise", str(noise)], noise)


def test_the_cli_says_it_without_a_traceback(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(nested(100_000))
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == EXIT_ERROR
    assert done.stderr == f"gpuwhy: error: {path} is nested too deeply to be read " + (
        f"(arrays and objects more than {MAX_DEPTH} levels deep)\n"
    )


def test_loads_bounds_the_depth_and_parses_the_rest():
    assert loads(nested(MAX_DEPTH), "x") == json.loads(nested(MAX_DEPTH))
    assert loads('{"a": [1, {"b": null}]}', "x") == {"a": [1, {"b": None}]}
    for depth in (MAX_DEPTH + 1, 100_000):
        with pytest.raises(TooDeep, match="^f.json is nested too deeply"):
            loads(nested(depth), "f.json")
    with pytest.raises(ValueError):
        loads("[1,", "f.json")
    assert not deeper_than(7, 0) and not deeper_than([], 1) and deeper_than([[]], 1)
