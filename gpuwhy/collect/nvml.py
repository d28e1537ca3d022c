"""The NVML layer, kept thin: NVIDIA's ``nvidia-ml-py`` binding (module ``pynvml``) in,
plain facts out.

Nothing here decides anything. NVML cannot work on a machine without an NVIDIA driver: the
error path (no driver) runs for real in every CI run (tests/collect/test_build_info_and_driver.py);
the conversion of a live GPU's values runs only where a GPU is present. The sampler's live
source (:class:`NvmlSource`, below) only reads: its raw readings can be recorded and replayed
(gpuwhy/collect/sampler.py), which is how their conversion is tested without a GPU.
"""

from __future__ import annotations

import ctypes
import sys
import time
from typing import Any

from gpuwhy.collect.dcgm_exporter import Poller
from gpuwhy.facts import GpuDevice, GpuProcess


def error_name(error: BaseException) -> str:
    """``NVMLError_DriverNotLoaded`` -> ``DriverNotLoaded`` (stable, documented names)."""
    name = type(error).__name__
    return name.split("NVMLError_", 1)[1] if name.startswith("NVMLError_") else str(error)


# The library the binding loads on Linux (pynvml's ``_LoadNvmlLibrary``: by this name
# alone in nvidia-ml-py 13.615, the version tested; one that looked elsewhere too would
# need the same look here). Where it cannot load there is no NVML to start, and the
# binding itself is not imported: importing it is 14-25 ms on this project's 2-core
# host, a tenth of what `gpuwhy run` spends before the program's first line, on every
# machine without an NVIDIA driver (docs/speed.md).
NVML_LIBRARY = "libnvidia-ml.so.1"


