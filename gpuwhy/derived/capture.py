"""What a profiler capture's section says, read one way by the rules and the verdict: the
share of the steps' time the host spent on each activity while the GPU idled, the
kernels' launch pattern, and the convolutions and matmuls off tensor cores. Pure
functions of ``facts.capture``; every figure measured."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts import CaptureFacts, HostShare, PythonFrame

MIN_STEPS = 3  # fewer captured steps decide nothing


@dataclass(frozen=True)
class KernelPattern:
    """The steps' kernels: how many a step, how long each, the gaps between them."""

    kernels_per_step: int
    median_kernel_s: float
    median_gap_s: float | None
    busy_share: float


def steps_time(capture: CaptureFacts) -> float:
    return sum(s.duration_s for s in capture.steps)


def activity_share(capture: CaptureFacts, activity: str) -> float:
    """The share of the steps' time the GPU idled (the whole step without a GPU) while
    the host was in ``activity``."""
    total = steps_time(capture)
    seconds = sum(s.seconds for s in capture.idle if s.activity == activity)
    return seconds / total if total > 0 else 0.0


def activity(capture: CaptureFacts, name: str) -> HostShare | None:
    return next((s for s in capture.idle if s.activity == name), None)


def own_frame(capture: CaptureFacts) -> PythonFrame | None:
    """The program's own Python function that covered the GPU's idle time, the most
    specific first (the capture's Python tracer; None without it)."""
    return next((f for f in capture.python if f.file), None)


def decides(capture: CaptureFacts | None) -> bool:
    """Whether the capture holds enough steps to decide anything."""
    return capture is not None and len(capture.steps) >= MIN_STEPS


def kernel_pattern(capture: CaptureFacts) -> KernelPattern | None:
    """The median step's kernels, where the capture has a GPU and steps with kernels."""
    busy = capture.busy_share
    steps = [s for s in capture.steps if s.kernels and s.median_kernel_s is not None]
    if busy is None or len(steps) < MIN_STEPS:
        return None
    gaps = sorted(s.median_gap_s for s in steps if s.median_gap_s is not None)
    return KernelPattern(
        kernels_per_step=sorted(s.kernels for s in steps)[len(steps) // 2],
        median_kernel_s=sorted(s.median_kernel_s or 0.0 for s in steps)[len(steps) // 2],
        median_gap_s=gaps[len(gaps) // 2] if gaps else None,
        busy_share=busy,
    )


def matmul_off_tensor_cores(capture: CaptureFacts) -> tuple[float, float, list[str]]:
    """(seconds of convolutions and matmuls on no tensor core, their total seconds, the
    longest such kernels' names) over the capture's GPUs."""
    total = sum(d.matmul_s for d in capture.devices)
    off = sum(d.matmul_s - d.matmul_tensor_core_s for d in capture.devices)
    names = [
        k.name for d in capture.devices for k in d.top_kernels if k.matmul and k.tensor_core is None
    ]
    return off, total, names


def device_shares(capture: CaptureFacts | None) -> dict[int, float]:
    """Per GPU index (``/device:GPU:N``), the share of the captured steps its kernels ran."""
    if capture is None or not decides(capture):
        return {}
    total = steps_time(capture)
    shares = {}
    for device in capture.devices:
        index = device.name.rsplit(":", 1)[-1]
        if index.isdigit() and total > 0:
            shares[int(index)] = device.steps_busy_s / total
    return shares
