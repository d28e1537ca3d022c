"""The GPU sampler over a whole day at 10 Hz: its memory and its cost per sample.

A constructed source (not measured: one H100, busy 33% then idle, process memory, power
limit and replay counter every 10th tick, clock-event reasons, temperature and PCIe link
every tick, as NVML gives them) feeds 864,000 ticks per simulated day through
``GpuSampler`` as fast as it reads them (not paced), so the figures are the sampler's own
work, without NVML's calls (a few ctypes calls per GPU per tick on a real GPU).

Printed: the time per sample (wall time of the feed / ticks, and the sampler's own
per-tick time), tracemalloc's peak and final size during a second, traced feed (the
series in windows: flat whatever the length), the facts' JSON size and the windows kept.
``--baseline-hours H`` also feeds H hours with every sample kept (the sampler before
issue #25 kept them all, in lists and then in the facts' tuples): the size of those
series (tracemalloc, around building the facts) and their JSON, which grow with the run.

    .venv/bin/python benchmarks/bench_sampler_long.py [--hours 24] [--baseline-hours 1]
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.derived.gpu_busy import gpu_busy
from gpuwhy.facts import to_dict

GiB = 1024**3
HZ = 10.0


class ConstructedSource:
    """``ticks`` readings of one GPU, made as the sampler asks for them."""

    paced = False

    def __init__(self, ticks: int) -> None:
        self.ticks, self.i = ticks, 0
        self.busy_until = ticks * 23 // 24

    def open(self, t0: float) -> dict:
        return {
            "error": None,
            "hz": HZ,
            "devices": [
                {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 80 * GiB}
            ],
        }

    def read(self, processes: bool) -> dict | None:
        i = self.i
        if i >= self.ticks:
            return None
        self.i += 1
        busy = i < self.busy_until
        counter = i * 20_000_000
        reading = {
            "index": 0,
            "util": 33 if busy else 0,
            "mem_used": 61 * GiB,
            "pcie_tx": [counter, 3, i * 100_000],
            "pcie_rx": [counter * 2, 3, i * 100_000],
            "sm_clock_mhz": 1980 if busy else 345,
            "power_mw": 300_000 if busy else 70_000,
            "gpm": {
                "graphics_util": 33.0 if busy else 0.0,
                "sm_activity": 30.0,
                "sm_occupancy": 20.0,
                "tensor_activity": 10.0,
            },
            # the driver's own buffer: one sample every 200 ms (issue #35)
            "util_samples": [] if i % 2 else [[i * 100_000, 33 if busy else 0]],
            "mem_reserved": 480 * 1024 * 1024,
            # clock-event reasons (SW power cap on every 7th busy tick, GPU idle when idle),
            # temperature and the link (Gen4 x16 busy, Gen1 idle), as NVML gives them
            "clocks_event_reasons": (0x4 if i % 7 == 0 else 0) if busy else 0x1,
            "temp_c": 70 if busy else 35,
            "pcie_gen": 4 if busy else 1,
            "pcie_width": 16,
        }
        if processes:
            reading["procs"] = [[4100, 60 * GiB, "python train.py"]]
            reading["power_limit_mw"] = 350_000
            reading["pcie_replays"] = i // 10_000
        return {"t": i / HZ, "gpus": [reading]}

    def close(self) -> None:
        pass


def feed(ticks: int, windows: int | None = None, traced: bool = False) -> dict:
    kwargs = {} if windows is None else {"windows": windows}
    sampler = GpuSampler(source=ConstructedSource(ticks), pids=lambda: {4100}, **kwargs)
    if traced:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    sampler.start(started)
    sampler.wait()
    sampler.stop()
    wall = time.perf_counter() - started
    out = {"wall_s": wall, "ticks": sampler.ticks, "tick_total_s": sampler.tick_total_s}
    if traced:
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out |= {"peak_bytes": peak - before, "kept_bytes": current - before}
    tracemalloc.start()
    facts = sampler.facts()
    out["facts_bytes"] = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    (gpu,) = facts.gpus
    started = time.perf_counter()
    block = gpu_busy(gpu, None)  # what diagnosing the run adds: bounded by the windows
    out["busy_s"] = time.perf_counter() - started
    out["busy"] = block
    out |= {
        "windows": len(gpu.t),
        "samples_per_window": gpu.samples_per_window,
        "json_bytes": len(json.dumps(to_dict(facts))),
        "first_s": gpu.t[0],
        "last_s": gpu.ends()[-1],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--baseline-hours", type=float, default=1.0)
    args = parser.parse_args()
    ticks = round(args.hours * 3600 * HZ)
    timed = feed(ticks)
    traced = feed(ticks, traced=True)
    mib = 1024 * 1024
    print(f"{args.hours:g} h at {HZ:g} Hz, one GPU: {ticks:,} samples")
    print(
        f"  per sample: {timed['wall_s'] / ticks * 1e6:.1f} µs wall "
        f"({timed['tick_total_s'] / ticks * 1e6:.1f} µs in the sampler's tick), "
        f"{timed['wall_s']:.1f} s in all"
    )
    print(
        f"  memory (tracemalloc): peak {traced['peak_bytes'] / mib:.2f} MiB, "
        f"kept {traced['kept_bytes'] / mib:.2f} MiB; facts JSON {timed['json_bytes'] / 1024:,.0f} kB"
    )
    block = timed["busy"]
    print(
        f"  the busy figure at the end: {timed['busy_s'] * 1000:.1f} ms "
        f"({block.measure}: {block.share:.0%}, steady {block.steady_share:.0%})"
    )
    print(
        f"  {timed['windows']} windows of {timed['samples_per_window']:,} samples, "
        f"covering {timed['first_s']:g} s to {timed['last_s']:,.1f} s"
    )
    if args.baseline_hours > 0:
        base_ticks = round(args.baseline_hours * 3600 * HZ)
        base = feed(base_ticks, windows=2 * base_ticks)
        print(
            f"every sample kept (before #25), {args.baseline_hours:g} h: the series "
            f"{base['facts_bytes'] / mib:.1f} MiB in memory (in lists again while sampling), "
            f"facts JSON {base['json_bytes'] / mib:,.1f} MiB; both x{args.hours / args.baseline_hours:g} "
            f"for {args.hours:g} h. Kept in windows, {args.hours:g} h: the series "
            f"{timed['facts_bytes'] / mib:.2f} MiB"
        )


if __name__ == "__main__":
    main()
