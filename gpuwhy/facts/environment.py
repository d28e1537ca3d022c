"""Sections ``environment`` and ``devices``: the machine, the TensorFlow build as a child
process saw it, the NVIDIA driver and the GPUs, read before anything runs on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LibraryProbe:
    """One shared library the TensorFlow build loads for the GPU, and whether it loads here.

    ``wanted`` is the exact soname the build asks for (``libcudnn.so.9``); ``other_versions``
    lists sonames of the same library with another major version that *are* on the loader
    path, which is how "CUDA 13 installed, TF built for CUDA 12" shows up.
    """

    name: str  # short name: cudart, cublas, cudnn ...
    wanted: str  # soname the build needs
    loaded: bool  # dlopen succeeded (or TF already had it mapped)
    path: str | None = None  # where it was found
    error: str | None = None  # dlerror text when it did not load
    other_versions: tuple[str, ...] = ()  # other majors found on the loader path
    pip_package: str | None = None  # pip package that ships it (nvidia-cudnn-cu12)
    apt_package: str | None = None  # Debian/Ubuntu package (NVIDIA's CUDA repository)


@dataclass(frozen=True)
class TensorFlowFacts:
    """What a child Python process saw when it imported TensorFlow and asked for GPUs."""

    installed: bool
    probe_status: str = "ok"  # ok | timeout | crashed | error
    python_version: str | None = None  # of the interpreter that was checked
    import_ok: bool = False
    import_error: str | None = None  # last line of the exception, or the crash signal
    import_traceback: str | None = None
    hung_in: str | None = None  # stage the child was in when it timed out / crashed
    signal: str | None = None  # SIGILL, SIGSEGV ... when the child died of one
    version: str | None = None
    distribution: str | None = None  # pip distribution that owns the package (tensorflow-cpu)
    location: str | None = None  # package directory
    import_seconds: float | None = None
    build: dict[str, Any] = field(default_factory=dict)  # tf.sysconfig.get_build_info()
    gpus: tuple[str, ...] = ()  # tf.config.list_physical_devices("GPU") names
    gpu_details: tuple[dict[str, Any], ...] = ()  # name, compute_capability, pci_bus_id per TF GPU
    confirm_device: str | None = None  # device a real matmul ran on (None: not tried)
    confirm_error: str | None = None
    loaded_libraries: tuple[str, ...] = ()  # CUDA-related .so files mapped in the child
    libraries: tuple[LibraryProbe, ...] = ()
    log_lines: tuple[str, ...] = ()  # TF's own GPU-related log lines (stderr)


@dataclass(frozen=True)
class DriverFacts:
    """The NVIDIA driver as NVML and libcuda report it, independent of TensorFlow."""

    nvml_ok: bool
    nvml_error: str | None = None  # NVML error name: LibraryNotFound, DriverNotLoaded ...
    libcuda_loaded: bool = False
    libcuda_error: str | None = None
    driver_version: str | None = None  # "550.54.15"
    cuda_driver_version: str | None = None  # highest CUDA the driver supports: "12.4"
    device_count: int = 0
    in_container: bool = False
    device_nodes: bool = False  # /dev/nvidiactl exists


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU (from NVML), other than gpuwhy's own."""

    pid: int
    name: str | None = None
    used_bytes: int | None = None


@dataclass(frozen=True)
class GpuDevice:
    """One physical NVIDIA GPU as NVML sees it, before TensorFlow allocates anything."""

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: str | None = None  # "9.0"
    memory_total_bytes: int | None = None
    # By everyone, read before TF started. With NVML's v2 memory info (memory_reserved_bytes
    # set) without the driver's own reservation; older records and drivers (v1) include it.
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None  # the driver's own (v2's `reserved`); None: v1
    # NVML's point reading (nvmlDeviceGetUtilizationRates) at the snapshot: it may be the
    # previous program's last one, so nothing decides on it alone (kept for older records).
    utilization_percent: float | None = None
    processes: tuple[GpuProcess, ...] = ()
    # The driver's own utilisation samples (percent each, oldest first) of the ~2 s before
    # the snapshot (nvmlDeviceGetSamples); None: not read (older record, or not supported).
    busy_before_samples: tuple[float, ...] | None = None
    busy_before_seconds: float | None = None  # first to last of those samples' timestamps

    @property
    def busy_before_percent(self) -> float | None:
        """The mean of :attr:`busy_before_samples`; None without any."""
        samples = self.busy_before_samples
        return sum(samples) / len(samples) if samples else None


@dataclass(frozen=True)
class EnvironmentFacts:
    """Section ``environment``: the machine, the TF build, the driver and the settings."""

    python_version: str
    python_executable: str
    platform: str  # sys.platform: linux, darwin, win32
    machine: str  # x86_64, aarch64, arm64
    wsl: bool = False
    cpu_count: int | None = None
    env_vars: dict[str, str] = field(default_factory=dict)  # the GPU-relevant ones that are set
    tensorflow: TensorFlowFacts | None = None
    driver: DriverFacts | None = None
