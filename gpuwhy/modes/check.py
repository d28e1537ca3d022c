"""The environment collector behind ``gpuwhy check``: machine, TF build, driver, settings.

The TensorFlow child is started first; while it imports TensorFlow (seconds), the driver
and NVML are read in this process, so the whole check costs about one TF import. NVML is
read before the child can initialise CUDA, so every process NVML lists on a GPU belongs to
someone else.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

from gpuwhy.collect import driver as driver_collector
from gpuwhy.collect.tf_probe import TensorFlowProbe
from gpuwhy.facts import DriverFacts, EnvironmentFacts, Facts, TensorFlowFacts
from gpuwhy.record import Record

# Environment variables that change whether or how TensorFlow uses a GPU.
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
        env_vars={k: os.environ[k] for k in GPU_ENV_VARS if k in os.environ},
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


def check(python: str | None = None, timeout: float = 120.0) -> Record:
    """The environment doctor's record (``gpuwhy.check()``)."""
    facts = EnvironmentCollector(python or sys.executable, timeout).collect()
    return Record.diagnose("check", facts)
