"""The GPU table: names as users type them and as NVML reports them."""

import pytest

from gpuwhy.projection.gpus import GPUS, UnknownGpuError, find_gpu, target_names


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
    ],
)
def test_names_as_typed_and_as_nvml_reports_them(name, found):
    assert find_gpu(name).name == found


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
