"""`gpuwhy diff` on records of real runs: the same program run three times a side
(`gpuwhy run --repeat 3`) does not fail the gate, a fixed input pipeline is faster with
the input named, a planted regression fails the gate with one line, several records a
side from a directory or a glob, --calibrate on the unchanged runs; its JSON validates;
bad input is one line, exit 2."""

import json
import subprocess
import textwrap

import jsonschema
import pytest

from gpuwhy.schema import published
from tests.test_run_tensorflow import GPUWHY, ROOT, run

# The step's time is mostly sleeps, which a busy host does not stretch as it stretches
# TF's own work: STEP_SLEEP in the loop's Python (4 ms; the regression makes it 8), and
# INPUT_SLEEP inside the input pipeline (a py_function per batch, no prefetch; 10 ms in
# the program before its input was fixed, none after).
PROGRAM = textwrap.dedent(
    """
    import os
    import time

    import numpy as np
    import tensorflow as tf

    INPUT_SLEEP = float(os.environ.get("INPUT_SLEEP", "0"))
    STEP_SLEEP = float(os.environ.get("STEP_SLEEP", "0.004"))
    RETRACE = os.environ.get("RETRACE") == "1"  # a new Python float each step: retraces
    EAGER_OPS = int(os.environ.get("EAGER_OPS", "0"))  # small eager ops after each step


    def load(batch):
        time.sleep(INPUT_SLEEP)
        return batch


    x = np.random.rand(4096, 16).astype("float32")
    dataset = (
        tf.data.Dataset.from_tensor_slices(x)
        .batch(8)
        .map(lambda b: tf.py_function(load, [b], tf.float32))
        .repeat()
    )


    @tf.function
    def train_step(batch, scale):
        return tf.reduce_sum(batch * scale)


    for step, batch in enumerate(dataset):
        if step >= 500:
            break
        scale = 2.0 + step * 1e-6 if RETRACE and step % 4 == 0 else tf.constant(2.0)
        loss = train_step(batch, scale)
        for _ in range(EAGER_OPS):
            loss = loss * 0.999 + 0.001
        time.sleep(STEP_SLEEP)
    """
)


