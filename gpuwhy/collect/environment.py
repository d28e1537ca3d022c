"""The ``environment`` section (machine, TF build, driver, settings), read two ways.

``gpuwhy check`` (:class:`EnvironmentCollector`): the TensorFlow child is started first;
while it imports TensorFlow (seconds), the driver and NVML are read in this process, so
the whole check costs about one TF import. NVML is read before the child can initialise
CUDA, so every process NVML lists on a GPU belongs to someone else.

``gpuwhy run`` (:class:`RunEnvironment`): a run must not import TensorFlow in a child (it
would double the start-up and compete with the program for the CPU). The program has
imported TF by then, so the same facts are read from its own process after it ended:
build, GPUs, a confirming matmul, the CUDA libraries mapped. When the program never
imported TF, the ``tensorflow`` part stays empty and the report says so.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

from gpuwhy.collect import driver as driver_collector
from gpuwhy.collect.child import build_info_file, cuda_libraries, tf_child
from gpuwhy.collect.inprocess.base import Collector, Gathering
from gpuwhy.collect.tf_probe import TensorFlowProbe
from gpuwhy.facts import DriverFacts, EnvironmentFacts, Facts, TensorFlowFacts, from_dict
from gpuwhy.redact import mask_environment

# Environment variables that change whether or how TensorFlow uses a GPU (kept in the
# record through gpuwhy.redact's mask_environment: one added here that holds a secret, or
# a URL with a password, is written masked).
GPU_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_GPU_THREAD_MODE",
    "TF_GPU_THREAD_COUNT",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_ENABLE_ONEDNN_OPTS",
    "XLA_FLAGS",
    "TF_XLA_FLAGS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_DETERMINISTIC_OPS",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_CACHE_DISABLE",
    "CUDA_HOME",
    "LD_LIBRARY_PATH",
)


def _wsl() -> bool:
    try:
        with open("/proc/version", encoding="utf-8") as f:
            return "microsoft" in f.read().lower()
    except OSError:
        return False


def environment_facts(
    driver: DriverFacts | None,
    tensorflow: TensorFlowFacts | None,
    python: str = sys.executable,
    python_version: str | None = None,
) -> EnvironmentFacts:
    """This machine and process around what was learned of the driver and TensorFlow."""
    return EnvironmentFacts(
        python_version=python_version or platform.python_version(),
        python_executable=python,
        platform=sys.platform,
        machine=platform.machine(),
        wsl=sys.platform == "linux" and _wsl(),
        cpu_count=os.cpu_count(),
        env_vars=mask_environment({k: os.environ[k] for k in GPU_ENV_VARS if k in os.environ}),
        tensorflow=tensorflow,
        driver=driver,
    )


@dataclass
class EnvironmentCollector:
    """Fills the ``environment`` and ``devices`` sections."""

    python: str = sys.executable
    timeout: float = 120.0

    def collect(self) -> Facts:
        probe = TensorFlowProbe(self.python, self.timeout)
        try:
            # Only the child is excluded: when this process (a notebook calling
            # gpuwhy.check()) already holds a GPU, that is worth reporting.
            child = frozenset() if probe.pid is None else frozenset({probe.pid})
            driver, devices = driver_collector.collect(child)
            tensorflow = probe.result()
        finally:
            probe.kill()
        environment = environment_facts(
            driver, tensorflow, python=self.python, python_version=tensorflow.python_version
        )
        return Facts(environment=environment, devices=devices)


def tensorflow_facts() -> TensorFlowFacts | None:
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "config"):
        return None

    location = os.path.dirname(getattr(tf, "__file__", "") or "") or None
    result: dict = {
        "installed": True,
        "import_ok": True,
        "python_version": platform.python_version(),
        "version": getattr(tf, "__version__", None),
        "location": location,
        "distribution": tf_child.distribution(),
    }
    try:
        result["build"] = dict(tf.sysconfig.get_build_info())
    except Exception:  # noqa: BLE001 - fall back to the file the wheel ships
        result["build"] = build_info_file.read_build_info(location) if location else {}
    try:
        gpus = tf.config.list_physical_devices("GPU")
    except Exception as e:  # noqa: BLE001
        result["import_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        gpus = []
    result["gpus"] = [g.name for g in gpus]
    if gpus:
        device, error, details = tf_child.confirm_on_gpus(tf, gpus)
        result.update(confirm_device=device, confirm_error=error, gpu_details=details)
    result["loaded_libraries"] = cuda_libraries.mapped_libraries()
    result["libraries"] = cuda_libraries.probe(result["build"], result["loaded_libraries"])
    return from_dict(TensorFlowFacts, result)


def run_environment_facts(driver: DriverFacts | None) -> EnvironmentFacts:
    """The ``environment`` section of a run: TF as the program left it."""
    return environment_facts(driver, tensorflow_facts())


class RunEnvironment(Collector):
    """Section ``environment``, read once the program ended: NVML's driver as the run
    found it at its start, TensorFlow as the program left it."""

    name = section = "environment"
    what = "environment"
    needs_tensorflow = True

    def fill(self, gathering: Gathering) -> EnvironmentFacts:
        return run_environment_facts(gathering.driver)
