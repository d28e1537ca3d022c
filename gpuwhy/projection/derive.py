"""Peaks for a GPU the table (gpuwhy/gpu_specs.py) does not know, from what NVML reports of it.

``--target auto`` on such a GPU still gets a projection: its FP32 rate is its CUDA
cores (``nvmlDeviceGetNumGpuCores``) x 2 FLOPs (a fused multiply-add) x its highest SM
clock (``nvmlDeviceGetMaxClockInfo``); its tensor-core rates are its SMs (cores over the
cores per SM of its architecture) x the architecture's dense FLOPs per SM per clock
(below) x that clock; its memory bandwidth is 2 transfers per memory clock x the bus
width (``nvmlDeviceGetMemoryBusWidth``; NVML reports GDDR6/6X/7 and HBM clocks so that
this holds for both); its host link the PCIe generation x width it can reach.

Where these land against the datasheets: within 10% for the table's GPUs at their
boost clocks (tests/projection/test_derive.py); NVIDIA quotes some tensor-core peaks
at a lower clock than the highest (H100: 1,830 against 1,980 MHz), and a GeForce card's
highest clock is often above its rated boost, so derived peaks lean high, and the
projection's band is widened (cost.DERIVED_WIDTH) and says so.
"""

from __future__ import annotations

from gpuwhy.facts.projection import NvmlReading
from gpuwhy.gpu_specs import GBS, PCIE_GENERATIONS, GpuSpec, UnknownGpuError, find_gpu

# Per compute capability: FP32 cores per SM, dense FP16 tensor FLOPs (FP32 accumulate)
# per SM per clock, and whether it has BF16/TF32 and FP8 tensor cores. From NVIDIA's
# architecture whitepapers (Pascal GP100, Volta, Turing, Ampere GA100 and GA102, Ada,
# Hopper, Blackwell): e.g. A100 108 SMs x 2,048 x 1.41 GHz = 312 TFLOPS.
# Pascal has no tensor cores: GP100 runs FP16 at twice its FP32 rate, the other
# Pascal chips at 1/64 of it.
_ARCH: dict[tuple[int, int], tuple[int, int, bool, bool]] = {
    (6, 0): (64, 256, False, False),
    (6, 1): (128, 4, False, False),
    (7, 0): (64, 1024, False, False),
    (7, 5): (64, 1024, False, False),
    (8, 0): (64, 2048, True, False),
    (8, 6): (128, 1024, True, False),
    (8, 7): (128, 1024, True, False),
    (8, 9): (128, 1024, True, True),
    (9, 0): (128, 4096, True, True),
    (10, 0): (128, 8192, True, True),
    (12, 0): (128, 1024, True, True),
}
# nvmlDeviceGetArchitecture's values (nvml.h NVML_DEVICE_ARCH_*) where the compute
# capability is not known: the architecture's data-centre chip, or its only one
_NVML_ARCH = {
    4: (6, 0),  # Pascal
    5: (7, 0),  # Volta
    6: (7, 5),  # Turing
    7: (8, 6),  # Ampere (GA10x: all but the A100/A30/A800's GA100)
    8: (8, 9),  # Ada
    9: (9, 0),  # Hopper
    10: (10, 0),  # Blackwell
}
# GB/s per lane, one way, by PCIe generation (after line coding)
_PCIE_LANE = {g: spec.lane_gb_s for g, spec in PCIE_GENERATIONS.items()}


class CannotDerive(LookupError):
    """NVML did not report enough to derive the peaks; the message says what is missing."""


def _capability(reading: NvmlReading) -> tuple[int, int]:
    given = reading.compute_capability
    if given is not None:
        major, minor = given
        if (major, minor) in _ARCH:
            return major, minor
        known = [cc for cc in _ARCH if cc[0] == major]  # a newer minor: its major's base
        if known:
            return min(known)
    if reading.architecture in _NVML_ARCH:
        return _NVML_ARCH[reading.architecture]
    raise CannotDerive(
        f"{reading.name}: NVML reports no compute capability or architecture gpuwhy knows"
    )


def derive_gpu(reading: NvmlReading) -> GpuSpec:
    """The GPU's peaks from NVML's figures; raises CannotDerive where one is missing."""
    cc = _capability(reading)
    lanes, tensor_per_sm, bf16_tf32, fp8 = _ARCH[cc]
    missing = [
        label
        for label, value in (
            ("CUDA cores", reading.cuda_cores),
            ("SM clock", reading.max_sm_clock_mhz),
            ("memory clock", reading.max_memory_clock_mhz),
            ("memory bus width", reading.memory_bus_bits),
        )
        if not value
    ]
    if missing:
        raise CannotDerive(f"{reading.name}: NVML does not report its {', '.join(missing)}")
    cores, clock = reading.cuda_cores or 0, (reading.max_sm_clock_mhz or 0) * 1e6
    sms = max(1, cores // lanes)
    tensor = sms * tensor_per_sm * clock
    geforce = "geforce" in reading.name.lower()
    if geforce and cc >= (7, 5):
        tensor /= 2  # GeForce: FP16 with FP32 accumulate at half rate
    bandwidth = 2 * (reading.max_memory_clock_mhz or 0) * 1e6 * (reading.memory_bus_bits or 0) / 8
    lane = _PCIE_LANE.get(reading.pcie_generation or 3, _PCIE_LANE[3])
    fp32 = 2 * cores * clock
    return GpuSpec(
        name=reading.name,
        compute_capability=cc,
        float32_flops=fp32,
        tf32_flops=tensor / 2 if bf16_tf32 else None,
        float16_flops=tensor,
        bfloat16_flops=tensor if bf16_tf32 else None,
        memory_bandwidth=bandwidth,
        memory_bytes=reading.memory_bytes or 0,
        host_link=lane * (reading.pcie_width or 16) * GBS,
        sm_count=sms,
        float8_flops=2 * tensor if fp8 else None,
        geforce=geforce,
        derived_from=(
            f"derived from NVML: compute capability {cc[0]}.{cc[1]}, {sms} SMs at "
            f"{reading.max_sm_clock_mhz} MHz, a {reading.memory_bus_bits}-bit memory bus at "
            f"{reading.max_memory_clock_mhz} MHz"
        ),
    )


def auto_gpu(name: str, reading: NvmlReading | None) -> GpuSpec:
    """``--target auto``'s GPU: the table's for ``name``, else peaks derived from
    ``reading`` (what NVML reported of it when the run was watched,
    collect.nvml.peaks_reading). Raises UnknownGpuError where neither works, saying why."""
    try:
        return find_gpu(name)
    except UnknownGpuError:
        if reading is None:
            raise UnknownGpuError(
                f"{name} is not in gpuwhy's table and NVML could not be read to derive its "
                "peaks: name a GPU with --target"
            ) from None
        try:
            return derive_gpu(reading)
        except CannotDerive as error:
            raise UnknownGpuError(
                f"{name} is not in gpuwhy's table and {error}: name a GPU with --target"
            ) from None
