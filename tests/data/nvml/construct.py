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


def reading(
    index, t, util, mem, tx, rx, vtype=ULL, gpm=None, procs=None, clock=1980, power=300, **more
):
    """One GPU's raw reading; ``more``: the optional keys of issue #26 (clocks_event_reasons,
    temp_c, pcie_gen, pcie_width, and on process ticks power_limit_mw, pcie_replays)."""
    stamp = EPOCH_US + round(t * 1e6)
    r = {
        "index": index,
        "util": util,
        "mem_used": mem,
        "pcie_tx": None if tx is None else [tx, vtype, EPOCH_US + round(t * 1e6)],
        "pcie_rx": None if rx is None else [rx, vtype, EPOCH_US + round(t * 1e6)],
        "sm_clock_mhz": clock,
        "power_mw": None if power is None else power * 1000,
        "gpm": gpm,
        # the driver's own buffer: one sample every 200 ms (as on an H100), read at the
        # tick after it was taken, of the load the tick reads
        "util_samples": [] if util is None or round(t * 10) % 2 else [[stamp - 50_000, util]],
    }
    r.update(more)
    if procs is not None:
        r["procs"] = procs
    return r


def tick(i, gpus, pids=None, period=0.1):
    t = round(period * i + 0.002 * (i % 3), 4)
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


# NVML's clock-event reason bits (pynvml nvmlClocksEventReason*) and PCIe link fields as
# nvidia-ml-py returns them: plain ints (the bitmask an unsigned long long).
GPU_IDLE, SW_POWER_CAP, HW_THERMAL = 0x1, 0x4, 0x40


def limits(max_clock, power_limit_w, max_gen, max_width, gpu_max_gen):
    """The header's optional per-device keys (nvml._limits)."""
    return {
        "max_sm_clock_mhz": max_clock,
        "power_default_limit_mw": power_limit_w * 1000,
        "pcie_max_gen": max_gen,
        "pcie_max_width": max_width,
        "gpu_pcie_max_gen": gpu_max_gen,
    }


def one_gpu(name, description, device_, ticks, period, each, held_gib=20):
    """A one-GPU recording, a tick every ``period`` seconds and a process tick every 5th:
    ``each(i, process_tick)`` gives the reading's arguments."""
    lines = [header(description, [device_], hz=round(1 / period, 3), process_hz=0.2 / period)]
    for i in range(ticks):
        process_tick = i % 5 == 0
        args = each(i, process_tick)
        procs = [[WATCHED, held_gib * GiB, "python train.py"]] if process_tick else None
        lines.append(
            tick(
                i,
                [lambda t, args=args, procs=procs: reading(0, t, procs=procs, **args)],
                pids=[WATCHED] if process_tick else None,
                period=period,
            )
        )
    write(name, lines)


def power_capped():
    """An A100 PCIe (300 W) busy for 5 minutes at 0.5 Hz, held at its 300 W power limit
    by the SW power cap from minute 2 on: the SM clock drops from 1410 to 1155 MHz."""
    device_ = {**device(0, "NVIDIA A100-PCIE-40GB", 40, False), **limits(1410, 300, 4, 16, 4)}

    def each(i, process_tick):
        capped = i >= 60  # t = 120 s
        extra = {"power_limit_mw": 300_000, "pcie_replays": 0} if process_tick else {}
        return dict(
            util=97,
            mem=31 * GiB,
            tx=i * 40_000_000,
            rx=i * 400_000_000,
            clock=1155 if capped else 1410,
            power=299 if capped else 262,
            clocks_event_reasons=SW_POWER_CAP if capped else 0,
            temp_c=71 if capped else 64,
            pcie_gen=4,
            pcie_width=16,
            **extra,
        )

    one_gpu(
        "constructed_a100_power_cap.jsonl",
        "CONSTRUCTED, not measured: one A100 PCIe 40GB (300 W limit, max SM clock 1410 MHz) "
        "97% busy for 5 min at 0.5 Hz; from t=120 s the clock-event reasons read 0x4 (SW "
        "power cap), power 299 W, SM clock 1155 MHz.",
        device_,
        150,
        2.0,
        each,
    )


def thermal():
    """A T4 (70 W, passively cooled) busy for 8 s at 10 Hz, heating from 78 C; from tick
    30 it reads 87 C and HW thermal slowdown (0x40): the SM clock drops from 1590 to
    900 MHz."""
    device_ = {**device(0, "Tesla T4", 16, False), **limits(1590, 70, 3, 16, 3)}
    device_["compute_capability"] = "7.5"

    def each(i, process_tick):
        hot = i >= 30
        extra = {"power_limit_mw": 70_000, "pcie_replays": 12} if process_tick else {}
        return dict(
            util=99,
            mem=12 * GiB,
            tx=i * 4_000_000,
            rx=i * 40_000_000,
            clock=900 if hot else 1590,
            power=52 if hot else 69,
            clocks_event_reasons=HW_THERMAL if hot else 0,
            temp_c=87 if hot else 78 + i * 8 // 30,
            pcie_gen=3,
            pcie_width=16,
            **extra,
        )

    one_gpu(
        "constructed_t4_thermal.jsonl",
        "CONSTRUCTED, not measured: one T4 (max SM clock 1590 MHz) 99% busy for 8 s at "
        "10 Hz; from tick 30 (t=3 s) 87 C and the clock-event reasons read 0x40 (HW thermal "
        "slowdown), SM clock 900 MHz.",
        device_,
        80,
        0.1,
        each,
        held_gib=11,
    )


