"""``-f sarif`` through the commands, in real subprocesses: ``gpuwhy run -o`` on a Keras
fit with a planted sequential map (its fix a replacement of the call as written),
``report`` of the saved record, ``audit`` of a SavedModel and ``merge`` of workers'
records. Every log is validated against the official SARIF 2.1.0 schema."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.commands.output_paths import is_gpuwhy_output
from gpuwhy.finding import Finding
from gpuwhy.report.run.sarif import LEVELS
from tests.builders_workers import save, worker_record
from tests.report.sarif_checks import apply_fix, sarif_errors
from tests.test_cli import SAVED_MODEL_SOURCE

ROOT = Path(__file__).resolve().parents[2]

# a sequential map: stateful random ops keep TF from parallelising augment
TRAIN = """\
import tensorflow as tf


def augment(image, label):
    for _ in range(12):
        image = tf.image.random_flip_left_right(image)
        image = tf.image.adjust_brightness(image, tf.random.uniform([], -0.1, 0.1))
    return image, label


images = tf.random.stateless_uniform((1024, 32, 32, 3), seed=(1, 2))
labels = tf.zeros((1024,), tf.int64)
dataset = tf.data.Dataset.from_tensor_slices((images, labels))
dataset = dataset.map(augment).batch(32)
model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(),
                             tf.keras.layers.Dense(10)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(dataset, epochs=3, verbose=0)
print("trained")
"""
AUGMENT_LINE, MAP_LINE = 4, 14


def gpuwhy(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )


def valid(text: str) -> dict:
    log = json.loads(text)
    assert sarif_errors(log) == []
    return log


@pytest.fixture(scope="module")
def fit_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sarif-run")
    (folder / "train.py").write_text(TRAIN)
    result = gpuwhy(
        "run", "-f", "sarif", "-o", "out.sarif", "--json", "run.json", "train.py", cwd=folder
    )
    return folder, result


def test_run_writes_the_log_with_the_fix_on_the_map_s_line(fit_run):
    folder, result = fit_run
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout == "trained\n"  # the report went to -o, not stdout
    assert TRAIN.splitlines()[AUGMENT_LINE - 1].startswith("def augment(")
    assert TRAIN.splitlines()[MAP_LINE - 1] == "dataset = dataset.map(augment).batch(32)"
    log = valid((folder / "out.sarif").read_text())
    record = json.loads((folder / "run.json").read_text())
    finding = next(f for f in record["findings"] if f["id"] == "input.sequential-map")
    found = next(r for r in log["runs"][0]["results"] if r["ruleId"] == "input.sequential-map")
    assert found["level"] == LEVELS[finding["severity"]]
    assert found["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "train.py", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": MAP_LINE},
    }
    (fix,) = found["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["replacements"][0]["deletedRegion"] == {
        "startLine": MAP_LINE,
        "startColumn": 11,
        "endColumn": 31,
    }
    fixed = apply_fix(folder / "train.py", fix)
    assert fixed[MAP_LINE - 1] == (
        "dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32)"
    )
    ast.parse("\n".join(fixed))
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == folder.as_uri() + "/"
    assert log["runs"][0]["invocations"][0]["properties"]["exit_code"] == 0
    # the next run may write over it (a file of the user's beside the script it may not)
    assert is_gpuwhy_output(str(folder / "out.sarif"))


def test_report_of_the_saved_record_gives_the_same_log(fit_run):
    folder, _ = fit_run
    result = gpuwhy("report", "run.json", "-f", "sarif", cwd=folder)
    assert result.returncode in (0, 1), result.stderr  # 1: a high or medium finding
    assert result.stdout == (folder / "out.sarif").read_text()


def test_audit_of_a_saved_model(tmp_path):
    (tmp_path / "make_model.py").write_text(SAVED_MODEL_SOURCE)
    subprocess.run(
        [sys.executable, "make_model.py", "model"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    result = gpuwhy("audit", "model", "-f", "sarif", cwd=tmp_path)
    assert result.returncode == 1, result.stderr  # medium findings
    run = valid(result.stdout)["runs"][0]
    ids = [r["ruleId"] for r in run["results"]]
    assert {"placement.forced-cpu", "placement.no-gpu-kernel"} <= set(ids)
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == sorted(set(ids))
    forced = next(r for r in run["results"] if r["ruleId"] == "placement.forced-cpu")
    assert forced["level"] == "warning"
    assert "locations" not in forced  # a SavedModel keeps no source lines
    assert run["properties"]["command"] == "audit"


def test_merge_of_workers_records(tmp_path):
    bound = Finding(
        id="input.bound",
        severity="high",
        title="Steps wait for input 34% of the time",
        evidence={"input_wait_fraction": 0.34},
        fix="# train.py:31: in place of: ds.batch(32)\nds.batch(32).prefetch(tf.data.AUTOTUNE)",
        location="train.py:31",
    )
    for name in ("worker-0", "worker-1"):
        save(tmp_path / "runs", worker_record(name, findings=(bound,)))
    (tmp_path / "train.py").write_text("\n" * 30 + "ds = ds.batch(32)\n")
    result = gpuwhy("merge", "runs", "-f", "sarif", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    run = valid(result.stdout)["runs"][0]
    found = next(r for r in run["results"] if r["ruleId"] == "input.bound")
    assert found["message"]["text"] == "Steps wait for input 34% of the time (on all 2 workers)"
    assert found["properties"]["evidence"]["workers"] == ["worker-0", "worker-1"]
    replacement = found["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement == {
        "deletedRegion": {"startLine": 31, "startColumn": 6, "endColumn": 18},
        "insertedContent": {"text": "ds.batch(32).prefetch(tf.data.AUTOTUNE)"},
    }
    assert run["properties"]["command"] == "merge"


def test_the_format_is_in_the_help():
    result = gpuwhy("report", "--help", cwd=ROOT)
    assert "sarif (the findings for code scanning, SARIF 2.1.0)" in " ".join(result.stdout.split())
