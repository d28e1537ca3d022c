"""The NVML layer, kept thin: NVIDIA's ``nvidia-ml-py`` binding (module ``pynvml``) in,
plain facts out.

Nothing here decides anything. NVML cannot work on a machine without an NVIDIA driver: the
error path (no driver) runs for real in every CI run (tests/collect/test_build_info_and_driver.py);
the conversion of a live GPU's values runs only where a GPU is present, and has no recorded
fixture yet.
"""

from __future__ import annotations

from typing import Any, Optional

from gpuwhy.facts import GpuDevice, GpuProcess


def error_name(error: BaseException) -> str:
    """``NVMLError_DriverNotLoaded`` -> ``DriverNotLoaded`` (stable, documented names)."""
    name = type(error).__name__
    return name.split("NVMLError_", 1)[1] if name.startswith("NVMLError_") else str(error)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(fn, *args, default=None):
    """One optional NVML query: unsupported on this GPU/driver -> default."""
    import pynvml
    try:
        return fn(*args)
    except pynvml.NVMLError:
        return default


def cuda_version_text(version: Optional[int]) -> Optional[str]:
    """NVML/CUDA encode 12.4 as 12040."""
    if not version:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def snapshot(exclude_pids: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Driver and per-GPU state right now.

    Returns ``{"ok": bool, "error": name|None, "driver_version", "cuda_driver_version",
    "devices": [GpuDevice]}``. Never raises for NVML errors: a missing driver is a fact.
    """
    try:
        import pynvml
    except ImportError as e:  # the dependency is declared; a broken install is still a fact
        return {"ok": False, "error": f"nvidia-ml-py not importable: {e}", "devices": []}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return {"ok": False, "error": error_name(e), "devices": []}
    try:
        devices = [_device(pynvml, i, exclude_pids)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        return {
            "ok": True, "error": None,
            "driver_version": _text(_call(pynvml.nvmlSystemGetDriverVersion, default="")) or None,
            "cuda_driver_version": cuda_version_text(
                _call(pynvml.nvmlSystemGetCudaDriverVersion_v2)
                or _call(pynvml.nvmlSystemGetCudaDriverVersion)),
            "devices": devices,
        }
    except pynvml.NVMLError as e:
        return {"ok": False, "error": error_name(e), "devices": []}
    finally:
        _call(pynvml.nvmlShutdown)


def _device(pynvml, index: int, exclude_pids: frozenset[int]) -> GpuDevice:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
    util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
    cc = _call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    pci = _call(pynvml.nvmlDeviceGetPciInfo, handle)
    processes = []
    for proc in (_call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle, default=[]) or []):
        if proc.pid in exclude_pids:
            continue
        used = proc.usedGpuMemory
        processes.append(GpuProcess(
            pid=proc.pid, name=_process_name(proc.pid),
            used_bytes=int(used) if isinstance(used, int) and used >= 0 else None))
    return GpuDevice(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        uuid=_text(_call(pynvml.nvmlDeviceGetUUID, handle, default="")) or None,
        pci_bus_id=_text(pci.busId).lower() if pci is not None else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        memory_used_bytes=int(memory.used) if memory is not None else None,
        utilization_percent=float(util.gpu) if util is not None else None,
        processes=tuple(processes),
    )


def _process_name(pid: int) -> Optional[str]:
    # NVML's own process-name call is slow and needs privileges; /proc is enough on Linux.
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
        return " ".join(p.decode(errors="replace") for p in parts if p)[:200] or None
    except OSError:
        return None
