"""Section ``program``: what a watched run ran and how it ended."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.redact import mask_argv, mask_values, masked_values


@dataclass(frozen=True)
class ProgramFacts:
    """Section ``program``: what was watched and how it ended.

    ``command`` is masked as it is made (gpuwhy.redact): every record, report, SARIF
    file and merge holds ``--api-key=***``, never the value the program received, and
    the exception's line does not repeat a value masked there. Masking is idempotent,
    so a record read back (an older one included) comes out masked too."""

    command: tuple[str, ...]  # argv as the program saw it, secret values masked
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
    # file:line of the program's last compile, where it was given run_eagerly=True (fit
    # then runs its train step op by op); None where it was not
    keras_run_eagerly_at: str | None = None
    notes: tuple[str, ...] = ()  # what gpuwhy could not watch, and why
    # how the script names Keras ("keras", "tf.keras"): what a fix that calls Keras
    # writes; None where it imports neither Keras nor TensorFlow by name
    keras_name: str | None = None

    def __post_init__(self) -> None:
        command = tuple(self.command)
        shown = mask_argv(command)
        if shown != command:
            object.__setattr__(self, "command", shown)
        if isinstance(self.error, str) and self.error:
            object.__setattr__(self, "error", mask_values(self.error, masked_values(command)))
