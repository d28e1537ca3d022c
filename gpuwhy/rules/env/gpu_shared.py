"""env.gpu-shared: other processes already hold the GPU's memory or compute."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes.gpu_evidence import memory_evidence
from gpuwhy.formatting import MiB
from gpuwhy.rules.base import Rule


class GpuShared(Rule):
    """Other processes use the GPU that TensorFlow will use, so it gets less memory and time.

    ## What it detects
    Before TensorFlow starts, NVML lists processes on a GPU holding at least
    `memory_fraction` of its memory, or the GPU is already busy for at least
    `busy_percent` of the time. High when others hold `high_fraction` of the memory or
    more. Each process is named with its pid, command line and memory.

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

    Use instead:
    ```console
    $ export CUDA_VISIBLE_DEVICES=1          # a free GPU, or stop the old process
    $ export TF_FORCE_GPU_ALLOW_GROWTH=true  # when sharing is intended: take memory as needed
    ```

    ## Options
    - `memory_fraction`: share of a GPU's memory held by others that triggers (0.10).
    - `high_fraction`: share held by others that makes the finding high (0.50).
    - `busy_percent`: NVML utilisation before the run that triggers (20).
    """

    id = "env.gpu-shared"
    severity = "medium"
    status = "stable"
    needs = ("devices",)
    options = {"memory_fraction": 0.10, "high_fraction": 0.50, "busy_percent": 20}
    question = "Why is it slower than expected?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        findings = []
        devices = facts.devices or ()
        for dev in devices:
            total = dev.memory_total_bytes or 0
            # In a container NVML lists no processes of other containers; the memory
            # used on the device (read before TF started) still shows them.
            held = max(sum(p.used_bytes or 0 for p in dev.processes), dev.memory_used_bytes or 0)
            share = held / total if total else 0.0
            busy = dev.utilization_percent or 0.0
            if share < options["memory_fraction"] and busy < options["busy_percent"]:
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
            findings.append(
                self.finding(
                    f"GPU {dev.index} ({dev.name}) is shared: other processes hold "
                    f"{held / MiB:,.0f} MiB ({share:.0%}) and it is {busy:.0f}% busy",
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
                        "utilization_percent_before_run": busy,
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
                    gain_value=share,
                    estimated_gain=f"up to {share:.0%} more GPU memory for TensorFlow",
                )
            )
        return findings
