"""env.gpu-shared: other processes already hold the GPU's memory or compute."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts, GpuDevice
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import memory_evidence
from gpuwhy.formatting import MiB
from gpuwhy.rules.base import Rule

# "Several" driver samples: a busy reading needs at least this many behind it.
MIN_BUSY_SAMPLES = 3


class GpuShared(Rule):
    """Other processes use the GPU that TensorFlow will use, so it gets less memory and time.

    ## What it detects
    Before TensorFlow starts, other processes hold at least `memory_fraction` of a GPU's
    memory: those NVML lists, or (in a container, where NVML lists no process of another
    container) the memory used on the device. Where the driver reports its own
    reservation (NVML's v2 memory info: a few hundred MiB that nvidia-smi does not count
    as used) it is left out; records and drivers with v1 only count it, below the
    threshold on any GPU. Also when the GPU was busy before the run, but only on the
    driver's own utilisation samples of the 2 s before it: at least 3 of them, over at
    least `sustained_s`, nearly all (`busy_share`) at least `busy_percent` busy, *and*
    someone holds the GPU now (a process listed, or at least `holding_mib` used beyond
    the reservation). A single point reading is never enough: right after another
    program ends it is that program's last one. High when others hold `high_fraction`
    of the memory or more. Each process is named with its pid, command line and memory.

    ## Why is this slow?
    Kernels from several processes time-slice one GPU, so each step takes longer than on
    a free GPU. By default TensorFlow maps nearly all *free* memory at start: with others
    holding some, it gets less, cuDNN may fall back to slower algorithms that need less
    workspace, and a batch size that fit yesterday runs out of memory today.

    ## Example
    ```console
    $ nvidia-smi        # a notebook kernel from last week still holds 30 GiB on GPU 0
    $ python train.py   # same GPU, slower steps, OOM at the old batch size
    ```
    The GPU a program ended on a moment ago is not shared: the driver's 480 MiB
    reservation on an H100 and its last point reading (20 % busy) are no evidence.

    Use instead:
    ```console
    $ export CUDA_VISIBLE_DEVICES=1          # a free GPU, or stop the old process
    $ export TF_FORCE_GPU_ALLOW_GROWTH=true  # when sharing is intended: take memory as needed
    ```

    ## Options
    - `memory_fraction`: share of a GPU's memory held by others that triggers (0.10).
    - `high_fraction`: share held by others that makes the finding high (0.50).
    - `busy_percent`: a driver sample at least this busy counts as busy (20).
    - `busy_share`: share of the driver samples before the run that must be busy (0.8).
    - `sustained_s`: the span those samples must cover, in seconds (1.0).
    - `holding_mib`: memory beyond the driver's reservation that shows someone holds the
      GPU, for a busy reading without a process listed (64).
    """

    id = "env.gpu-shared"
    severity = "medium"
    status = "stable"
    needs = ("devices",)
    options = {
        "memory_fraction": 0.10,
        "high_fraction": 0.50,
        "busy_percent": 20,
        "busy_share": 0.8,
        "sustained_s": 1.0,
        "holding_mib": 64,
    }
    question = "Why is it slower than expected?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        findings = []
        devices = facts.devices or ()
        for dev in devices:
            total = dev.memory_total_bytes or 0
            held = _held_by_others(dev)
            share = held / total if total else 0.0
            busy = _sustained_busy(dev, options) and _holding(dev, held, share, options)
            if share < options["memory_fraction"] and not busy:
                continue
            free = [d for d in devices if d is not dev and not d.processes]
            # A UUID, not an index: CUDA numbers GPUs fastest-first, NVML by PCI bus.
            fix = (
                f"export CUDA_VISIBLE_DEVICES={free[0].uuid or free[0].index}   "
                f"# {free[0].name} has no other process"
                if free
                else "# stop the processes listed, or share on purpose:"
            )
            fix += (
                "\nexport TF_FORCE_GPU_ALLOW_GROWTH=true   # take memory as needed, "
                "not all that is free at start"
            )
            severity = "high" if share >= options["high_fraction"] else "medium"
            title = (
                f"GPU {dev.index} ({dev.name}) is shared: other processes hold "
                f"{held / MiB:,.0f} MiB ({share:.0%})"
            )
            gains = []
            if share >= options["memory_fraction"]:
                gains.append(f"up to {share:.0%} more GPU memory for TensorFlow")
            mean = dev.busy_before_percent or 0.0
            if busy:
                title += (
                    f" and it was {mean:.0f}% busy over the "
                    f"{dev.busy_before_seconds or 0.0:.1f} s before the run (driver samples)"
                )
                gains.append(f"the GPU's time the other work took ({mean:.0f}%)")
            reserved = dev.memory_reserved_bytes
            findings.append(
                self.finding(
                    title,
                    severity=severity,
                    evidence={
                        **memory_evidence(
                            dev.index,
                            used_key="memory_held_by_others_mib",
                            used=held,
                            total=total,
                            share_key="memory_share",
                            share=share,
                        ),
                        "memory_reading": (
                            "NVML v2: without the driver's reservation"
                            if reserved is not None
                            else "NVML v1: includes the driver's reservation"
                        ),
                        "memory_reserved_by_driver_mib": (
                            None if reserved is None else round(reserved / MiB)
                        ),
                        "busy_before_run": _busy_evidence(dev, options),
                        "processes": [
                            {
                                "pid": p.pid,
                                "command": p.name,
                                "memory_mib": round((p.used_bytes or 0) / MiB),
                            }
                            for p in dev.processes
                        ],
                    },
                    fix=fix,
                    gain_value=max(share, mean / 100 if busy else 0.0),
                    estimated_gain=" and ".join(gains),
                )
            )
        return findings


def _held_by_others(dev: GpuDevice) -> int:
    """The memory others hold: the processes NVML lists, or the memory used on the
    device where that is more (in a container NVML lists no processes of other
    containers; the memory used, read before TF started, still shows them). With v2
    the used memory leaves out the driver's reservation; with v1 it includes it."""
    listed = sum(p.used_bytes or 0 for p in dev.processes)
    return max(listed, dev.memory_used_bytes or 0)


