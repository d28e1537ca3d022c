"""The per-architecture constants: which generation a GPU is, whose efficiencies and band
it gets, and that every figure they were set on names a GPU of the table."""

import sys
from pathlib import Path

import pytest

from gpuwhy.facts import KernelWork
from gpuwhy.gpu_specs import GPUS, find_gpu
from gpuwhy.projection import architectures as arch
from gpuwhy.projection.cost import project_step
from tests import builders as b
from tests.projection.test_cost import TRAIN, placement, train_function


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("P100", arch.PASCAL),
        ("V100", arch.VOLTA),
        ("T4", arch.TURING),
        ("Quadro RTX 8000", arch.TURING),
        ("A100", arch.AMPERE),
        ("RTX 3090", arch.AMPERE),
        ("L4", arch.ADA),
        ("RTX 6000 Ada", arch.ADA),
        ("H100", arch.HOPPER),
        ("H200", arch.HOPPER),
        ("B200", arch.BLACKWELL),
        ("RTX 5090", arch.BLACKWELL),
    ],
)
def test_each_gpu_is_its_generation(name, expected):
    assert arch.architecture(find_gpu(name)) == expected


def test_every_gpu_has_every_efficiency_it_can_use():
    for gpu in GPUS:
        table = arch.efficiency(gpu)
        needed = [("fp32", "conv"), ("fp32", "matmul"), ("fp16", "conv"), ("fp16", "matmul")]
        if gpu.tf32_flops:
            needed += [("tf32", "conv"), ("tf32", "matmul")]
        assert all(0 < table[key] < 2 for key in needed), gpu.name
        assert arch.KERNEL_FIXED_S[arch.architecture(gpu)] > 0


def test_a_geforce_card_takes_its_familys_constants_else_its_architectures():
    rtx4090, l40s, rtx3090 = find_gpu("RTX 4090"), find_gpu("L40S"), find_gpu("RTX 3090")
    assert arch.family(rtx4090) == "Ada GeForce" and arch.family(l40s) == "Ada"
    assert arch.efficiency(rtx4090) is arch.EFFICIENCY["Ada GeForce"]
    assert arch.efficiency(l40s) is arch.EFFICIENCY[arch.ADA]
    assert arch.efficiency(rtx3090) is arch.EFFICIENCY[arch.AMPERE]  # no family of its own


def test_hopper_runs_tf32_at_a_higher_share_and_float16_matmuls_at_a_lower_one():
    """What the H100's steps showed against the A100-fitted constants scaled by peak."""
    hopper, ampere = arch.EFFICIENCY[arch.HOPPER], arch.EFFICIENCY[arch.AMPERE]
    assert hopper[("tf32", "matmul")] > ampere[("tf32", "matmul")]
    assert hopper[("tf32", "conv")] > ampere[("tf32", "conv")]
    assert hopper[("fp16", "matmul")] < ampere[("fp16", "matmul")]
    half = [b.tensor_op(dtype="float16", flops=4e11, function=TRAIN, gradient=True)]
    h100 = project_step(placement(tensor_ops=half), find_gpu("H100"))
    a100 = project_step(placement(tensor_ops=half), find_gpu("A100"))
    assert h100 is not None and a100 is not None
    speedup = a100.tensor.mid / h100.tensor.mid
    assert 1.5 < speedup < 3.17 * 0.9  # well short of the peaks' ratio


def test_an_unmeasured_combination_gets_the_default_band():
    assert arch.error_band(find_gpu("L40S"), "fp16", True) == arch.DEFAULT_BAND
    assert (
        arch.error_band(find_gpu("H100"), "fp32", True)
        == arch.ERROR_BAND[(arch.HOPPER, "fp32", True)]
    )
    low, high = arch.DEFAULT_BAND
    for band in arch.ERROR_BAND.values():  # every band holds its middle
        assert band[0] < 1 < band[1] and band[0] >= 0.5 * low and band[1] <= 1.5 * high


def test_fixed_costs_make_small_batches_slower_per_sample():
    """Each fused kernel's start and drain does not shrink with the batch: a step of
    the same kernels at a quarter of the bytes takes more than a quarter of the time."""

    def step(written: int):
        return train_function(
            jit_compile=True, kernels=(KernelWork("Mul", count=4000, bytes=written, sized=4000),)
        )

    large, small = step(4_000_000_000), step(1_000_000_000)
    h100 = find_gpu("H100")
    big = project_step(placement(functions=(large,)), h100)
    little = project_step(placement(functions=(small,)), h100)
    assert big is not None and little is not None
    assert little.kernels.mid > 0.25 * big.kernels.mid + 0.5 * 1000 * 1.6e-6


def test_every_published_figure_names_a_gpu_of_the_table_and_a_kind():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import projection_figures as figures
    finally:
        sys.path.pop(0)
    for figure in [*figures.PUBLISHED, *figures.RELATIVE, *figures.SWEEPS]:
        find_gpu(figure.gpu)
        assert figure.precision in (figures.FP32, figures.AMP)
    for relative in figures.RELATIVE:
        find_gpu(relative.over)
        assert relative.kind in ("fit", "held out") and relative.source
        assert relative.ratio == pytest.approx(relative.value / relative.over_value, rel=1e-3)
    kinds = {p.kind for p in figures.PUBLISHED}
    assert kinds == {"fit", "held out"}
