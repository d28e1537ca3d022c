"""The CI example (examples/ci/, docs/ci.md) as a CI job runs it: the gate script,
unchanged, called as the GitHub and GitLab configs call it, in a project of its own (no
git) with a small real TensorFlow training script; its baseline recorded by the script's
own --record-baseline. Then the same program unchanged passes, and two planted
regressions fail it with the line that says why: a step twice as long, and a new
finding.

The training loop is paced, a step every 40 ms (a sleep to the next tick, then a tiny
model's step): a CPU busy with other jobs moves a compute-bound step, and even a plain
sleep, by more than 5% between two runs (docs/ci.md shows it), a paced loop's mean step
not at all; the gate is what is tested here, not this machine's quiet. The pace starts
after the first call, which traces: paced from before it, the steps after the warm-up
caught up on the tracing (0.5-1 s on a loaded machine) with steps of no sleep, and the
mean step kept after warm-up fell below the period by an amount the load set (a step
twice as long read 2.21x in one CI run). The sleep comes before the step, not after it:
TF's first call after a sleep pays its threads' wake-up (2 ms on these machines), which
in next() made a 5% input wait, input.bound's threshold, there in one run and not in the
next (a new finding to the gate). The target is 4,096 values wide: float64 on a tensor
of a few values a row (a loss of one output) is low, a kernel launch's work on any GPU;
on 4,096 a row it is the medium finding the gate must name. The gate runs the script
twice a side here (GPUWHY_RUNS=2; the configs' 3 cost a third more), and once a side in
one test of its own."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ci"
GATE = "examples/ci/gpuwhy_gate.sh"  # as both CI configs call it
OUT = "gpuwhy-out"  # the script's default, which the configs' artifacts name

TRAIN = """\
import os
import time

import numpy as np
import tensorflow as tf

PERIOD_S = float(os.environ.get("STEP_PERIOD_MS", "40")) / 1000  # regression: 80
LOSS_DTYPE = os.environ.get("LOSS_DTYPE", "float32")  # regression: float64

x = np.random.default_rng(0).normal(size=(100 * 32, 16)).astype("float32")
y = np.repeat(x.sum(axis=1, keepdims=True), 4096, axis=1)  # a wide target
dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).prefetch(2)
layers = [tf.keras.layers.Dense(32, activation="relu") for _ in range(24)]
model = tf.keras.Sequential([tf.keras.Input(shape=(16,)), *layers, tf.keras.layers.Dense(4096)])
optimizer = tf.keras.optimizers.SGD(0.01)


@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        error = tf.cast(model(xb) - yb, LOSS_DTYPE)
        loss = tf.reduce_mean(tf.square(error))
    variables = model.trainable_variables
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))  # @gradient


next_step = None
for xb, yb in dataset:
    if next_step is not None:  # a step every PERIOD_S: late ones catch up
        next_step += PERIOD_S
        time.sleep(max(0.0, next_step - time.perf_counter()))  # before the step: next()
    train_step(xb, yb)  # follows it at once
    if next_step is None:  # the first call traces: the pace starts after it
        next_step = time.perf_counter()
"""


RUNS = "2"


def gate(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``sh examples/ci/gpuwhy_gate.sh`` in ``project``, with the configs' settings (the
    script's defaults; RUNS runs a side) and ``gpuwhy`` found on PATH, as a CI job finds
    it."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        ["sh", GATE, *args],
        cwd=project,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PATH": path,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "GPUWHY_RUNS": RUNS,
            **env,
        },
        timeout=600,
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with the example's gate script, its training script where the gate
    looks for it (examples/ci/train_short.py), and a baseline it recorded itself."""
    root = tmp_path_factory.mktemp("project")
    (root / "examples" / "ci").mkdir(parents=True)
    shutil.copy(EXAMPLE / "gpuwhy_gate.sh", root / GATE)
    (root / "examples" / "ci" / "train_short.py").write_text(TRAIN)
    recorded = gate(root, "--record-baseline")
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert (
        "baseline written to examples/ci/gpuwhy-baseline-1.json ... -2.json: commit them"
        in recorded.stderr
    )
    for i in (1, 2):
        baseline = json.loads((root / f"examples/ci/gpuwhy-baseline-{i}.json").read_text())
        assert baseline["projection"]["gpu"] == "T4"  # projected onto the configs' --target
    return root


