"""`gpuwhy` as a user runs it: real subprocesses, the real TensorFlow, this real machine."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.schema import validation_errors

GPUWHY = [str(Path(sys.executable).with_name("gpuwhy"))]
NO_GPU_HERE = not os.path.exists("/dev/nvidiactl")


def gpuwhy(*args, env=None, cmd=None):
    return subprocess.run(
        (cmd or GPUWHY) + list(args),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


@pytest.fixture(scope="module")
def check_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("check") / "check.json"
    result = gpuwhy("check", "--json", str(out))
    return result, json.loads(out.read_text()), out


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA driver")
def test_check_on_a_machine_without_driver_says_no_driver(check_run):
    result, record, _ = check_run
    assert result.returncode == 1, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("✗ No: TensorFlow cannot use a GPU here: no NVIDIA driver")
    (finding,) = [f for f in record["findings"] if f["id"] == "env.no-gpu"]
    assert finding["severity"] == "high"
    assert finding["evidence"]["causes"][0]["code"] == "no-driver"
    assert record["verdict"]["gpu_usable"] is False
    assert "\x1b[" not in result.stdout  # piped: no colour codes


def test_check_writes_a_valid_schema_1_record(check_run):
    _, record, _ = check_run
    assert record["schema"] == 1 and record["tool"]["name"] == "gpuwhy"
    assert record["command"] == "check"
    assert validation_errors(record) == []
    assert record["environment"]["tensorflow"]["version"].startswith("2.")


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA driver")
def test_hidden_gpus_and_a_wrong_cuda_major_on_the_loader_path(tmp_path, build_so):
    """Two real conditions at once, through `python -m gpuwhy`: CUDA_VISIBLE_DEVICES=-1,
    and only a CUDA 13 runtime on LD_LIBRARY_PATH for a CUDA 12 build."""
    lib = build_so(tmp_path / "cuda-13", "libcudart.so.13")
    out = tmp_path / "r.json"
    result = gpuwhy(
        "check",
        "--json",
        str(out),
        cmd=[sys.executable, "-m", "gpuwhy"],
        env={"CUDA_VISIBLE_DEVICES": "-1", "LD_LIBRARY_PATH": str(lib.parent)},
    )
    assert result.returncode == 1
    causes = {
        c["code"]: c for c in json.loads(out.read_text())["findings"][0]["evidence"]["causes"]
    }
    assert list(causes)[:2] == ["no-driver", "hidden-by-cuda-visible-devices"]
    assert f"found {lib} instead" in causes["missing-libraries"]["detail"]
    assert "CUDA_VISIBLE_DEVICES='-1' hides every GPU" in result.stdout


def test_check_with_an_interpreter_without_tensorflow(python_without_tensorflow):
    result = gpuwhy("check", "--python", python_without_tensorflow)
    assert result.returncode == 1
    assert "TensorFlow is not installed" in result.stdout.splitlines()[0]
    assert 'pip install "tensorflow[and-cuda]"' in result.stdout


def test_check_with_a_missing_interpreter_is_one_line_exit_2(tmp_path):
    result = gpuwhy("check", "--python", str(tmp_path / "python9"))
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "no Python interpreter" in result.stderr


def test_report_re_renders_a_saved_record(check_run):
    result, _, path = check_run
    again = gpuwhy("report", str(path))
    assert again.stdout.splitlines()[0] == result.stdout.splitlines()[0]
    rechecked = gpuwhy("report", str(path), "--recheck", "-f", "json")
    assert validation_errors(json.loads(rechecked.stdout)) == []


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not valid JSON"),
        ('{"schema": 2}', "upgrade gpuwhy"),
        ('{"hello": 1}', "not a gpuwhy run record"),
        ('{"schema": 1, "tool": {}}', "invalid run record"),
    ],
)
def test_report_refuses_bad_files_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = gpuwhy("report", str(path))
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_explain_prints_the_documentation():
    result = gpuwhy("explain", "env.no-gpu")
    assert result.returncode == 0
    for heading in ("## What it detects", "## Why is this slow?", "Use instead:"):
        assert heading in result.stdout


def test_explain_unknown_id_suggests_close_ones():
    result = gpuwhy("explain", "input.bund")
    assert result.returncode == 2 and "did you mean input.bound" in result.stderr


def test_explain_json_and_rules_json():
    doc = json.loads(gpuwhy("explain", "input.bound", "--format", "json").stdout)
    assert doc["status"] == "stable" and doc["options"]["high_at"] == 0.2
    rules = json.loads(gpuwhy("rules", "--format", "json").stdout)
    states = {r["id"]: r["status"] for r in rules}
    assert states["env.no-gpu"] == "stable" and states["input.sequential-map"] == "stable"


def test_unknown_format_is_a_usage_error(check_run):
    _, _, path = check_run
    result = gpuwhy("report", str(path), "-f", "yaml")
    assert result.returncode == 2 and "unknown format 'yaml'" in result.stderr


def test_ctrl_c_during_check_exits_130_and_leaves_no_child(fake_tensorflow, tmp_path):
    import signal
    import time

    pid_file = tmp_path / "child.pid"
    env = fake_tensorflow(
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    proc = subprocess.Popen(
        GPUWHY + ["check"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 60
    while not pid_file.exists() and time.time() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.strip() == "gpuwhy: error: interrupted"
    child = int(pid_file.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "/bin/ls"], "is not a text file"),
        (["check", "--timeout", "nan"], "--timeout must be a positive number"),
        (["report", "{record}", "-f", ":X"], "cannot load renderer"),
        (
            ["report", "{record}", "-f", "gpuwhy.report.base:Renderer"],
            "not a gpuwhy Renderer subclass",
        ),
    ],
)
def test_odd_input_gets_one_line_not_a_traceback(check_run, args, message):
    _, _, path = check_run
    result = gpuwhy(*[a.replace("{record}", str(path)) for a in args])
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_deeply_nested_json_is_refused_in_one_line(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    result = gpuwhy("report", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr


SAVED_MODEL_SOURCE = """
import sys
import tensorflow as tf

