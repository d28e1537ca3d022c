"""What a training step reaches of each GPU generation's peaks, and how far the
projection is trusted there: the constants of the cost model (cost.py) that differ by
architecture, each set from published or measured training steps of that generation
(docs/projection.md says which figures set which constant and which are held out).

Why by architecture: a share of the peak fitted on one generation does not carry over
to another. Hopper's tensor cores triple the A100's peak, yet the steps measured on an
H100 ran float16 transformer matmuls at a lower share of it than the A100 did, and TF32
work at a higher one; its kernels also start and end faster (the step's fixed cost per
kernel is smaller). Volta and Ampere keep the constants fitted on NVIDIA's TensorFlow
figures; Turing has Volta's tensor cores; Ada, Hopper and Blackwell are set from their
own measured steps.

The band of a projection comes from the same place: the spread of the held-out errors
of its architecture and precision (``ERROR_BAND``), not one width for every GPU.
"""

from __future__ import annotations

from gpuwhy.gpu_specs import GpuSpec

PASCAL, VOLTA, TURING, AMPERE, ADA, HOPPER, BLACKWELL = (
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada",
    "Hopper",
    "Blackwell",
)


def architecture(gpu: GpuSpec) -> str:
    """The generation of ``gpu``, from its compute capability."""
    major, minor = gpu.compute_capability
    if major >= 10:
        return BLACKWELL
    if major == 9:
        return HOPPER
    if (major, minor) >= (8, 9):
        return ADA
    if major == 8:
        return AMPERE
    if (major, minor) >= (7, 5):
        return TURING
    if major == 7:
        return VOLTA
    return PASCAL


def family(gpu: GpuSpec) -> str:
    """Its architecture, and whether it is a GeForce card: a GeForce card's FP32-
    accumulate tensor rate is half its professional sibling's (gpu_specs.py), and how
    much of it training reaches differs (Lambda's RTX 4090 ran BERT as fast as its RTX
    6000 Ada of twice the peak)."""
    return f"{architecture(gpu)} GeForce" if gpu.geforce else architecture(gpu)


def efficiency(gpu: GpuSpec) -> dict[tuple[str, str], float]:
    """The efficiencies of ``gpu``'s family, else of its architecture."""
    return EFFICIENCY.get(family(gpu)) or EFFICIENCY[architecture(gpu)]


