"""The start-of-run snapshot's conversion of NVML's values (gpuwhy/collect/nvml.py
``_device``), on the binding's own structures with its calls stubbed: no GPU here."""

import time
from types import SimpleNamespace

import pytest

from gpuwhy.collect import nvml
from gpuwhy.rules.env.gpu_shared import GpuShared
from tests import builders as b

pynvml = pytest.importorskip("pynvml")
MiB = 1024**2


def stub(memory_v2=True, samples=None, samples_error=None):
    """A pynvml whose calls answer like the H100 right after a JAX program ended:
    0 used and 480 MiB reserved (v2; v1 counts the reservation as used), the point
    reading the previous program's last (20 %)."""

    def memory(handle, version=None):
        if version is None:
            info = pynvml.c_nvmlMemory_t()
            info.total, info.used = 80 * b.GiB, 480 * MiB
            return info
        if not memory_v2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info = pynvml.c_nvmlMemory_v2_t()
        info.total, info.reserved, info.used = 80 * b.GiB, 480 * MiB, 0
        return info

    def get_samples(handle, kind, since_us):
        assert kind == pynvml.NVML_GPU_UTILIZATION_SAMPLES
        if samples_error is not None:
            raise pynvml.NVMLError(samples_error)
        out = []
        for t_us, value in samples or ():
            sample = pynvml.c_nvmlSample_t()
            sample.timeStamp, sample.sampleValue.uiVal = t_us, value
            out.append(sample)
        return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, out

    module = SimpleNamespace(**vars(pynvml))
    module.nvmlDeviceGetHandleByIndex = lambda index: "handle"
    module.nvmlDeviceGetMemoryInfo = memory
    module.nvmlDeviceGetUtilizationRates = lambda handle: SimpleNamespace(gpu=20, memory=0)
    module.nvmlDeviceGetSamples = get_samples
    module.nvmlDeviceGetCudaComputeCapability = lambda handle: (9, 0)
    module.nvmlDeviceGetPciInfo = lambda handle: SimpleNamespace(busId=b"00000000:01:00.0")
    module.nvmlDeviceGetComputeRunningProcesses = lambda handle: []
    module.nvmlDeviceGetName = lambda handle: b"NVIDIA H100 80GB HBM3"
    module.nvmlDeviceGetUUID = lambda handle: b"GPU-1"
    return module


def test_v2_memory_leaves_out_the_reservation_and_the_samples_are_the_last_two_seconds():
    now_us = int(time.time() * 1e6)
    samples = [(now_us - 5_000_000, 100), (now_us - 1_400_000, 20), (now_us - 200_000, 0)]
    device = nvml._device(stub(samples=samples), 0, frozenset())
    assert device.memory_used_bytes == 0 and device.memory_reserved_bytes == 480 * MiB
    assert device.memory_total_bytes == 80 * b.GiB and device.utilization_percent == 20.0
    assert device.busy_before_samples == (20.0, 0.0)  # the one 5 s ago is not "before"
    assert device.busy_before_seconds == pytest.approx(1.2)
    assert device.busy_before_percent == 10.0
    assert GpuShared().check(b.facts(devices=[device]), GpuShared.options) == []


def test_a_driver_without_v2_memory_info_counts_the_reservation_as_used():
    device = nvml._device(
        stub(memory_v2=False, samples_error=pynvml.NVML_ERROR_NOT_FOUND), 0, frozenset()
    )
    assert device.memory_used_bytes == 480 * MiB and device.memory_reserved_bytes is None
    assert device.busy_before_samples == () and device.busy_before_seconds is None
    assert GpuShared().check(b.facts(devices=[device]), GpuShared.options) == []


def test_a_driver_that_keeps_no_samples_leaves_them_unknown():
    device = nvml._device(stub(samples_error=pynvml.NVML_ERROR_NOT_SUPPORTED), 0, frozenset())
    assert device.busy_before_samples is None and device.busy_before_percent is None