def diff(*args):
    return subprocess.run(
        [GPUWHY, "diff", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff")
    script = folder / "train.py"
    script.write_text(PROGRAM)
    variants = {
        "slow_input": {"INPUT_SLEEP": "0.010"},
        "slower": {"STEP_SLEEP": "0.008"},
        "retracing": {"RETRACE": "1"},
        "eager": {"EAGER_OPS": "60"},
    }
    out: dict = {}
    # the unchanged program three times a side, interleaved (base, again, base, ...): a
    # side's runs back to back, a minute before the other's, read 11 % apart on a
    # shared host whose load changed between them (a full suite here)
    for side in ("base", "again"):
        out[f"{side}_runs"] = [folder / f"{side}-{i}.json" for i in (1, 2, 3)]
    for i in range(3):
        for side in ("base", "again"):
            result = run("--json", out[f"{side}_runs"][i], script)
            assert result.returncode == 0, result.stderr[-3000:]
    out["base"], out["again"] = out["base_runs"][0], out["again_runs"][0]
    # --repeat: its own runs, what test_repeat_... reads
    result = run("--repeat", "2", "--json", folder / "repeated.json", script)
    assert result.returncode == 0, result.stderr[-3000:]
    out["repeated_runs"] = [folder / f"repeated-{i}.json" for i in (1, 2)]
    out["repeated_stderr"] = result.stderr
    for name, env in variants.items():
        path = folder / f"{name}.json"
        result = run("--json", path, script, env_extra=env)
        assert result.returncode == 0, result.stderr[-3000:]
        out[name] = path
    return out


def test_repeat_writes_one_record_a_run_and_says_how_far_they_spread(records):
    assert all(path.exists() for path in records["repeated_runs"])
    said = records["repeated_stderr"]
    assert said.count("gpuwhy: run ") == 2 and "gpuwhy: 2 of 2 runs" in said
    assert "the runs' mean steps spread by " in said
    assert f"{records['repeated_runs'][1]}" in said
    base = str(records["repeated_runs"][0]).removesuffix("-1.json")
    assert f"compare: gpuwhy diff {base}-*.json -- OTHER-*.json" in said


def test_the_same_program_three_runs_a_side_does_not_fail_the_gate(records, tmp_path):
    out = tmp_path / "same.json"
    result = diff(
        "--fail-on", "step:+10%", "--json", out, *records["base_runs"], "--", *records["again_runs"]
    )
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    data = json.loads(out.read_text())
    jsonschema.Draft202012Validator(published.load_diff()).validate(data)
    assert data["spread"] == "between runs"
    assert data["before"]["runs"] == data["after"]["runs"] == 3
    step = data["step_time"]
    # a 95 % interval calls about 1 in 20 unchanged pairs of sides, and then by little
    if step["called"] == "same":
        assert first.startswith("• No measurable difference in step time"), first
        assert "with 3 runs a side this program can show changes of " in first
    else:
        assert abs(step["estimate"] - 1) < 0.10, first
    assert "\nFindings\n" in result.stdout


def test_a_directory_or_a_glob_is_a_side(records, tmp_path):
    side = tmp_path / "base"
    side.mkdir()
    for path in records["base_runs"]:
        (side / path.name).write_text(path.read_text())
    pattern = str(records["slower"]).replace("slower.json", "slowe*.json")
    out = tmp_path / "d.json"
    result = diff("--json", out, side, "--", pattern)
    data = json.loads(out.read_text())
    assert data["before"]["runs"] == 3 and data["after"]["runs"] == 1
    # twice the loop's sleep; with 3 and 1 runs (2 degrees of freedom) the interval is
    # as wide as the runs' spread on this machine, said with the change it could show
    assert data["step_time"]["estimate"] > 1.3, result.stdout
    assert "3 runs of BEFORE, 1 of AFTER" in result.stdout
    assert "1 run, each: every step" in result.stdout


def test_calibrate_on_unchanged_runs_says_which_gate_to_use(records, tmp_path):
    runs = [*records["base_runs"], *records["again_runs"]]
    result = diff("--calibrate", *runs)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("Unchanged runs of this program spread by "), first
    assert "use --fail-on step:+" in first and "\nRuns a side\n" in result.stdout
    as_json = diff("--calibrate", "-f", "json", *runs)
    data = json.loads(as_json.stdout)
    jsonschema.Draft202012Validator(published.load_calibration()).validate(data)
    assert data["runs"] == 6 and len(data["step_s"]) == 6
    three = next(r for r in data["by_runs"] if r["runs"] == 3)
    assert three["splits"] > 0 and data["fail_on"].startswith("step:+")
    # the calibration, kept, gives one run a side an interval that sees between runs
    calibration = tmp_path / "calibration.json"
    assert diff("--calibrate", "-f", "json", "-o", calibration, *runs).returncode == 0
    out = tmp_path / "one.json"
    one = diff("--noise", calibration, "--json", out, records["base"], records["slower"])
    compared = json.loads(out.read_text())
    assert compared["spread"] == "between runs", one.stdout
    assert compared["step_time"]["estimate"] > 1.3
    assert any(
        f"as the calibration {calibration} measured it (6 unchanged runs" in n
        for n in compared["notes"]
    )
    refused = diff("--calibrate", "--noise", calibration, *runs)
    assert refused.returncode == 2 and "it takes no --noise" in refused.stderr


def test_several_records_without_the_separator_are_refused(records):
    three = diff(*records["base_runs"])
    assert three.returncode == 2 and three.stderr.count("\n") == 1
    assert "several a side with -- between them" in three.stderr
    empty = diff(*records["base_runs"], "--")
    assert empty.returncode == 2 and "no AFTER records" in empty.stderr
    calibrate_two = diff("--calibrate", records["base"], "--", records["again"])
    assert calibrate_two.returncode == 2 and "no -- between sides" in calibrate_two.stderr
    few = diff("--calibrate", records["base"], records["again"])
    assert few.returncode == 2 and "--calibrate needs at least 3 records" in few.stderr


def test_a_fixed_input_pipeline_is_faster_and_the_input_is_named(records, tmp_path):
    out = tmp_path / "diff.json"
    result = diff(records["slow_input"], records["base"], "--json", out)
    assert result.returncode == 0, result.stderr
    first = result.stdout.splitlines()[0]
    # ✓, or • where a neighbour loaded the shared host in one run only (said in the line)
    assert first.startswith(("✓ AFTER is ", "• AFTER is ")), first
    assert "faster per step" in first and "waiting for input" in first
    data = json.loads(out.read_text())
    jsonschema.Draft202012Validator(published.load_diff()).validate(data)
    assert data["step_time"]["called"] == "faster"
    (input_part,) = [p for p in data["parts"] if p["part"] == "input"]
    assert input_part["called"] and input_part["delta_s"] < -0.003
    assert input_part["share"] > 0.5
    # waiting for input is gone, or (py_function's own cost stays) no longer high
    better = {f["id"] for f in data["findings"] if f["change"] in ("gone", "better")}
    assert "input.bound" in better


def test_a_planted_regression_fails_the_gate_with_one_line(records):
    result = diff(records["base"], records["slower"], "--fail-on", "step:+5%")
    first = result.stdout.splitlines()[0]
    assert first.startswith(("✗ AFTER is ", "• AFTER is ")), first
    assert "slower per step" in first
    # the part that grew is the Python between the calls (the loop's own sleep)
    assert "Python outside the calls (the loop itself)" in first
    (gate,) = [line for line in result.stderr.splitlines() if line.startswith("gpuwhy: gate:")]
    if "may be the machine's" in first:  # a neighbour loaded the host in one run only
        assert result.returncode == 0 and gate.startswith("gpuwhy: gate: step:+5% not judged")
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        assert gate.startswith("gpuwhy: gate: step:+5%: the step time is ")


def test_bad_input_is_one_line_and_exit_2(records, tmp_path):
    missing = diff(tmp_path / "nope.json", records["base"])
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "cannot read" in missing.stderr and "Traceback" not in missing.stderr
    not_json = tmp_path / "train.txt"
    not_json.write_text("hello")
    bad = diff(not_json, records["base"])
    assert bad.returncode == 2 and "is not valid JSON" in bad.stderr
    gate = diff(records["base"], records["again"], "--fail-on", "slower")
    assert gate.returncode == 2
    assert "--fail-on 'slower': expected step:+N%" in gate.stderr
    over = diff(records["base"], records["again"], "-o", records["again"])
    assert over.returncode == 2 and "Traceback" not in over.stderr
    nothing = diff(tmp_path / "none-*.json", records["base"])
    assert nothing.returncode == 2 and "no record matches this pattern" in nothing.stderr
    (tmp_path / "empty").mkdir()
    empty = diff(tmp_path / "empty", records["base"])
    assert empty.returncode == 2 and "a directory with no *.json records" in empty.stderr


def test_gpuwhy_diff_from_python_is_the_command_s_comparison(records, tmp_path):
    import gpuwhy
    from gpuwhy.report.diff.json_ import comparison_dict

    out = tmp_path / "diff.json"
    assert diff(records["base"], records["slower"], "--json", out).returncode in (0, 1)
    from_file = json.loads(out.read_text())
    in_python = comparison_dict(gpuwhy.diff(records["base"], gpuwhy.load(records["slower"])))
    # the same figures: the bootstrap is seeded, whichever way the records came in
    assert in_python["step_time"] == from_file["step_time"]
    assert in_python["verdict"] == from_file["verdict"]


@pytest.mark.parametrize(
    "variant, part",
    [
        ("retracing", "tracing and compiling tf.functions (the calls that traced)"),
        ("eager", "issuing eager ops (estimated from their count)"),
    ],
)
def test_the_part_of_the_step_that_changed_is_named(records, tmp_path, variant, part):
    out = tmp_path / "diff.json"
    result = diff(records["base"], records[variant], "--json", out)
    first = result.stdout.splitlines()[0]
    assert "slower per step" in first, first
    data = json.loads(out.read_text())
    (moved,) = [p for p in data["parts"] if p["label"] == part]
    assert moved["called"] and moved["delta_s"] > 0
    # the verdict names the part that moved most; eager ops are counted and their cost
    # estimated from the median gap between them, which a loaded host's longer gaps
    # exceed, the rest of their cost landing in the loop's own Python: there the verdict
    # names that, and the eager part is still called, above
    named = [part] + (["Python outside the calls (the loop itself)"] if variant == "eager" else [])
    assert any(f"; {label} " in first for label in named), first


def test_a_record_that_holds_no_run_is_refused_naming_it(records, tmp_path):
    from gpuwhy.facts import Facts
    from gpuwhy.record import Record

    check = Record(command="check", facts=Facts()).save(tmp_path / "check.json")
    refused = diff(check, records["base"])
    assert refused.returncode == 2
    assert f"{check} is a gpuwhy check record: diff compares the records of run" in refused.stderr
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    named = diff(records["base"], other)
    assert named.returncode == 2 and f"gpuwhy: error: {other}: " in named.stderr
