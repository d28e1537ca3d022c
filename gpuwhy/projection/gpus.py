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
  what TensorFlow's mixed precision uses, runs at half the FP16-accumulate rate).

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
    peer_link: float | None = None  # bytes/s, NVLink to another GPU (None: PCIe only)

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


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        "V100",
        (7, 0),
        15.7 * TFLOPS,
        None,
        125 * TFLOPS,
        None,
        900 * GBS,
        _gb(32),
        16 * GBS,
        300 * GBS,
    ),
    GpuSpec("T4", (7, 5), 8.1 * TFLOPS, None, 65 * TFLOPS, None, 320 * GBS, _gb(16), 16 * GBS),
    GpuSpec(
        "A100",
        (8, 0),
        19.5 * TFLOPS,
        156 * TFLOPS,
        312 * TFLOPS,
        312 * TFLOPS,
        2039 * GBS,
        _gb(80),
        32 * GBS,
        600 * GBS,
    ),
    GpuSpec(
        "A100-40GB",
        (8, 0),
        19.5 * TFLOPS,
        156 * TFLOPS,
        312 * TFLOPS,
        312 * TFLOPS,
        1555 * GBS,
        _gb(40),
        32 * GBS,
        600 * GBS,
    ),
    GpuSpec(
        "A10",
        (8, 6),
        31.2 * TFLOPS,
        62.5 * TFLOPS,
        125 * TFLOPS,
        125 * TFLOPS,
        600 * GBS,
        _gb(24),
        32 * GBS,
    ),
    GpuSpec(
        "L4",
        (8, 9),
        30.3 * TFLOPS,
        60 * TFLOPS,
        121 * TFLOPS,
        121 * TFLOPS,
        300 * GBS,
        _gb(24),
        32 * GBS,
    ),
    GpuSpec(
        "L40S",
        (8, 9),
        91.6 * TFLOPS,
        183 * TFLOPS,
        362 * TFLOPS,
        362 * TFLOPS,
        864 * GBS,
        _gb(48),
        32 * GBS,
    ),
    GpuSpec(
        "H100",
        (9, 0),
        67 * TFLOPS,
        494.5 * TFLOPS,
        989.5 * TFLOPS,
        989.5 * TFLOPS,
        3350 * GBS,
        _gb(80),
        64 * GBS,
        900 * GBS,
    ),
    GpuSpec(
        "H100-PCIe",
        (9, 0),
        51 * TFLOPS,
        378 * TFLOPS,
        756 * TFLOPS,
        756 * TFLOPS,
        2000 * GBS,
        _gb(80),
        64 * GBS,
    ),
    GpuSpec(
        "H200",
        (9, 0),
        67 * TFLOPS,
        494.5 * TFLOPS,
        989.5 * TFLOPS,
        989.5 * TFLOPS,
        4800 * GBS,
        _gb(141),
        64 * GBS,
        900 * GBS,
    ),
    GpuSpec(
        "RTX 4090",
        (8, 9),
        82.6 * TFLOPS,
        82.6 * TFLOPS,
        165.2 * TFLOPS,
        165.2 * TFLOPS,
        1008 * GBS,
        _gb(24),
        32 * GBS,
    ),
    GpuSpec(
        "RTX 3090",
        (8, 6),
        35.6 * TFLOPS,
        35.6 * TFLOPS,
        71 * TFLOPS,
        71 * TFLOPS,
        936 * GBS,
        _gb(24),
        32 * GBS,
    ),
)


class UnknownGpuError(LookupError):
    """A --target that names no GPU of the table; the message lists them."""


def _key(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` and ``a100`` compare alike: letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", "").replace("geforce", ""))


def target_names() -> list[str]:
    return [gpu.name for gpu in GPUS]


def find_gpu(name: str) -> GpuSpec:
    """The table's GPU for a --target name or an NVML device name
    (``NVIDIA H100 80GB HBM3``, ``Tesla T4``, ``NVIDIA A100-SXM4-40GB``)."""
    key = _key(name).replace("tesla", "")
    if not key:
        raise UnknownGpuError(f"no GPU named {name!r}")
    exact = {_key(gpu.name): gpu for gpu in GPUS}
    if key in exact:
        return exact[key]
    # a device name: the longest table name it contains, memory and form factor checked
    found = [gpu for gpu in GPUS if _key(gpu.name.split("-")[0]) in key]
    if not found:
        raise UnknownGpuError(
            f"no GPU named {name!r}: --target takes one of {', '.join(target_names())} "
            "(or auto: the GPU of this machine)"
        )
    family = max(len(_key(gpu.name.split("-")[0])) for gpu in found)
    found = [gpu for gpu in found if len(_key(gpu.name.split("-")[0])) == family]
    for gpu in found:
        variant = gpu.name.split("-", 1)[1:] or [""]
        if variant[0] and _key(variant[0]) in key:
            return gpu
    return found[0]