def outputs(project: Path) -> tuple[dict, str]:
    return (
        json.loads((project / OUT / "diff.json").read_text()),
        (project / OUT / "gate.txt").read_text(),
    )


def test_the_unchanged_program_passes_and_writes_every_report(project):
    result = gate(project)
    comparison, summary = outputs(project)
    assert result.returncode == 0, summary + result.stderr[-3000:]
    assert comparison["step_time"]["called"] != "slower", comparison["verdict"]
    crossed = [x for x in result.stderr.splitlines() if x.startswith("gpuwhy: gate:")]
    notes = ("gpuwhy: gate: note: step:+5%: these runs cannot", "gpuwhy: gate: note: new:medium")
    assert all(x.startswith(notes) for x in crossed)
    assert summary.splitlines()[-1] == (
        "gpuwhy gate: passed (gpuwhy run exit 0, gpuwhy diff exit 0)"
    )
    assert summary.splitlines()[-2] == comparison["verdict"]
    assert comparison["verdict"] in result.stdout  # the diff's report is in the log
    for name in _artifacts():
        assert (project / OUT / name).stat().st_size > 0, name
    current = json.loads((project / OUT / "current.json").read_text())
    assert current["projection"]["gpu"] == "T4"
    assert current == json.loads((project / OUT / "current-2.json").read_text())  # the last
    assert comparison["before"]["runs"] == comparison["after"]["runs"] == 2
    assert comparison["spread"] == "between runs"
    assert 'failures="0"' in (project / OUT / "gate.junit.xml").read_text()


def test_one_run_a_side_is_still_a_gate(project):
    single = {"GPUWHY_RUNS": "1", "GPUWHY_BASELINE": "examples/ci/single.json"}
    missing = gate(project, **single)
    assert missing.returncode == 2
    assert "no baseline record at examples/ci/single.json" in missing.stderr
    assert gate(project, "--record-baseline", **single).returncode == 0
    result = gate(project, **single)
    comparison, summary = outputs(project)
    assert result.returncode == 0, summary + result.stderr[-3000:]
    assert comparison["before"]["runs"] == comparison["after"]["runs"] == 1
    assert any(n.startswith("one run a side") for n in comparison["notes"])
    assert not (project / OUT / "current-1.json").exists()
    # a calibration of the three unchanged runs recorded so far, judged against
    records = ["examples/ci/gpuwhy-baseline-1.json", "examples/ci/gpuwhy-baseline-2.json"]
    calibrated = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "diff", "--calibrate", "-f", "json", "-o"]
        + ["examples/ci/noise.json", *records, "examples/ci/single.json"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert calibrated.returncode == 0, calibrated.stderr
    result = gate(project, **single, GPUWHY_NOISE="examples/ci/noise.json")
    comparison, summary = outputs(project)
    assert result.returncode == 0, summary + result.stderr[-3000:]
    assert comparison["spread"] == "between runs"
    assert any(
        "as the calibration examples/ci/noise.json measured it" in n for n in comparison["notes"]
    )


def test_a_step_twice_as_long_fails_the_gate_and_says_so(project):
    result = gate(project, STEP_PERIOD_MS="80")
    comparison, summary = outputs(project)
    assert result.returncode == 1, summary + result.stderr[-3000:]
    assert comparison["step_time"]["called"] == "slower"
    assert comparison["verdict"].startswith("AFTER is ")
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("gpuwhy: gate:")]
    assert re.fullmatch(
        r"gpuwhy: gate: step:\+5%: the step time is \d+\.\d% slower "
        r"\([+-]\d+\.\d% to \+\d+\.\d%, 95%\)",
        line,
    ), line
    assert 1.8 < comparison["step_time"]["estimate"] < 2.2
    assert summary.splitlines()[0] == line
    assert summary.splitlines()[-1] == (
        "gpuwhy gate: FAILED (gpuwhy run exit 0, gpuwhy diff exit 1)"
    )
    assert (project / OUT / "report.html").stat().st_size > 0  # both reports written
    junit = (project / OUT / "gate.junit.xml").read_text()
    assert 'failures="1"' in junit and "step:+5%: the step time is" in junit