class Model(tf.Module):
    def __init__(self):
        self.w = tf.Variable(tf.ones([8, 4]))

    @tf.function(input_signature=[tf.TensorSpec([None, 8]), tf.TensorSpec([None], tf.string)])
    def serve(self, x, words):
        with tf.device("/CPU:0"):
            y = tf.exp(x)
        return {"y": tf.matmul(y, self.w), "n": tf.strings.length(words)}

model = Model()
tf.saved_model.save(model, sys.argv[1], signatures={"serving_default": model.serve})
"""


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    script = root / "make_model.py"
    script.write_text(SAVED_MODEL_SOURCE)
    subprocess.run(
        [sys.executable, str(script), str(root / "model")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return root / "model"


def test_audit_a_saved_model_predicts_cpu_ops_and_writes_a_valid_record(saved_model, tmp_path):
    out = tmp_path / "audit.json"
    result = gpuwhy("audit", str(saved_model), "--json", str(out))
    assert result.returncode == 1, result.stderr  # medium findings
    first = result.stdout.splitlines()[0]
    assert first.startswith("• Predicted for a GPU machine (none here):"), first
    record = json.loads(out.read_text())
    assert record["command"] == "audit" and validation_errors(record) == []
    ids = {f["id"] for f in record["findings"]}
    assert {"placement.forced-cpu", "placement.no-gpu-kernel"} <= ids
    groups = {(g["op"], g["reason"]) for g in record["placement"]["groups"]}
    assert ("Exp", "forced-cpu") in groups and ("StringLength", "no-gpu-kernel") in groups
    assert ("MatMul", "gpu") in groups
    # The per-op table and the copies are in the terminal report.
    assert "Placement (predicted for a GPU machine: no GPU here)" in result.stdout
    assert "StringLength" in result.stdout and "no-gpu-kernel" in result.stdout
    assert "Registered:" not in result.stderr  # the kernel registry's noise is kept off


def test_audit_verify_without_a_gpu_says_it_could_not(saved_model, tmp_path):
    if not NO_GPU_HERE:
        pytest.skip("this machine has an NVIDIA driver")
    out = tmp_path / "audit.json"
    gpuwhy("audit", str(saved_model), "--verify", "--json", str(out))
    check = json.loads(out.read_text())["placement"]["verification"]
    assert check["ran"] is False and "no GPU on this machine" in check["reason"]


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: p / "missing", "no such file or directory"),
        (lambda p: p, "not a SavedModel"),
        (
            lambda p: (p / "notes.txt").write_text("x") and p / "notes.txt",
            "not a SavedModel directory or a .keras",
        ),
    ],
)
def test_audit_odd_paths_get_one_line(tmp_path, make, message):
    result = gpuwhy("audit", str(make(tmp_path)))
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("gpuwhy: error:") and message in last
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args, said",
    [
        (["run", "--repeat", "abc", "x.py"], "argument --repeat: invalid int value: 'abc'"),
        (["diff", "--"], "the following arguments are required: RECORD"),
        (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
    ],
)
def test_a_command_line_argparse_refuses_is_one_line_too(args, said):
    result = gpuwhy(*args)
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"gpuwhy: error: {said}") and line.endswith("lists the options)")


@pytest.mark.parametrize(
    "option, suffix", [("--json", ".json"), ("--html", ".html"), ("-o", ".txt")]
)
def test_an_option_that_took_the_script_as_its_path_is_said_so(option, suffix):
    """`gpuwhy run --json train.py` (a user expecting JSON on stdout): --json takes the
    script as the file to write and SCRIPT is missing; argparse's "the following
    arguments are required: SCRIPT, ARGS" did not say why."""
    result = gpuwhy("run", option, "train.py")
    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line == (
        f"gpuwhy: error: {option} takes a PATH and took the script train.py as it: give it "
        f"a file to write (gpuwhy run {option} out{suffix} train.py)"
    )
