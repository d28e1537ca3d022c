"""Section ``program`` of a watched run: what ran and how it ended, the TensorFlow and
Keras it used, and (from the step collector's Keras hooks) how Keras compiled its step.

Filled before the sections that read it (the projection reads the GPUs TF saw and the
compile); its ``notes`` are the session's to add last, once every section had its say.
"""

from __future__ import annotations

import sys

from gpuwhy.collect.inprocess.base import Collector, Ending, Gathering
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.facts import ProgramFacts
from gpuwhy.tfapi.keras_hooks import keras_version
from gpuwhy.tfapi.memory import tf_gpus


class Program(Collector):
    section = "program"
    order = 100
    what = "program"

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
        )
