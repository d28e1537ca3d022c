"""gpu.throttled and gpu.pcie-degraded: from small hand-built series, and end to end from
the constructed NVML recordings (sampler replay -> facts -> rules -> a saved record that
`gpuwhy report --recheck` reads back)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gpuwhy.facts import ClockReasonSeries, Facts, GpuLatest, GpuSamplesFacts, GpuSeries
from gpuwhy.formatting import run_time
from gpuwhy.record import Record
from gpuwhy.rules import run_rules
from gpuwhy.rules.gpu.pcie_degraded import PcieDegraded
from gpuwhy.rules.gpu.throttled import GpuThrottled
from tests.rules.gpu.test_gpu_rules import check, from_recording

ROOT = Path(__file__).parents[3]
GiB = 1024**3


def gpu(n=100, busy=lambda i: True, throttled=lambda i: False, reason="sw_power_cap", **more):
    """One GPU's raw samples at 10 Hz: busy at 95% where ``busy(i)``, a slowdown bit
    ``reason`` where ``throttled(i)`` (1410 MHz max, 1100 MHz while throttled)."""
    t = tuple(round(i / 10, 3) for i in range(n))
    on = [busy(i) for i in range(n)]
    slow = [throttled(i) for i in range(n)]
    shares = tuple(1.0 if s else 0.0 for s in slow)
    fields = dict(
        index=0,
        name="NVIDIA A100-PCIE-40GB",
        t=t,
        utilization=tuple(0.95 if b else 0.0 for b in on),
        own_memory_bytes=(GiB,) * n,
        sm_clock_mhz=tuple(1100.0 if s else 1410.0 for s in slow),
        throttled=shares,
        throttled_busy=tuple(s if b else None for s, b in zip(shares, on)),
        sm_clock_throttled_mhz=tuple(1100.0 if s and b else None for s, b in zip(slow, on)),
        sm_clock_busy_mhz=tuple((1100.0 if s else 1410.0) if b else None for s, b in zip(slow, on)),
        temperature_c=(70.0,) * n,
        power_w=(250.0,) * n,
        power_limit_w=(250.0,) * n,
        max_sm_clock_mhz=1410.0,
        power_default_limit_w=250.0,
        clock_reasons=(
            ClockReasonSeries(
                name=reason,
                bit=0x4,
                slowdown=True,
                share=shares,
                samples=sum(slow),
                busy_samples=sum(s and b for s, b in zip(slow, on)),
            ),
        )
        if any(slow)
        else (),
    )
    fields.update(more)
    return GpuSeries(**fields)


def facts_of(*series):
    return Facts(gpu_samples=GpuSamplesFacts(hz=10, gpus=series))


# -- gpu.throttled from small facts ------------------------------------------------------


def test_a_power_cap_over_the_second_half_fires_from_its_start():
    (finding,) = check(GpuThrottled, facts_of(gpu(throttled=lambda i: i >= 50)))
    assert finding.evidence["from_s"] == 5.0 and finding.evidence["to_s"] is None
    assert "from 5.0 s: SW power cap: the board hit its 250 W limit" in finding.title
    assert "1100 of its 1410 MHz in 50% of its busy samples" in finding.title
    assert finding.evidence["clock_ratio"] == round(1100 / 1410, 3)
    assert finding.gain_value == round(0.5 * (1 - 1100 / 1410), 3)
    # 11% of the busy time, at most, at the board's default 250 W: its design point
    assert finding.severity == "medium"
    assert "nvidia-smi -q -d PERFORMANCE,POWER" in finding.fix and "-pl" in finding.fix


def test_a_stray_sample_early_does_not_move_the_start_and_a_stop_is_said():
    stray = lambda i: i == 3 or 40 <= i < 70
    (finding,) = check(GpuThrottled, facts_of(gpu(throttled=stray)))
    assert (finding.evidence["from_s"], finding.evidence["to_s"]) == (4.0, 6.9)
    assert "from 4.0 s to 6.9 s" in finding.title


def test_a_limit_set_below_the_default_is_named():
    series = gpu(throttled=lambda i: True, power_limit_w=(200.0,) * 100)
    (finding,) = check(GpuThrottled, facts_of(series))
    assert "hit its 200 W limit, lowered from the default 250 W" in finding.title
    assert finding.severity == "high"  # a limit set low: 22% of the busy time, at most


def test_no_finding_for_few_samples_a_small_share_idle_bits_or_a_clock_at_its_maximum():
    assert check(GpuThrottled, facts_of(gpu(n=25, throttled=lambda i: True))) == []
    assert check(GpuThrottled, facts_of(gpu(throttled=lambda i: i < 9))) == []  # 9%
    # throttled only while idle (below 50% utilisation): not judged
    idle_half = gpu(busy=lambda i: i < 50, throttled=lambda i: i >= 50)
    assert check(GpuThrottled, facts_of(idle_half)) == []
    # a slowdown bit with the clock still at 96% of its maximum costs too little
    near = gpu(throttled=lambda i: True, sm_clock_throttled_mhz=(1360.0,) * 100)
    assert check(GpuThrottled, facts_of(near)) == []


def test_thermal_words_carry_the_temperature():
    series = gpu(throttled=lambda i: True, reason="hw_thermal_slowdown")
    series = GpuSeries(**{**series.__dict__, "temperature_c": (87.0,) * 100})
    (finding,) = check(GpuThrottled, facts_of(series))
    assert "HW thermal slowdown at 87 C" in finding.title
    assert "airflow" in finding.fix or "Cooling" in finding.fix


# -- gpu.pcie-degraded from small facts -------------------------------------------------


def link(n=60, gen=2, width=16, busy=lambda i: True, replays=None, top=(4, 16)):
    on = [busy(i) for i in range(n)]
    return GpuSeries(
        index=0,
        name="NVIDIA A100-PCIE-40GB",
        t=tuple(round(i / 10, 3) for i in range(n)),
        utilization=tuple(0.9 if b else 0.0 for b in on),
        own_memory_bytes=(GiB,) * n,
        pcie_gen_busy=tuple(float(gen) if b else None for b in on),
        pcie_width_busy=tuple(float(width) if b else None for b in on),
        pcie_degraded_busy=tuple(float(gen < top[0] or width < top[1]) if b else None for b in on),
        pcie_replays=replays or (None,) * n,
        pcie_max_gen=top[0],
        pcie_max_width=top[1],
        gpu_pcie_max_gen=top[0],
        latest=GpuLatest(t=n / 10, pcie_gen=gen, pcie_width=width),
    )


def test_a_gen2_link_under_load_gives_both_rates():
    (finding,) = check(PcieDegraded, facts_of(link()))
    assert "PCIe link at Gen2 x16 whenever busy, where Gen4 x16 is possible" in finding.title
    assert "(8 GB/s per direction instead of 31.5)" in finding.title
    assert finding.severity == "high" and finding.evidence["per_lane"] == (
        "5 GT/s (8b/10b) vs 16 GT/s (128b/130b)"
    )
    assert "lspci -vv" in finding.fix and "nvidia-smi -q -d PCIE" in finding.fix


def test_a_narrow_link_is_degraded_too_and_replays_are_counted():
    replays = tuple(2.0 if i % 10 == 0 else None for i in range(60))
    (finding,) = check(PcieDegraded, facts_of(link(gen=4, width=8, replays=replays)))
    assert "Gen4 x8" in finding.title and "12 PCIe replays" in finding.title
    assert finding.evidence["link_gb_s"] == 15.75 and finding.severity == "high"


def test_a_link_that_degrades_later_says_from_when():
    late = link(gen=2, busy=lambda i: True)
    late = GpuSeries(
        **{
            **late.__dict__,
            "pcie_gen_busy": (4.0,) * 30 + (2.0,) * 30,
            "pcie_degraded_busy": (0.0,) * 30 + (1.0,) * 30,
        }
    )
    (finding,) = check(PcieDegraded, facts_of(late))
    assert "Gen2 x16 under load from 3.0 s" in finding.title


def test_an_idle_link_at_gen1_and_a_link_at_its_maximum_are_no_finding():
    idle_gen1 = link(gen=1, busy=lambda i: False)
    assert check(PcieDegraded, facts_of(idle_gen1)) == []
    assert check(PcieDegraded, facts_of(link(gen=4))) == []
    # a Gen5 GPU in a Gen4 slot: the link's maximum is Gen4, reached
    assert check(PcieDegraded, facts_of(link(gen=4, top=(4, 16)))) == []


# -- end to end: the constructed recordings ---------------------------------------------


def recorded(name):
    return Facts(gpu_samples=from_recording(name))


def ids(facts):
    findings, _ = run_rules(facts)
    return {f.id: f for f in findings}


def test_the_power_capped_recording_names_the_cap_from_minute_two():
    found = ids(recorded("constructed_a100_power_cap.jsonl"))
    finding = found["gpu.throttled"]
    assert finding.evidence["from_s"] == 120.0 and run_time(120.0) == "2 min"
    assert finding.title.startswith(
        "GPU 0 (NVIDIA A100-PCIE-40GB) is throttled from 2 min: SW power cap: the board "
        "hit its 300 W limit (299 W drawn); 1155 of its 1410 MHz in 60% of its busy samples"
    )
    assert "gpu.pcie-degraded" not in found


def test_the_hot_t4_recording_names_hw_thermal_slowdown_at_87_c():
    finding = ids(recorded("constructed_t4_thermal.jsonl"))["gpu.throttled"]
    assert "from 3.0 s: HW thermal slowdown at 87 C" in finding.title
    assert finding.severity == "high"  # 27% of the busy time, at most
    assert "900 of its 1590 MHz" in finding.title


def test_the_gen2_recording_names_the_link_and_its_replays():
    found = ids(recorded("constructed_a100_pcie_gen2.jsonl"))
    finding = found["gpu.pcie-degraded"]
    assert "Gen2 x16 whenever busy, where Gen4 x16 is possible" in finding.title
    assert finding.evidence["pcie_replays"] == 33 and "33 PCIe replays" in finding.title
    assert "copies reached 7.0 GB/s, 88% of what it carries" in finding.title
    assert "lspci -vv -s 0000:01:00.0" in finding.fix
    assert "gpu.throttled" not in found


def test_the_healthy_control_has_neither_finding():
    found = ids(recorded("constructed_a100_healthy_link.jsonl"))
    assert "gpu.throttled" not in found and "gpu.pcie-degraded" not in found


def test_a_saved_record_rechecked_by_the_command_gives_the_same_finding(tmp_path):
    record = Record.diagnose("watch", recorded("constructed_a100_power_cap.jsonl"))
    path = record.save(tmp_path / "run.json")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    out = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", str(path), "--recheck", "-f", "json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode in (0, 1), out.stderr[-2000:]
    findings = {f["id"]: f for f in json.loads(out.stdout)["findings"]}
    assert findings["gpu.throttled"]["evidence"]["from_s"] == 120.0
    assert findings["gpu.throttled"]["evidence"]["reason"] == "sw_power_cap"
