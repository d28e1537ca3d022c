"""Section ``program`` of a watched run: what ran and how it ended, the TensorFlow and
Keras it used, and (from the step collector's Keras hooks) how Keras compiled its step.

Filled before the sections that read it (the projection reads the GPUs TF saw and the
compile); its ``notes`` are the session's to add last, once every section had its say.
"""

from __future__ import annotations

import sys

from gpuwhy.collect.inprocess.base import Collector, Ending, Gathering
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.formatting import how_it_ended
from gpuwhy.source_calls import keras_spelling_in
from gpuwhy.tfapi.keras_hooks import keras_version
from gpuwhy.tfapi.memory import tf_gpus


class Program(Collector):
    name = section = "program"
    reads_from = ("steps",)  # Keras' compile, seen by the step collector's hooks
    what = "program"
    shown = 10

    @classmethod
    def report_rows(cls, facts: Facts, html: bool) -> list[tuple[str, str]]:
        """How the program ran; on the page, also the TensorFlow it ran."""
        program = facts.program
        if program is None:
            return []
        ended = how_it_ended(program)
        command = " ".join(program.command)
        if not html:
            return [("Program", f"{command}: {ended} after {program.seconds:.1f} s")]
        rows = [("Program", f"{command}: {ended} after {program.seconds:,.1f} s")]
        if program.tensorflow_imported:
            keras = f", Keras {program.keras_version}" if program.keras_version else ""
            gpus = ", ".join(program.gpus_seen_by_tf) or "none"
            rows.append(
                (
                    "TensorFlow",
                    f"{program.tensorflow_version or '?'}{keras}; GPUs TF created: {gpus}",
                )
            )
        return rows

    def fill(self, gathering: Gathering) -> ProgramFacts:
        ending = gathering.ending or Ending()
        steps = gathering.peer(StepCollector)
        tf_imported = gathering.tensorflow_imported
        return ProgramFacts(
            command=gathering.options.command,
            ended=ending.ended,
            exit_code=ending.exit_code,
            error=ending.error,
            seconds=round(gathering.t_end - gathering.t0, 3),
            tensorflow_imported=tf_imported,
            tensorflow_version=getattr(sys.modules.get("tensorflow"), "__version__", None),
            keras_version=keras_version(),
            gpus_seen_by_tf=tf_gpus() if tf_imported else (),
            keras_auto_jit=steps.keras_auto_jit,
            keras_cudnn_rnn=steps.keras_cudnn_rnn,
            keras_run_eagerly_at=steps.keras_run_eagerly_at,
            keras_name=_keras_name(gathering.options.command),
        )


def _keras_name(command: tuple[str, ...]) -> str | None:
    """How the script (the command's first word) names Keras."""
    script = command[0] if command else ""
    return keras_spelling_in(script) if script.endswith(".py") else None
