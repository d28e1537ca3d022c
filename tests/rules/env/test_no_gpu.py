"""env.no-gpu from small facts objects: one cause per test, and the order of causes."""

from dataclasses import replace

import pytest

from gpuwhy.rules.env.no_gpu import NoGpu
from tests import builders as b


def check(facts):
    return NoGpu().check(facts, dict(NoGpu.options))


def codes(facts):
    (finding,) = check(facts)
    return [c["code"] for c in finding.evidence["causes"]]


def test_healthy_gpu_machine_has_no_finding():
    assert check(b.facts()) == []


def test_listed_gpu_without_a_successful_op_is_not_usable():
    facts = b.facts(
        tf=b.tensorflow(
            confirm_device=None, confirm_error="InternalError: CUDA error: out of memory"
        )
    )
    assert codes(facts) == ["op-failed"]


def test_no_driver_on_bare_metal():
    facts = b.facts(tf=b.no_gpu_tf(libraries=b.libraries()), drv=b.NO_DRIVER, devices=())
    (finding,) = check(facts)
    assert finding.severity == "high"
    assert finding.title == "TensorFlow cannot use a GPU: no NVIDIA driver"
    assert "ubuntu-drivers" in finding.fix and "nvidia-smi" in finding.fix


def test_no_driver_in_a_container_without_device_nodes_points_at_gpus_all():
    facts = b.facts(tf=b.no_gpu_tf(), drv=replace(b.NO_DRIVER, in_container=True), devices=())
    (finding,) = check(facts)
    assert "container" in finding.title
    assert "--gpus all" in finding.fix


def test_no_driver_in_wsl_points_at_the_windows_driver():
    facts = b.facts(tf=b.no_gpu_tf(), drv=b.NO_DRIVER, devices=(), wsl=True)
    (finding,) = check(facts)
    assert "WSL" in finding.title and "Windows" in finding.fix


@pytest.mark.parametrize(
    "nvml_error, code, fix_word",
    [
        ("DriverNotLoaded", "driver-not-loaded", "modprobe"),
        ("LibRmVersionMismatch", "driver-mismatch", "reboot"),
        ("NoPermission", "driver-permission", "usermod"),
    ],
)
def test_driver_installed_but_unusable(nvml_error, code, fix_word):
    drv = b.driver(nvml_ok=False, nvml_error=nvml_error, libcuda_loaded=True, device_count=0)
    (finding,) = check(b.facts(tf=b.no_gpu_tf(), drv=drv, devices=()))
    assert finding.evidence["causes"][0]["code"] == code
    assert fix_word in finding.fix


def test_driver_without_gpus():
    facts = b.facts(tf=b.no_gpu_tf(), drv=b.driver(device_count=0), devices=())
    assert codes(facts) == ["no-gpu-hardware"]


@pytest.mark.parametrize("value", ["-1", "", "7", "GPU-nope"])
def test_gpus_hidden_by_cuda_visible_devices(value):
    facts = b.facts(tf=b.no_gpu_tf(), env_vars={"CUDA_VISIBLE_DEVICES": value})
    (finding,) = check(facts)
    assert finding.evidence["causes"][0]["code"] == "hidden-by-cuda-visible-devices"
    assert repr(value) in finding.title
    assert "unset CUDA_VISIBLE_DEVICES" in finding.fix


def test_valid_cuda_visible_devices_is_not_a_cause():
    facts = b.facts(tf=b.no_gpu_tf(), env_vars={"CUDA_VISIBLE_DEVICES": "0"})
    assert "hidden-by-cuda-visible-devices" not in codes(facts)


def test_hidden_devices_is_reported_next_to_a_missing_driver():
    facts = b.facts(
        tf=b.no_gpu_tf(), drv=b.NO_DRIVER, devices=(), env_vars={"CUDA_VISIBLE_DEVICES": "-1"}
    )
    assert codes(facts) == ["no-driver", "hidden-by-cuda-visible-devices"]


def test_driver_older_than_the_builds_cuda_major():
    drv = b.driver(driver_version="470.199.02", cuda_driver_version="11.4")
    (finding,) = check(b.facts(tf=b.no_gpu_tf(), drv=drv))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "driver-too-old"
    assert "11.4" in cause["title"] and "12.5.1" in cause["title"]
    assert "525.60.13" in finding.fix


