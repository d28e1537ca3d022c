"""The sampler's clocks, heat and PCIe link series (issue #26), on the constructed
recordings of tests/data/nvml (construct.py: the bitmasks and fields as nvidia-ml-py
returns them), and on a recording made before those keys existed."""

from __future__ import annotations

import pytest

from gpuwhy.facts import CLOCK_REASONS, SLOWDOWN_BITS
from tests.collect.test_sampler import replay


def reasons_by_name(series):
    return {r.name: r for r in series.clock_reasons}


def test_the_reason_bits_are_nvidia_ml_pys():
    pynvml = pytest.importorskip("pynvml")
    for reason in CLOCK_REASONS:
        camel = "".join(part.capitalize() for part in reason.name.split("_"))
        known = getattr(pynvml, f"nvmlClocksThrottleReason{camel}", None)
        event = getattr(pynvml, f"nvmlClocksEventReason{camel}", known)
        assert reason.bit == known == event, reason.name
    assert SLOWDOWN_BITS & pynvml.nvmlClocksEventReasonGpuIdle == 0
    assert SLOWDOWN_BITS & pynvml.nvmlClocksEventReasonApplicationsClocksSetting == 0
    assert SLOWDOWN_BITS & pynvml.nvmlClocksEventReasonSwPowerCap


def test_a_power_cap_from_minute_two_is_counted_on_busy_samples():
    facts, _ = replay("constructed_a100_power_cap.jsonl")
    (gpu,) = facts.gpus
    cap = reasons_by_name(gpu)["sw_power_cap"]
    assert (cap.samples, cap.busy_samples, cap.slowdown) == (90, 90, True)
    assert cap.first_busy_s == pytest.approx(120.0, abs=0.01)
    assert cap.seconds == pytest.approx(180.0, abs=0.1)  # 90 intervals of 2 s
    assert list(reasons_by_name(gpu)) == ["sw_power_cap"]  # no bit never set
    assert gpu.mean("throttled_busy") == pytest.approx(0.6)
    assert gpu.mean("sm_clock_throttled_mhz") == 1155
    assert gpu.mean("sm_clock_busy_mhz") == pytest.approx(0.4 * 1410 + 0.6 * 1155)
    assert gpu.max_sm_clock_mhz == 1410 and gpu.power_default_limit_w == 300
    assert gpu.low("power_limit_w") == 300 and gpu.peak("temperature_c") == 71
    assert gpu.latest is not None
    assert gpu.latest.clocks_event_reasons == 0x4 and gpu.latest.power_w == 299
    assert (gpu.latest.pcie_gen, gpu.latest.pcie_width, gpu.latest.pcie_replay_counter) == (
        4,
        16,
        0,
    )


def test_the_same_shares_in_windows_of_many_samples():
    facts, _ = replay("constructed_a100_power_cap.jsonl", windows=8)
    (gpu,) = facts.gpus
    assert gpu.windowed
    assert gpu.mean("throttled_busy") == pytest.approx(0.6)
    share = reasons_by_name(gpu)["sw_power_cap"].share
    assert len(share) == len(gpu.t) and share[0] == 0.0 and share[-1] == 1.0
    assert gpu.known("throttled_busy") == 150


def test_hw_thermal_slowdown_at_87_c():
    facts, _ = replay("constructed_t4_thermal.jsonl")
    (gpu,) = facts.gpus
    hot = reasons_by_name(gpu)["hw_thermal_slowdown"]
    assert hot.first_busy_s == pytest.approx(3.0, abs=0.01) and hot.busy_samples == 50
    assert gpu.peak("temperature_c") == 87
    assert gpu.mean("sm_clock_throttled_mhz") == 900


def test_a_gen2_link_under_load_with_replays_growing():
    facts, _ = replay("constructed_a100_pcie_gen2.jsonl")
    (gpu,) = facts.gpus
    assert (gpu.pcie_max_gen, gpu.pcie_max_width, gpu.gpu_pcie_max_gen) == (4, 16, 4)
    assert gpu.low("pcie_gen_busy") == 2 and gpu.low("pcie_width_busy") == 16
    assert gpu.mean("pcie_degraded_busy") == 1.0
    assert gpu.total("pcie_replays") == 33  # 40 -> 73 over 12 process ticks
    assert gpu.mean("throttled") == 0.0 and gpu.clock_reasons == ()


def test_the_healthy_control_judges_its_link_only_under_load():
    facts, _ = replay("constructed_a100_healthy_link.jsonl")
    (gpu,) = facts.gpus
    assert gpu.low("pcie_gen_busy") == 4  # Gen1 while idle is not a busy sample
    assert gpu.known("pcie_gen_busy") == 60
    assert gpu.mean("pcie_degraded_busy") == 0.0
    assert gpu.total("pcie_replays") == 0
    (idle,) = gpu.clock_reasons
    assert (idle.name, idle.slowdown, idle.samples, idle.busy_samples) == ("gpu_idle", False, 20, 0)
    assert gpu.peak("throttled") == 0.0


def test_a_recording_from_before_these_keys_replays_without_them():
    facts, _ = replay("constructed_h100_busy.jsonl")
    (gpu,) = facts.gpus
    assert gpu.clock_reasons == () and gpu.max_sm_clock_mhz is None
    assert gpu.peak("temperature_c") is None and gpu.low("pcie_gen_busy") is None
    assert gpu.total("pcie_replays") is None
    assert gpu.peak("others_memory_bytes") == 2 * 1024**3  # the notebook's, from procs
    assert gpu.latest is not None and gpu.latest.clocks_event_reasons is None
