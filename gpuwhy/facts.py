"""Facts: the plain data that collectors produce and rules read.

Collectors never decide and rules never touch TensorFlow or NVML; this module is the
contract between them. Every section is a frozen dataclass made only of JSON-friendly
values, so a saved run record can be loaded on another machine and checked again with
the current rules (``gpuwhy report --recheck``) without filling anything from the
machine that loads it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class LibraryProbe:
    """One shared library the TensorFlow build loads for the GPU, and whether it loads here.

    ``wanted`` is the exact soname the build asks for (``libcudnn.so.9``); ``other_versions``
    lists sonames of the same library with another major version that *are* on the loader
    path, which is how "CUDA 13 installed, TF built for CUDA 12" shows up.
    """

    name: str                          # short name: cudart, cublas, cudnn ...
    wanted: str                        # soname the build needs
    loaded: bool                       # dlopen succeeded (or TF already had it mapped)
    path: Optional[str] = None         # where it was found
    error: Optional[str] = None        # dlerror text when it did not load
    other_versions: tuple[str, ...] = ()  # other majors found on the loader path
    pip_package: Optional[str] = None  # pip package that ships it (nvidia-cudnn-cu12)
    apt_package: Optional[str] = None  # Debian/Ubuntu package (NVIDIA's CUDA repository)


@dataclass(frozen=True)
class TensorFlowFacts:
    """What a child Python process saw when it imported TensorFlow and asked for GPUs."""

    installed: bool
    probe_status: str = "ok"           # ok | timeout | crashed | error
    python_version: Optional[str] = None  # of the interpreter that was checked
    import_ok: bool = False
    import_error: Optional[str] = None  # last line of the exception, or the crash signal
    import_traceback: Optional[str] = None
    hung_in: Optional[str] = None      # stage the child was in when it timed out / crashed
    signal: Optional[str] = None       # SIGILL, SIGSEGV ... when the child died of one
    version: Optional[str] = None
    distribution: Optional[str] = None  # pip distribution that owns the package (tensorflow-cpu)
    location: Optional[str] = None     # package directory
    import_seconds: Optional[float] = None
    build: dict[str, Any] = field(default_factory=dict)  # tf.sysconfig.get_build_info()
    gpus: tuple[str, ...] = ()         # tf.config.list_physical_devices("GPU") names
    gpu_details: tuple[dict[str, Any], ...] = ()  # name, compute_capability, pci_bus_id per TF GPU
    confirm_device: Optional[str] = None  # device a real matmul ran on (None: not tried)
    confirm_error: Optional[str] = None
    loaded_libraries: tuple[str, ...] = ()  # CUDA-related .so files mapped in the child
    libraries: tuple[LibraryProbe, ...] = ()
    log_lines: tuple[str, ...] = ()    # TF's own GPU-related log lines (stderr)


@dataclass(frozen=True)
class DriverFacts:
    """The NVIDIA driver as NVML and libcuda report it, independent of TensorFlow."""

    nvml_ok: bool
    nvml_error: Optional[str] = None   # NVML error name: LibraryNotFound, DriverNotLoaded ...
    libcuda_loaded: bool = False
    libcuda_error: Optional[str] = None
    driver_version: Optional[str] = None   # "550.54.15"
    cuda_driver_version: Optional[str] = None  # highest CUDA the driver supports: "12.4"
    device_count: int = 0
    in_container: bool = False
    device_nodes: bool = False          # /dev/nvidiactl exists


@dataclass(frozen=True)
class GpuProcess:
    """A process holding memory on a GPU (from NVML), other than gpuwhy's own."""

    pid: int
    name: Optional[str] = None
    used_bytes: Optional[int] = None


@dataclass(frozen=True)
class GpuDevice:
    """One physical NVIDIA GPU as NVML sees it, before TensorFlow allocates anything."""

    index: int
    name: str
    uuid: Optional[str] = None
    pci_bus_id: Optional[str] = None
    compute_capability: Optional[str] = None  # "9.0"
    memory_total_bytes: Optional[int] = None
    memory_used_bytes: Optional[int] = None   # by everyone, sampled before TF started
    utilization_percent: Optional[float] = None
    processes: tuple[GpuProcess, ...] = ()


@dataclass(frozen=True)
class EnvironmentFacts:
    """Section ``environment``: the machine, the TF build, the driver and the settings."""

    python_version: str
    python_executable: str
    platform: str                      # sys.platform: linux, darwin, win32
    machine: str                       # x86_64, aarch64, arm64
    wsl: bool = False
    cpu_count: Optional[int] = None
    env_vars: dict[str, str] = field(default_factory=dict)  # the GPU-relevant ones that are set
    tensorflow: Optional[TensorFlowFacts] = None
    driver: Optional[DriverFacts] = None


@dataclass(frozen=True)
class Facts:
    """All fact sections of one run. A section is ``None`` when it was not collected;
    rules that need it are then skipped and listed as not checked."""

    environment: Optional[EnvironmentFacts] = None
    devices: Optional[tuple[GpuDevice, ...]] = None

    def has(self, section: str) -> bool:
        return getattr(self, section, None) is not None


# ---------------------------------------------------------------------------
# JSON round trip. asdict() goes out; from_dict() rebuilds the frozen classes from
# their type hints, so adding a field to a section needs no serialisation code.

def to_dict(obj: Any) -> Any:
    """Dataclass tree -> JSON-friendly dicts/lists (tuples become lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def from_dict(cls: Any, data: Any) -> Any:
    """Rebuild ``cls`` (a dataclass or a typing form over dataclasses) from JSON data.

    Unknown keys are ignored so that a record written by a newer minor version of
    gpuwhy with extra fields still loads; the schema number guards real breaks.
    """
    if data is None:
        return None
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):   # only Optional[X] is used in facts
        (inner,) = [a for a in typing.get_args(cls) if a is not type(None)]
        return from_dict(inner, data)
    if origin in (tuple, list):
        (item,) = typing.get_args(cls)[:1]
        values = [from_dict(item, v) for v in data]
        return tuple(values) if origin is tuple else values
    if origin is dict:
        return dict(data)
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        kwargs = {f.name: from_dict(hints[f.name], data[f.name])
                  for f in dataclasses.fields(cls) if f.name in data}
        return cls(**kwargs)
    return data
