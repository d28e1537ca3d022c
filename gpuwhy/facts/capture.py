"""Section ``capture``: what a profiler capture (XProf's XSpace, written by TensorFlow's or
JAX's profiler) measured of the program: its steps, the GPU's kernels and copies, and
what the host did while the GPU waited. Every figure here is measured, none predicted.
Filled by ``gpuwhy report CAPTURE`` and by ``gpuwhy run --capture N``.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

# what the host was doing while the GPU idled inside a step, most specific first: the
# time of a gap goes to the first of these whose events cover it ("compute": TensorFlow
# op kernels running on the host)
HOST_ACTIVITIES = ("input", "compile", "synchronisation", "compute", "python", "dispatch")
# no host event covers that idle time: Python between TF's calls (without the Python
# tracer), or the host idle
NOT_RECORDED = "untraced"


@dataclass(frozen=True)
class CaptureKernel:
    """One kernel (by name) on one GPU over the capture. ``tensor_core``: the precision a
    tensor-core kernel's name says ("tf32", "bf16", "fp16", "fp8", "int8"; "" where the
    name does not say), None for a kernel that uses none; ``matmul``: a convolution or a
    matrix product (one that could use them). ``op``: the TensorFlow op (or XLA
    instruction) the capture attaches to it, ``module`` its XLA module."""

    name: str
    count: int
    time_s: float
    tensor_core: str | None = None
    matmul: bool = False
    op: str | None = None
    module: str | None = None


@dataclass(frozen=True)
class CaptureModule:
    """An XLA module (a jitted function, a TF function compiled with XLA) and its kernels' time."""

    name: str
    time_s: float
    kernels: int


@dataclass(frozen=True)
class CaptureCopies:
    """The copies of one direction on one GPU. ``pageable``: copies from or to pageable
    host memory (the driver stages them through a pinned buffer: slower, never overlapped);
    ``overlapped_s``: their time while a kernel ran on another stream."""

    direction: str  # "host_to_device" | "device_to_host" | "device_to_device" | "peer"
    count: int
    bytes: int
    time_s: float
    pageable: int = 0
    pinned: int = 0
    overlapped_s: float = 0.0


@dataclass(frozen=True)
class CaptureDevice:
    """One GPU's plane. ``busy_s``: the union of its kernels' intervals over all streams
    (not their sum), within the capture; ``kernel_time_s`` their sum."""

    name: str  # "/device:GPU:0"
    model: str | None
    streams: int
    kernels: int
    busy_s: float
    kernel_time_s: float
    tensor_core_s: float  # kernels whose names say they use tensor cores
    matmul_s: float  # convolutions and matrix products
    matmul_tensor_core_s: float  # of those, on tensor cores
    steps_busy_s: float = 0.0  # the union of its kernels inside the steps
    top_kernels: tuple[CaptureKernel, ...] = ()
    modules: tuple[CaptureModule, ...] = ()
    copies: tuple[CaptureCopies, ...] = ()


@dataclass(frozen=True)
class HostShare:
    """What the host was doing for ``seconds`` of the GPU's idle time in the steps."""

    activity: str  # one of HOST_ACTIVITIES or NOT_RECORDED
    seconds: float
    share: float  # of the idle time in the steps
    top: tuple[str, ...] = ()  # the host events that covered most of it, longest first


@dataclass(frozen=True)
class CaptureStep:
    """One step: from its start to the next one's. ``busy_s`` the union of kernel
    intervals in it (all GPUs' planes), ``copy_s`` the union of copies', ``kernels`` how
    many ran, ``median_kernel_s`` their median length, ``median_gap_s`` the median gap
    between one kernel's end and the next one's start where the GPU idled; ``idle_s``
    and ``host``: the GPU's idle time in the step and the activity that covered most of
    it (a step that waited for input among steps that waited for nothing shows here)."""

    start_s: float  # from the capture's start
    duration_s: float
    busy_s: float
    copy_s: float = 0.0
    exposed_copy_s: float = 0.0  # of copy_s, while no kernel ran (not hidden behind one)
    kernels: int = 0
    median_kernel_s: float | None = None
    median_gap_s: float | None = None
    idle_s: float | None = None  # the GPU's idle time in it (the whole step without a GPU)
    host: str | None = None  # what the host did in most of that time (HOST_ACTIVITIES...)


