"""What a fix trial's run of one variant installs before the script (``gpuwhy run``'s
hidden ``--trial-results PATH --trial-seed N``), so that the variants of one program can
be compared.

- **The same seeds in every variant**: Python's ``random``, NumPy's global generator
  and TensorFlow's global seed are set before the script runs (and TF's when it is
  imported). Seeds the script sets itself come later and win. Keras 3 draws the seeds of
  initialisers, dropout and shuffling it is not given from Python's ``random``, so a
  Keras program that sets no seed computes the same in every variant.
- **What the program computes, from Keras**: the logs of its first training batches and
  of every epoch (``CallbackList.on_train_batch_end``/``on_epoch_end``), one JSON line
  each in RESULTS, written as they come (a variant that crashes or is stopped keeps
  what it reached). The first :data:`BATCHES` only: reading a batch's logs waits for the
  step to finish.
- **What a custom loop computes**: what it prints (same_results), and a few elements of
  each trainable variable after its 1st, 5th and 20th step (the steps a loop's
  ``next()`` on a dataset counts: tf.data's iterator hook), so a loop that prints
  nothing, or prints a loss a broken step still computes, is compared too.
"""

from __future__ import annotations

import functools
import json
import random
import threading
from typing import Any

from gpuwhy.collect.inprocess.imports import when_imported
from gpuwhy.tfapi import variable_samples
from gpuwhy.tfapi.tfdata import iterators

BATCHES = 20  # batch logs kept from the start of each run
EPOCHS = 50
VARIABLES_AFTER = (1, 5, 20)  # a custom loop's steps after which its variables are read

CALLBACK_LISTS = (
    "keras.src.callbacks.callback_list",
    "tf_keras.src.callbacks",
)


class _Results:
    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.batches = 0
        self.epochs = 0

    def write(self, kind: str, index: Any, logs: Any) -> None:
        values = _floats(logs)
        if not values:
            return
        if kind == "variables":
            self._append(kind, index, values)
            return
        with self.lock:
            if kind == "batch":
                if self.batches >= BATCHES:
                    return
                self.batches += 1
            elif self.epochs >= EPOCHS:
                return
            else:
                self.epochs += 1
        self._append(kind, index, values)

    def _append(self, kind: str, index: Any, values: dict[str, float]) -> None:
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, "index": _int(index), "values": values}) + "\n")


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _floats(logs: Any) -> dict[str, float]:
    if not isinstance(logs, dict):
        return {}
    out = {}
    for name, value in sorted(logs.items()):
        try:
            out[str(name)] = float(value.numpy() if hasattr(value, "numpy") else value)
        except (TypeError, ValueError, AttributeError):
            continue
    return out


def _wrap(cls: Any, method: str, kind: str, results: _Results) -> None:
    original = getattr(cls, method, None)
    if original is None:
        return

    @functools.wraps(original)
    def wrapper(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        try:
            index = args[0] if args else kwargs.get("batch", kwargs.get("epoch"))
            logs = args[1] if len(args) > 1 else kwargs.get("logs")
            results.write(kind, index, logs)
        except Exception:  # noqa: BLE001 - never break the program's fit
            pass
        return out

    setattr(cls, method, wrapper)


def install(results_path: str, seed: int) -> None:
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    results = _Results(results_path)

    def on_tensorflow(module: Any) -> None:
        try:
            module.random.set_seed(seed)
        except Exception:  # noqa: BLE001 - a TF without it: the script's own seeds only
            pass

    def on_callbacks(module: Any) -> None:
        cls = getattr(module, "CallbackList", None)
        if cls is not None:
            _wrap(cls, "on_train_batch_end", "batch", results)
            _wrap(cls, "on_epoch_end", "epoch", results)

    when_imported("tensorflow", on_tensorflow)
    when_imported("tensorflow", lambda _module: _read_variables_between_steps(results))
    for name in CALLBACK_LISTS:
        when_imported(name, on_callbacks)


def _read_variables_between_steps(results: _Results) -> None:
    """At the ``next()`` on a dataset that starts a custom loop's 2nd, 6th and 21st step,
    the trainable variables' samples (tfapi/variable_samples.py): the state after 1, 5 and
    20 steps."""
    calls = 0
    reader = variable_samples.VariableReader()

    def on_next() -> None:
        nonlocal calls
        calls += 1
        if calls == 1:  # the heap walked before the timed steps, not in one
            reader.prepare()
        elif calls - 1 in VARIABLES_AFTER:
            results.write("variables", calls - 1, reader.samples())

    try:
        iterators.after_each_next(on_next)
    except Exception:  # noqa: BLE001 - a TF without the hook: printed values only
        pass
