"""``gpuwhy report CAPTURE`` as a user runs it (real subprocesses) on the committed XProf
captures (tests/data/xplane/, SOURCE.md there): the report of an input-bound H100 capture,
its JSON record against the published schema, ``--run``, the Keras TensorBoard callback's
log dir, and what is not a capture refused in one line."""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.schema import validation_errors
from tests.collect.capture import variants

ROOT = Path(__file__).resolve().parents[2]
XPLANE = ROOT / "tests" / "data" / "xplane"
H100 = XPLANE / "h100_slow_input"
TF_CPU = XPLANE / "tf_cpu"
EXIT_OK, EXIT_PROBLEM, EXIT_ERROR = 0, 1, 2  # gpuwhy/commands/reporting.py


def gpuwhy(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if k != "GPUWHY_DEBUG"},
            "PYTHONPATH": str(ROOT),
        },
    )


def report_json(*args: str | Path) -> tuple[subprocess.CompletedProcess, dict]:
    result = gpuwhy("report", *args, "-f", "json")
    assert result.returncode in (EXIT_OK, EXIT_PROBLEM), result.stderr
    return result, json.loads(result.stdout)


def expected_status(record: dict) -> int:
    """exit_status's contract for every record but check's: 1 when a high or medium
    finding exists, else 0."""
    serious = any(f["severity"] in ("high", "medium") for f in record["findings"])
    return EXIT_PROBLEM if serious else EXIT_OK


@pytest.fixture(scope="module")
def h100_json() -> tuple[subprocess.CompletedProcess, dict]:
    return report_json(H100)


@pytest.fixture(scope="module")
def h100_text() -> subprocess.CompletedProcess:
    return gpuwhy("report", H100)


def test_the_h100_capture_reports_the_verdict_then_the_capture_block(h100_text, h100_json):
    _, record = h100_json
    assert h100_text.returncode == expected_status(record), h100_text.stderr
    assert h100_text.stderr == ""
    lines = h100_text.stdout.splitlines()
    assert lines[0].endswith(record["verdict"]["text"])  # the verdict first, as for every record
    assert "Capture (every figure measured by the profiler)" in lines
    rows = {line.split("  ")[0]: line for line in lines if "  " in line}
    assert "vm.xplane.pb (JAX's profiler, 511.3 ms traced" in rows["Capture"]
    assert rows["Captured steps"].startswith(
        "Captured steps    20 from the GPU's repeating work (jit_train_step)"
    )
    assert "GPU busy 3.2% of them" in rows["Captured steps"]
    device = rows["/device:GPU:0 (captured)"]
    assert "NVIDIA H100 80GB HBM3: 765 kernels on 4 streams" in device
    assert "on tensor cores (tf32)" in device
    assert "host→GPU 48 (63.0 MiB" in rows["Copies (captured)"]
    idle = rows["GPU idle in captured steps"]
    assert re.search(r"the host was in input (99|100)%", idle), idle
    assert idle.endswith("first Python frame: slow (xplane_capture.py:14)")


def test_the_h100_capture_as_json_is_a_valid_capture_record(h100_json):
    result, record = h100_json
    assert result.returncode == expected_status(record)
    assert validation_errors(record) == []
    assert record["command"] == "capture"
    capture = record["capture"]
    assert capture["producer"] == "jax"
    assert capture["steps_from"] == "device pattern" and capture["step_count"] == 20
    (device,) = capture["devices"]
    assert device["model"] == "NVIDIA H100 80GB HBM3"
    copies = {c["direction"]: c for c in device["copies"]}
    assert copies["host_to_device"]["count"] == 48
    assert copies["host_to_device"]["bytes"] == 66065688
    assert copies["host_to_device"]["pinned"] == 48
    assert capture["python"][0]["function"] == "slow"
    assert capture["python"][0]["line"] == 14


def test_an_input_bound_capture_is_not_reported_as_without_problems(h100_json):
    result, record = h100_json
    assert record["capture"]["idle"][0]["activity"] == "input"
    assert record["verdict"]["text"] != "No problems found."
    assert result.returncode == EXIT_PROBLEM