def pcie_gen2():
    """An A100 PCIe (a Gen4 x16 GPU in a Gen4 x16 slot) busy for 6 s at 10 Hz with its
    link trained at Gen2 x16; the replay counter grows by 3 per process tick."""
    device_ = {**device(0, "NVIDIA A100-PCIE-40GB", 40, False), **limits(1410, 250, 4, 16, 4)}

    def each(i, process_tick):
        extra = {"power_limit_mw": 250_000, "pcie_replays": 40 + 3 * (i // 5)}
        return dict(
            util=92,
            mem=20 * GiB,
            tx=i * 100_000_000,
            rx=i * 700_000_000,  # 7 GB/s: near the 8 GB/s of Gen2 x16
            clock=1410,
            power=180,
            clocks_event_reasons=0,
            temp_c=60,
            pcie_gen=2,
            pcie_width=16,
            **(extra if process_tick else {}),
        )

    one_gpu(
        "constructed_a100_pcie_gen2.jsonl",
        "CONSTRUCTED, not measured: one A100 PCIe 40GB whose link (max Gen4 x16, link and "
        "GPU) reads Gen2 x16 while 92% busy for 6 s at 10 Hz; 7 GB/s host -> GPU; the "
        "replay counter grows from 40 by 3 a second.",
        device_,
        60,
        0.1,
        each,
    )


def healthy_link():
    """The control: an A100 PCIe idle for 2 s (link at Gen1 x16, reasons 0x1 GPU idle),
    then busy for 6 s at Gen4 x16 with no reason; no replay."""
    device_ = {**device(0, "NVIDIA A100-PCIE-40GB", 40, False), **limits(1410, 250, 4, 16, 4)}

    def each(i, process_tick):
        busy = i >= 20
        extra = {"power_limit_mw": 250_000, "pcie_replays": 7} if process_tick else {}
        return dict(
            util=95 if busy else 0,
            mem=(20 if busy else 1) * GiB,
            tx=i * 100_000_000,
            rx=i * 700_000_000,
            clock=1410 if busy else 210,
            power=230 if busy else 35,
            clocks_event_reasons=0 if busy else GPU_IDLE,
            temp_c=58 if busy else 33,
            pcie_gen=4 if busy else 1,
            pcie_width=16,
            **extra,
        )

    one_gpu(
        "constructed_a100_healthy_link.jsonl",
        "CONSTRUCTED, not measured: one A100 PCIe 40GB idle for 2 s (link Gen1 x16, clock "
        "210 MHz, reasons 0x1 GPU idle), then 95% busy for 6 s at Gen4 x16, 1410 MHz, no "
        "clock-event reason; the replay counter stays at 7.",
        device_,
        80,
        0.1,
        each,
    )


def shared_a100():
    """One A100 shared with a notebook that holds 30 GiB and keeps working: the GPUs
    before the run (as ``gpuwhy watch --record`` keeps them) list it, and the driver's
    samples before the start read it busy; the program's outcome is the last line."""
    before = [
        {
            "index": 0,
            "name": "NVIDIA A100-SXM4-80GB",
            "uuid": "GPU-constructed-0",
            "memory_total_bytes": 80 * GiB,
            "memory_used_bytes": 30 * GiB,
            "memory_reserved_bytes": 512 * 1024**2,
            "busy_before_samples": [70, 72, 69, 71, 70, 73, 70, 71, 70, 72],
            "busy_before_seconds": 1.8,
            "utilization_percent": 71.0,
            "processes": [{"pid": 777, "name": "python notebook.py", "used_bytes": 30 * GiB}],
        }
    ]
    lines = [
        header(
            "CONSTRUCTED, not measured: one A100 shared with a notebook (30 GiB, ~70 % busy "
            "before the run); the watched program holds 20 GiB beside it.",
            [device(0, "NVIDIA A100-SXM4-80GB", 80, False)],
            command=["python", "train.py"],
            devices_before=before,
        )
    ]
    for i in range(60):
        process_tick = i % 10 == 0
        procs = [[WATCHED, 20 * GiB, "python train.py"], [777, 30 * GiB, "python notebook.py"]]
        lines.append(
            tick(
                i,
                [
                    lambda t, procs=procs, pt=process_tick: reading(
                        0, t, 90, 50 * GiB, None, None, procs=procs if pt else None
                    )
                ],
                pids=[WATCHED] if process_tick else None,
            )
        )
    lines.append(
        {"kind": "end", "ended": "completed", "exit_code": 0, "error": None, "seconds": 6.1}
    )
    write("constructed_a100_shared.jsonl", lines)


if __name__ == "__main__":
    shared_a100()
    busy_hopper()
    starved_ampere()
    four_gpus_one_busy()
    no_driver()
    power_capped()
    thermal()
    pcie_gen2()
    healthy_link()