def test_driver_of_an_older_minor_is_not_too_old():
    # CUDA minor-version compatibility: a 12.2 driver runs a 12.5 build
    drv = b.driver(cuda_driver_version="12.2")
    facts = b.facts(tf=b.no_gpu_tf(libraries=b.libraries(missing=("cudnn",))), drv=drv)
    assert codes(facts) == ["missing-libraries"]


def test_driver_too_old_is_also_read_from_tfs_log():
    tf = b.no_gpu_tf(
        log_lines=(
            "E cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
            "Failed call to cuInit: CUDA driver version is insufficient for "
            "CUDA runtime version",
        )
    )
    (finding,) = check(b.facts(tf=tf, drv=b.driver(cuda_driver_version=None, driver_version=None)))
    assert finding.title == "TensorFlow cannot use a GPU: the driver is too old for CUDA 12.5.1"
    assert "None" not in str(finding.evidence["causes"][0])


@pytest.mark.parametrize(
    "in_container, fix_word",
    [(True, "NVIDIA_DRIVER_CAPABILITIES=compute"), (False, "libnvidia-compute-550")],
)
def test_nvml_works_but_libcuda_is_missing(in_container, fix_word):
    drv = b.driver(
        libcuda_loaded=False,
        in_container=in_container,
        libcuda_error="libcuda.so.1: cannot open shared object file",
    )
    (finding,) = check(b.facts(tf=b.no_gpu_tf(), drv=drv))
    assert finding.evidence["causes"][0]["code"] == "no-libcuda"
    assert fix_word in finding.fix


def test_a_failure_after_import_shows_its_error():
    tf = b.TensorFlowFacts(
        installed=True,
        import_ok=True,
        probe_status="error",
        import_error="AttributeError: module 'tensorflow' has no attribute 'config'",
    )
    (finding,) = check(b.facts(tf=tf))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "tf-probe-failed" and "no attribute 'config'" in cause["detail"]


def test_crash_and_hang_without_details_print_no_none():
    for tf in (
        b.TensorFlowFacts(installed=True, probe_status="crashed"),
        b.TensorFlowFacts(installed=True, probe_status="timeout"),
    ):
        (finding,) = check(b.facts(tf=tf))
        assert "None" not in finding.title + str(finding.evidence["causes"][0])


def test_gpu_0_failing_while_gpu_1_works_is_not_usable():
    tf = b.tensorflow(
        gpus=("/physical_device:GPU:0", "/physical_device:GPU:1"),
        confirm_device=None,
        confirm_error="InternalError: CUDA error: an illegal memory access",
    )
    assert codes(b.facts(tf=tf, devices=[b.gpu(0), b.gpu(1)])) == ["op-failed"]


def test_nightly_builds_are_not_pinned_to_a_missing_release():
    tf = b.no_gpu_tf(
        version="2.22.0-dev20261101",
        distribution="tf-nightly",
        libraries=b.libraries(missing=("cudnn",)),
    )
    (finding,) = check(b.facts(tf=tf))
    assert 'pip install "tensorflow[and-cuda]"' in finding.fix and "==2.22" not in finding.fix


def test_missing_libraries_are_named_with_their_packages():
    tf = b.no_gpu_tf(libraries=b.libraries(missing=("cudart", "cudnn")))
    (finding,) = check(b.facts(tf=tf))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "missing-libraries"
    assert "libcudart.so.12 (nvidia-cuda-runtime-cu12)" in cause["detail"]
    assert "libcudnn.so.9 (nvidia-cudnn-cu12)" in cause["detail"]
    assert 'pip install "tensorflow[and-cuda]==2.21.0"' in finding.fix
    assert "nvidia-cuda-runtime-cu12 nvidia-cudnn-cu12" in finding.fix
    assert "sudo apt install libcudart-12-5 libcudnn-12-5" in finding.fix


def test_wrong_major_version_of_a_library_is_told_apart():
    tf = b.no_gpu_tf(
        libraries=b.libraries(
            missing=("cudart",),
            other_versions={"cudart": ["/usr/local/cuda-13.0/lib64/libcudart.so.13"]},
        )
    )
    (finding,) = check(b.facts(tf=tf))
    cause = finding.evidence["causes"][0]
    assert "another CUDA version" in cause["title"]
    assert "found /usr/local/cuda-13.0/lib64/libcudart.so.13 instead" in cause["detail"]


