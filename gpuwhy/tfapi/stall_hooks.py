"""What commonly stalls a training loop, timed where TF and Keras run it: checkpoint
writes, summary flushes, evaluation and prediction called by the program.

Each is a class method found in ``sys.modules`` only (never imported here), wrapped by a
:class:`~gpuwhy.tfapi.patching.Patch` that calls the original and then
``record(kind, start, end, location, detail)``: two clock reads and a stack walk to the
user's line (:func:`~gpuwhy.tfapi.frames.user_location`), on calls a program makes a
few times a minute, never per op. What the wrapped method computes, returns or raises
is unchanged. Read in TF 2.21 and Keras 3.15:

- ``tensorflow/python/checkpoint/checkpoint.py``: ``Checkpoint.write`` and
  ``Checkpoint.save`` (which calls ``_write``, not ``write``), and
  ``checkpoint_management.py``: ``CheckpointManager.save`` (which calls the
  checkpoint's ``_write``): kind ``checkpoint``;
- ``keras/src/models/model.py``: ``Model.save`` and ``Model.save_weights``, and
  ``keras/src/callbacks/model_checkpoint.py``: ``ModelCheckpoint._save_model`` (the
  callback's one place that writes, from ``on_train_batch_end`` with ``save_freq=N``
  or from ``on_epoch_end``): kind ``checkpoint``;
- ``tensorflow/python/ops/summary_ops_v2.py``: ``_ResourceSummaryWriter.flush`` and
  ``close`` (what ``tf.summary.create_file_writer``'s writer runs; the writes
  themselves only enqueue): kind ``summary``;
- ``keras/src/backend/tensorflow/trainer.py``: ``TensorFlowTrainer.evaluate`` and
  ``predict``: kind ``evaluate`` (fit's own validation calls ``evaluate`` with
  ``_use_cached_eval_dataset=True``: its detail says so).

Only the outermost of nested calls on a thread is recorded (``CheckpointManager.save``
writing its checkpoint, ``ModelCheckpoint`` calling ``Model.save``): one activity, named
after what the program called.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.patching import Patch, mark_wrapped

__all__ = ["KERAS_TARGETS", "TF_TARGETS", "Begin", "Record", "install_keras", "install_tensorflow"]

# record(kind, start, end, user file:line or None, what ran)
Record = Callable[[str, float, float, "str | None", str], None]
# begin(kind, start, what runs): told as it starts
Begin = Callable[[str, float, str], None]

# (module, class, method, kind, what ran)
TF_TARGETS = (
    ("tensorflow.python.checkpoint.checkpoint", "Checkpoint", "write", "checkpoint",
     "tf.train.Checkpoint.write"),
    ("tensorflow.python.checkpoint.checkpoint", "Checkpoint", "save", "checkpoint",
     "tf.train.Checkpoint.save"),
    ("tensorflow.python.checkpoint.checkpoint_management", "CheckpointManager", "save",
     "checkpoint", "tf.train.CheckpointManager.save"),
    ("tensorflow.python.ops.summary_ops_v2", "_ResourceSummaryWriter", "flush", "summary",
     "tf.summary writer flush"),
    ("tensorflow.python.ops.summary_ops_v2", "_ResourceSummaryWriter", "close", "summary",
     "tf.summary writer close"),
)  # fmt: skip
KERAS_TARGETS = (
    ("keras.src.models.model", "Model", "save", "checkpoint", "Model.save"),
    ("keras.src.models.model", "Model", "save_weights", "checkpoint", "Model.save_weights"),
    ("keras.src.callbacks.model_checkpoint", "ModelCheckpoint", "_save_model", "checkpoint",
     "keras.callbacks.ModelCheckpoint"),
    ("keras.src.backend.tensorflow.trainer", "TensorFlowTrainer", "evaluate", "evaluate",
     "Model.evaluate"),
    ("keras.src.backend.tensorflow.trainer", "TensorFlowTrainer", "predict", "evaluate",
     "Model.predict"),
)  # fmt: skip

_state = threading.local()
_fit_state = threading.local()  # fit's own: evaluate runs inside it


def install_tensorflow(record: Record) -> list[Patch]:
    """Time TF's checkpoint writes and summary flushes (the modules imported so far)."""
    return _install(TF_TARGETS, record)


def install_keras(record: Record, begin: Begin | None = None) -> list[Patch]:
    """Time Keras' saves, ModelCheckpoint's writes, evaluate and predict; ``begin``,
    where given, hears of each as it starts (``begin(kind, start, detail)``)."""
    return _install(KERAS_TARGETS, record, begin)


def install_keras_fit(record: Record) -> list[Patch]:
    """Time each ``Model.fit`` call as kind ``fit`` (not a stall's cause: fit's steps run
    in it; a fit called once per step is what is counted). Its own nesting flag, so that
    the evaluate of fit's validation inside it is still timed."""
    cls = getattr(
        sys.modules.get("keras.src.backend.tensorflow.trainer"), "TensorFlowTrainer", None
    )
    if cls is None or "fit" not in vars(cls):
        return []

    def make(original: Any) -> Any:
        def timed(self, *args, **kwargs):
            if getattr(_fit_state, "depth", 0):
                return original(self, *args, **kwargs)
            _fit_state.depth = 1
            start = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                end = time.perf_counter()
                _fit_state.depth = 0
                try:
                    record("fit", start, end, user_location(), "Model.fit")
                except Exception:  # noqa: BLE001 - a hook never breaks the user's fit
                    pass

        mark_wrapped(timed, original)
        return timed

    return [Patch(cls, "fit", make)]


def _install(targets: tuple, record: Record, begin: Begin | None = None) -> list[Patch]:
    patches = []
    for module, name, method, kind, what in targets:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is None or method not in vars(cls):
            continue
        patches.append(Patch(cls, method, _maker(kind, what, record, begin)))
    return patches


def _maker(
    kind: str, what: str, record: Record, begin: Begin | None = None
) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        def timed(self, *args, **kwargs):
            if getattr(_state, "depth", 0):
                return original(self, *args, **kwargs)
            _state.depth = 1
            start = time.perf_counter()
            if begin is not None:
                try:
                    begin(kind, start, _detail(what, self, kwargs))
                except Exception:  # noqa: BLE001 - a hook never breaks the user's call
                    pass
            try:
                return original(self, *args, **kwargs)
            finally:
                end = time.perf_counter()
                _state.depth = 0
                try:
                    record(kind, start, end, user_location(), _detail(what, self, kwargs))
                except Exception:  # noqa: BLE001 - a hook never breaks the user's save
                    pass

        mark_wrapped(timed, original)
        return timed

    return make


def _detail(what: str, owner: Any, kwargs: dict) -> str:
    """What ran, with the settings a fix names: ModelCheckpoint's ``save_freq``, fit's
    validation told from an evaluate the program called."""
    if what == "Model.evaluate" and kwargs.get("_use_cached_eval_dataset"):
        return "fit's validation"
    if what == "keras.callbacks.ModelCheckpoint":
        freq = getattr(owner, "save_freq", None)
        return f"{what}(save_freq={freq!r})" if freq is not None else what
    return what
