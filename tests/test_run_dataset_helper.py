"""`gpuwhy run` on Keras fit over a dataset Keras' helper built
(keras.utils.timeseries_dataset_from_array): its windows are the same every epoch, so
input.no-cache offers `.cache()` on the helper's call as the program wrote it; pasted,
the program gives the same batches and its epochs after the first read them from memory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuwhy.record import validation_errors
from tests.rules.input import paste

pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """\
import time

import keras
import numpy as np

rng = np.random.default_rng(0)
series = np.cumsum(rng.normal(size=(6000, 8)), axis=0).astype("float32")
targets = series[48:, 0]
train = keras.utils.timeseries_dataset_from_array(
    series[:-48], targets, sequence_length=48, batch_size=64
)


class EpochTimes(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        print(f"epoch {epoch} {time.perf_counter() - self.start:.4f}")


model = keras.Sequential([keras.Input((48, 8)), keras.layers.Flatten(), keras.layers.Dense(1)])
model.compile("sgd", "mse")
model.fit(train, epochs=4, verbose=0, callbacks=[EpochTimes()])
print("checksum", float(sum(x.sum() + y.sum() for x, y in train.as_numpy_iterator())))
"""


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )


def _epochs(stdout: str) -> list[float]:
    return [float(line.split()[2]) for line in stdout.splitlines() if line.startswith("epoch ")]


@pytest.fixture(scope="module")
def helper_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("helper")
    (tmp / "train.py").write_text(PROGRAM)
    result = _run("-m", "gpuwhy", "run", "--json", "run.json", "train.py", cwd=tmp)
    assert result.returncode == 0, result.stderr[-3000:]
    return tmp, result, json.loads((tmp / "run.json").read_text())


def test_the_helper_s_call_is_recorded_with_its_pipeline(helper_run):
    _, _, record = helper_run
    assert validation_errors(record) == []
    (pipeline,) = [p for p in record["tfdata"]["pipelines"] if p["consumer"] == "keras-fit"]
    assert pipeline["helper_call"].startswith("keras.utils.timeseries_dataset_from_array(")
    assert all(s["by_library"] for s in pipeline["stages"] if s["written_as"])


def test_no_cache_offers_the_cache_after_the_helper_and_it_pays_from_the_second_epoch(
    helper_run,
):
    tmp, result, record = helper_run
    (finding,) = [f for f in record["findings"] if f["id"] == "input.no-cache"]
    assert finding["location"] == "train.py:9"
    assert finding["fix"].splitlines()[-1].endswith("batch_size=64).cache()")
    pasted, *_ = paste.pasted(PROGRAM, finding["fix"], {})
    (tmp / "pasted.py").write_text(pasted)
    again = _run("pasted.py", cwd=tmp)
    assert again.returncode == 0, again.stderr[-3000:]
    checksum = [line for line in result.stdout.splitlines() if line.startswith("checksum")]
    assert checksum == [line for line in again.stdout.splitlines() if line.startswith("checksum")]
    first, *later = _epochs(again.stdout)
    # the first epoch fills the cache; the others read memory (x20-x50 measured here)
    assert max(later) < first / 2, (first, later)
