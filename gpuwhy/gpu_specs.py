"""The GPUs a run can be projected onto: peak throughput by precision, memory, links.

Every figure is the dense (no structured sparsity) peak NVIDIA publishes for the part,
from its datasheet or architecture whitepaper:

- V100: "NVIDIA Tesla V100 GPU Accelerator" datasheet (SXM2 32 GB).
- T4: "NVIDIA T4 Tensor Core GPU" datasheet.
- A100: "NVIDIA A100 Tensor Core GPU" datasheet (SXM4 80 GB; 40 GB: 1,555 GB/s).
- A10: "NVIDIA A10 Tensor Core GPU" datasheet.
- L4: "NVIDIA L4 Tensor Core GPU" datasheet.
- L40S: "NVIDIA L40S GPU" datasheet.
- H100: "NVIDIA H100 Tensor Core GPU" datasheet (SXM5 and PCIe).
- H200: "NVIDIA H200 Tensor Core GPU" datasheet (SXM).
- RTX 4090 / RTX 3090: "NVIDIA Ada GPU Architecture" and "NVIDIA Ampere GA102 GPU
  Architecture" whitepapers (GeForce parts: tensor FP16 with FP32 accumulate, which is
  what TensorFlow's mixed precision uses, runs at half the FP16-accumulate rate, and
  TF32 with it).
- B200: "NVIDIA DGX B200" / "HGX B200" datasheets, per GPU (their 8-GPU figures are
  with sparsity: halved here); GB200: "NVIDIA GB200 NVL72" datasheet, per GPU (its host
  link is NVLink-C2C to the Grace CPU, 900 GB/s both ways).
- H800 / A800: H100 SXM / A100 SXM 80 GB compute and memory, NVLink cut to 400 GB/s
  ("NVIDIA H800" and "A800 40GB Active"/SXM product briefs). H20: NVIDIA's H20 product
  brief as reported by its resellers (not on nvidia.com): 148 TFLOPS FP16, 4.0 TB/s.
- L40, A40, A30, RTX A6000, RTX 6000 Ada, Quadro RTX 6000/8000: their datasheets
  ("NVIDIA L40 GPU", "NVIDIA A40", "NVIDIA A30 Tensor Core GPU", "NVIDIA RTX A6000",
  "NVIDIA RTX 6000 Ada Generation", "Quadro RTX 6000/8000"); professional parts run
  FP16 with FP32 accumulate at the full rate (the L40's datasheet gives half the
  L40S's).
- RTX 5090 / 4080 / 3080 / 2080 Ti: "NVIDIA RTX Blackwell GPU Architecture", "NVIDIA
  Ada GPU Architecture", "NVIDIA Ampere GA102 GPU Architecture" and "NVIDIA Turing GPU
  Architecture" whitepapers (GeForce: FP32-accumulate tensor rate, half the
  FP16-accumulate one; the 2080 Ti at its reference boost clock).
- P100: "NVIDIA Tesla P100" datasheet (PCIe 16 GB; no tensor cores: FP16 at twice the
  FP32 rate on the CUDA cores).

Peaks are what a kernel can never beat; what a training step reaches is a fraction of
them, which the cost model (cost.py) says with its band. ``float32`` is the rate of the
plain FP32 units; ``tf32`` the tensor-core rate TensorFlow uses for float32 matmuls and
convolutions on compute capability 8.0+ while TF32 is on (the default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TFLOPS = 1e12
GBS = 1e9


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's published peaks (dense), per second."""

    name: str
    compute_capability: tuple[int, int]
    float32_flops: float
    tf32_flops: float | None  # None: no TF32 (before compute capability 8.0)
    float16_flops: float  # tensor cores, FP32 accumulate
    bfloat16_flops: float | None  # None: no BF16 tensor cores
    memory_bandwidth: float  # bytes/s
    memory_bytes: int
    host_link: float  # bytes/s, one direction: the PCIe link to the host
    peer_link: float | None = None  # bytes/s, NVLink as quoted (None: PCIe only)
    sm_count: int = 0  # streaming multiprocessors (0: not given)
    float8_flops: float | None = None  # tensor cores, FP8 (None: none)
    # where the peaks come from when not from the table: what NVML reported (derive.py)
    derived_from: str | None = None
    # a GeForce card: its tensor cores' FP32-accumulate (and TF32) rate is half the
    # professional part's, and how much of it training reaches is not fitted
    geforce: bool = False

    def matmul_flops(self, dtype: str, tf32_enabled: bool = True) -> float:
        """The peak a matmul/convolution of ``dtype`` can run at on this GPU."""
        if dtype in ("float16", "half"):
            return self.float16_flops
        if dtype == "bfloat16":
            return self.bfloat16_flops or self.float32_flops
        if dtype == "float32" and tf32_enabled and self.tf32_flops:
            return self.tf32_flops
        if dtype == "float64":
            return self.float32_flops / 32  # consumer-grade FP64; data-centre parts differ
        return self.float32_flops


