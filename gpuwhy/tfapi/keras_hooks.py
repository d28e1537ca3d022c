"""Keras' training loop as events: fit/evaluate begin and end, each batch, each epoch,
and eager ``apply_gradients`` calls.

Why the callback list: Keras calls ``CallbackList.on_train_batch_begin/end`` around
every call of its compiled train function (``keras/src/backend/tensorflow/trainer.py``:
``for begin_step, end_step, iterator in epoch_iterator``), whatever callbacks the user
passed, so wrapping those methods times every batch without adding a callback to the
user's list and without step markers. ``end_step - begin_step + 1`` is the number of
steps one call ran (``steps_per_execution``), except for an epoch's last call: Keras'
``EpochIterator`` reports ``begin + steps_per_execution - 1`` there too, though the call
stops at the epoch's end (10 batches at 4 a call: 4, 4 and 2 steps, reported 4, 4, 4).
So ``on_train_begin`` is followed by an ``epoch_steps`` event carrying the
``steps`` fit gave its callbacks (``CallbackList.params``; None for a dataset of unknown
length), and the step count is clipped to it. Where that length is unknown and a call
runs several steps, the optimizer's step counter (``optimizer.iterations``), read at the
fit's start and at each epoch's end as a ``train_iterations`` event, says what the
epoch's last call ran (75 batches at 32 a call: 32, 32 and 11, never 96). Then a ``fit_key`` event: the model and
its optimizer (a new one at each compile), which tell a fit of another model, or of one
compiled anew (fine-tuning), from ``fit`` called again in a loop. Evaluation inside
``fit`` arrives as test events, so validation time is not step time.

Legacy Keras 2 (``tf_keras``, ``TF_USE_LEGACY_KERAS=1``) has the same methods on
``tf_keras.src.callbacks.CallbackList``. The optimizer hook times
``apply_gradients`` only when it runs eagerly: in a ``tf.function`` the Python method
runs once at tracing, not once per step.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.patching import Patch, mark_wrapped
from gpuwhy.tfapi.training import note_traced_update

# (module, class) per Keras flavour; looked up in sys.modules only (never imported here).
CALLBACK_LISTS = (
    ("keras.src.callbacks.callback_list", "CallbackList"),
    ("tf_keras.src.callbacks", "CallbackList"),
)
# (module, class, method): Keras 3's apply_gradients calls its ``apply``, which a custom
# loop may call itself (keras-io's guide to a training loop from scratch does:
# ``optimizer.apply(grads, model.trainable_weights)``): timing ``apply`` sees both once
OPTIMIZERS = (
    ("keras.src.optimizers.base_optimizer", "BaseOptimizer", "apply"),
    ("tf_keras.src.optimizers.optimizer", "Optimizer", "apply_gradients"),
)
EVENTS = (
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_predict_begin",
    "on_predict_end",
)

# emit(event, perf_counter time, value): value is the batch/epoch index, or the
# user's file:line for on_train_begin.
Emit = Callable[[str, float, object], None]


def _class(module: str, name: str):
    return getattr(sys.modules.get(module), name, None)


def install_callbacks(emit: Emit) -> list[Patch]:
    """Wrap the CallbackList methods of every Keras flavour imported so far."""
    patches = []
    for module, name in CALLBACK_LISTS:
        cls = _class(module, name)
        if cls is None:
            continue
        for event in EVENTS:
            if hasattr(cls, event):
                patches.append(Patch(cls, event, functools.partial(_timed, event=event, emit=emit)))
    return patches


def _timed(original, event: str, emit: Emit):
    def method(self, *args, **kwargs):
        now = time.perf_counter()
        try:
            if event in ("on_train_begin", "on_epoch_end"):
                _iterations(self, emit, now)
            if event == "on_train_begin":
                emit(event, now, user_location())
                params = getattr(self, "params", None)
                steps = params.get("steps") if isinstance(params, dict) else None
                emit("epoch_steps", now, steps if isinstance(steps, int) and steps > 0 else None)
                model = getattr(self, "model", None)
                optimizer = getattr(model, "optimizer", None)
                emit("fit_key", now, (id(model), id(optimizer)) if model is not None else None)
            elif event in (
                "on_train_batch_end",
                "on_train_batch_begin",
                "on_epoch_begin",
                "on_epoch_end",
            ):
                emit(event, now, args[0] if args else kwargs.get("batch", kwargs.get("epoch")))
            else:
                emit(event, now, None)
        except Exception:  # noqa: BLE001 - a hook never breaks the user's fit
            pass
        return original(self, *args, **kwargs)

    mark_wrapped(method, original)
    return method


def _iterations(callbacks: Any, emit: Emit, now: float) -> None:
    """Where a call runs several steps (``steps_per_execution``) over a dataset of
    unknown length, the optimizer's step counter, read at the fit's start and at each
    epoch's end (where Keras reads its logs anyway: no wait for the device added between
    calls): what the epoch ran, less what its calls reported, is what its last call did
    not (``train_iterations`` event)."""
    params = getattr(callbacks, "params", None)
    if isinstance(params, dict) and isinstance(params.get("steps"), int):
        return  # the epoch's length is known: the count is clipped to it
    model = getattr(callbacks, "model", None)
    per_call = getattr(model, "steps_per_execution", 1)
    if not isinstance(per_call, int) or per_call <= 1:
        return
    counter = getattr(getattr(model, "optimizer", None), "iterations", None)
    if counter is not None and hasattr(counter, "numpy"):
        emit("train_iterations", now, int(counter.numpy()))


def install_optimizer(emit: Emit) -> list[Patch]:
    """Time eager optimizer updates (custom loops without tf.function): Keras 3's
    ``apply`` (under ``apply_gradients`` too), tf_keras' ``apply_gradients``."""
    patches = []
    for module, name, method in OPTIMIZERS:
        cls = _class(module, name)
        if cls is not None and method in vars(cls):
            patches.append(Patch(cls, method, lambda original: _eager_timed(original, emit)))
    return patches


