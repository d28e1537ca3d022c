"""``python -m gpuwhy.trial.child RESULTS SEED -- ARGS...``: ``gpuwhy ARGS`` (a bounded
``gpuwhy run``) with what a fix trial needs to compare variants of one program.

- **The same seeds in every variant**: Python's ``random``, NumPy's global generator
  and TensorFlow's global seed are set before the script runs (and TF's when it is
  imported). Seeds the script sets itself come later and win. Keras 3 draws the seeds of
  initialisers, dropout and shuffling it is not given from Python's ``random``, so a
  Keras program that sets no seed computes the same in every variant.
- **What the program computes, from Keras**: the logs of its first training batches and
  of every epoch (``CallbackList.on_train_batch_end``/``on_epoch_end``), one JSON line
  each in RESULTS, written as they come (a variant that crashes or is stopped keeps
  what it reached). The first :data:`BATCHES` only: reading a batch's logs waits for the
  step to finish. A custom loop's values are read from what it prints (same_results).
"""

from __future__ import annotations

import functools
import json
import os
import random
import sys
import threading
from typing import Any

BATCHES = 20  # batch logs kept from the start of each run
EPOCHS = 50

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
        with self.lock:
            if kind == "batch":
                if self.batches >= BATCHES:
                    return
                self.batches += 1
            elif self.epochs >= EPOCHS:
                return
            else:
                self.epochs += 1
            with open(self.path, "a", encoding="utf-8") as f:
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
    from gpuwhy.collect.inprocess.imports import when_imported

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
    for name in CALLBACK_LISTS:
        when_imported(name, on_callbacks)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[2] != "--":
        print("usage: python -m gpuwhy.trial.child RESULTS SEED -- ARGS...", file=sys.stderr)
        return 2
    install(argv[0], int(argv[1]))
    os.environ.pop("GPUWHY_TRIAL", None)
    from gpuwhy.cli import main as gpuwhy

    return gpuwhy(argv[3:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