def test_a_new_medium_finding_fails_the_gate_naming_it_at_its_line(project):
    result = gate(project, LOSS_DTYPE="float64")
    comparison, summary = outputs(project)
    assert result.returncode == 1, summary + result.stderr[-3000:]
    where = f"examples/ci/train_short.py:{_line_of('# @gradient')}"
    new = [x for x in result.stderr.splitlines() if x.startswith("gpuwhy: gate: new:medium")]
    assert any(
        x.startswith(f"gpuwhy: gate: new:medium: new medium placement.float64 at {where}: ")
        for x in new
    ), result.stderr[-3000:]
    assert any(
        f["id"] == "placement.float64" and f["change"] == "new" for f in comparison["findings"]
    )


def test_the_configs_run_the_gate_script_with_its_own_settings_and_keep_its_reports():
    """Both configs call the script as the tests above do, set only settings it reads (to
    its defaults), and keep files it writes."""
    script = (EXAMPLE / "gpuwhy_gate.sh").read_text()
    defaults = dict(re.findall(r"\$\{(GPUWHY_[A-Z_]+):?-([^}]*)\}", script))
    for name in ("github-actions.yml", "gitlab-ci.yml"):
        text = (EXAMPLE / name).read_text()
        assert f"sh {GATE}\n" in text and f"sh {GATE} --record-baseline\n" in text, name
        settings = dict(
            re.findall(r"^  (GPUWHY_[A-Z_]+): \"?([^\"\n#]*?)\"?\s*(?:#.*)?$", text, re.M)
        )
        assert settings == defaults, name
        kept = set(re.findall(r"(?:gpuwhy-out|\$\{\{ env\.GPUWHY_OUT \}\})/([\w.]+)", text))
        assert kept and kept <= set(_artifacts()) | {"gate.junit.xml"}, (name, kept)


def test_the_configs_are_yaml_of_the_shape_each_ci_system_reads():
    yaml = pytest.importorskip("yaml")  # not a dependency of the project
    github = yaml.safe_load((EXAMPLE / "github-actions.yml").read_text())
    triggers = github.get("on", github.get(True))  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"pull_request", "push", "workflow_dispatch"}
    steps = {s.get("name", s.get("uses")): s for s in github["jobs"]["gate"]["steps"]}
    assert steps["gpuwhy gate"]["run"] == f"sh {GATE}"
    assert steps["Keep the reports"]["if"] == "${{ always() }}"
    gitlab = yaml.safe_load((EXAMPLE / "gitlab-ci.yml").read_text())
    job = gitlab["gpuwhy-gate"]
    assert job["script"] == [f"sh {GATE}"] and job["artifacts"]["when"] == "always"
    assert job["artifacts"]["reports"]["junit"] == f"{OUT}/gate.junit.xml"


def test_the_github_workflow_keeps_the_sarif_upload_ready_in_a_comment():
    text = (EXAMPLE / "github-actions.yml").read_text()
    assert '#   run: gpuwhy report "$GPUWHY_OUT/current.json" -f sarif -o gpuwhy.sarif' in text
    assert "#   uses: github/codeql-action/upload-sarif@v3" in text


def _artifacts() -> list[str]:
    return ["current.json", "report.html", "diff.json", "diff.txt", "gate.txt", "run.log"]


def _line_of(marker: str) -> int:
    (number,) = [n for n, text in enumerate(TRAIN.splitlines(), 1) if text.endswith(marker)]
    return number
