"""Section ``program``: what a watched run ran and how it ended."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProgramFacts:
    """Section ``program``: what was watched and how it ended."""

    command: tuple[str, ...]  # argv as the program saw it
    ended: str = "completed"  # completed | exception | interrupted | exit
    exit_code: int = 0
    error: str | None = None  # the exception's last line
    seconds: float = 0.0
    tensorflow_imported: bool = False
    tensorflow_version: str | None = None
    keras_version: str | None = None
    gpus_seen_by_tf: tuple[str, ...] = ()  # logical GPUs TF created in the program
    # Keras compile(jit_compile="auto") (the default): True where Keras would XLA-compile
    # the train step on a GPU machine (it does not on one without a GPU)
    keras_auto_jit: bool | None = None
    # Keras LSTM/GRU layers (names) that a GPU runs with cuDNN's RNN kernels (and for
    # which Keras compiles no step with XLA there); here, without a GPU, a while loop
    keras_cudnn_rnn: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # what gpuwhy could not watch, and why