# -- Keras' fit on NumPy arrays, on JAX without a GPU ----------------------------------------------
JAX_ARRAYS = XPLANE / "jax_cpu" / "keras_fit_numpy_arrays"
ARRAYS_SCRIPT = XPLANE / "jax_cpu_capture.py"
# the files the captures' programs are: the only places a finding on them may point at
# (h100_xplane_capture.py ran as xplane_capture.py, SOURCE.md)
PROGRAMS = {p.name for p in XPLANE.glob("*.py")} | {"xplane_capture.py"}


@pytest.fixture(scope="module")
def arrays_json() -> tuple[subprocess.CompletedProcess, dict]:
    return report_json(JAX_ARRAYS)


def test_fit_on_numpy_arrays_is_named_as_kerass_slicing_at_the_programs_fit_call(arrays_json):
    """The training thread waits in Keras' per-batch slicing of the arrays (its array
    adapter): named as that, at the script's function that calls fit (line 24, its def:
    the tracer's line), with the fixes for arrays, never a PyDataset of worker
    processes nor a Keras frame (callback_list.py, traceback_utils.py)."""
    result, record = arrays_json
    assert result.returncode == EXIT_PROBLEM
    assert validation_errors(record) == []
    (finding,) = [f for f in record["findings"] if f["id"] == "input.bound"]
    assert finding["severity"] == "high"
    assert finding["title"].startswith(
        "The training thread slices and converts each NumPy batch, 62% of the step: "
        "Keras' fit on in-memory arrays (measured in 6 captured steps of 1.0 ms)"
    )
    assert finding["title"].endswith("; fit is called in train (jax_cpu_capture.py:24)")
    assert finding["location"] == "jax_cpu_capture.py:24"
    assert ARRAYS_SCRIPT.read_text().splitlines()[23].startswith("def train(")
    assert (
        "slice_and_convert_to_jax (array_data_adapter.py:251)"
        in (finding["evidence"]["keras_frames_in_the_wait"])
    )
    fix = finding["fix"]
    ast.parse(fix)  # pastes as Python
    for wanted in ("jax.device_put(x)", "from_tensor_slices((x, y))", "prefetch(tf.data.AUTOTUNE)"):
        assert wanted in fix
    assert "steps_per_execution" in fix and "batch_size" in fix
    for wrong in ("PyDataset", "workers", "use_multiprocessing", "_on_train_batch_end"):
        assert wrong not in fix
    assert record["verdict"]["text"].endswith(
        "The training thread slices and converts each NumPy batch, 62% of the step."
    )


def test_a_fit_called_at_the_top_level_points_at_no_librarys_line(tmp_path):
    """The same capture without the script's frame (fit called at the module's top
    level, inside the profiler's with: no frame of the script is recorded): the finding
    stands, with no location, where Keras' error_handler (traceback_utils.py:110) was."""
    source = next(JAX_ARRAYS.rglob("*.xplane.pb"))
    _, record = report_json(variants.without_events(source, tmp_path / "logs", "$jax_cpu_capture"))
    (finding,) = [f for f in record["findings"] if f["id"] == "input.bound"]
    assert finding["title"].startswith("The training thread slices and converts each NumPy batch")
    assert "location" not in finding or finding["location"] is None
    assert "fit is called in" not in finding["title"]
    assert ".py:" not in finding["title"]


@pytest.mark.parametrize(
    "capture",
    [H100, JAX_ARRAYS, *sorted(p for p in TF_CPU.iterdir() if p.is_dir())],
    ids=lambda p: p.name,
)
def test_every_location_a_capture_gives_is_in_the_program_that_made_it(capture):
    _, record = report_json(capture)
    for finding in record["findings"]:
        location = finding.get("location")
        if location:
            assert location.rsplit(":", 1)[0] in PROGRAMS, finding


# -- which run ------------------------------------------------------------------------------------
@pytest.fixture
def two_runs(tmp_path) -> Path:
    """A log dir with two profile runs: the H100 capture (older), a TF one (newer)."""
    runs = tmp_path / "logdir" / "plugins" / "profile"
    older = runs / "2026_11_27_17_38_41"
    newer = runs / "2026_11_28_04_46_05"
    older.mkdir(parents=True)
    newer.mkdir()
    shutil.copy(next(H100.rglob("*.xplane.pb")), older / "vm.xplane.pb")
    shutil.copy(next((TF_CPU / "custom_loop_step_markers").rglob("*.xplane.pb")), newer)
    return tmp_path / "logdir"


