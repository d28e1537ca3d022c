"""The suite's own Keras tests (placement of a Keras step, fit's steps, its tf.functions,
mixed precision, a lazy import under `gpuwhy run`) once more under the oldest supported
Keras, in a subprocess with that Keras first on PYTHONPATH (the installed one runs them
in the suite itself)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.keras.test_keras_fit import OLDEST, ROOT, _keras_path

MODULES = [
    "tests/collect/test_placement.py",
    "tests/collect/test_steps.py",
    "tests/collect/test_functions.py",
    "tests/tfapi/test_tracing.py",
    "tests/test_run_tensorflow.py",
]
SELECTED = "keras or mixed or float16 or fit"


def test_the_keras_tests_pass_under_the_oldest_supported_keras():
    path = _keras_path(OLDEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, str(ROOT)])}
    env.pop("PYTEST_ADDOPTS", None)
    version = subprocess.run(
        [sys.executable, "-c", "import keras; print(keras.__version__)"],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert version.stdout.strip() == OLDEST, version.stderr[-2000:]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *MODULES, "-k", SELECTED],
        env=env, capture_output=True, text=True, cwd=ROOT, timeout=1200,
    )  # fmt: skip
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0, done.stdout[-4000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 10, summary