def _eager_timed(original, emit: Emit):
    from tensorflow.python.eager import context

    def apply_gradients(self, *args, **kwargs):
        if not context.executing_eagerly():  # traced: the function being traced trains
            with contextlib.suppress(Exception):
                note_traced_update(getattr(self, "name", None))
            return original(self, *args, **kwargs)
        if _UPDATING.active:  # inside another timed update (a LossScaleOptimizer's inner)
            return original(self, *args, **kwargs)
        start = time.perf_counter()
        _UPDATING.active = True
        try:
            return original(self, *args, **kwargs)
        finally:
            _UPDATING.active = False
            emit("apply_gradients", start, time.perf_counter())

    mark_wrapped(apply_gradients, original)
    return apply_gradients


class _Updating(threading.local):
    active = False


_UPDATING = _Updating()


TRAINERS = (("keras.src.trainers.trainer", "Trainer"),)


CompileRecord = Callable[[Any, bool | None, tuple[str, ...], str | None], None]


def install_compile(record: CompileRecord) -> list[Patch]:
    """``record(model, would_xla, cudnn, eager_at)`` after each Keras 3 ``compile``. ``would_xla``, where
    ``jit_compile`` was left at "auto" (else None): whether Keras would then
    XLA-compile the train step on a GPU machine (its ``_resolve_auto_jit_compile``: no
    tf.distribute strategy, every layer supports jit, op determinism off). On a machine
    without a GPU Keras turns XLA off, so the step traced here is not the one a GPU
    would run. ``cudnn``: the model's LSTM/GRU layers a GPU runs with cuDNN
    (:func:`cudnn_rnn_layers`); such a layer supports no jit on a GPU machine.
    ``eager_at``: the program's ``file:line`` of a compile given ``run_eagerly=True``
    (fit then runs its train step op by op: that line is the cause), else None."""
    patches = []
    for module, name in TRAINERS:
        cls = _class(module, name)
        if cls is None or not hasattr(cls, "compile"):
            continue
        supports = getattr(sys.modules.get(module), "model_supports_jit", None)
        patches.append(
            Patch(cls, "compile", functools.partial(_compiled, record=record, supports=supports))
        )
    return patches


