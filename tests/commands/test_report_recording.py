"""``gpuwhy report RECORDING.jsonl`` on the real H100 recordings (tests/data/nvml/h100/,
SOURCE.md there says what ran): the one busy figure against each program's own clock
(issue #35), through the command a user runs, in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

H100 = Path(__file__).parents[1] / "data" / "nvml" / "h100"
DUTY = ("duty_100_100", "duty_40_160")


def report(*args: str | Path) -> dict:
    """The JSON record ``gpuwhy report ... -f json`` prints."""
    out = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", *map(str, args), "-f", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def busy(record: dict) -> dict:
    """The one GPU's busy block, in the record's ``derived`` section."""
    (gpu,) = record["gpu_samples"]["gpus"]
    (block,) = record["derived"]["gpu_busy"]
    assert block["index"] == gpu["index"] and "busy" not in gpu
    return block["busy"]


def truth(stem: str) -> float:
    return json.loads((H100 / f"{stem}.truth.json").read_text())["duty_measured"]


@pytest.mark.parametrize("stem", DUTY)
def test_a_duty_loop_reads_its_own_clock_within_a_tenth(stem):
    # made before GPM's graphics utilisation was recorded: SM activity, said so; never
    # the point readings (22 % for the 50 % loop, 14 % for the 21 % one)
    block = busy(report(H100 / f"{stem}.nvml.jsonl"))
    assert block["share"] == pytest.approx(truth(stem), abs=0.10)
    assert block["source"] == "gpm" and block["measure"] == "SM activity"
    assert block["reliable"] and "SM activity" in block["why"]
    assert 10.0 < block["span_s"] < 14.0  # the loop ran 12 s


@pytest.mark.parametrize("stem", DUTY)
def test_the_drivers_own_samples_give_the_time_share_and_no_beat_shows(stem):
    # the same runs with the driver's buffer of each (with_driver_samples.py): its samples
    # cover their period here (48 % for 51 %, 19-20 % for 21 %)
    block = busy(report(H100 / f"{stem}.with_samples.nvml.jsonl"))
    assert block["time_share"] == pytest.approx(truth(stem), abs=0.05)
    assert block["space_share"] > 0.9  # a 4096² matmul fills the GPU: time idle, not space


def test_the_start_up_heavy_resnet50_is_told_apart_from_its_steady_work():
    record = report(H100 / "torch_resnet50_setup_heavy.gpuwhy.json", "--recheck")
    block = busy(record)
    assert block["share"] < 0.2  # of the whole span: true, and not the answer
    assert block["steady_share"] >= 0.8
    assert block["startup_s"] >= 40.0 and block["steady_span_s"] < 10.0
    text = record["verdict"]["text"]
    assert "steady work" in text and "start-up" in text
    assert not any(f["id"] == "gpu.underutilized" for f in record["findings"])


def test_the_launch_bound_resnet18_is_told_its_kernels_are_too_small():
    record = report(H100 / "torch_resnet18_launch_bound.nvml.jsonl")
    (finding,) = [f for f in record["findings"] if f["id"] == "gpu.underutilized"]
    assert finding["evidence"]["kind"] == "kernels too small"
    assert "too small to fill" in finding["title"]
    fix = finding["fix"].lower()
    assert "input" not in fix and "pipeline" not in fix and "prefetch" not in fix
    assert "torch.compile" in fix and "cuda graphs" in fix


def as_the_old_snapshot_read_it(name: str, tmp_path: Path) -> Path:
    """The recording with the GPUs before the run as gpuwhy 2be7b4f's snapshot read them
    from its first tick: NVML v1 memory (the driver's 480 MiB reservation counted as used)
    and the point reading left by the previous program (20 % before real_jax_idle)."""
    lines = (H100 / name).read_text().splitlines()
    header, first = json.loads(lines[0]), json.loads(lines[1])
    header["devices_before"] = [
        {
            "index": gpu["index"],
            "name": "NVIDIA H100 80GB HBM3",
            "memory_total_bytes": 85520809984,
            "memory_used_bytes": gpu["mem_used"],
            "utilization_percent": float(gpu["util"]),
            "processes": [],
        }
        for gpu in first["gpus"]
    ]
    path = tmp_path / name
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return path


@pytest.mark.parametrize(
    "name",
    [
        *(f"{s}.nvml.jsonl" for s in DUTY),
        "torch_resnet18_launch_bound.nvml.jsonl",
        *(p.name for p in sorted(H100.glob("real_*_*_nvidia-h100-80gb-hbm3.jsonl"))),
    ],
)
def test_no_recording_of_one_program_says_the_gpu_is_shared(name, tmp_path):
    if "peaks" in name:
        pytest.skip("a peaks reading, not a recording")
    record = report(as_the_old_snapshot_read_it(name, tmp_path))
    assert record["devices"], "the GPUs before the run were read back"
    assert not any(f["id"] == "env.gpu-shared" for f in record["findings"])


def test_copies_are_not_called_small_kernels():
    record = report(H100 / "real_torch_transfer_nvidia-h100-80gb-hbm3.jsonl")
    (finding,) = [f for f in record["findings"] if f["id"] == "gpu.underutilized"]
    assert finding["evidence"]["kind"] == "copies, not compute"
    assert "placement.host-transfers" in finding["evidence"]["explained_by"]


def test_a_program_that_never_imported_tensorflow_gets_its_gpu_first():
    text = report(H100 / "real_torch_busy_nvidia-h100-80gb-hbm3.jsonl")["verdict"]["text"]
    assert text.startswith("GPU busy ")
    assert "TensorFlow" not in text


def test_a_file_that_is_neither_is_one_line_and_status_2(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"kind": "header", "format": "gpuwhy-nvml-recording", "version": 7}\n')
    out = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "recording version 7" in out.stderr


def test_a_shared_gpu_recorded_by_watch_is_still_found_shared():
    # constructed (construct.py): the GPUs before the run list a notebook with 30 GiB
    record = report(H100.parent / "constructed_a100_shared.jsonl")
    (shared,) = [f for f in record["findings"] if f["id"] == "env.gpu-shared"]
    assert shared["evidence"]["processes"][0]["pid"] == 777
    assert record["program"]["command"] == ["python", "train.py"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (
            '{"kind": "header", "format": "gpuwhy-nvml-peaks", "version": 1}\n{}\n',
            "a gpuwhy-nvml-peaks file",
        ),
        ("", "is empty"),
    ],
)
def test_other_files_are_named_in_one_line(tmp_path, content, words):
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    out = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and words in out.stderr
