"""A traced training step's time on a named GPU, from what the audit read of its graph.

Three kinds of GPU work, each with a band (low, mid, high seconds):

- **matmuls and convolutions** (placement.tensor_ops): FLOPs at the peak of their
  precision on the target (tensor cores where dtype, TF32 and the architecture allow:
  gpus.py), at an efficiency that grows with the op's size: large ops reach about
  half the peak in cuDNN/cuBLAS, small ones a fraction of it.
- **other kernels** (placement.functions[].kernels): elementwise ops, reductions and
  normalisations move their bytes at the memory bandwidth (read about as much as they
  write: twice their output), and no kernel is cheaper than its launch.
- **host<->device copies** of the step: a latency each (the audit counts them), and
  the batch itself over the host link.

Ops of unknown size count as launches only, and the projection says how many there
were. The efficiencies below are literature values for cuDNN/cuBLAS training kernels,
not yet calibrated against steps measured on these GPUs: the band is wide on purpose,
and the output calls the figure a projection.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts import AuditedFunction, PlacementFacts, TensorOp
from gpuwhy.projection.gpus import GpuSpec

# Fraction of the dtype's peak a matmul/convolution reaches, by its GFLOPs: (low, mid,
# high) efficiencies; a higher efficiency is a shorter time.
TENSOR_EFFICIENCY = (
    (1.0, (0.35, 0.55, 0.80)),  # >= 1 GFLOP
    (0.1, (0.20, 0.35, 0.60)),  # >= 0.1 GFLOP
    (0.0, (0.05, 0.15, 0.35)),  # smaller: latency and occupancy bound
)
MEMORY_EFFICIENCY = (0.50, 0.70, 0.85)  # of the peak memory bandwidth
LINK_EFFICIENCY = (0.50, 0.75, 0.90)  # of the host link's bandwidth
# Seconds per kernel launch, TF's executor issuing one op after another (graph mode);
# under XLA fused kernels replace several ops each.
LAUNCH_S = (6e-6, 4e-6, 2.5e-6)
XLA_OPS_PER_KERNEL = 4
COPY_LATENCY_S = 10e-6


@dataclass(frozen=True)
class Band:
    """Seconds: the highest and lowest the model allows, and its middle estimate."""

    low: float
    mid: float
    high: float

    def __add__(self, other: Band) -> Band:
        return Band(self.low + other.low, self.mid + other.mid, self.high + other.high)


ZERO = Band(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class StepProjection:
    """One step of ``function`` on ``gpu``: its parts and their sum."""

    gpu: str
    function: str
    tensor: Band  # matmuls and convolutions
    kernels: Band  # other GPU kernels
    copies: Band  # host<->device copies
    tensor_ops: int
    tensor_ops_unsized: int  # of unknown FLOPs: not in `tensor`
    kernel_count: int
    kernels_unsized: int  # of unknown bytes: launches only
    launch_bound: Band = ZERO  # of `kernels`: op types whose launches outweigh their bytes
    launch_bound_kernels: int = 0

    @property
    def step(self) -> Band:
        return self.tensor + self.kernels + self.copies


def _times(work: float, peak: float, efficiency: tuple[float, float, float]) -> Band:
    """``work`` at ``peak`` per second: the lowest time at the highest efficiency."""
    low_eff, mid_eff, high_eff = efficiency
    return Band(work / (peak * high_eff), work / (peak * mid_eff), work / (peak * low_eff))


def _tensor_efficiency(flops: float) -> tuple[float, float, float]:
    for gflops, band in TENSOR_EFFICIENCY:
        if flops >= gflops * 1e9:
            return band
    return TENSOR_EFFICIENCY[-1][1]


def tensor_time(ops: list[TensorOp], gpu: GpuSpec, tf32_enabled: bool) -> Band:
    total = ZERO
    for op in ops:
        if op.flops:
            peak = gpu.matmul_flops(op.dtype, tf32_enabled)
            total = total + _times(op.flops, peak, _tensor_efficiency(op.flops))
    return total


def kernel_times(function: AuditedFunction, gpu: GpuSpec) -> tuple[Band, Band, int]:
    """Each op type's kernels: their bytes at memory bandwidth, never less than their
    launches (ops of unknown size: launches only). Returns (all of it, the part of op
    types whose launches outweigh their bytes, how many kernels those are)."""
    per_launch = Band(LAUNCH_S[2], LAUNCH_S[1], LAUNCH_S[0])
    fused = XLA_OPS_PER_KERNEL if function.jit_compile else 1
    total = bound = ZERO
    bound_kernels = 0
    for work in function.kernels:
        launches = max(1, work.count // fused)
        floor = Band(
            per_launch.low * launches, per_launch.mid * launches, per_launch.high * launches
        )
        moved = _times(2 * work.bytes, gpu.memory_bandwidth, MEMORY_EFFICIENCY)
        total = total + Band(
            max(floor.low, moved.low), max(floor.mid, moved.mid), max(floor.high, moved.high)
        )
        if floor.mid >= moved.mid:
            bound = bound + floor
            bound_kernels += launches
    return total, bound, bound_kernels


def kernel_time(function: AuditedFunction, gpu: GpuSpec) -> Band:
    return kernel_times(function, gpu)[0]


def copy_time(function: AuditedFunction, input_bytes: int | None, gpu: GpuSpec) -> Band:
    """The step's copies: each costs a transfer's latency, and the batch it is given
    (``input_bytes``, the pipeline's element size) crosses the host link."""
    count = function.input_copies + function.step_copies
    latency = Band(COPY_LATENCY_S * count, COPY_LATENCY_S * count, COPY_LATENCY_S * count)
    if not input_bytes:
        return latency
    return latency + _times(input_bytes, gpu.host_link, LINK_EFFICIENCY)


def training_function(placement: PlacementFacts) -> AuditedFunction | None:
    """The audited function that trains (its tensor ops have a backward pass), else the
    first audited one (they come most time in calls first)."""
    training = {op.function for op in placement.tensor_ops if op.gradient}
    for function in placement.functions:
        if _label(function) in training:
            return function
    return placement.functions[0] if placement.functions else None


def _label(function: AuditedFunction) -> str:
    return f"{function.name} ({function.location})" if function.location else function.name


def project_step(
    placement: PlacementFacts, gpu: GpuSpec, input_bytes: int | None = None
) -> StepProjection | None:
    """One call of the training function on ``gpu``; None without an audited function.
    ``input_bytes``: the batch the step is given (its copy to the GPU)."""
    function = training_function(placement)
    if function is None:
        return None
    label = _label(function)
    ops = [op for op in placement.tensor_ops if op.function in (label, None)]
    kernels, launch_bound, launch_bound_kernels = kernel_times(function, gpu)
    return StepProjection(
        gpu=gpu.name,
        function=label,
        tensor=tensor_time(ops, gpu, placement.tf32_enabled is not False),
        kernels=kernels,
        launch_bound=launch_bound,
        launch_bound_kernels=launch_bound_kernels,
        copies=copy_time(function, input_bytes, gpu),
        tensor_ops=len(ops),
        tensor_ops_unsized=sum(1 for op in ops if not op.flops),
        kernel_count=sum(k.count for k in function.kernels),
        kernels_unsized=sum(k.count - k.sized for k in function.kernels),
    )
