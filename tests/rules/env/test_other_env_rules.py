"""env.gpu-shared, env.ptx-jit and env.allocator-settings from small facts objects."""

import pytest

from gpuwhy.rules.env.allocator_settings import AllocatorSettings
from gpuwhy.rules.env.gpu_shared import GpuShared
from gpuwhy.rules.env.ptx_jit import PtxJit
from tests import builders as b


def run(rule_cls, facts, **options):
    return rule_cls().check(facts, {**rule_cls.options, **options})


# -- env.gpu-shared ------------------------------------------------------------------------
def test_free_gpu_is_not_shared():
    assert run(GpuShared, b.facts()) == []


def test_other_process_holding_memory_is_named():
    devices = [b.gpu(0, processes=(b.process(4242, 30.0),)), b.gpu(1)]
    (finding,) = run(GpuShared, b.facts(devices=devices))
    assert finding.severity == "medium"
    assert finding.evidence["memory_held_by_others_mib"] == 30 * 1024
    assert finding.evidence["processes"][0] == {
        "pid": 4242,
        "command": "python notebook_kernel.py",
        "memory_mib": 30720,
    }
    assert "export CUDA_VISIBLE_DEVICES=GPU-1aaa-bbbb" in finding.fix  # the free GPU, by UUID


def test_most_memory_held_by_others_is_high():
    devices = [b.gpu(0, processes=(b.process(1, 50.0),))]
    (finding,) = run(GpuShared, b.facts(devices=devices))
    assert finding.severity == "high"
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in finding.fix


def test_busy_gpu_without_memory_still_counts_as_shared():
    (finding,) = run(GpuShared, b.facts(devices=[b.gpu(0, utilization_percent=85.0)]))
    assert finding.evidence["utilization_percent_before_run"] == 85.0


def test_memory_used_by_invisible_processes_counts_in_containers():
    # NVML lists no processes of other containers; the device's used memory shows them
    (finding,) = run(GpuShared, b.facts(devices=[b.gpu(0, memory_used_bytes=70 * b.GiB)]))
    assert finding.severity == "high" and finding.evidence["processes"] == []


def test_small_process_below_threshold_is_ignored():
    devices = [b.gpu(0, processes=(b.process(1, 2.0),))]  # 2.5% of 80 GiB
    assert run(GpuShared, b.facts(devices=devices)) == []
    assert len(run(GpuShared, b.facts(devices=devices), memory_fraction=0.01)) == 1


# -- env.ptx-jit ---------------------------------------------------------------------------
def test_blackwell_on_a_hopper_build_jits_ptx():
    devices = [b.gpu(0, name="NVIDIA B200", compute_capability="10.0")]
    (finding,) = run(PtxJit, b.facts(devices=devices, drv=b.driver(cuda_driver_version="12.8")))
    assert finding.severity == "medium"
    assert finding.evidence["ptx_used"] == "compute_90"
    assert "CUDA_CACHE_MAXSIZE" in finding.fix


def test_ptx_jit_under_minor_version_compatibility_is_high():
    devices = [b.gpu(0, name="NVIDIA RTX PRO 6000", compute_capability="12.0")]
    (finding,) = run(PtxJit, b.facts(devices=devices, drv=b.driver(cuda_driver_version="12.2")))
    assert finding.severity == "high"


def test_tensorflows_own_jit_warning_triggers_too():
    line = (
        "W gpu_device.cc:2100] TensorFlow was not built with CUDA kernel binaries compatible "
        "with compute capability 8.6. CUDA kernels will be jit-compiled from PTX, which could "
        "take 30 minutes or longer."
    )
    tf = b.tensorflow(
        build={**b.BUILD_2_21, "cuda_compute_capabilities": ["sm_70", "compute_80"]},
        log_lines=(line,),
    )
    (finding,) = run(PtxJit, b.facts(tf=tf, devices=[b.gpu(0, compute_capability="8.6")]))
    assert finding.evidence["tensorflow_log"] == [line]


def test_native_cubin_needs_no_jit():
    assert run(PtxJit, b.facts(devices=[b.gpu(0, compute_capability="8.6")])) == []
    assert run(PtxJit, b.facts(devices=[b.gpu(0, compute_capability="9.0")])) == []


# -- env.allocator-settings ----------------------------------------------------------------
@pytest.mark.parametrize("value, fixed", [("1", "true"), ("True", "true"), ("0", "false")])
def test_allow_growth_accepts_only_exact_strings(value, fixed):
    (finding,) = run(AllocatorSettings, b.facts(env_vars={"TF_FORCE_GPU_ALLOW_GROWTH": value}))
    assert finding.evidence["variable"] == "TF_FORCE_GPU_ALLOW_GROWTH"
    assert finding.fix == f"export TF_FORCE_GPU_ALLOW_GROWTH={fixed}"


def test_unknown_allocator_is_reported():
    (finding,) = run(AllocatorSettings, b.facts(env_vars={"TF_GPU_ALLOCATOR": "cuda_async"}))
    assert "silently ignored" in finding.title


def test_growth_with_the_async_allocator_has_no_effect():
    env_vars = {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "TF_GPU_ALLOCATOR": "cuda_malloc_async"}
    (finding,) = run(AllocatorSettings, b.facts(env_vars=env_vars))
    assert "no effect" in finding.title


def test_valid_settings_are_quiet():
    for env_vars in (
        {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        {"TF_GPU_ALLOCATOR": "cuda_malloc_async"},
        {},
    ):
        assert run(AllocatorSettings, b.facts(env_vars=env_vars)) == []