def _busy_samples(dev: GpuDevice, options: dict[str, Any]) -> int:
    return sum(v >= options["busy_percent"] for v in dev.busy_before_samples or ())


def _sustained_busy(dev: GpuDevice, options: dict[str, Any]) -> bool:
    """The driver's samples show the GPU busy over at least ``sustained_s`` before the
    run: several of them, nearly all busy. A point reading never counts."""
    samples = dev.busy_before_samples or ()
    return (
        len(samples) >= MIN_BUSY_SAMPLES
        and (dev.busy_before_seconds or 0.0) >= options["sustained_s"]
        and _busy_samples(dev, options) >= options["busy_share"] * len(samples)
    )


def _holding(dev: GpuDevice, held: int, share: float, options: dict[str, Any]) -> bool:
    """Someone holds the GPU now, so a busy reading is not the last of a program that
    ended: a process listed, or memory used beyond the driver's reservation (known with
    v2 only; with v1 the used memory must pass ``memory_fraction``)."""
    if dev.processes:
        return True
    if dev.memory_reserved_bytes is not None:
        return held >= options["holding_mib"] * MiB
    return share >= options["memory_fraction"]


def _busy_evidence(dev: GpuDevice, options: dict[str, Any]) -> dict[str, Any] | None:
    """Which busy reading there was: the driver's samples (how many, over how long, how
    many busy); None where none were read (older records: their point reading proves
    nothing, see the docstring)."""
    samples = dev.busy_before_samples
    if samples is None:
        return None
    mean = dev.busy_before_percent
    return {
        "source": "driver samples",
        "samples": len(samples),
        "seconds": round(dev.busy_before_seconds or 0.0, 2),
        "busy_samples": _busy_samples(dev, options),
        "mean_percent": None if mean is None else round(mean, 1),
        "sustained": _sustained_busy(dev, options),
    }
