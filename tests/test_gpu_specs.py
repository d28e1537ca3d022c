"""The GPU table: names as users type them and as NVML reports them."""

import pytest

from gpuwhy.gpu_specs import GPUS, UnknownGpuError, find_gpu, target_names


@pytest.mark.parametrize(
    "name, found",
    [
        ("A100", "A100"),
        ("a100", "A100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A10G", "A10"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("rtx 3090", "RTX 3090"),
        ("H200", "H200"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA H800", "H800"),
        ("NVIDIA A800-SXM4-80GB", "A800"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA A40", "A40"),
        ("NVIDIA A30", "A30"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("A6000", "RTX A6000"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("Quadro RTX 6000", "Quadro RTX 6000"),
        ("Quadro RTX 8000", "Quadro RTX 8000"),
        ("NVIDIA GeForce RTX 5090", "RTX 5090"),
        ("NVIDIA GeForce RTX 4080", "RTX 4080"),
        ("NVIDIA GeForce RTX 3080", "RTX 3080"),
        ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"),
        ("Tesla P100-PCIE-16GB", "P100"),
        ("Tesla V100-PCIE-16GB", "V100"),
        ("NVIDIA A100 80GB PCIe", "A100"),
    ],
)
def test_names_as_typed_and_as_nvml_reports_them(name, found):
    assert find_gpu(name).name == found


@pytest.mark.parametrize(
    "name",
    # another GPU whose name contains a table name: derived from NVML, not mistaken
    ["NVIDIA RTX A4000", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA RTX A3000 Laptop GPU"],
)
def test_a_name_that_only_contains_a_table_name_is_another_gpu(name):
    with pytest.raises(UnknownGpuError):
        find_gpu(name)


def test_an_unknown_name_lists_the_table():
    with pytest.raises(UnknownGpuError) as error:
        find_gpu("Voodoo 5")
    assert "A100" in str(error.value) and "auto" in str(error.value)
    with pytest.raises(UnknownGpuError):
        find_gpu("  ")


def test_the_peak_a_matmul_gets_follows_dtype_tf32_and_the_architecture():
    a100, v100 = find_gpu("A100"), find_gpu("V100")
    assert a100.matmul_flops("float32") == 156e12  # TF32 tensor cores, on by default
    assert a100.matmul_flops("float32", tf32_enabled=False) == 19.5e12
    assert a100.matmul_flops("bfloat16") == a100.matmul_flops("float16") == 312e12
    assert v100.matmul_flops("float32") == 15.7e12  # no TF32 before 8.0
    assert v100.matmul_flops("bfloat16") == 15.7e12  # no BF16 tensor cores: FP32 units


def test_every_entry_is_consistent():
    assert len(set(target_names())) == len(GPUS)
    for gpu in GPUS:
        assert gpu.float16_flops > gpu.float32_flops > 0
        assert (gpu.tf32_flops is None) == (gpu.compute_capability < (8, 0))
        assert gpu.memory_bandwidth > gpu.host_link > 0 and gpu.memory_bytes > 0
        assert gpu.sm_count > 0 and gpu.derived_from is None
        # FP8 tensor cores from Ada and Hopper on, at twice the FP16 rate
        assert (gpu.float8_flops is not None) == (gpu.compute_capability >= (8, 9))
        if gpu.float8_flops:
            assert gpu.float8_flops == pytest.approx(2 * gpu.float16_flops, rel=0.02)


def test_geforce_tensor_cores_run_fp32_accumulate_at_half_the_professional_rate():
    # same chip (GA102, AD102), same SMs: the GeForce card's FP16-with-FP32-accumulate
    # and TF32 rates are half those of its professional sibling, clock for clock
    rtx3090, a6000 = find_gpu("RTX 3090"), find_gpu("RTX A6000")
    per_clock = rtx3090.float32_flops / a6000.float32_flops
    assert rtx3090.float16_flops / a6000.float16_flops == pytest.approx(per_clock / 2, rel=0.02)
    assert rtx3090.tf32_flops == pytest.approx(rtx3090.float16_flops / 2, rel=0.01)
    rtx4090, ada = find_gpu("RTX 4090"), find_gpu("RTX 6000 Ada")
    per_clock = rtx4090.float32_flops / ada.float32_flops
    assert rtx4090.float16_flops / ada.float16_flops == pytest.approx(per_clock / 2, rel=0.02)
