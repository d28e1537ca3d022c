"""The environment of a watched run, read inside the program after it ended.

``gpuwhy check`` imports TensorFlow in a child; a run must not (it would double the
start-up and compete with the program for the CPU). The program has imported TF by
then, so the same facts are read from its own process: build, GPUs, a confirming
matmul, the CUDA libraries mapped. When the program never imported TF, the
``tensorflow`` part stays empty and the report says so.
"""

from __future__ import annotations

import os
import platform
import sys

from gpuwhy.collect.inprocess.base import Collector, Gathering
from gpuwhy.facts import DriverFacts, EnvironmentFacts, TensorFlowFacts, from_dict
from gpuwhy.modes.check import environment_facts


def tensorflow_facts() -> TensorFlowFacts | None:
    tf = sys.modules.get("tensorflow")
    if tf is None or not hasattr(tf, "config"):
        return None
    from gpuwhy.collect.child import build_info_file, cuda_libraries, tf_child

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

    section = "environment"
    what = "environment"
    needs_tensorflow = True

    def fill(self, gathering: Gathering) -> EnvironmentFacts:
        return run_environment_facts(gathering.driver)
