"""Writes the CONSTRUCTED NVML recordings of this folder (``constructed_*.jsonl``).

These are not measurements: no GPU was available when they were made. Each one is built
by hand, in exactly the format the live sampler records (gpuwhy/collect/sampler.py,
module docstring), to exercise one conversion or one rule; the header says
``"constructed": true`` and what the file stands for. Real recordings come from
``tools/record_nvml.py`` on a GPU machine and are named ``real_*.jsonl``.

Run ``python tests/data/nvml/construct.py`` to rewrite them (deterministic).
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
GiB = 1024**3
EPOCH_US = 1_700_000_000_000_000  # NVML field timestamps are wall-clock microseconds
ULL, UINT = 3, 1  # NVML value types: unsigned long long, unsigned int
WATCHED = 4100  # the watched program's pid in these files


def header(description, devices, error=None, **extra):
    return {
        "kind": "header",
        "format": "gpuwhy-nvml-recording",
        "version": 1,
        "constructed": True,
        "description": description,
        "recorded_by": "hand (construct.py)",
        "hz": 10.0,
        "process_hz": 1.0,
        "source": "nvml",
        "error": error,
        "driver_version": None if error else "550.54.15",
        "nvml_version": None if error else "12.550.54.15",
        "devices": devices,
        **extra,
    }


def device(index, name, total_gib, gpm):
    return {
        "index": index,
        "name": name,
        "uuid": f"GPU-constructed-{index}",
        "pci_bus_id": f"00000000:{index + 1:02x}:00.0",
        "compute_capability": "9.0" if gpm else "8.0",
        "memory_total_bytes": total_gib * GiB,
        "gpm": gpm,
    }


def reading(index, t, util, mem, tx, rx, vtype=ULL, gpm=None, procs=None, clock=1980, power=300):
    r = {
        "index": index,
        "util": util,
        "mem_used": mem,
        "pcie_tx": None if tx is None else [tx, vtype, EPOCH_US + round(t * 1e6)],
        "pcie_rx": None if rx is None else [rx, vtype, EPOCH_US + round(t * 1e6)],
        "sm_clock_mhz": clock,
        "power_mw": None if power is None else power * 1000,
        "gpm": gpm,
    }
    if procs is not None:
        r["procs"] = procs
    return r


def tick(i, gpus, pids=None):
    t = round(0.1 * i + 0.002 * (i % 3), 4)
    line = {"kind": "tick", "t": t, "read_s": 0.0004, "gpus": [g(t) for g in gpus]}
    if pids is not None:
        line["pids"] = pids
    return line


def write(name, lines):
    with open(HERE / name, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, separators=(",", ":")) + "\n")


def busy_hopper():
    """One H100, 40 ticks: 95% busy, GPM on, a util reading missing at tick 7, the PCIe
    counters reset (driver reload) at tick 20, a process of someone else on the GPU."""
    lines = [
        header(
            "CONSTRUCTED, not measured: one H100, a busy training loop "
            "(util 95%, SM activity 80%, 60 GiB held by the program); tick 7 lacks "
            "utilisation, the PCIe counters reset at tick 20.",
            [device(0, "NVIDIA H100 80GB HBM3", 80, True)],
        )
    ]
    tx = rx = 10 * GiB
    for i in range(40):
        process_tick = i % 10 == 0
        rx = 0 if i == 20 else rx + 200_000_000 if i else rx  # 2 GB/s host -> GPU
        tx = 0 if i == 20 else tx + 50_000_000 if i else tx  # 0.5 GB/s GPU -> host
        gpm = (
            None if i == 0 else {"sm_activity": 80.0, "sm_occupancy": 40.0, "tensor_activity": 55.0}
        )
        procs = [[WATCHED, 60 * GiB, "python train.py"], [777, 2 * GiB, "python notebook.py"]]
        lines.append(
            tick(
                i,
                [
                    lambda t, i=i, tx=tx, rx=rx, gpm=gpm, procs=procs: reading(
                        0,
                        t,
                        None if i == 7 else 95,
                        63 * GiB,
                        tx,
                        rx,
                        gpm=gpm,
                        procs=procs if process_tick else None,
                    )
                ],
                pids=[WATCHED] if process_tick else None,
            )
        )
    write("constructed_h100_busy.jsonl", lines)


def starved_ampere():
    """One A100 (no GPM), 60 ticks: bursts of 40% between idle ticks (input-starved),
    5 of 80 GiB held; 32-bit PCIe counters that wrap at tick 31; power not supported."""
    lines = [
        header(
            "CONSTRUCTED, not measured: one A100 (no GPM), an input-starved loop "
            "(util alternating 0/40%, 5 GiB of 80 held); 32-bit PCIe counters wrap "
            "at tick 31; power reading not supported.",
            [device(0, "NVIDIA A100-SXM4-80GB", 80, False)],
        )
    ]
    rx = (1 << 32) - 30 * 100_000_000 - 50_000_000
    tx = 1_000_000
    for i in range(60):
        process_tick = i % 10 == 0
        if i:
            rx = (rx + 100_000_000) % (1 << 32)  # 1 GB/s host -> GPU
            tx += 1_000_000
        procs = [[WATCHED, 5 * GiB, "python train.py"]]
        lines.append(
            tick(
                i,
                [
                    lambda t, i=i, tx=tx, rx=rx, procs=procs: reading(
                        0,
                        t,
                        40 if i % 2 else 0,
                        6 * GiB,
                        tx,
                        rx,
                        vtype=UINT,
                        power=None,
                        procs=procs if process_tick else None,
                    )
                ],
                pids=[WATCHED] if process_tick else None,
            )
        )
    write("constructed_a100_input_starved.jsonl", lines)


def four_gpus_one_busy():
    """Four H100s, 50 ticks: the program (and a worker it starts at tick 20) works on GPU 0
    only; GPUs 1-3 stay idle and empty; GPU 3 lost its process list (not supported)."""
    devices = [device(i, "NVIDIA H100 80GB HBM3", 80, True) for i in range(4)]
    lines = [
        header(
            "CONSTRUCTED, not measured: four H100s, a program busy on GPU 0 only "
            "(a worker process joins at tick 20); GPUs 1-3 idle.",
            devices,
        )
    ]
    for i in range(50):
        process_tick = i % 10 == 0
        pids = [WATCHED] if i < 20 else [WATCHED, WATCHED + 1]
        gpus = []
        for g in range(4):
            busy = g == 0
            procs = None
            if process_tick:
                procs = (
                    [[p, (20 if p == WATCHED else 4) * GiB, "python train.py"] for p in pids]
                    if busy
                    else []
                )
                if g == 3:
                    procs = None  # stays None on a process tick: NVML refused the list
            gpm = (
                None
                if i == 0
                else {
                    "sm_activity": 70.0 if busy else 0.0,
                    "sm_occupancy": 30.0 if busy else 0.0,
                    "tensor_activity": 20.0 if busy else 0.0,
                }
            )
            gpus.append(
                lambda t, i=i, busy=busy, gpm=gpm, procs=procs, g=g: reading(
                    g,
                    t,
                    88 if busy else 0,
                    (25 if busy else 0) * GiB + 500 * 1024**2,
                    i * 10_000_000,
                    i * 80_000_000 if busy else 0,
                    gpm=gpm,
                    procs=procs,
                    power=400 if busy else 70,
                )
            )
        line = tick(i, gpus, pids=pids if process_tick else None)
        if process_tick:
            for r in line["gpus"]:
                r.setdefault("procs", None)
        lines.append(line)
    write("constructed_4gpu_one_busy.jsonl", lines)


def no_driver():
    write(
        "constructed_no_driver.jsonl",
        [
            header(
                "CONSTRUCTED, not measured: a machine without the NVIDIA driver; nvmlInit fails "
                "with NVML_ERROR_LIBRARY_NOT_FOUND, so there are no ticks.",
                [],
                error="LibraryNotFound",
            )
        ],
    )


if __name__ == "__main__":
    busy_hopper()
    starved_ampere()
    four_gpus_one_busy()
    no_driver()