def test_gpu_architecture_not_in_the_build():
    devices = [b.gpu(name="Tesla M60", compute_capability="5.2")]
    tf = b.no_gpu_tf(
        log_lines=(
            "I gpu_device.cc:2040] Ignoring visible gpu device (device: 0, "
            "name: Tesla M60, compute capability: 5.2) with Cuda compute "
            "capability 5.2. The minimum required Cuda capability is 6.0.",
        )
    )
    (finding,) = check(b.facts(tf=tf, devices=devices))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "unsupported-arch"
    assert "Tesla M60 (compute capability 5.2)" in cause["detail"]
    assert "sm_60" in cause["detail"]


def test_tensorflow_not_installed():
    facts = b.facts(tf=b.TensorFlowFacts(installed=False), drv=b.NO_DRIVER, devices=())
    (finding,) = check(facts)
    assert [c["code"] for c in finding.evidence["causes"]] == ["tf-not-installed", "no-driver"]
    assert 'pip install "tensorflow[and-cuda]"' in finding.fix


def test_tensorflow_not_installed_on_macos_suggests_metal():
    facts = b.facts(
        tf=b.TensorFlowFacts(installed=False), platform="darwin", drv=b.NO_DRIVER, devices=()
    )
    assert "tensorflow-metal" in check(facts)[0].fix


def test_import_failure_keeps_the_error():
    tf = b.TensorFlowFacts(
        installed=True,
        import_ok=False,
        import_error="ImportError: numpy.core.multiarray failed to import",
    )
    (finding,) = check(b.facts(tf=tf))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "tf-import-failed"
    assert "numpy" in cause["detail"] and "numpy" in cause["fix"]


def test_crash_with_sigill_names_the_cpu():
    tf = b.TensorFlowFacts(
        installed=True,
        probe_status="crashed",
        signal="SIGILL",
        hung_in="import",
        import_error="the Python process died with SIGILL",
    )
    (finding,) = check(b.facts(tf=tf))
    assert "illegal instruction" in finding.title
    assert "AVX" in finding.evidence["causes"][0]["detail"]


def test_hang_in_gpu_initialisation_names_the_stage():
    tf = b.TensorFlowFacts(
        installed=True,
        import_ok=True,
        probe_status="timeout",
        hung_in="list_gpus",
        import_error="no answer after 120 s",
    )
    (finding,) = check(b.facts(tf=tf))
    assert "list_gpus" in finding.title
    assert "cuInit" in finding.evidence["causes"][0]["detail"]


def test_cpu_only_pip_build_on_linux():
    tf = b.no_gpu_tf(build=dict(b.CPU_BUILD), distribution="tensorflow-cpu", libraries=())
    (finding,) = check(b.facts(tf=tf))
    assert finding.evidence["causes"][0]["code"] == "cpu-only-build"
    assert "pip uninstall -y tensorflow-cpu" in finding.fix


def test_cpu_only_build_on_macos_says_no_cuda_there():
    tf = b.no_gpu_tf(build=dict(b.CPU_BUILD), distribution="tensorflow", libraries=())
    (finding,) = check(
        b.facts(tf=tf, platform="darwin", machine="arm64", drv=b.NO_DRIVER, devices=())
    )
    assert "macOS" in finding.evidence["causes"][0]["detail"]
    assert "tensorflow-metal" in finding.fix


def test_cpu_only_build_on_native_windows_says_wsl2():
    tf = b.no_gpu_tf(build=dict(b.CPU_BUILD), libraries=())
    (finding,) = check(b.facts(tf=tf, platform="win32"))
    assert "WSL2" in finding.fix


def test_unknown_cause_shows_tfs_log():
    tf = b.no_gpu_tf(log_lines=("W gpu_device.cc:2341] Cannot dlopen some GPU libraries.",))
    (finding,) = check(b.facts(tf=tf))
    cause = finding.evidence["causes"][0]
    assert cause["code"] == "unknown" and "Cannot dlopen" in cause["detail"]