# Share of the precision's peak that the matmuls and convolutions of a training step
# reach (the middle of the band), by the units that run them ("fp32": the FP32 units;
# "tf32"; "fp16": float16/bfloat16 tensor cores) and the kind of op. FP32 convolutions
# may pass the FLOP peak: cuDNN runs 3x3 ones with Winograd's transform, fewer
# multiplies than the FLOPs counted.
_VOLTA = {  # fitted on NVIDIA's TensorFlow figures, V100 and A100 (docs/projection.md)
    ("fp32", "conv"): 1.25,
    ("fp32", "matmul"): 0.63,
    ("fp16", "conv"): 0.49,
    ("fp16", "matmul"): 0.49,
}
_AMPERE = {**_VOLTA, ("tf32", "conv"): 0.30, ("tf32", "matmul"): 0.30}
EFFICIENCY: dict[str, dict[tuple[str, str], float]] = {
    PASCAL: _VOLTA,
    VOLTA: _VOLTA,
    TURING: _VOLTA,  # Volta's tensor cores (FP16 only), checked on a Quadro RTX 8000
    AMPERE: _AMPERE,
    # Hopper: TF32 and float16 convolutions from current software's absolute steps
    # (torchvision's ResNet-50 on the H100 measured for this project; Lambda's PyTorch
    # BERT-Large and BERT-base in TF32, NGC 24.03), float16 matmuls from how much
    # faster than an A100 it ran mixed-precision BERT in one harness (no current
    # figure of a mixed-precision, not whole-float16, transformer on an H100)
    HOPPER: {
        **_AMPERE,
        ("tf32", "conv"): 0.53,
        ("tf32", "matmul"): 0.62,
        ("fp16", "conv"): 0.54,
        ("fp16", "matmul"): 0.345,
    },
    # Ada, professional parts (RTX 6000 Ada, L40S, L40, L4: 300 W or less for twice
    # the GeForce card's tensor peak): from how much slower than an A100 the RTX 6000
    # Ada ran ResNet-50 (TF32) and BERT-Large (mixed precision) in one harness
    ADA: {
        **_AMPERE,
        ("tf32", "conv"): 0.21,
        ("tf32", "matmul"): 0.21,
        ("fp16", "conv"): 0.24,
        ("fp16", "matmul"): 0.24,
    },
    # Ada GeForce: the RTX 4090 in the same harness, and its ResNet-50 in
    # tf_cnn_benchmarks at batch 256 (against its FP32-accumulate peak, half the
    # FP16-accumulate one: it reaches more of it than the professional parts do)
    f"{ADA} GeForce": {
        **_AMPERE,
        ("tf32", "conv"): 0.33,
        ("tf32", "matmul"): 0.33,
        ("fp16", "conv"): 0.66,
        ("fp16", "matmul"): 0.66,
    },
    # Blackwell: from how much faster than an H100 the B200 ran BERT-Large (TF32) and
    # BERT-base (mixed precision) in one harness; convolutions take the matmuls' share
    # (no figure of a convolution network that is not harness-bound)
    BLACKWELL: {
        **_AMPERE,
        ("tf32", "conv"): 0.42,
        ("tf32", "matmul"): 0.42,
        ("fp16", "conv"): 0.157,
        ("fp16", "matmul"): 0.157,
    },
}

# Under XLA, a fused kernel's fixed cost beside its work: the time it takes to start,
# fill the GPU and drain, one kernel after the other on a stream. Measured on an H100
# (tests/data/xplane/h100_slow_input: Keras 3 on JAX, XLA's kernels back to back, the
# median kernel 1.5 µs and the median gap to the next 0.1 µs); Volta to Ada at the
# fastest launch of TF's executor (2.5 µs).
KERNEL_FIXED_S: dict[str, float] = {
    PASCAL: 2.5e-6,
    VOLTA: 2.5e-6,
    TURING: 2.5e-6,
    AMPERE: 2.5e-6,
    ADA: 2.5e-6,
    HOPPER: 1.6e-6,
    BLACKWELL: 1.6e-6,
}

# The step's band, (fastest, slowest) as factors on the middle time, by architecture
# and precision ("fp32" also TF32; "fp16" mixed precision), and whether the step is
# XLA-compiled: the range of the held-out published/measured figures' errors there
# (projected over published step time, docs/projection.md) with a tenth more either
# side. Where no held-out figure is (a combination not measured), DEFAULT_BAND.
# Printed by tools/fit_projection.py from benchmarks/projection_figures.py.
DEFAULT_BAND = (0.65, 1.5)
ERROR_BAND: dict[tuple[str, str, bool], tuple[float, float]] = {
    (AMPERE, "fp16", True): (0.66, 1.15),  # 7 held-out figures
    (AMPERE, "fp32", True): (0.57, 1.3),  # 6
    (HOPPER, "fp16", True): (0.82, 1.2),  # 3
    (HOPPER, "fp32", True): (0.85, 1.2),  # 6
    (VOLTA, "fp16", True): (0.65, 1.49),  # 9
    (VOLTA, "fp32", False): (0.66, 1.35),  # 3
    (VOLTA, "fp32", True): (0.87, 1.43),  # 6
}


def error_band(gpu: GpuSpec, precision: str, xla: bool) -> tuple[float, float]:
    """(fastest, slowest) factors on the projected step for this combination: its
    family's held-out spread, else its architecture's, else DEFAULT_BAND."""
    return ERROR_BAND.get(
        (family(gpu), precision, xla),
        ERROR_BAND.get((architecture(gpu), precision, xla), DEFAULT_BAND),
    )