def test_the_newest_run_is_read_unless_run_names_one(two_runs):
    _, newest = report_json(two_runs)
    assert newest["capture"]["producer"] == "tensorflow"
    assert "2026_11_28_04_46_05" in newest["capture"]["path"]
    _, named = report_json(two_runs, "--run", "2026_11_27_17_38_41")
    assert named["capture"]["producer"] == "jax"
    assert "2026_11_27_17_38_41" in named["capture"]["path"]
    assert named["capture"]["step_count"] == 20


def assert_one_line_error(result: subprocess.CompletedProcess, *words: str) -> str:
    assert result.returncode == EXIT_ERROR, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith("gpuwhy: error: ")
    assert "Traceback" not in line and "internal error" not in line, line
    for word in words:
        assert word in line, line
    return line


def test_a_wrong_run_name_is_a_one_line_error_naming_the_runs(two_runs):
    result = gpuwhy("report", two_runs, "--run", "no_such_run")
    assert_one_line_error(
        result, "no run 'no_such_run'", "2026_11_27_17_38_41", "2026_11_28_04_46_05"
    )


def test_the_keras_tensorboard_callbacks_log_dir_is_found_under_train():
    # Keras 3's TensorBoard(profile_batch=...) writes under log_dir/train/plugins/profile
    logdir = TF_CPU / "keras_fit_tensorboard_callback"
    assert not (logdir / "plugins").exists()
    result, record = report_json(logdir)
    assert validation_errors(record) == []
    capture = record["capture"]
    assert (
        "keras_fit_tensorboard_callback/train/plugins/profile/2026_11_28_04_46_01"
        in (capture["path"])
    )
    assert capture["producer"] == "tensorflow"
    assert capture["no_device"] == "no GPU: the capture has no device plane"
    text = gpuwhy("report", logdir)
    assert text.returncode == expected_status(record)
    assert "GPU (captured)    no GPU: the capture has no device plane" in text.stdout


# -- what is not a capture -----------------------------------------------------------------------
def test_a_missing_path_is_a_one_line_error(tmp_path):
    missing = tmp_path / "no_such_logdir"
    assert_one_line_error(gpuwhy("report", missing), str(missing))
    assert_one_line_error(gpuwhy("report", missing, "--run", "x"), str(missing))


def test_an_empty_folder_is_a_one_line_error(tmp_path):
    empty = tmp_path / "empty_logdir"
    empty.mkdir()
    assert_one_line_error(gpuwhy("report", empty), str(empty))


def test_an_empty_capture_file_is_a_one_line_error(tmp_path):
    empty = tmp_path / "vm.xplane.pb"
    empty.write_bytes(b"")
    assert_one_line_error(gpuwhy("report", empty), "empty")


def test_a_truncated_capture_is_a_one_line_error(tmp_path):
    data = next(H100.rglob("*.xplane.pb")).read_bytes()
    run = tmp_path / "logdir" / "plugins" / "profile" / "2026_11_27_17_38_41"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(data[: len(data) // 2])
    assert_one_line_error(gpuwhy("report", run / "vm.xplane.pb"), "cut short")
    assert_one_line_error(gpuwhy("report", tmp_path / "logdir"), "cut short")


def test_a_file_that_is_not_an_xplane_capture_is_a_one_line_error(tmp_path):
    other = tmp_path / "vm.trace.json.gz"
    other.write_bytes(b"\x1f\x8b\x08\x00" + bytes(20))
    result = gpuwhy("report", other)
    assert result.returncode == EXIT_ERROR and "Traceback" not in result.stderr
    json_named_as_capture = tmp_path / "record.xplane.pb"
    json_named_as_capture.write_text(json.dumps({"schema": 1, "command": "capture"}))
    assert_one_line_error(gpuwhy("report", json_named_as_capture), "not an XSpace capture")


def test_a_corrupt_capture_is_a_one_line_format_error_not_an_internal_error(tmp_path):
    data = bytearray(next((TF_CPU / "custom_loop_step_markers").rglob("*.xplane.pb")).read_bytes())
    position = random.Random(0).randrange(len(data) // 2, len(data))
    data[position] ^= 0xFF  # inside a host line's events (the framing around it intact)
    corrupt = tmp_path / "vm.xplane.pb"
    corrupt.write_bytes(bytes(data))
    assert_one_line_error(gpuwhy("report", corrupt))