def _compiled(original, record: CompileRecord, supports):
    import inspect

    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None

    def compile(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            given = signature.bind(self, *args, **kwargs).arguments if signature else kwargs
            cudnn, no_jit = cudnn_rnn_layers(self)
            would_xla = None
            if given.get("jit_compile", "auto") == "auto" and not given.get("run_eagerly"):
                strategy = getattr(self, "_distribute_strategy", None)
                would_xla = bool(
                    strategy is None and supports is not None and supports(self) and not no_jit
                )
            eager_at = user_location(skip=2) if given.get("run_eagerly") else None
            record(self, would_xla, cudnn, eager_at)
        except Exception:  # noqa: BLE001 - a hook never breaks the user's compile
            pass
        return result

    mark_wrapped(compile, original)
    return compile


RNN_LAYERS = (("keras.src.layers.rnn.lstm", "LSTM"), ("keras.src.layers.rnn.gru", "GRU"))
RNN_BACKEND = "keras.src.backend.tensorflow.rnn"


def cudnn_rnn_layers(model: Any) -> tuple[tuple[str, ...], bool]:
    """(the names of ``model``'s LSTM/GRU layers that a GPU runs with cuDNN, whether
    any of its layers turns XLA off there). Keras 3 decides it on the machine it runs
    on (keras/src/layers/rnn/lstm.py, gru.py): with ``use_cudnn`` "auto" or True and
    arguments cuDNN supports (tanh activation, sigmoid recurrent activation, no unroll,
    a bias, and for GRU ``reset_after``: ``backend.tensorflow.rnn.cudnn_ok``, whose
    GPU check is all that fails here), a layer sets ``supports_jit = False``, and runs
    cuDNN's kernels unless it has a recurrent dropout."""
    backend = sys.modules.get(RNN_BACKEND)
    kinds = [c for c in (_class(m, n) for m, n in RNN_LAYERS) if c is not None]
    if backend is None or not kinds:
        return (), False
    lstm_ok = getattr(backend, "_do_lstm_arguments_support_cudnn", None)
    gru_ok = getattr(backend, "_do_gru_arguments_support_cudnn", None)
    cudnn, no_jit = [], False
    for layer in model._flatten_layers():
        if not isinstance(layer, tuple(kinds)) or layer.use_cudnn not in ("auto", True):
            continue
        cell = layer.cell
        args = (cell.activation, cell.recurrent_activation, layer.unroll, cell.use_bias)
        if hasattr(cell, "reset_after"):
            supported = gru_ok is not None and gru_ok(*args, cell.reset_after)
        else:
            supported = lstm_ok is not None and lstm_ok(*args)
        if supported:
            no_jit = True
            if not getattr(cell, "recurrent_dropout", 0):
                cudnn.append(layer.name)
    return tuple(cudnn), no_jit


def keras_version() -> str | None:
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__version__", None):
            return module.__version__
    return None


def keras_owner(function: Any) -> Any:
    """The Keras model whose train/test/predict step a ``tf.function`` is, or None.

    Keras builds those functions as closures inside ``Trainer._make_function`` and
    ``make_predict_function`` (keras/src/backend/tensorflow/trainer.py): ``self``, the
    model, is one of their free variables in every Keras 3 release so far. What
    ``compile`` chose for that model (its jit_compile) then applies to the function."""
    python_function = getattr(function, "python_function", None)
    if python_function is None:
        return None
    try:
        import inspect

        code = inspect.unwrap(python_function)
        names = code.__code__.co_freevars
        cells = code.__closure__ or ()
    except (AttributeError, ValueError):
        return None
    for name, cell in zip(names, cells):
        if name != "self":
            continue
        try:
            owner = cell.cell_contents
        except ValueError:  # an empty cell
            return None
        trainers = tuple(c for c in (_class(m, n) for m, n in TRAINERS) if c is not None)
        return owner if trainers and isinstance(owner, trainers) else None
    return None


def rnn_time_steps(model: Any) -> dict[str, int]:
    """The time steps of each LSTM/GRU layer's input where ``model`` fixes them (its
    ``Input``'s static shape: ``Input(shape=(120, 7))``), by layer name; a Bidirectional
    wrapper's two inner layers (their loops carry their names) take its input's. A
    dataset can leave the time dimension unknown in the traced step
    (``timeseries_dataset_from_array``), so the loop's iterations are not in the graph:
    the model still knows them. Layers whose input has no static shape (a subclassed
    model's) are left out."""
    kinds = tuple(c for c in (_class(m, n) for m, n in RNN_LAYERS) if c is not None)
    wrapper = _class("keras.src.layers.rnn.bidirectional", "Bidirectional")
    found: dict[str, int] = {}
    if not kinds:
        return found
    for layer in model._flatten_layers():
        inner = (
            [layer.forward_layer, layer.backward_layer]
            if wrapper is not None and isinstance(layer, wrapper)
            else [layer]
            if isinstance(layer, kinds)
            else []
        )
        if not inner:
            continue
        try:
            shape = tuple(layer.input.shape)
        except Exception:  # noqa: BLE001 - never called on an Input, or a user's layer
            continue
        steps = shape[1] if len(shape) >= 3 else None
        if isinstance(steps, int) and steps > 0:
            for each in inner:
                found[each.name] = steps
    return found
