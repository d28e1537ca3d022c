import json
import os
import subprocess
import sys

from gpuwhy.collect import driver
from tests.conftest import CHILD_DIR


def test_static_build_info_equals_tensorflows_own():
    sys.path.insert(0, str(CHILD_DIR))
    try:
        import build_info_file

        static = build_info_file.read_build_info(build_info_file.tensorflow_location())
    finally:
        sys.path.remove(str(CHILD_DIR))
    code = "import json, tensorflow as tf; print(json.dumps(dict(tf.sysconfig.get_build_info())))"
    real = json.loads(
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    assert static == real


def test_driver_facts_on_this_machine():
    facts, devices = driver.collect()
    if os.path.exists("/dev/nvidiactl"):
        assert facts.nvml_ok and facts.device_count == len(devices) > 0
    else:
        assert facts.nvml_ok is False and facts.nvml_error == "LibraryNotFound"
        assert facts.libcuda_loaded is False and "libcuda.so.1" in facts.libcuda_error
        assert devices == ()
