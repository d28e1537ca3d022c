"""env.no-gpu: TensorFlow cannot use a GPU, and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.environment import tf_can_use_gpu
from gpuwhy.facts import EnvironmentFacts, Facts, GpuDevice
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule
from gpuwhy.rules.env.cuda_compat import (
    MIN_DRIVER_FOR_CUDA_MAJOR,
    arch_support,
    driver_supports,
    version_tuple,
    visible_devices,
)


@dataclass(frozen=True)
class Cause:
    """One reason the GPU is unusable; the first cause found is the verdict."""

    code: str
    title: str
    detail: str
    fix: str


class NoGpu(Rule):
    """TensorFlow cannot use a GPU on this machine; the finding names the cause and the fix.

    ## What it detects
    TensorFlow lists no GPU, or lists one but a real operation placed on it fails. The
    causes are checked in the order a user has to fix them, and every one that applies is
    listed, the first being the verdict:
    TensorFlow not installed or failing to import (with the crash signal or the stage
    where it hung), a CPU-only build (`tensorflow-cpu`, the macOS wheel, native Windows
    since TF 2.11), no NVIDIA driver (NVML and `libcuda.so.1` cannot be loaded; in a
    container: started without GPU access), the GPU visible to NVML but the driver's
    `libcuda.so.1` missing (a container without the `compute` capability), the driver's
    kernel module not loaded or of another version, GPUs hidden by `CUDA_VISIBLE_DEVICES`, a driver older than the CUDA
    major version of the build, each CUDA/cuDNN library of the build that does not load
    (naming another major version found instead, and the pip/apt package that provides
    it), and a GPU architecture the build has no code for.

    ## Why is this slow?
    Without a usable GPU every op runs on the CPU. TensorFlow does not stop: it logs one
    line among hundreds ("Cannot dlopen some GPU libraries", "Could not find cuda
    drivers") and trains 10-100x slower, so the first sign is often a slow epoch.

    ## Example
    ```console
    $ pip install tensorflow          # CUDA build, but no CUDA libraries installed
    $ python -c "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"
    []
    ```

    Use instead:
    ```console
    $ pip install "tensorflow[and-cuda]"   # pulls the matching nvidia-*-cu12 libraries
    $ gpuwhy check                         # exit status 0 once a real op ran on the GPU
    ```

    ## Options
    None.
    """

    id = "env.no-gpu"
    severity = "high"
    status = "stable"
    needs = ("environment",)
    options = {}
    question = "Is TensorFlow using my GPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        env = facts.environment
        assert env is not None
        if tf_can_use_gpu(env):
            return []
        causes = find_causes(env, facts.devices or ())
        primary = causes[0]
        evidence: dict[str, Any] = {
            "causes": [
                {"code": c.code, "title": c.title, "detail": c.detail, "fix": c.fix} for c in causes
            ],
            "tensorflow_gpus": len(env.tensorflow.gpus) if env.tensorflow else 0,
        }
        tf = env.tensorflow
        if tf and tf.build:
            evidence["build_cuda"] = tf.build.get("cuda_version")
            evidence["build_cudnn"] = tf.build.get("cudnn_version")
        if tf and tf.log_lines:
            evidence["tensorflow_log"] = list(tf.log_lines[:8])
        fix = "\n".join(f"# {c.title}\n{c.fix}" for c in causes)
        return [
            self.finding(
                f"TensorFlow cannot use a GPU: {primary.title}",
                evidence=evidence,
                fix=fix,
                estimated_gain="GPU training instead of CPU (typically 10-100x)",
            )
        ]


# ---------------------------------------------------------------------------------------
# The causes, in the order a user has to fix them. Each returns a Cause or None.


def find_causes(env: EnvironmentFacts, devices: tuple[GpuDevice, ...]) -> list[Cause]:
    causes: list[Cause] = []
    blocking = _tensorflow_cause(env)
    if blocking:
        # The build cannot be judged further, but the driver can.
        return [blocking] + [c for c in [_driver_cause(env, devices)] if c]
    for check in (
        _driver_cause,
        _visibility_cause,
        _driver_version_cause,
        _libraries_cause,
        _arch_cause,
    ):
        cause = check(env, devices)
        if cause:
            causes.append(cause)
    tf = env.tensorflow
    if tf and tf.gpus and tf.confirm_error:
        causes.append(
            Cause(
                "op-failed",
                "a GPU is listed but an op placed on it fails",
                tf.confirm_error,
                "# run `nvidia-smi` to check the GPU's health (Xid errors in `dmesg`), then\n"
                'python -c "import tensorflow as tf; tf.debugging.set_log_device_placement(True); '
                'print(tf.linalg.matmul(tf.ones((2, 2)), tf.ones((2, 2))))"',
            )
        )
    if not causes:
        causes.append(
            Cause(
                "unknown",
                "no cause found in the facts; TensorFlow's own log lines follow",
                "; ".join(tf.log_lines[:5]) if tf and tf.log_lines else "TensorFlow logged nothing",
                "TF_CPP_MIN_LOG_LEVEL=0 TF_CPP_VMODULE=cuda_platform=3,dso_loader=3 "
                "python -c \"import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))\"",
            )
        )
    return causes


def _tensorflow_cause(env: EnvironmentFacts) -> Cause | None:
    tf = env.tensorflow
    install = _install_command(env)
    if tf is None or (not tf.installed and tf.probe_status == "ok"):
        return Cause(
            "tf-not-installed",
            "TensorFlow is not installed",
            f"`import tensorflow` finds no package in {env.python_executable}",
            install,
        )
    if tf.probe_status == "error" and not tf.installed:
        return Cause(
            "tf-not-installed",
            "the Python interpreter could not be run",
            tf.import_error or "",
            "gpuwhy check --python /path/to/your/venv/bin/python",
        )
    if tf.probe_status == "error" and tf.import_ok:
        return Cause(
            "tf-probe-failed",
            "TensorFlow imports but fails when asked for its GPUs",
            tf.import_error or "the child process ended without an answer",
            'pip install --force-reinstall "tensorflow[and-cuda]"   '
            "# a partly removed or mixed install",
        )
    if tf.probe_status == "timeout":
        where = tf.hung_in or "start"
        hint = (
            "cuInit is waiting on the driver: the GPU may be wedged or still initialising"
            if where in ("list_gpus", "confirm")
            else "the import itself did not finish"
        )
        return Cause(
            "tf-hung",
            f"TensorFlow hung in stage '{where}'",
            f"{tf.import_error or 'no answer'}; {hint}",
            "nvidia-smi                     # does the driver answer?\n"
            "sudo nvidia-smi -pm 1          # persistence mode avoids slow re-initialisation\n"
            "# if nvidia-smi hangs too: check `dmesg` for Xid errors and reset or reboot",
        )
    if tf.probe_status == "crashed":
        detail = tf.import_error or ""
        if tf.signal == "SIGILL":
            return Cause(
                "tf-crashed",
                "TensorFlow crashed with an illegal instruction",
                detail + "; this CPU lacks instructions (AVX/AVX2) the wheel was built for",
                "# use a build for older CPUs, or run on a machine whose CPU has AVX2:\n"
                "grep -o -w 'avx2\\|avx' /proc/cpuinfo | sort -u",
            )
        return Cause(
            "tf-crashed",
            f"TensorFlow crashed ({tf.signal or 'unknown signal'}) "
            f"in stage '{tf.hung_in or 'start'}'",
            detail,
            f"{install}   # a clean reinstall of a matching TF/CUDA pair",
        )
    if tf.installed and not tf.import_ok:
        return Cause(
            "tf-import-failed",
            "`import tensorflow` fails",
            tf.import_error or "",
            _import_fix(tf.import_error or "", install),
        )
    build = tf.build or {}
    if build.get("is_rocm_build"):
        return Cause(
            "rocm-build",
            "this is a ROCm (AMD) build of TensorFlow",
            f"distribution {tf.distribution}: it cannot drive NVIDIA GPUs",
            f"pip uninstall -y {tf.distribution or 'tensorflow-rocm'}\n{install}",
        )
    if build and not build.get("is_cuda_build"):
        return Cause(
            "cpu-only-build",
            "this TensorFlow build has no CUDA support",
            _cpu_build_detail(env, tf.distribution),
            _cpu_build_fix(env, tf.distribution),
        )
    return None


def _install_command(env: EnvironmentFacts) -> str:
    if env.platform == "darwin":
        return (
            "pip install tensorflow tensorflow-metal   "
            "# macOS has no CUDA; tensorflow-metal uses the Apple GPU"
        )
    if env.platform == "win32":
        return (
            "# TensorFlow >= 2.11 has no GPU support on native Windows: use WSL2, then\n"
            'pip install "tensorflow[and-cuda]"'
        )
    return 'pip install "tensorflow[and-cuda]"'


def _import_fix(error: str, install: str) -> str:
    if "numpy" in error.lower():
        return "pip install --upgrade --force-reinstall tensorflow numpy   # NumPy ABI mismatch"
    if "cannot open shared object file" in error or "DLL load failed" in error:
        return f"{install}   # the build links a library this machine lacks"
    if "protobuf" in error.lower() or "Descriptors cannot be created" in error:
        return "pip install --force-reinstall tensorflow   # protobuf version mismatch"
    return 'pip install --force-reinstall "tensorflow[and-cuda]"'


def _cpu_build_detail(env: EnvironmentFacts, distribution: str | None) -> str:
    if env.platform == "darwin":
        return "macOS wheels are built without CUDA; NVIDIA GPUs are not supported on macOS"
    if env.platform == "win32":
        return "TensorFlow 2.11 and later have no CUDA support on native Windows"
    return f"installed from the '{distribution or 'unknown'}' distribution, built without CUDA"


def _cpu_build_fix(env: EnvironmentFacts, distribution: str | None) -> str:
    if env.platform in ("darwin", "win32"):
        return _install_command(env)
    name = distribution or "tensorflow-cpu"
    return f'pip uninstall -y {name}\npip install "tensorflow[and-cuda]"'


def _driver_cause(env: EnvironmentFacts, devices: tuple[GpuDevice, ...] = ()) -> Cause | None:
    d = env.driver
    if d is None:
        return None
    if d.nvml_ok and d.device_count > 0:
        return None if d.libcuda_loaded else _no_libcuda(env, d)
    if d.nvml_ok and d.device_count == 0:
        return Cause(
            "no-gpu-hardware",
            "the NVIDIA driver sees no GPU",
            f"driver {d.driver_version} is loaded but NVML counts 0 GPUs",
            "nvidia-smi -L      # lists the GPUs the driver sees\nlspci | grep -i nvidia",
        )
    error = d.nvml_error or ""
    if error == "DriverNotLoaded":
        return Cause(
            "driver-not-loaded",
            "the NVIDIA kernel module is not loaded",
            "NVML: DriverNotLoaded",
            "sudo modprobe nvidia     # or reboot after installing the driver",
        )
    if error == "LibRmVersionMismatch":
        return Cause(
            "driver-mismatch",
            "the NVIDIA driver was upgraded without a reboot",
            "NVML: the user-space library and the kernel module versions differ",
            "sudo reboot",
        )
    if error == "NoPermission":
        return Cause(
            "driver-permission",
            "no permission to open the GPU device files",
            "NVML: NoPermission on /dev/nvidia*",
            "sudo usermod -aG video $USER   # then log in again",
        )
    if d.libcuda_loaded:
        return None  # libcuda is there (NVML may be absent in some containers): not the cause
    if error == "LibraryNotFound" or not d.nvml_ok:
        detail = (
            f"NVML: {error or 'unavailable'}; {d.libcuda_error or 'libcuda.so.1 cannot be loaded'}"
        )
        if env.wsl:
            return Cause(
                "no-driver",
                "no NVIDIA driver visible in WSL",
                detail,
                "# install the NVIDIA driver on Windows (not inside WSL); "
                "WSL2 gets /usr/lib/wsl/lib/libcuda.so.1 from it",
            )
        if d.in_container and not d.device_nodes:
            return Cause(
                "no-driver",
                "no NVIDIA driver: the container has no GPU access",
                detail,
                "docker run --gpus all ...      # needs the NVIDIA Container Toolkit\n"
                "# Kubernetes: request nvidia.com/gpu in the pod's resources.limits",
            )
        return Cause(
            "no-driver",
            "no NVIDIA driver",
            detail,
            "sudo ubuntu-drivers install      # Ubuntu; or NVIDIA's driver for your OS\n"
            "nvidia-smi                       # must list your GPU afterwards",
        )
    return None


def _no_libcuda(env: EnvironmentFacts, d) -> Cause:
    detail = (
        f"NVML sees {d.device_count} GPU(s) but {d.libcuda_error or 'libcuda.so.1 does not load'}"
    )
    if d.in_container:
        return Cause(
            "no-libcuda",
            "the container has the GPU but not the driver's CUDA library",
            detail + "; NVIDIA_DRIVER_CAPABILITIES must include 'compute'",
            "docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility ...",
        )
    return Cause(
        "no-libcuda",
        "the driver's CUDA library libcuda.so.1 is missing",
        detail + "; the driver install is incomplete",
        f"sudo apt install libnvidia-compute-{(d.driver_version or 'XXX').split('.')[0]}"
        "   # the CUDA part of your driver version",
    )


def _visibility_cause(env: EnvironmentFacts, devices: tuple[GpuDevice, ...]) -> Cause | None:
    value = env.env_vars.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    count = env.driver.device_count if env.driver and env.driver.nvml_ok else None
    visible = visible_devices(value, count, [d.uuid for d in devices if d.uuid])
    if visible != 0:
        return None
    total = f"{count} GPU(s) exist" if count else "every GPU is hidden"
    return Cause(
        "hidden-by-cuda-visible-devices",
        f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU",
        f"{total}; CUDA stops reading the list at the first invalid entry",
        "unset CUDA_VISIBLE_DEVICES        # or list valid indices: export CUDA_VISIBLE_DEVICES=0",
    )


def _driver_version_cause(
    env: EnvironmentFacts, devices: tuple[GpuDevice, ...] = ()
) -> Cause | None:
    d, tf = env.driver, env.tensorflow
    if not d or not tf or not tf.build:
        return None
    build_cuda = tf.build.get("cuda_version")
    verdict = driver_supports(d.cuda_driver_version, build_cuda)
    logged = [
        ln
        for ln in tf.log_lines
        if "insufficient for CUDA runtime" in ln
        or "COMPAT_NOT_SUPPORTED" in ln
        or "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" in ln
    ]
    if verdict != "too-old" and not logged:
        return None
    major = (version_tuple(build_cuda) or (0,))[0]
    minimum = MIN_DRIVER_FOR_CUDA_MAJOR.get(major, "the newest")
    title = (
        f"the driver supports CUDA {d.cuda_driver_version}, the build needs CUDA {build_cuda}"
        if d.cuda_driver_version
        else f"the driver is too old for CUDA {build_cuda}"
    )
    return Cause(
        "driver-too-old",
        title,
        f"driver {d.driver_version or '(version unknown)'}; "
        + ("; ".join(logged) or f"CUDA {major}.x needs driver >= {minimum}"),
        f"# install an NVIDIA driver >= {minimum} (CUDA {major}.x), e.g.\n"
        "sudo ubuntu-drivers install",
    )


def _libraries_cause(env: EnvironmentFacts, devices: tuple[GpuDevice, ...] = ()) -> Cause | None:
    tf = env.tensorflow
    if not tf:
        return None
    missing = [lib for lib in tf.libraries if not lib.loaded]
    if not missing:
        return None
    parts = []
    for lib in missing:
        text = f"{lib.wanted} ({lib.pip_package})" if lib.pip_package else lib.wanted
        if lib.other_versions:
            text += f": found {', '.join(lib.other_versions)} instead (another major version)"
        parts.append(text)
    pip = sorted({lib.pip_package for lib in missing if lib.pip_package})
    apt = sorted({lib.apt_package for lib in missing if lib.apt_package})
    # tf-nightly and dev versions have no matching `tensorflow` release to pin
    version = (
        f"=={tf.version}"
        if tf.version and tf.distribution == "tensorflow" and "dev" not in tf.version
        else ""
    )
    wrong = any(lib.other_versions for lib in missing)
    title = (
        f"{len(missing)} CUDA/cuDNN librar{'y' if len(missing) == 1 else 'ies'} of the "
        f"build {'do not load' if len(missing) > 1 else 'does not load'}"
        + (" (another CUDA version is installed)" if wrong else "")
    )
    fix = f'pip install "tensorflow[and-cuda]{version}"'
    if pip:
        fix += f"   # or only: pip install {' '.join(pip)}"
    if apt:
        fix += (
            f"\n# system-wide instead (NVIDIA's apt repository): sudo apt install {' '.join(apt)}"
        )
    return Cause("missing-libraries", title, "; ".join(parts), fix)


def _arch_cause(env: EnvironmentFacts, devices: tuple[GpuDevice, ...]) -> Cause | None:
    tf = env.tensorflow
    archs = (tf.build or {}).get("cuda_compute_capabilities") if tf else None
    if not archs:
        return None
    unsupported = [
        d
        for d in devices
        if d.compute_capability and arch_support(d.compute_capability, archs)[0] == "none"
    ]
    logged = [ln for ln in (tf.log_lines if tf else ()) if "Ignoring visible gpu device" in ln]
    if not unsupported and not logged:
        return None
    names = ", ".join(
        f"{d.name} (compute capability {d.compute_capability})" for d in unsupported
    ) or "; ".join(logged)
    return Cause(
        "unsupported-arch",
        "the GPU's architecture is not in this build",
        f"{names}; the build has code for {', '.join(archs)}",
        "# older GPUs: an older TensorFlow whose build lists your architecture;\n"
        "# newer GPUs: a newer TensorFlow or tf-nightly\n"
        'pip install --upgrade "tensorflow[and-cuda]"',
    )
