"""The GPU sampler over a whole day at 10 Hz (864,000 ticks, fed as fast as the sampler
reads them): its series stay within the windows' bound, cover the first and the last
sample, keep the raw data's means and peaks, and the rules find on them what they find on
every sample.

The day is CONSTRUCTED, not measured: two H100s; GPU 0 runs the program, busy 33% for
23 h then idle, and GPU 1 stays idle and empty. Ticks are made one by one as the sampler
asks (a recording of a day would be a 300 MB file); the raw series the rules are compared
against are built from the same formula, every sample kept.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.collect.windows import CAPACITY
from gpuwhy.facts import Facts, GpuSamplesFacts, GpuSeries, ProgramFacts, from_dict, to_dict
from gpuwhy.rules.distribute.idle_gpus import IdleGpus
from gpuwhy.rules.gpu.underutilized import GpuUnderutilized
from gpuwhy.rules.memory.near_limit import MemoryNearLimit
from gpuwhy.rules.memory.underused import MemoryUnderused

pytestmark = pytest.mark.slow  # at scale: out of make test-fast

GiB = 1024**3
HZ = 10.0
DAY = 864_000  # ticks: 24 h at 10 Hz
BUSY_UNTIL = 23 * 36_000  # tick at which GPU 0 goes idle (23 h)
SPIKE = 12 * 36_000  # a process tick (every 10th) at 12 h
PID = 4100
RULES = (GpuUnderutilized, MemoryNearLimit, MemoryUnderused, IdleGpus)


class Day:
    """The two GPUs' readings at tick ``i``, raw as NVML gives them."""

    def __init__(self, own_gib: int, spike_gib: int | None) -> None:
        self.own = own_gib * GiB
        self.spike = None if spike_gib is None else spike_gib * GiB

    def own_bytes(self, i: int) -> int:
        return self.spike if self.spike is not None and i == SPIKE else self.own

    def reading(self, gpu: int, i: int, processes: bool) -> dict:
        busy = gpu == 0 and i < BUSY_UNTIL
        own = self.own_bytes(i) if gpu == 0 else 0
        reading = {
            "index": gpu,
            "util": 33 if busy else 0,
            "mem_used": own + GiB,
            "pcie_tx": None,
            "pcie_rx": None,
            "sm_clock_mhz": 1980 if busy else 345,
            "power_mw": 700_000 if gpu == 0 and i == SPIKE else 300_000 if busy else 70_000,
            "gpm": None,
            # the driver's own buffer: a sample every other tick (200 ms)
            "util_samples": []
            if i % 2
            else [[1_700_000_000_000_000 + i * 100_000, 33 if busy else 0]],
        }
        if processes:
            reading["procs"] = [[PID, own, "python train.py"]] if gpu == 0 else []
        return reading

    def raw_series(self, gpu: int) -> GpuSeries:
        """Every sample, as the sampler converts it (shared value objects keep it small)."""
        util = {33: 0.33, 0: 0.0}
        return GpuSeries(
            index=gpu,
            name="NVIDIA H100 80GB HBM3",
            memory_total_bytes=80 * GiB,
            t=tuple(round(i / HZ, 4) for i in range(DAY)),
            utilization=tuple(
                util[33] if gpu == 0 and i < BUSY_UNTIL else util[0] for i in range(DAY)
            ),
            driver_utilization=tuple(
                None if i % 2 else util[33] if gpu == 0 and i < BUSY_UNTIL else util[0]
                for i in range(DAY)
            ),
            driver_sample_period_s=0.2,
            memory_used_bytes=tuple(
                (self.own_bytes(i) if gpu == 0 else 0) + GiB for i in range(DAY)
            ),
            own_memory_bytes=tuple(
                (self.own_bytes(i) if gpu == 0 else 0) if i % 10 == 0 else None for i in range(DAY)
            ),
            sm_clock_mhz=tuple(
                1980.0 if gpu == 0 and i < BUSY_UNTIL else 345.0 for i in range(DAY)
            ),
            power_w=tuple(
                700.0 if gpu == 0 and i == SPIKE else 300.0 if gpu == 0 and i < BUSY_UNTIL else 70.0
                for i in range(DAY)
            ),
        )