def _gb(value: float) -> int:
    return int(value * 2**30)


def _spec(
    name: str,
    cc: tuple[int, int],
    fp32: float,
    tf32: float | None,
    fp16: float,
    bf16: float | None,
    bandwidth: float,
    memory: float,
    host: float,
    peer: float | None = None,
    sms: int = 0,
    fp8: float | None = None,
) -> GpuSpec:
    """A table row in the datasheets' units: TFLOPS, GB/s, GiB."""
    return GpuSpec(
        name,
        cc,
        fp32 * TFLOPS,
        tf32 * TFLOPS if tf32 else None,
        fp16 * TFLOPS,
        bf16 * TFLOPS if bf16 else None,
        bandwidth * GBS,
        _gb(memory),
        host * GBS,
        peer * GBS if peer else None,
        sms,
        fp8 * TFLOPS if fp8 else None,
        # a GeForce model number (RTX 2080 Ti, 4090), not a workstation part (RTX 6000 Ada)
        geforce=re.fullmatch(r"RTX [2-5]0[5-9]0( Ti)?", name) is not None,
    )


# name, compute capability, FP32, TF32, FP16, BF16 (TFLOPS), memory GB/s, GiB, host link
# one way and NVLink GB/s as NVIDIA quotes it (both ways, all links), SMs, FP8 TFLOPS
GPUS: tuple[GpuSpec, ...] = (
    _spec("V100", (7, 0), 15.7, None, 125, None, 900, 32, 16, 300, 80),
    _spec("T4", (7, 5), 8.1, None, 65, None, 320, 16, 16, None, 40),
    _spec("A100", (8, 0), 19.5, 156, 312, 312, 2039, 80, 32, 600, 108),
    _spec("A100-40GB", (8, 0), 19.5, 156, 312, 312, 1555, 40, 32, 600, 108),
    _spec("A10", (8, 6), 31.2, 62.5, 125, 125, 600, 24, 32, None, 72),
    _spec("L4", (8, 9), 30.3, 60, 121, 121, 300, 24, 32, None, 58, fp8=242.5),
    _spec("L40S", (8, 9), 91.6, 183, 362, 362, 864, 48, 32, None, 142, fp8=733),
    _spec("H100", (9, 0), 67, 494.5, 989.5, 989.5, 3350, 80, 64, 900, 132, fp8=1979),
    _spec("H100-PCIe", (9, 0), 51, 378, 756, 756, 2000, 80, 64, None, 114, fp8=1513),
    _spec("H200", (9, 0), 67, 494.5, 989.5, 989.5, 4800, 141, 64, 900, 132, fp8=1979),
    _spec("RTX 4090", (8, 9), 82.6, 82.6, 165.2, 165.2, 1008, 24, 32, None, 128, fp8=330.3),
    _spec("RTX 3090", (8, 6), 35.6, 35.6, 71, 71, 936, 24, 32, None, 82),
    _spec("B200", (10, 0), 75, 1125, 2250, 2250, 8000, 180, 64, 1800, 148, fp8=4500),
    _spec("GB200", (10, 0), 80, 1250, 2500, 2500, 8000, 186, 450, 1800, 148, fp8=5000),
    _spec("H20", (9, 0), 44, 74, 148, 148, 4000, 96, 64, 900, 78, fp8=296),
    _spec("H800", (9, 0), 67, 494.5, 989.5, 989.5, 3350, 80, 64, 400, 132, fp8=1979),
    _spec("A800", (8, 0), 19.5, 156, 312, 312, 2039, 80, 32, 400, 108),
    _spec("L40", (8, 9), 90.5, 90.5, 181, 181, 864, 48, 32, None, 142, fp8=362),
    _spec("A40", (8, 6), 37.4, 74.8, 149.7, 149.7, 696, 48, 32, 112.5, 84),
    _spec("A30", (8, 0), 10.3, 82, 165, 165, 933, 24, 32, 200, 56),
    _spec("RTX A6000", (8, 6), 38.7, 77.4, 154.8, 154.8, 768, 48, 32, 112.5, 84),
    _spec("RTX 6000 Ada", (8, 9), 91.1, 182.1, 364.2, 364.2, 960, 48, 32, None, 142, fp8=728.5),
    _spec("Quadro RTX 6000", (7, 5), 16.3, None, 130.5, None, 672, 24, 16, 100, 72),
    _spec("Quadro RTX 8000", (7, 5), 16.3, None, 130.5, None, 672, 48, 16, 100, 72),
    _spec("RTX 5090", (12, 0), 104.8, 104.8, 209.5, 209.5, 1792, 32, 64, None, 170, fp8=419),
    _spec("RTX 4080", (8, 9), 48.7, 48.7, 97.5, 97.5, 716.8, 16, 32, None, 76, fp8=194.9),
    _spec("RTX 3080", (8, 6), 29.8, 29.8, 59.5, 59.5, 760, 10, 32, None, 68),
    _spec("RTX 2080 Ti", (7, 5), 13.4, None, 53.8, None, 616, 11, 16, None, 68),
    _spec("P100", (6, 0), 9.3, None, 18.7, None, 732, 16, 16, None, 56),
)


