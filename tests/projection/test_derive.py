"""Peaks derived from NVML for a GPU the table lacks, checked against the table's own
GPUs (constructed NVML readings at their datasheets' clocks: tests/data/nvml/
constructed_peaks.jsonl) and carried through --target auto into the projection."""

import dataclasses
import json
from pathlib import Path

import pytest

from gpuwhy.facts import Facts, NvmlReading
from gpuwhy.gpu_specs import UnknownGpuError, find_gpu
from gpuwhy.projection.derive import CannotDerive, auto_gpu, derive_gpu
from gpuwhy.projection.step import projection_facts
from tests import builders as b
from tests.projection.test_cost import placement

READINGS = [  # constructed, and any recorded by tools/record_nvml.py on a GPU machine
    json.loads(line)
    for path in sorted((Path(__file__).parents[1] / "data/nvml").glob("*_peaks*.jsonl"))
    for line in path.open()
]
TABLE = [(r["table"], r["reading"]) for r in READINGS if r["kind"] == "reading" and r["table"]]
UNKNOWN = next(r["reading"] for r in READINGS if r["kind"] == "reading" and not r["table"])


@pytest.mark.parametrize("table, reading", TABLE, ids=[name for name, _ in TABLE])
def test_derived_peaks_land_within_ten_percent_of_the_datasheet(table, reading):
    derived, sheet = derive_gpu(NvmlReading(**reading)), find_gpu(table)
    assert derived.sm_count == sheet.sm_count
    pairs = [
        (derived.float32_flops, sheet.float32_flops),
        (derived.float16_flops, sheet.float16_flops),
        (derived.memory_bandwidth, sheet.memory_bandwidth),
    ]
    if sheet.tf32_flops:
        pairs.append((derived.tf32_flops, sheet.tf32_flops))
    # a GeForce card's NVML max clock may be a quarter above its rated boost
    tolerance = 0.30 if sheet.geforce else 0.10
    for got, published in pairs:
        assert got == pytest.approx(published, rel=tolerance)
    assert (derived.tf32_flops is None) == (sheet.tf32_flops is None)
    assert derived.derived_from and "NVML" in derived.derived_from
    assert sheet.derived_from is None


def test_a_gpu_the_table_lacks_gets_derived_peaks_and_a_table_gpu_its_datasheet():
    a4000 = auto_gpu(UNKNOWN["name"], NvmlReading(**UNKNOWN))
    # RTX A4000 datasheet: 19.2 TFLOPS FP32, 448 GB/s, 48 SMs
    assert a4000.float32_flops == pytest.approx(19.2e12, rel=0.02)
    assert a4000.memory_bandwidth == pytest.approx(448e9, rel=0.01)
    assert a4000.sm_count == 48 and a4000.tf32_flops == a4000.float16_flops / 2
    assert "48 SMs at 1560 MHz" in (a4000.derived_from or "")
    h100 = auto_gpu("NVIDIA H100 80GB HBM3", None)  # the table's: NVML not read
    assert h100.name == "H100" and h100.derived_from is None


def test_without_enough_from_nvml_the_error_says_what_is_missing():
    with pytest.raises(UnknownGpuError, match="could not be read"):
        auto_gpu("NVIDIA RTX A4000", None)
    partial = {**UNKNOWN, "max_memory_clock_mhz": None, "memory_bus_bits": None}
    with pytest.raises(UnknownGpuError, match="memory clock, memory bus width"):
        auto_gpu("NVIDIA RTX A4000", NvmlReading(**partial))
    with pytest.raises(CannotDerive):
        derive_gpu(NvmlReading("Voodoo 5", compute_capability=None, architecture=None))
    # a newer minor version than the table knows: its major's base architecture
    newer = derive_gpu(NvmlReading(**{**UNKNOWN, "compute_capability": (8, 8)}))
    assert newer.compute_capability == (8, 0)


def test_geforce_cards_get_the_half_rate_fp32_accumulate_tensor_cores():
    pro = derive_gpu(NvmlReading(**{**UNKNOWN, "name": "NVIDIA RTX A5000"}))
    geforce = derive_gpu(NvmlReading(**{**UNKNOWN, "name": "NVIDIA GeForce RTX 3070"}))
    assert geforce.float16_flops == pro.float16_flops / 2
    assert geforce.float32_flops == pro.float32_flops


def test_auto_on_an_unknown_gpu_says_its_peaks_were_derived_and_widens_the_band():
    facts = Facts(placement=placement(), devices=(b.gpu(0, name=UNKNOWN["name"]),))
    # this machine has no GPU: NVML's answer is the constructed reading's
    found = projection_facts(facts, "auto", peaks=NvmlReading(**UNKNOWN))
    assert found.gpu == "NVIDIA RTX A4000"
    note = next(n for n in found.notes if "not in gpuwhy's GPU table" in n)
    assert "derived from NVML" in note and "1.25x wider" in note
    # the same peaks from the table would give the same middle and a narrower band
    derived = derive_gpu(NvmlReading(**UNKNOWN))
    from gpuwhy.projection.cost import project_step

    widened = project_step(placement(), derived)
    plain = project_step(placement(), dataclasses.replace(derived, derived_from=None))
    assert widened.step.mid == pytest.approx(plain.step.mid)
    assert widened.step.low < plain.step.low and widened.step.high > plain.step.high


def test_auto_on_an_unknown_gpu_without_nvml_asks_for_a_name():
    facts = Facts(placement=placement(), devices=(b.gpu(0, name=UNKNOWN["name"]),))
    with pytest.raises(UnknownGpuError, match="name a GPU with --target"):
        projection_facts(facts, "auto", peaks=None)  # NVML not readable
    with pytest.raises(UnknownGpuError, match="name a GPU with --target"):
        projection_facts(facts, "auto")  # not read at all (an audit of files)
