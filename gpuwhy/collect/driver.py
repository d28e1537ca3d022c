"""The NVIDIA driver, seen without TensorFlow: NVML for the GPUs and their users,
``libcuda.so.1`` for the CUDA version the driver supports.

Both are checked independently because they fail differently: NVML missing but libcuda
present happens in containers that mount only the compute libraries; libcuda missing
with NVML present means the driver's user-space part is broken.
"""

from __future__ import annotations

import ctypes
import os
import sys

from gpuwhy.collect import nvml
from gpuwhy.facts import DriverFacts, GpuDevice

LIBCUDA = {"linux": "libcuda.so.1", "win32": "nvcuda.dll"}


def libcuda_version() -> tuple[bool, str | None, str | None]:
    """(loaded, error, cuda version the driver supports) from ``cuDriverGetVersion``,
    which needs no cuInit and so cannot hang on a wedged GPU."""
    name = LIBCUDA.get(sys.platform)
    if name is None:
        return False, f"no NVIDIA CUDA driver exists for {sys.platform}", None
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        return False, str(e), None
    version = ctypes.c_int(0)
    try:
        rc = lib.cuDriverGetVersion(ctypes.byref(version))
    except AttributeError as e:
        return True, str(e), None
    return True, None, nvml.cuda_version_text(version.value) if rc == 0 else None


def in_container() -> bool:
    if (
        os.path.exists("/.dockerenv")
        or os.path.exists("/run/.containerenv")
        or "KUBERNETES_SERVICE_HOST" in os.environ
        or os.environ.get("container")
    ):
        return True
    try:
        with open("/proc/1/cgroup", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return False
    return any(word in text for word in ("docker", "containerd", "kubepods", "libpod"))


def collect(
    exclude_pids: frozenset[int] = frozenset(),
) -> tuple[DriverFacts, tuple[GpuDevice, ...]]:
    snap = nvml.snapshot(exclude_pids)
    loaded, error, cuda_from_lib = libcuda_version()
    driver = DriverFacts(
        nvml_ok=snap["ok"],
        nvml_error=snap["error"],
        libcuda_loaded=loaded,
        libcuda_error=error,
        driver_version=snap.get("driver_version"),
        cuda_driver_version=cuda_from_lib or snap.get("cuda_driver_version"),
        device_count=len(snap["devices"]),
        in_container=in_container(),
        device_nodes=os.path.exists("/dev/nvidiactl"),
    )
    return driver, tuple(snap["devices"])