def start_nvml() -> tuple[Any, str | None]:
    """``(pynvml, None)`` once ``nvmlInit()`` succeeded, else ``(None, why)``: the NVML
    error's name (``LibraryNotFound`` where the driver's library does not load, as
    ``nvmlInit`` names it: on Linux that is said first, before the binding is looked
    at, broken or not) or why the binding cannot be imported."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(NVML_LIBRARY)
        except OSError:
            return None, "LibraryNotFound"
    try:
        import pynvml
    except ImportError as e:  # the dependency is declared; a broken install is still a fact
        return None, f"nvidia-ml-py not importable: {e}"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return None, error_name(e)
    return pynvml, None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(fn, *args, default=None):
    """One optional NVML query: unsupported on this GPU/driver -> default."""
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError:
        return default


def cuda_version_text(version: int | None) -> str | None:
    """NVML/CUDA encode 12.4 as 12040."""
    if not version:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def snapshot(exclude_pids: frozenset[int] = frozenset()) -> dict[str, Any]:
    """Driver and per-GPU state right now.

    Returns ``{"ok": bool, "error": name|None, "driver_version", "cuda_driver_version",
    "devices": [GpuDevice]}``. Never raises for NVML errors: a missing driver is a fact.
    """
    pynvml, why = start_nvml()
    if pynvml is None:
        return {"ok": False, "error": why, "devices": []}
    try:
        devices = [_device(pynvml, i, exclude_pids) for i in range(pynvml.nvmlDeviceGetCount())]
        return {
            "ok": True,
            "error": None,
            "driver_version": _text(_call(pynvml.nvmlSystemGetDriverVersion, default="")) or None,
            "cuda_driver_version": cuda_version_text(
                _call(pynvml.nvmlSystemGetCudaDriverVersion_v2)
                or _call(pynvml.nvmlSystemGetCudaDriverVersion)
            ),
            "devices": devices,
        }
    except pynvml.NVMLError as e:
        return {"ok": False, "error": error_name(e), "devices": []}
    finally:
        _call(pynvml.nvmlShutdown)


# How far back the snapshot reads the driver's utilisation samples: enough for a busy GPU
# to show several (one each 1/6 s to 1 s, by GPU), little enough to be about "now".
BUSY_BEFORE_S = 2.0


def _memory(pynvml, handle) -> tuple[Any, bool]:
    """``(memory info, v2)``: ``nvmlDeviceGetMemoryInfo_v2`` where the binding and the
    driver have it (its ``used`` leaves out the driver's own ``reserved``), else v1's
    (``used`` includes it); ``(None, False)`` where neither answers."""
    version = getattr(pynvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            return pynvml.nvmlDeviceGetMemoryInfo(handle, version=version), True
        except (pynvml.NVMLError, TypeError):  # an older driver, or a binding without version=
            pass
    return _call(pynvml.nvmlDeviceGetMemoryInfo, handle), False


def _utilization_samples(pynvml, handle, since_us: int) -> list[tuple[int, float]] | None:
    """The driver's GPU utilisation samples taken after ``since_us`` (NVML's clock:
    wall-clock µs), as ``(timestamp µs, percent)`` oldest first; [] where it kept none
    since; None where the driver cannot say."""
    try:
        value_type, samples = pynvml.nvmlDeviceGetSamples(
            handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, since_us
        )
    except pynvml.NVMLError as e:
        return [] if getattr(e, "value", None) == pynvml.NVML_ERROR_NOT_FOUND else None
    member = _VALUE_FIELDS.get(int(value_type))
    if member is None:
        return None
    return sorted(
        (int(s.timeStamp), float(getattr(s.sampleValue, member)))
        for s in samples
        if int(s.timeStamp) > since_us
    )


def _device(pynvml, index: int, exclude_pids: frozenset[int]) -> GpuDevice:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    memory, v2 = _memory(pynvml, handle)
    util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
    samples = _utilization_samples(pynvml, handle, int((time.time() - BUSY_BEFORE_S) * 1e6))
    cc = _call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
    pci = _call(pynvml.nvmlDeviceGetPciInfo, handle)
    processes = []
    for proc in _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle, default=[]) or []:
        if proc.pid in exclude_pids:
            continue
        used = proc.usedGpuMemory
        processes.append(
            GpuProcess(
                pid=proc.pid,
                name=_process_name(proc.pid),
                used_bytes=int(used) if isinstance(used, int) and used >= 0 else None,
            )
        )
    return GpuDevice(
        index=index,
        name=_text(pynvml.nvmlDeviceGetName(handle)),
        uuid=_text(_call(pynvml.nvmlDeviceGetUUID, handle, default="")) or None,
        pci_bus_id=_text(pci.busId).lower() if pci is not None else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        memory_used_bytes=int(memory.used) if memory is not None else None,
        memory_reserved_bytes=int(memory.reserved) if v2 else None,
        utilization_percent=float(util.gpu) if util is not None else None,
        processes=tuple(processes),
        busy_before_samples=tuple(v for _, v in samples) if samples is not None else None,
        busy_before_seconds=(samples[-1][0] - samples[0][0]) / 1e6 if samples else None,
    )


# the header format of a file of peaks readings (tools/record_nvml.py writes them)
PEAKS_FORMAT = "gpuwhy-nvml-peaks"


def peaks_reading(index: int) -> dict[str, Any] | None:
    """What the projection derives an unknown GPU's peaks from (projection/derive.py):
    NVML's raw figures for device ``index``, each None where NVML does not report it;
    None where NVML cannot start."""
    pynvml, _ = start_nvml()
    if pynvml is None:  # no driver: nothing to read
        return None
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        cc = _call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
        memory = _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
        return {
            "name": _text(pynvml.nvmlDeviceGetName(handle)),
            "compute_capability": tuple(cc) if cc else None,
            "architecture": _call(pynvml.nvmlDeviceGetArchitecture, handle),
            "cuda_cores": _call(pynvml.nvmlDeviceGetNumGpuCores, handle),
            "max_sm_clock_mhz": _call(
                pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM
            ),
            "max_memory_clock_mhz": _call(
                pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_MEM
            ),
            "memory_bus_bits": _call(pynvml.nvmlDeviceGetMemoryBusWidth, handle),
            "memory_bytes": int(memory.total) if memory is not None else None,
            "pcie_generation": _call(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            "pcie_width": _call(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        }
    except pynvml.NVMLError:
        return None
    finally:
        _call(pynvml.nvmlShutdown)


def _process_name(pid: int) -> str | None:
    # NVML's own process-name call is slow and needs privileges; /proc is enough on Linux.
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts = f.read().split(b"\0")
        return " ".join(p.decode(errors="replace") for p in parts if p)[:200] or None
    except OSError:
        return None


# ---------------------------------------------------------------------------
# The live source of the background sampler (gpuwhy/collect/sampler.py).
#
# Each tick returns the *raw* readings as a JSON-friendly dict in the recording format
# documented in sampler.py; every conversion (counter differencing, percentages, pid
# filtering) happens in the sampler, so that it is tested on recordings where no GPU
# exists. Every call below is a ctypes call, during which the GIL is released; the
# PCIe traffic comes from the cumulative byte counters (one field-values call), not from
# nvmlDeviceGetPcieThroughput, which blocks for 20 ms per direction.

PCIE_TX_FIELD = 197  # NVML_FI_DEV_PCIE_COUNT_TX_BYTES (nvml.h, R535+): cumulative, may wrap
PCIE_RX_FIELD = 198  # NVML_FI_DEV_PCIE_COUNT_RX_BYTES
# Recording key -> NVML_GPM_METRIC_* id (percentages 0-100 computed by NVML from 2 samples).
GPM_METRICS = (
    ("graphics_util", 1),  # NVML_GPM_METRIC_GRAPHICS_UTIL: time share, integrated
    ("sm_activity", 2),  # NVML_GPM_METRIC_SM_UTIL
    ("sm_occupancy", 3),  # NVML_GPM_METRIC_SM_OCCUPANCY
    ("tensor_activity", 5),
)  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
_VALUE_FIELDS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


class _Gpm:
    """Two GPM sample buffers per GPU: each tick's metrics cover the time since the last."""

    def __init__(self, pynvml, handle) -> None:
        self.pynvml, self.handle = pynvml, handle
        self.previous = pynvml.nvmlGpmSampleAlloc()
        self.current = pynvml.nvmlGpmSampleAlloc()
        self.primed = False

    def read(self) -> dict[str, float | None] | None:
        pynvml = self.pynvml
        try:
            pynvml.nvmlGpmSampleGet(self.handle, self.current)
        except pynvml.NVMLError:
            self.primed = False
            return None
        values = None
        if self.primed:
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(GPM_METRICS)
            request.sample1, request.sample2 = self.previous, self.current
            for i, (_, metric_id) in enumerate(GPM_METRICS):
                request.metrics[i].metricId = metric_id
            try:
                pynvml.nvmlGpmMetricsGet(request)
                values = {
                    key: (
                        float(request.metrics[i].value)
                        if request.metrics[i].nvmlReturn == 0
                        else None
                    )
                    for i, (key, _) in enumerate(GPM_METRICS)
                }
            except pynvml.NVMLError:
                values = None
        self.previous, self.current, self.primed = self.current, self.previous, True
        return values

    def free(self) -> None:
        for sample in (self.previous, self.current):
            _call(self.pynvml.nvmlGpmSampleFree, sample)


