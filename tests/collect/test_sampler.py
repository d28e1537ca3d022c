"""The GPU sampler: the live NVML path as far as this machine has one (no driver here),
and the conversion of raw readings on the recordings in tests/data/nvml/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuwhy.collect import nvml
from gpuwhy.collect.sampler import (
    FORMAT,
    GpuSampler,
    RecordingError,
    ReplaySource,
    counter_rate,
    gpu_line,
)

DATA = Path(__file__).parents[1] / "data" / "nvml"
GiB = 1024**3


def replay(name: str, **kwargs):
    source = ReplaySource(DATA / name)
    sampler = GpuSampler(source=source, pids=kwargs.pop("pids", source.watched_pids), **kwargs)
    sampler.start(time.perf_counter())
    assert sampler.wait(10), "a replay ends by itself"
    sampler.stop()
    return sampler.facts(), sampler


# -- the live path on this machine --------------------------------------------------


def test_live_sampler_records_why_nvml_is_missing_or_samples_the_gpus():
    snap = nvml.snapshot()
    sampler = GpuSampler(hz=50)
    sampler.start(time.perf_counter())
    time.sleep(0.3)
    sampler.stop()
    facts = sampler.facts()
    assert not sampler._thread.is_alive()
    if snap["ok"]:
        assert facts.error is None and len(facts.gpus) == len(snap["devices"])
        assert all(len(g.t) >= 2 for g in facts.gpus)
    else:
        assert facts.error == snap["error"]  # LibraryNotFound on a machine without a driver
        assert facts.gpus == ()


def test_live_recording_without_driver_is_a_header_that_replays_to_the_same_error(tmp_path):
    snap = nvml.snapshot()
    if snap["ok"]:
        pytest.skip("this machine has a driver: tools/record_nvml.py records it")
    path = tmp_path / "live.jsonl"
    sampler = GpuSampler(hz=50, record_path=path)
    sampler.start(time.perf_counter())
    sampler.stop()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 1
    assert lines[0]["format"] == FORMAT and lines[0]["constructed"] is False
    assert lines[0]["error"] == snap["error"]
    assert replay_file(path).error == snap["error"]


def replay_file(path):
    source = ReplaySource(path)
    sampler = GpuSampler(source=source, pids=source.watched_pids)
    sampler.start(0.0)
    sampler.wait(10)
    sampler.stop()
    return sampler.facts()


# -- counters -----------------------------------------------------------------------


def test_counter_rate_uses_nvml_timestamps_and_handles_wrap_reset_and_gaps():
    us = 1_000_000
    assert counter_rate([0, 3, 10 * us], [2_000_000, 3, 12 * us], dt=99.0) == 1_000_000
    assert counter_rate([0, 3, 0], [500, 3, 0], dt=0.5) == 1000  # no timestamps: ticks
    wrapped = counter_rate([(1 << 32) - 100, 1, us], [900, 1, 2 * us], dt=1.0)
    assert wrapped == 1000  # 32-bit counter wrapped
    assert counter_rate([10**12, 3, us], [5, 3, 2 * us], dt=1.0) is None  # 64-bit: a reset
    assert counter_rate([10, 3, us], [20, 3, us], dt=0.1) is None  # not refreshed
    assert counter_rate(None, [20, 3, us], dt=0.1) is None
    assert counter_rate([20, 3, us], None, dt=0.1) is None


# -- replayed recordings -------------------------------------------------------------


def test_every_recording_here_says_whether_it_was_constructed():
    files = sorted(DATA.glob("*.jsonl"))
    assert files
    for path in files:
        header = json.loads(path.read_text().splitlines()[0])
        # beside the sample recordings: what NVML reports of each GPU's peaks (the
        # projection's derivation reads those, tests/projection/test_derive.py)
        assert header["format"] == (nvml.PEAKS_FORMAT if "_peaks" in path.name else FORMAT)
        assert header["constructed"] is path.name.startswith("constructed_"), path.name
        if header["constructed"]:
            assert "CONSTRUCTED" in header["description"]


def test_busy_hopper_conversion():
    facts, _ = replay("constructed_h100_busy.jsonl")
    (gpu,) = facts.gpus
    assert facts.error is None and facts.gpm is True and facts.hz == 10.0
    assert gpu.name == "NVIDIA H100 80GB HBM3" and gpu.memory_total_bytes == 80 * GiB
    assert len(gpu.t) == 40 and gpu.t[0] == 0.0 and gpu.t[1] == pytest.approx(0.102)
    n = len(gpu.t)
    assert all(
        len(getattr(gpu, c)) == n
        for c in (
            "utilization",
            "memory_used_bytes",
            "own_memory_bytes",
            "pcie_tx_bytes_per_s",
            "pcie_rx_bytes_per_s",
            "sm_clock_mhz",
            "power_w",
            "sm_activity",
            "sm_occupancy",
            "tensor_activity",
        )
    )
    assert gpu.utilization[0] == 0.95 and gpu.utilization[7] is None  # missing stays missing
    assert gpu.power_w[0] == 300.0 and gpu.sm_clock_mhz[0] == 1980.0
    # GPM: NVML needs two samples, so the first tick has none.
    assert gpu.sm_activity[0] is None and gpu.sm_activity[1] == 0.8
    assert gpu.tensor_activity[5] == 0.55 and gpu.sm_occupancy[5] == 0.4
    # PCIe: 200 MB per ~0.1 s host -> GPU; no rate on the first tick nor at the reset.
    rx = gpu.pcie_rx_bytes_per_s
    assert rx[0] is None and rx[20] is None and gpu.pcie_tx_bytes_per_s[20] is None
    measured = [r for r in rx if r is not None]
    assert len(measured) == 38
    assert sum(measured) / len(measured) == pytest.approx(2e9, rel=0.05)
    # Process memory: read on every 10th tick only; the other process is someone else's.
    own = gpu.own_memory_bytes
    assert [i for i, v in enumerate(own) if v is not None] == [0, 10, 20, 30]
    assert own[10] == 60 * GiB
    assert [(p.pid, p.name, p.used_bytes) for p in gpu.others] == [
        (777, "python notebook.py", 2 * GiB)
    ]
    assert facts.watched_pids == (4100,)


def test_input_starved_ampere_conversion():
    facts, _ = replay("constructed_a100_input_starved.jsonl")
    (gpu,) = facts.gpus
    assert facts.gpm is False and all(v is None for v in gpu.sm_activity)
    assert all(p is None for p in gpu.power_w)
    assert gpu.utilization[:4] == (0.0, 0.4, 0.0, 0.4)
    rx = gpu.pcie_rx_bytes_per_s
    assert rx[31] == pytest.approx(1e9, rel=0.05)  # the 32-bit counter wrapped here
    assert all(r == pytest.approx(1e9, rel=0.05) for r in rx[1:])
    assert gpu.others == ()


def test_process_tree_that_grows_and_a_gpu_without_process_list():
    facts, _ = replay("constructed_4gpu_one_busy.jsonl")
    assert facts.watched_pids == (4100, 4101)
    gpu0, gpu1, _, gpu3 = facts.gpus
    assert gpu0.own_memory_bytes[10] == 20 * GiB
    assert gpu0.own_memory_bytes[20] == 24 * GiB  # the worker joined at tick 20
    assert gpu1.own_memory_bytes[20] == 0
    assert all(v is None for v in gpu3.own_memory_bytes)  # NVML refused the list there


def test_pids_filter_splits_own_memory_from_others():
    facts, _ = replay("constructed_4gpu_one_busy.jsonl", pids=lambda: {4100})
    gpu0 = facts.gpus[0]
    assert gpu0.own_memory_bytes[20] == 20 * GiB
    assert [(p.pid, p.used_bytes) for p in gpu0.others] == [(4101, 4 * GiB)]


def test_a_failing_pid_callable_does_not_stop_sampling():
    def broken():
        raise ProcessLookupError("tree gone")

    facts, _ = replay("constructed_h100_busy.jsonl", pids=broken)
    assert facts.error is None and len(facts.gpus[0].t) == 40
    assert facts.gpus[0].own_memory_bytes[10] == 0


def test_recording_round_trip_gives_the_same_facts(tmp_path):
    path = tmp_path / "again.jsonl"
    first, _ = replay("constructed_4gpu_one_busy.jsonl", record_path=path)
    second = replay_file(path)
    assert second == first
    header = json.loads(path.read_text().splitlines()[0])
    assert header["constructed"] is True  # a copy keeps the original's label


class ExplodingSource:
    paced = True

    def open(self, t0):
        return {"devices": [{"index": 0, "name": "GPU", "memory_total_bytes": GiB}], "error": None}

    def read(self, processes):
        raise OSError("device fell off the bus")

    def close(self):
        self.closed = True


class EndlessSource(ExplodingSource):
    def read(self, processes):
        return {
            "t": time.perf_counter(),
            "gpus": [
                {"index": 0, "util": 50, "procs": []} if processes else {"index": 0, "util": 50}
            ],
        }


def test_a_failing_source_is_recorded_not_raised():
    source = ExplodingSource()
    sampler = GpuSampler(source=source)
    sampler.start(time.perf_counter())
    sampler.stop()
    assert sampler.facts().error == "sampler failed: OSError: device fell off the bus"
    assert source.closed


def test_stop_joins_a_paced_sampler_and_processes_are_read_at_most_once_a_second():
    sampler = GpuSampler(source=EndlessSource(), hz=40, pids=lambda: {1})
    sampler.start(0.0)
    time.sleep(0.3)
    sampler.stop()
    assert not sampler._thread.is_alive()
    (gpu,) = sampler.facts().gpus
    assert len(gpu.t) >= 2
    assert gpu.own_memory_bytes[0] == 0
    assert all(v is None for v in gpu.own_memory_bytes[1:40])


def test_not_a_recording_is_refused(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"kind": "tick", "t": 0}\n')
    with pytest.raises(RecordingError):
        ReplaySource(bad)


def test_a_recording_cut_short_mid_line_replays_what_it_holds_and_a_bad_line_is_refused(
    tmp_path,
):
    # the recorder killed while writing a tick (OOM kill, node taken away): the readings
    # before the torn line stand; a broken line inside the file is a one-line error
    whole = (DATA / "constructed_h100_busy.jsonl").read_text().splitlines()
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(whole[:20]) + "\n" + whole[20][: len(whole[20]) // 2])
    assert len(ReplaySource(torn).ticks) == 19
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([whole[0], "not json", *whole[1:20]]) + "\n")
    with pytest.raises(RecordingError, match="line 2 is not JSON"):
        ReplaySource(broken)
    scalar = tmp_path / "scalar.jsonl"
    scalar.write_text("\n".join([whole[0], "5", *whole[1:20]]) + "\n")
    with pytest.raises(RecordingError, match="line 2 is not a JSON object"):
        ReplaySource(scalar)


# -- TensorFlow's own peak ----------------------------------------------------------


@pytest.mark.parametrize("reader", ["tf_peak_memory", "tf_memory_in_use"])
def test_tf_memory_never_starts_tensorflow_and_is_empty_without_gpus(reader):
    code = (
        "import json\n"
        f"from gpuwhy.tfapi.memory import {reader} as read\n"
        "before = read()\n"
        "import tensorflow as tf\n"
        "from tensorflow.python.eager import context\n"
        "asked = read()\n"
        "untouched = context.context_safe() is None or not context.context()._initialized\n"
        "tf.constant(1.0) + 1.0\n"
        "gpus = len(tf.config.list_logical_devices('GPU'))\n"
        "print(json.dumps([before, asked, untouched, read(), gpus]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    before, asked, untouched, after, gpus = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == {} and asked == {} and untouched is True
    assert len(after) == gpus and all(k.startswith("GPU:") for k in after)


def test_sampler_reads_tf_peak_at_stop_only_when_tensorflow_was_imported(monkeypatch):
    import gpuwhy.collect.sampler

    monkeypatch.setattr(gpuwhy.collect.sampler, "tf_peak_memory", lambda: {"GPU:0": 5})
    peaks = []
    for tensorflow in (False, True):
        sampler = GpuSampler(source=ExplodingSource())
        sampler.start(0.0)
        if tensorflow:
            sampler.on_tensorflow()
        sampler.stop()
        peaks.append(sampler.facts().tf_peak_memory_bytes)
    assert peaks == [{}, {"GPU:0": 5}]


# -- issue #35: what the busy figure needs -------------------------------------------------
def write_recording(path: Path, ticks: list[list[dict]]) -> Path:
    """A recording in the live format, two GPUs, built tick by tick (by this test)."""
    header = {
        "kind": "header",
        "format": FORMAT,
        "version": 1,
        "constructed": True,
        "hz": 10.0,
        "devices": [
            {"index": 0, "name": "NVIDIA H100 80GB HBM3", "gpm": True, "memory_v2": True},
            {"index": 1, "name": "NVIDIA A100-SXM4-80GB", "gpm": False, "memory_v2": True},
        ],
    }
    lines = [header] + [
        {"kind": "tick", "t": round(i / 10, 3), "gpus": gpus} for i, gpus in enumerate(ticks)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_driver_samples_count_once_gpm_graphics_and_dcgm_fill_the_activities(tmp_path):
    us = 1_700_000_000_000_000
    ticks = []
    for i in range(20):
        h100 = {
            "index": 0,
            "util": 50,
            "mem_used": 1000,
            "mem_reserved": 480 * 2**20,
            "gpm": {"graphics_util": 60.0, "sm_activity": 55.0},
            # a sample every 200 ms; each read twice (a driver that returns the last one
            # again): counted once
            "util_samples": [[us + (i // 2) * 200_000, 40 + i // 2]],
        }
        a100 = {"index": 1, "util": 10, "mem_used": 1000, "gpm": None, "util_samples": []}
        if i % 5 == 0:
            a100["dcgm"] = {"gr_engine_active": 0.25, "sm_active": 0.2, "tensor_active": 0.1}
        ticks.append([h100, a100])
    samples = GpuSampler(
        source=ReplaySource(write_recording(tmp_path / "r.jsonl", ticks)), pids=lambda: ()
    )
    samples.start(0.0)
    assert samples.wait(10)
    samples.stop()
    h100, a100 = samples.facts().gpus
    assert h100.known("driver_utilization") == 10  # 10 distinct samples in 20 ticks
    assert h100.mean("driver_utilization") == pytest.approx(sum(range(40, 50)) / 1000)
    assert h100.driver_sample_period_s == 0.2  # measured from their timestamps
    assert h100.mean("graphics_activity") == pytest.approx(0.6)
    assert (h100.activity_source, h100.memory_reserved_bytes) == ("gpm", 480 * 2**20)
    assert a100.activity_source == "dcgm" and a100.known("graphics_activity") == 4
    assert a100.mean("graphics_activity") == pytest.approx(0.25)
    assert a100.mean("tensor_activity") == pytest.approx(0.1)
    assert a100.driver_sample_period_s is None


def test_a_dcgm_exporter_that_cannot_be_read_is_said(tmp_path):
    path = write_recording(tmp_path / "r.jsonl", [[{"index": 0, "util": 5}]] * 3)
    lines = path.read_text().splitlines()
    tick = json.loads(lines[2])
    tick["dcgm_error"] = "connection refused (http://10.0.0.7:9400/metrics)"
    lines[2] = json.dumps(tick)
    path.write_text("\n".join(lines) + "\n")
    sampler = GpuSampler(source=ReplaySource(path), pids=lambda: ())
    sampler.start(0.0)
    assert sampler.wait(10)
    sampler.stop()
    facts = sampler.facts()
    assert facts.dcgm_error == "connection refused (http://10.0.0.7:9400/metrics)"
    assert "dcgm-exporter not read: connection refused" in gpu_line(facts, {})
