"""What a profiler capture's section says, read one way by the rules and the verdict: the
share of the steps' time the host spent on each activity while the GPU idled, the
kernels' launch pattern, and the convolutions and matmuls off tensor cores. Pure
functions of ``facts.capture``; every figure measured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuwhy.facts import CaptureFacts, HostShare, PythonFrame
from gpuwhy.library_files import is_library_frame

MIN_STEPS = 3  # fewer captured steps decide nothing
# Keras 3's adapter for in-memory arrays: fit(x, y) on NumPy arrays slices each batch out
# of them and converts it, in a generator on the training thread (slice_and_convert_to_jax)
KERAS_ARRAY_ADAPTER = "array_data_adapter.py"
ARRAY_SLICING_SHARE = 0.1  # of the input wait: less is a moment, not what the steps wait on


@dataclass(frozen=True)
class KernelPattern:
    """The steps' kernels: how many a step, how long each, the gaps between them."""

    kernels_per_step: int
    median_kernel_s: float
    median_gap_s: float | None
    busy_share: float


def activity_share(capture: CaptureFacts, activity: str) -> float:
    """The share of the steps' time the GPU idled (the whole step without a GPU) while
    the host was in ``activity``."""
    total = capture.steps_s
    seconds = sum(s.seconds for s in capture.idle if s.activity == activity)
    return seconds / total if total > 0 else 0.0


def activity(capture: CaptureFacts, name: str) -> HostShare | None:
    return next((s for s in capture.idle if s.activity == name), None)


def own_frame(capture: CaptureFacts) -> PythonFrame | None:
    """The program's own Python function that covered the GPU's idle time, the most
    specific first (the capture's Python tracer; None without it). Never a library's:
    a record written before the capture reader left them out may still list one, and a
    location in Keras' callback list is no line the user can change."""
    return next(
        (f for f in capture.python if f.file and not is_library_frame(f.function, f.file)),
        None,
    )


def keras_array_slicing_s(capture: CaptureFacts) -> float | None:
    """Seconds of the steps' input wait that Keras spent slicing batches out of
    in-memory arrays (its array adapter's frames; they nest, the outermost holds the
    rest), where that is at least ARRAY_SLICING_SHARE of the wait; else None. The rest
    of such a wait is the same batches' copy to the device and fit's iterator."""
    waited = activity(capture, "input")
    slicing = max(
        (f.seconds for f in capture.input_frames if f.file == KERAS_ARRAY_ADAPTER), default=0.0
    )
    if waited is None or slicing <= 0 or slicing < ARRAY_SLICING_SHARE * waited.seconds:
        return None
    return slicing


def decides(capture: CaptureFacts | None) -> bool:
    """Whether the capture holds enough steps to decide anything."""
    return capture is not None and len(capture.steps) >= MIN_STEPS


def kernel_pattern(capture: CaptureFacts) -> KernelPattern | None:
    """The median step's kernels, where the capture has a GPU and steps with kernels."""
    busy = capture.busy_share
    steps = [s for s in capture.steps if s.kernels and s.median_kernel_s is not None]
    if busy is None or len(steps) < MIN_STEPS:
        return None
    gaps = [s.median_gap_s for s in steps if s.median_gap_s is not None]
    return KernelPattern(
        kernels_per_step=statistics.median_low(s.kernels for s in steps),
        median_kernel_s=statistics.median(s.median_kernel_s or 0.0 for s in steps),
        median_gap_s=statistics.median(gaps) if gaps else None,
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


PERTURBED = 1.2  # traced steps this much slower than the run's are no measure of it


def device_shares(
    capture: CaptureFacts | None, run_median_s: float | None = None
) -> dict[int, float]:
    """The share of the captured steps the GPU's kernels ran, by the index NVML gives
    it: only where the capture has one GPU (TF numbers GPUs after CUDA_VISIBLE_DEVICES,
    NVML by the bus: with several, which is which is not known here), and only where
    the traced steps ran at about the run's pace (``run_median_s``: the watched run's
    median step; the profiler slowed them otherwise, and their share says little of
    the run's)."""
    if capture is None or not decides(capture) or len(capture.devices) != 1:
        return {}
    median = capture.median_step_s
    if run_median_s and median and median > PERTURBED * run_median_s:
        return {}
    total = capture.steps_s
    index = capture.devices[0].name.rsplit(":", 1)[-1]
    if not index.isdigit() or total <= 0:
        return {}
    return {int(index): capture.devices[0].steps_busy_s / total}