class NvmlSource:
    """Live NVML readings for the sampler: ``open`` -> header, ``read`` -> one tick.

    ``open`` never raises: without a driver it returns a header with ``error`` set
    (``LibraryNotFound``, ``DriverNotLoaded`` ...), as NVML names it.
    """

    paced = True  # read at the sampler's rate (sampler.Source)

    def __init__(self, dcgm_exporter: str | None = None) -> None:
        self.dcgm_exporter = dcgm_exporter  # a dcgm-exporter's URL, read beside NVML
        self.dcgm: Poller | None = None
        self.dcgm_error: str | None = None  # the exporter's last error, as recorded
        self.pynvml: Any = None  # the pynvml module once open() succeeds
        self.handles: list[Any] = []
        self.gpm: dict[int, _Gpm] = {}
        self.names: dict[int, str | None] = {}  # pid -> command line, read once
        self.reasons: Any = None  # the clock-event reasons call this driver has
        self.memory_v2: dict[int, bool] = {}  # nvmlDeviceGetMemoryInfo_v2 answers
        self.last_sample_us: dict[int, int] = {}  # the driver's newest sample read, per GPU
        self.t0 = 0.0

    def open(self, t0: float) -> dict[str, Any]:
        self.t0 = t0
        header: dict[str, Any] = {"source": "nvml", "error": None, "devices": []}
        pynvml, header["error"] = start_nvml()
        if pynvml is None:
            return header
        self.pynvml = pynvml
        started = time.perf_counter()
        try:
            count = pynvml.nvmlDeviceGetCount()
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as e:
            header["error"] = error_name(e)
            self.close()
            return header
        header["driver_version"] = (
            _text(_call(pynvml.nvmlSystemGetDriverVersion, default="")) or None
        )
        header["nvml_version"] = _text(_call(pynvml.nvmlSystemGetNVMLVersion, default="")) or None
        self.reasons = _reasons_call(pynvml, self.handles)
        opened_us = int(time.time() * 1e6)  # no driver sample from before gpuwhy started
        for index, handle in enumerate(self.handles):
            memory, self.memory_v2[index] = _memory(pynvml, handle)
            self.last_sample_us[index] = opened_us
            cc = _call(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
            pci = _call(pynvml.nvmlDeviceGetPciInfo, handle)
            support = _call(pynvml.nvmlGpmQueryDeviceSupport, handle)
            if support is not None and support.isSupportedDevice:
                try:
                    self.gpm[index] = _Gpm(pynvml, handle)
                except pynvml.NVMLError:
                    pass
            header["devices"].append(
                {
                    "index": index,
                    "name": _text(_call(pynvml.nvmlDeviceGetName, handle, default=""))
                    or f"GPU {index}",
                    "uuid": _text(_call(pynvml.nvmlDeviceGetUUID, handle, default="")) or None,
                    "pci_bus_id": _text(pci.busId).lower() if pci is not None else None,
                    "compute_capability": f"{cc[0]}.{cc[1]}" if cc else None,
                    "memory_total_bytes": int(memory.total) if memory is not None else None,
                    "gpm": index in self.gpm,
                    "memory_v2": self.memory_v2[index],
                    **_limits(pynvml, handle),
                }
            )
        if self.dcgm_exporter:
            header["dcgm_exporter"] = self.dcgm_exporter
            known = [
                GpuDevice(index=d["index"], name=d["name"], uuid=d["uuid"])
                for d in header["devices"]
            ]
            self.dcgm = Poller(self.dcgm_exporter, known)
        header["open_s"] = round(time.perf_counter() - started, 6)
        return header

    def read(self, processes: bool) -> dict[str, Any] | None:
        if self.pynvml is None:
            return None
        started = time.perf_counter()
        gpus = [self._read_device(i, h, processes) for i, h in enumerate(self.handles)]
        tick: dict[str, Any] = {}
        if self.dcgm is not None:
            for index, values in self.dcgm.take().items():
                if 0 <= index < len(gpus):
                    gpus[index]["dcgm"] = dict(values)
            if self.dcgm.error != self.dcgm_error:  # said once, when it changes
                self.dcgm_error = tick["dcgm_error"] = self.dcgm.error
        return {
            **tick,
            "t": round(started - self.t0, 6),
            "read_s": round(time.perf_counter() - started, 6),
            "gpus": gpus,
        }

    def _read_device(self, index: int, handle: Any, processes: bool) -> dict[str, Any]:
        pynvml = self.pynvml
        util = _call(pynvml.nvmlDeviceGetUtilizationRates, handle)
        # v2 where it answered at open (used without the driver's reservation)
        memory = (
            _memory(pynvml, handle)[0]
            if self.memory_v2.get(index)
            else _call(pynvml.nvmlDeviceGetMemoryInfo, handle)
        )
        fields = _call(pynvml.nvmlDeviceGetFieldValues, handle, [PCIE_TX_FIELD, PCIE_RX_FIELD])
        reading: dict[str, Any] = {
            "index": index,
            "util": int(util.gpu) if util is not None else None,
            "mem_used": int(memory.used) if memory is not None else None,
            "util_samples": self._driver_samples(index, handle),
            "pcie_tx": _counter(fields[0]) if fields is not None else None,
            "pcie_rx": _counter(fields[1]) if fields is not None else None,
            "sm_clock_mhz": _call(pynvml.nvmlDeviceGetClockInfo, handle, pynvml.NVML_CLOCK_SM),
            "power_mw": _call(pynvml.nvmlDeviceGetPowerUsage, handle),
            "gpm": self.gpm[index].read() if index in self.gpm else None,
            "clocks_event_reasons": _call(self.reasons, handle) if self.reasons else None,
            "temp_c": _call(pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU),
            "pcie_gen": _call(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            "pcie_width": _call(pynvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        }
        if memory is not None and self.memory_v2.get(index):
            reading["mem_reserved"] = int(memory.reserved)
        if processes:
            # change rarely (a limit set by hand, a link error): once a second is enough
            reading["power_limit_mw"] = _call(pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
            reading["pcie_replays"] = _call(pynvml.nvmlDeviceGetPcieReplayCounter, handle)
            procs = _call(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)
            reading["procs"] = (
                None
                if procs is None
                else [
                    [
                        int(p.pid),
                        int(p.usedGpuMemory) if isinstance(p.usedGpuMemory, int) else None,
                        self._name(int(p.pid)),
                    ]
                    for p in procs
                ]
            )
        return reading

    def _driver_samples(self, index: int, handle: Any) -> list[list[float]] | None:
        """Every utilisation sample the driver took since the last one read (its own
        buffer): ``[[timestamp µs, percent], ...]``; [] when it took none since, None
        where the GPU does not keep them."""
        read = _utilization_samples(self.pynvml, handle, self.last_sample_us[index])
        if read:
            self.last_sample_us[index] = read[-1][0]
        return None if read is None else [[ts, value] for ts, value in read]

    def _name(self, pid: int) -> str | None:
        if pid not in self.names:
            self.names[pid] = _process_name(pid)
        return self.names[pid]

    def close(self) -> None:
        if self.dcgm is not None:
            self.dcgm.close()
            self.dcgm = None
        if self.pynvml is None:
            return
        for gpm in self.gpm.values():
            gpm.free()
        self.gpm = {}
        _call(self.pynvml.nvmlShutdown)
        self.pynvml = None


def _reasons_call(pynvml: Any, handles: list[Any]) -> Any:
    """The clock-event reasons call this binding and driver have: the current name
    (nvidia-ml-py 12.535+, driver R535+), else the former "throttle reasons" (same bits);
    None where neither answers."""
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    ):
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        if not handles:
            return fn
        try:
            fn(handles[0])
        except pynvml.NVMLError as e:
            if getattr(e, "value", None) == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                continue  # a driver older than the name
        return fn  # (a GPU that does not say gives None on each tick)
    return None


def _limits(pynvml: Any, handle: Any) -> dict[str, Any]:
    """What a GPU's clocks, power and PCIe link can reach, read once per run (header)."""
    gpu_max_gen = getattr(pynvml, "nvmlDeviceGetGpuMaxPcieLinkGeneration", None)  # R510+
    return {
        "max_sm_clock_mhz": _call(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM),
        "power_default_limit_mw": _call(pynvml.nvmlDeviceGetPowerManagementDefaultLimit, handle),
        "pcie_max_gen": _call(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
        "pcie_max_width": _call(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        "gpu_pcie_max_gen": _call(gpu_max_gen, handle) if gpu_max_gen else None,
    }


def _counter(field: Any) -> list | None:
    """A field value as ``[value, NVML value type, NVML timestamp in µs]``; None on error.

    The value type tells the sampler the counter's width, hence where it wraps."""
    if field.nvmlReturn != 0:
        return None
    member = _VALUE_FIELDS.get(int(field.valueType))
    if member is None:
        return None
    return [int(getattr(field.value, member)), int(field.valueType), int(field.timestamp)]


# ---------------------------------------------------------------------------
# Topology: what an all-reduce between two local GPUs crosses. Raw NVML values out
# (``gpuwhy.collect.inprocess.collective_link`` reads them), so that recordings stand in for a
# machine in tests.

NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS (nvml.h)
TOPOLOGY_LEVELS = {  # nvmlGpuTopologyLevel_t (nvml.h)
    0: "internal",  # NVML_TOPOLOGY_INTERNAL: the same board
    10: "single",  # NVML_TOPOLOGY_SINGLE: one PCIe switch
    20: "multiple",  # NVML_TOPOLOGY_MULTIPLE: several PCIe switches
    30: "hostbridge",  # NVML_TOPOLOGY_HOSTBRIDGE: one PCIe host bridge
    40: "node",  # NVML_TOPOLOGY_NODE: one NUMA node, across host bridges
    50: "system",  # NVML_TOPOLOGY_SYSTEM: across NUMA nodes (SMP interconnect)
}


def topology() -> dict[str, Any]:
    """``{"ok", "error", "gpus": [{"index", "name", "nvlinks_active"}], "pairs": [{"a",
    "b", "level", "nvlink"}]}``: per GPU its active NVLink links, per pair the PCIe
    common ancestor and whether an NVLink joins them. Never raises for NVML errors."""
    pynvml, why = start_nvml()
    if pynvml is None:
        return {"ok": False, "error": why, "gpus": [], "pairs": []}
    try:
        count = pynvml.nvmlDeviceGetCount()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        buses = [
            _text(getattr(_call(pynvml.nvmlDeviceGetPciInfo, h), "busId", "")).lower()
            for h in handles
        ]
        gpus, remote_buses = [], []
        for index, handle in enumerate(handles):
            active, remotes = 0, set()
            for link in range(NVLINK_MAX_LINKS):
                if _call(pynvml.nvmlDeviceGetNvLinkState, handle, link) == 1:
                    active += 1
                    pci = _call(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
                    if pci is not None:
                        remotes.add(_text(pci.busId).lower())
            gpus.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "nvlinks_active": active,
                }
            )
            remote_buses.append(remotes)
        pairs = []
        for a in range(count):
            for b in range(a + 1, count):
                level = _call(pynvml.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b])
                pairs.append(
                    {
                        "a": a,
                        "b": b,
                        "level": TOPOLOGY_LEVELS.get(level, str(level))
                        if level is not None
                        else None,
                        "nvlink": bool(buses[b] and buses[b] in remote_buses[a]),
                    }
                )
        return {"ok": True, "error": None, "gpus": gpus, "pairs": pairs}
    except pynvml.NVMLError as e:
        return {"ok": False, "error": error_name(e), "gpus": [], "pairs": []}
    finally:
        _call(pynvml.nvmlShutdown)