@dataclass(frozen=True)
class HostOp:
    """A TensorFlow op kernel that ran on the host during the steps (its node name and
    type; ``gpu_kernels``: False where no GPU kernel carries that node, so it ran on
    the CPU; None where the capture cannot tell)."""

    name: str
    type: str
    count: int
    time_s: float
    on_cpu: bool | None = None


@dataclass(frozen=True)
class PythonFrame:
    """A Python function (the profiler's Python tracer) that covered the GPU's idle time:
    where the host spent the steps' gaps, by its file (the base name the tracer gives)
    and the line of its def."""

    function: str
    file: str | None
    line: int | None
    seconds: float


@dataclass(frozen=True)
class CaptureFacts:
    """A capture read back. ``steps_from`` says how the steps were found: "step markers"
    (TF's ``Trace(..., step_num=, _r=1)``), "function calls" (each call of ``step_name``,
    a tf.function, or a jitted function where JAX's capture has no GPU), "device pattern" (a kernel the GPU ran once per step, XProf's
    "no step marker" case), "eager op pattern" (an op an eager loop ran once per step,
    on a capture without a GPU); None where no step was found. ``no_device``: why the
    capture has no GPU figures (a CPU-only machine, a capture without device tracing).
    ``steps``: the first ``MAX_STEPS`` steps (a capture holds a few dozen)."""

    path: str
    producer: str  # "tensorflow" | "jax" | "unknown"
    span_s: float
    host: str | None = None
    versions: tuple[tuple[str, str], ...] = ()
    devices: tuple[CaptureDevice, ...] = ()
    no_device: str | None = None
    steps_from: str | None = None
    step_name: str | None = None
    steps: tuple[CaptureStep, ...] = ()
    step_count: int = 0
    # the steps' GPU idle time by host activity (without a GPU: the steps' whole time)
    idle: tuple[HostShare, ...] = ()
    python: tuple[PythonFrame, ...] = ()  # the program's own frames, never a library's
    # the Python frames the input wait was spent in that are input by name (``next``, a
    # data library's files: Keras' ``slice_and_convert_to_jax``), libraries' included
    input_frames: tuple[PythonFrame, ...] = ()
    # tf.data's stages busiest while the steps waited for input, most first
    # ("Iterator::Root::Prefetch::FlatMap[0]::Generator", "EagerPyFunc")
    input_stages: tuple[str, ...] = ()
    host_ops: tuple[HostOp, ...] = ()
    host_ops_known: bool = False  # whether GPU kernels name their ops (on_cpu can be told)
    cpu_ops_s: float = 0.0  # the union of the steps' op kernels that ran on the CPU
    bytes: int = 0  # the capture file's size
    captured_steps: int | None = None  # gpuwhy run --capture N: the steps asked for
    overhead_s: float | None = None  # run --capture: time the capture cost the program
    note: str | None = None  # why a part could not be read

    @property
    def steps_s(self) -> float:
        """The steps' time, together."""
        return sum(s.duration_s for s in self.steps)

    @property
    def median_step_s(self) -> float | None:
        return statistics.median(s.duration_s for s in self.steps) if self.steps else None

    @property
    def busy_share(self) -> float | None:
        """The GPU's busy time over the steps' time (the union of kernels; with several
        GPUs, of all of theirs: the time any was busy); None without a GPU."""
        if not self.devices:
            return None
        total = self.steps_s
        return sum(s.busy_s for s in self.steps) / total if total > 0 else None
