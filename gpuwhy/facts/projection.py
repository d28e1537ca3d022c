"""Sections ``target`` and ``projection``.

``target``: the GPU ``--target`` named and what projecting onto it needs that no other
section keeps (a few profiled steps, NVML's reading of a GPU the table lacks): the
derivation stage projects the step from it and the other sections (derived/stage.py).

``projection``: the traced training step as it would run on a named GPU, joined with the
input pipeline as the run measured it: what the stage derives. A record keeps it as a
section only where it was written before the ``target`` section existed (or facts are
made by hand): the stage then reads it as it was projected.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.facts.step_profile import StepProfile


@dataclass(frozen=True)
class NvmlReading:
    """What NVML says of one GPU that the peaks are derived from (None: not reported)."""

    name: str
    compute_capability: tuple[int, int] | None = None  # nvmlDeviceGetCudaComputeCapability
    architecture: int | None = None  # nvmlDeviceGetArchitecture
    cuda_cores: int | None = None  # nvmlDeviceGetNumGpuCores
    max_sm_clock_mhz: int | None = None  # nvmlDeviceGetMaxClockInfo(NVML_CLOCK_SM)
    max_memory_clock_mhz: int | None = None  # nvmlDeviceGetMaxClockInfo(NVML_CLOCK_MEM)
    memory_bus_bits: int | None = None  # nvmlDeviceGetMemoryBusWidth
    memory_bytes: int | None = None  # nvmlDeviceGetMemoryInfo().total
    pcie_generation: int | None = None  # nvmlDeviceGetMaxPcieLinkGeneration
    pcie_width: int | None = None  # nvmlDeviceGetMaxPcieLinkWidth


@dataclass(frozen=True)
class TargetFacts:
    """Section ``target``: what ``--target`` asked for, and the measurements of this run
    the projection onto it reads that no other section keeps."""

    requested: str  # as asked: "A100", "auto"
    # a few training steps profiled once warm (their CPU ops' time, each call's own
    # cost); None where they were not, ``unprofiled`` saying why
    profile: StepProfile | None = None
    unprofiled: str | None = None
    # ``auto`` on a GPU gpuwhy's table lacks: what NVML reports of this machine's first
    # GPU, its peaks derived from it (projection/derive.py); None where not read
    peaks: NvmlReading | None = None


@dataclass(frozen=True)
class ProjectionFacts:
    """Section ``projection``: the traced training step as it would run on a named GPU.

    Predicted: a cost model of the audited graph (gpuwhy/projection/cost.py) at the
    target's published peaks (gpuwhy/gpu_specs.py), plus the ops that stay on the CPU at their time
    measured on this host's CPU (a few profiled steps). Every time is a band
    (``*_low_s`` .. ``*_high_s`` around the middle estimate). The input side joins what
    this run measured: the pipeline's time to make one batch on this host."""

    gpu: str  # the table's name: "A100"
    requested: str  # as asked: "A100", "auto"
    function: str  # the projected tf.function: "train_step (train.py:40)"
    step_s: float
    step_low_s: float
    step_high_s: float
    tensor_s: float  # matmuls and convolutions
    kernels_s: float  # other GPU kernels (memory bandwidth or launches)
    copies_s: float  # host<->device copies
    # ops that stay on the CPU on any GPU (no GPU kernel, or pinned there), at the time
    # a few profiled steps measured on this host's CPU: the middle and the band for the
    # target's host; how many ops there are, how many were measured, and how
    cpu_ops_s: float = 0.0
    cpu_ops_low_s: float | None = None
    cpu_ops_high_s: float | None = None
    cpu_ops: int = 0
    cpu_ops_measured: int = 0
    cpu_ops_measured_by: str | None = None
    tensor_ops: int = 0
    tensor_ops_unsized: int = 0  # of unknown FLOPs: left out
    kernels: int = 0
    kernels_unsized: int = 0  # of unknown bytes: launches only
    launch_bound_s: float = 0.0  # of kernels_s: op types whose launches outweigh their bytes
    launch_bound_kernels: int = 0
    jit_compile: bool = False  # the projected function is compiled by XLA
    cudnn_rnn: tuple[str, ...] = ()  # Keras LSTM/GRU layers costed as cuDNN runs them
    batch: int | None = None  # the batch size the FLOPs were sized with, where needed
    input_batch_s: float | None = None  # the pipeline alone per batch, this host (TF's
    # stage timers: the slowest stage at the threads it ran with)
    input_batch_measured_s: float | None = None  # per batch as the steps got them here,
    # where they waited for input (the mean step: the pipeline shared the cores with the
    # model, so this is an upper bound)
    input_wait_fraction: float | None = None  # projected share of a step waiting for input
    input_wait_low: float | None = None  # the slowest step, the pipeline alone
    input_wait_high: float | None = None  # the fastest step, the pipeline as measured here
    calibrated: bool = False  # the model's path for this function was fitted to published
    # throughputs (XLA-compiled functions; docs/projection.md)
    # where this run trained on the target GPU itself: its median step less its median
    # input wait (what the projection models), to put beside the projected step
    measured_step_s: float | None = None
    # Python issuing eager ops each step (measured here: ops per step x the median gap
    # between two of them); a GPU runs their kernels while Python issues the next, so
    # the step is at least this long, whatever the GPU
    # the GPU's part alone (its kernels, copies and the ops that stay on the CPU), the
    # step's part that comes from the traced graph: what `diff`'s projected gate compares
    # (the host's measured work moves from run to run; the step time sees it)
    device_s: float | None = None
    device_low_s: float | None = None
    device_high_s: float | None = None
    # the host's own work per step, on the target's host (projection/host.py): the time
    # between calls of the step's function and each call's own cost, measured here;
    # overlapping the GPU's work at best, added to it at worst
    host_s: float = 0.0
    host_low_s: float | None = None
    host_high_s: float | None = None
    host_between_s: float | None = None  # measured here: per step, outside the calls
    call_overhead_s: float | None = None  # measured here: per call, outside its ops
    eager_s: float = 0.0
    eager_ops_per_step: float | None = None
    graph: bool = True  # False: no traced function in the step, only eager ops (the
    # device work is then unknown and the step a lower bound)
    notes: tuple[str, ...] = ()

    @property
    def paced_step_s(self) -> float | None:
        """The step as the loop would see it where its input sets the pace: ``step_s``
        is the step alone, ``input_wait_fraction`` the share of the paced step spent
        waiting, so the paced step is the step over its share not waiting (None where
        no wait was projected)."""
        wait = self.input_wait_fraction
        if wait is None or not 0 < wait < 1 or self.step_s <= 0:
            return None
        return self.step_s / (1 - wait)
