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


def test_a_point_reading_alone_is_no_evidence():
    # an older record's only busy figure: the previous program's last reading, maybe
    assert run(GpuShared, b.facts(devices=[b.gpu(0, utilization_percent=85.0)])) == []


# The H100 of /work/shared/gpu/h100 right after a JAX program ended: NVML v2 says 0 used
# and 480 MiB reserved, the point reading is the previous program's last (20 %).
H100_RESERVED = 480 * 1024**2


def v2_gpu(index=0, used=0, samples=None, seconds=None, **changes):
    return b.gpu(
        index,
        memory_used_bytes=used,
        memory_reserved_bytes=H100_RESERVED,
        utilization_percent=20.0,
        busy_before_samples=samples,
        busy_before_seconds=seconds,
        **changes,
    )


def test_the_drivers_reservation_and_a_stale_point_reading_are_not_sharing():
    devices = [v2_gpu(0, samples=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), seconds=1.4)]
    assert run(GpuShared, b.facts(devices=devices)) == []
    assert run(GpuShared, b.facts(devices=[v2_gpu(0, samples=())])) == []


def test_an_older_v1_record_with_the_reservation_used_and_a_point_reading_is_quiet():
    # no reserved figure (v1 counts it as used), no samples: the old record's fields only
    device = b.gpu(0, memory_used_bytes=H100_RESERVED, utilization_percent=20.0)
    assert device.memory_reserved_bytes is None and device.busy_before_samples is None
    assert run(GpuShared, b.facts(devices=[device])) == []


def test_another_process_holding_memory_beside_the_reservation_is_shared():
    devices = [v2_gpu(0, used=30 * b.GiB, processes=(b.process(4242, 30.0),))]
    (finding,) = run(GpuShared, b.facts(devices=devices))
    assert finding.evidence["memory_held_by_others_mib"] == 30 * 1024
    assert finding.evidence["memory_reserved_by_driver_mib"] == 480
    assert finding.evidence["memory_reading"] == "NVML v2: without the driver's reservation"
    assert "20% busy" not in finding.title  # the point reading is not quoted


def test_memory_used_beyond_the_reservation_with_no_process_listed_is_shared():
    # in a container NVML lists no process of another container
    (finding,) = run(GpuShared, b.facts(devices=[v2_gpu(0, used=12 * b.GiB)]))
    assert finding.severity == "medium" and finding.evidence["processes"] == []
    assert finding.evidence["memory_held_by_others_mib"] == 12 * 1024


BUSY = (90.0, 95.0, 100.0, 85.0, 0.0, 92.0, 97.0, 100.0)  # one sample each 200 ms


def test_busy_driver_samples_over_a_second_while_someone_holds_memory_is_shared():
    devices = [v2_gpu(0, used=2 * b.GiB, samples=BUSY, seconds=1.5)]  # 2.5 %: below 10 %
    (finding,) = run(GpuShared, b.facts(devices=devices))
    assert "82% busy over the 1.5 s before the run (driver samples)" in finding.title
    assert finding.evidence["busy_before_run"] == {
        "source": "driver samples",
        "samples": 8,
        "seconds": 1.5,
        "busy_samples": 7,
        "mean_percent": 82.4,
        "sustained": True,
    }
    assert finding.severity == "medium"


def test_busy_driver_samples_with_a_process_listed_is_shared():
    devices = [v2_gpu(0, samples=BUSY, seconds=1.5, processes=(b.process(7, 0.5),))]
    assert len(run(GpuShared, b.facts(devices=devices))) == 1


def test_busy_driver_samples_of_a_program_that_ended_are_not_sharing():
    # nobody holds the GPU now: the samples were the previous program's last
    devices = [v2_gpu(0, samples=BUSY, seconds=1.5)]
    assert run(GpuShared, b.facts(devices=devices)) == []


def test_busy_driver_samples_over_a_fifth_of_a_second_are_not_sustained():
    devices = [v2_gpu(0, used=2 * b.GiB, samples=(100.0, 100.0), seconds=0.2)]
    assert run(GpuShared, b.facts(devices=devices)) == []
    devices = [v2_gpu(0, used=2 * b.GiB, samples=(100.0,) * 3, seconds=0.4)]
    assert run(GpuShared, b.facts(devices=devices)) == []


def test_driver_samples_mostly_idle_are_not_busy():
    idle = (0.0, 0.0, 100.0, 0.0, 0.0, 0.0, 100.0, 0.0)
    devices = [v2_gpu(0, used=2 * b.GiB, samples=idle, seconds=1.5)]
    assert run(GpuShared, b.facts(devices=devices)) == []


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
