"""gpuwhy keeps no tf.data iterator alive past the moment the program lets go of it.

An iterator kept alive to the end of Keras' ``fit`` is freed there, and its autotune
thread can make the main thread wait for up to its optimisation period (up to a
minute, tf.data's model thread) on the way out of ``fit``: a Keras OCR example spent
8-40 s there under gpuwhy and under 2 s under python. The cause was a read of ``fit``'s
arguments off its frame (Python < 3.13 keeps a snapshot of every local with the frame),
made when Keras distributed the validation dataset after the first epoch: the first
epoch's training iterator stayed alive to the end. Real programs, real TensorFlow: the
same count of first-epoch iterators alive at ``on_train_end`` under python and gpuwhy.
"""

import subprocess
import sys
import textwrap

import pytest

from tests.test_run_tensorflow import run

PROGRAM = """
import gc, os, weakref
import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.data.ops import iterator_ops

rng = np.random.default_rng(0)
x = rng.normal(size=(96, 8)).astype("float32")
y = rng.normal(size=(96, 1)).astype("float32")
INPUT = os.environ["INPUT"]

def batches(x, y):
    return tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0, b)).batch(16)

class FirstEpochIterators(keras.callbacks.Callback):
    first = []
    def on_train_batch_end(self, batch, logs=None):
        if not self.first:  # every iterator alive during the first step of epoch 1
            self.first.extend(weakref.ref(o) for o in gc.get_objects()
                              if isinstance(o, iterator_ops.OwnedIterator))
    def on_train_end(self, logs=None):
        gc.collect()
        print("first-epoch iterators alive at the end:", sum(r() is not None for r in self.first))

model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile("sgd", "mse")
if INPUT == "dataset":
    model.fit(batches(x, y), validation_data=batches(x[:32], y[:32]), epochs=3, verbose=0,
              callbacks=[FirstEpochIterators()])
else:  # arrays: Keras batches them itself, and fit's batch_size is read off its frame
    model.fit(x, y, batch_size=16, validation_data=(x[:32], y[:32]), epochs=3, verbose=0,
              callbacks=[FirstEpochIterators()])
"""


def _alive(output: str) -> int:
    (line,) = [x for x in output.splitlines() if x.startswith("first-epoch iterators alive")]
    return int(line.rsplit(":", 1)[1])


@pytest.mark.parametrize("given", ["dataset", "arrays"])
def test_keras_fit_s_first_epoch_iterator_dies_under_gpuwhy_as_under_python(tmp_path, given):
    script = tmp_path / "fit_validation.py"
    script.write_text(textwrap.dedent(PROGRAM))
    env = {"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "INPUT": given}
    plain = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert plain.returncode == 0, plain.stderr[-2000:]
    watched = run("-o", tmp_path / "report.txt", script, cwd=tmp_path, env_extra={"INPUT": given})
    assert watched.returncode == 0, watched.stderr[-2000:]
    assert _alive(plain.stdout) == 0
    assert _alive(watched.stdout) == _alive(plain.stdout)