class DaySource:
    """A :class:`~gpuwhy.collect.sampler.Source` for the day, not paced: the sampler reads
    it as fast as it can."""

    paced = False

    def __init__(self, day: Day, ticks: int = DAY) -> None:
        self.day, self.ticks, self.i = day, ticks, 0

    def open(self, t0: float) -> dict:
        device = {"name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GiB, "gpm": False}
        return {
            "error": None,
            "hz": HZ,
            "devices": [{"index": g, **device} for g in (0, 1)],
        }

    def read(self, processes: bool) -> dict | None:
        i = self.i
        if i >= self.ticks:
            return None
        self.i += 1
        return {"t": i / HZ, "gpus": [self.day.reading(g, i, processes) for g in (0, 1)]}

    def close(self) -> None:
        pass


def sampled(day: Day) -> tuple[GpuSamplesFacts, GpuSampler]:
    sampler = GpuSampler(source=DaySource(day), pids=lambda: {PID})
    sampler.start(time.perf_counter())
    assert sampler.wait(600), "the day ends by itself"
    sampler.stop()
    return sampler.facts(), sampler


def findings(samples: GpuSamplesFacts) -> tuple[list[tuple], list[float]]:
    """The findings, and apart the busy span's length, which windows know to one window's
    width (when in its last window the program's memory was last read)."""
    program = ProgramFacts(command=("python", "train.py"), seconds=DAY / HZ)
    facts = Facts(program=program, gpu_samples=samples)
    found = [f for rule in RULES for f in rule().check(facts, dict(rule.options))]
    spans = [f.evidence["window_s"] for f in found if "window_s" in f.evidence]
    # the steady work's samples: its edges are known to a window too
    counted = ("window_s", "samples")
    evidence = [{k: v for k, v in f.evidence.items() if k not in counted} for f in found]
    titles = [re.sub(r"[\d,]+ samples\)", "N samples)", f.title) for f in found]
    return [(f.id, t, e) for f, t, e in zip(found, titles, evidence)], spans


@pytest.fixture(scope="module", params=[(60, 78), (10, None)], ids=["peak", "underused"])
def day(request):
    own, spike = request.param
    d = Day(own, spike)
    facts, sampler = sampled(d)
    return d, facts, sampler


def test_a_day_stays_in_the_bound_and_covers_the_first_and_last_sample(day):
    _, facts, sampler = day
    assert facts.error is None and sampler.ticks == DAY
    for gpu in facts.gpus:
        assert CAPACITY // 2 < len(gpu.t) <= CAPACITY and gpu.samples_per_window == 2048
        assert gpu.sample_count() == DAY and sum(gpu.counts) == DAY
        assert gpu.t[0] == 0.0 and gpu.ends()[-1] == round((DAY - 1) / HZ, 4)
        n = len(gpu.t)
        assert all(len(s.known) == len(s.high) == len(s.low) == n for s in gpu.spread)
    record = json.dumps(to_dict(facts))
    assert len(record) < 1_000_000, len(record)  # a day's record: a few hundred kB
    assert from_dict(GpuSamplesFacts, json.loads(record)) == facts


def test_a_day_keeps_the_raw_means_and_peaks(day):
    d, facts, _ = day
    for gpu in facts.gpus:
        raw = d.raw_series(gpu.index)
        for name in ("utilization", "memory_used_bytes", "sm_clock_mhz", "power_w"):
            values = [v for v in getattr(raw, name) if v is not None]
            assert gpu.mean(name) == pytest.approx(sum(values) / len(values), rel=1e-9), name
            assert gpu.peak(name) == max(values), name
            assert sum(gpu.column(name).known) == len(values)
        own = [v for v in raw.own_memory_bytes if v is not None]
        assert gpu.peak("own_memory_bytes") == max(own)
        assert sum(gpu.column("own_memory_bytes").known) == DAY // 10 == len(own)
    # the one-sample peak at 12 h is where it happened
    gpu0 = facts.gpus[0]
    window = gpu0.column("power_w").high.index(700.0)
    assert gpu0.t[window] <= SPIKE / HZ <= gpu0.ends()[window]


def test_the_rules_find_on_a_days_windows_what_they_find_on_every_sample(day):
    d, facts, _ = day
    raw = GpuSamplesFacts(hz=HZ, gpus=tuple(d.raw_series(g) for g in (0, 1)))
    expected, raw_spans = findings(raw)
    found, spans = findings(facts)
    assert found == expected
    width = facts.gpus[0].samples_per_window / HZ
    assert raw_spans and spans == pytest.approx(raw_spans, abs=width)
    ids = {f[0] for f in expected}
    near = d.spike is not None
    assert ids == {
        "gpu.underutilized",
        "distribute.idle-gpus",
        "memory.near-limit" if near else "memory.underused",
    }


class Churn(DaySource):
    """An hour in which every process tick shows new processes: the job's workers,
    restarted, and other users' jobs coming and going on GPU 0."""

    def read(self, processes: bool) -> dict | None:
        tick = super().read(processes)
        if tick is not None and processes:
            i = self.i
            gpu0 = tick["gpus"][0]
            gpu0["procs"] = [[PID, GiB, "python train.py"], [10_000 + i, GiB, "other"]]
        return tick


def test_processes_that_come_and_go_without_end_are_remembered_up_to_a_bound():
    from gpuwhy.collect import sampler as sampler_module

    worker = iter(range(20_000, 10**9))
    sampler = GpuSampler(
        source=Churn(Day(own_gib=1, spike_gib=None), ticks=36_000),
        pids=lambda: {PID, next(worker)},  # a new worker of the job at every process tick
    )
    sampler.start(time.perf_counter())
    assert sampler.wait(600)
    sampler.stop()
    facts = sampler.facts()
    assert len(facts.watched_pids) <= sampler_module.MAX_PIDS + 2
    assert len(facts.gpus[0].others) == sampler_module.MAX_PIDS
    first = facts.gpus[0].others[0].pid  # the first ones seen are kept
    assert first < 10_000 + 36_000 / 10 and facts.gpus[0].others[-1].pid < 10_000 + 300 * 10