class UnknownGpuError(LookupError):
    """A --target that names no GPU of the table; the message lists them."""


def _key(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` and ``a100`` compare alike: letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", "").replace("geforce", ""))


# What may stand around a model's name in a device name: a brand before it, memory
# size, memory kind, form factor and the like after it (``Tesla V100-SXM2-32GB``,
# ``NVIDIA H100 80GB HBM3``, ``NVIDIA A10G``). Anything else (``RTX A4000`` against
# A40, ``RTX 3080 Ti`` against RTX 3080) is another GPU.
_PREFIX = re.compile(r"(tesla|quadro|rtx)?")
_SUFFIX = re.compile(r"(\d+gb|sxm\d?|pcie|hbm\d?e?|nvl|g|generation|active|mig.*)*")


def _family(gpu: GpuSpec) -> str:
    return _key(gpu.name.split("-")[0])


def _names(key: str, family: str) -> bool:
    """``key`` (a typed or NVML name) names the model ``family``: the family inside it
    with only brands, sizes and form factors around it, or ``key`` the family less its
    brand (``a6000`` for RTX A6000)."""
    at = key.find(family)
    if at >= 0:
        before, after = key[:at], key[at + len(family) :]
        return bool(_PREFIX.fullmatch(before) and _SUFFIX.fullmatch(after))
    return family.endswith(key) and bool(_PREFIX.fullmatch(family[: -len(key)]))


def target_names() -> list[str]:
    return [gpu.name for gpu in GPUS]


def find_gpu(name: str) -> GpuSpec:
    """The table's GPU for a --target name or an NVML device name
    (``NVIDIA H100 80GB HBM3``, ``Tesla T4``, ``NVIDIA A100-SXM4-40GB``)."""
    key = _key(name)
    if not key:
        raise UnknownGpuError(f"no GPU named {name!r}")
    exact = {_key(gpu.name): gpu for gpu in GPUS}
    if key in exact:
        return exact[key]
    # a device name: the longest table name it contains, memory and form factor checked
    found = [gpu for gpu in GPUS if _names(key, _family(gpu))]
    if not found:
        raise UnknownGpuError(
            f"no GPU named {name!r}: --target takes one of {', '.join(target_names())} "
            "(or auto: the GPU of this machine)"
        )
    family = max(len(_family(gpu)) for gpu in found)
    found = [gpu for gpu in found if len(_family(gpu)) == family]
    for gpu in found:
        variant = gpu.name.split("-", 1)[1:] or [""]
        if variant[0] and _key(variant[0]) in key:
            return gpu
    return found[0]


@dataclass(frozen=True)
class PcieGeneration:
    """One PCIe generation's signalling (PCI-SIG base specifications)."""

    generation: int
    gt_s: float  # transfers per second per lane, in GT/s
    coding: str  # the line coding, which the lane's byte rate is net of
    lane_gb_s: float  # GB/s per lane, one direction, after line coding


PCIE_GENERATIONS = {
    g.generation: g
    for g in (
        PcieGeneration(1, 2.5, "8b/10b", 0.25),
        PcieGeneration(2, 5.0, "8b/10b", 0.5),
        PcieGeneration(3, 8.0, "128b/130b", 0.985),
        PcieGeneration(4, 16.0, "128b/130b", 1.969),
        PcieGeneration(5, 32.0, "128b/130b", 3.938),
        PcieGeneration(6, 64.0, "PAM4, 1b/1b FLIT", 7.563),
    )
}


def pcie_gb_s(generation: int | None, width: int | None) -> float | None:
    """A PCIe link's GB/s per direction (None: generation or width unknown)."""
    spec = PCIE_GENERATIONS.get(generation or 0)
    if spec is None or not width:
        return None
    return round(spec.lane_gb_s * width, 2)
