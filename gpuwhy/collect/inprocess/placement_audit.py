"""The placement audit of a watched run (section ``placement``): the tf.functions the
program spent its time in, placed as on a GPU machine, once the program ended.

It runs on what the sections before it found: the functions section ``tracing`` saw
called, the batch size the steps were given (``steps`` and ``tfdata``: it sizes what
their traces left unknown) and the strategy (``distribute``).

Keras' ``compile(jit_compile="auto")`` (the default) resolves to no XLA on a machine
without a GPU and to XLA on a GPU machine when every layer supports it (the step
collector's ``keras_auto_jit``). So the step traced here is not the one a GPU runs: there,
the per-batch step is one XLA cluster on the GPU, with no per-op placement and no copies
inside. It is audited as such, and the function's note says so.
"""

from __future__ import annotations

import dataclasses

from gpuwhy.collect.inprocess.base import Collector, Gathering, Option
from gpuwhy.collect.inprocess.functions import FunctionWatcher
from gpuwhy.collect.inprocess.input_wait import delivered_batch
from gpuwhy.collect.inprocess.steps import StepCollector
from gpuwhy.collect.placement import AuditTarget, audit_functions
from gpuwhy.collect.placement.loops import with_time_steps
from gpuwhy.facts import (
    KERAS_PREDICT_FUNCTIONS,
    KERAS_STEP_BODY,
    KERAS_STEP_FUNCTIONS,
    PlacementFacts,
)
from gpuwhy.tfapi.keras_hooks import rnn_time_steps
from gpuwhy.tfapi.memory import tf_gpus

# Every tf.function that ran is audited (fit's, evaluate's, predict's, the user's), up to
# this many, those with the most time in calls first; the rest are named in the notes.
AUDIT_FUNCTIONS = 16
KERAS_UNSEEN_NOTE = (
    "placed op by op, as traced here: compile() ran before gpuwhy watched, so whether "
    'jit_compile was left at "auto" is unknown; if it was, a GPU machine compiles the '
    "per-batch step with XLA and its ops are not placed one by one (start gpuwhy "
    "before compile, or run the script with `gpuwhy run`)"
)
KERAS_UNCOMPILED_NOTE = (
    "placed op by op, as traced here: the model was never compiled, so its jit_compile "
    'is Keras\' default "auto"; where a GPU machine takes that for XLA, the function is '
    "compiled as one cluster there and its ops are not placed one by one"
)
KERAS_CUDNN_NOTE = (
    "placed op by op: on a GPU, Keras runs {layers} with cuDNN's kernels and then "
    'compiles no step of this model with XLA (compile\'s jit_compile="auto")'
)
KERAS_XLA_NOTE = (
    "placed as a GPU machine runs it: there Keras compiles its step with XLA "
    '(compile\'s jit_compile="auto", the default), one GPU cluster with no per-op '
    "placement; traced here without XLA, as Keras does without a GPU. With "
    "compile(jit_compile=False) it would be placed op by op"
)


AUDIT: Option[bool] = Option(
    "audit",
    "--no-audit",
    True,
    "skip the placement audit of the tf.functions the script ran",
    switch=True,
)


class PlacementAudit(Collector):
    """Section ``placement``; ``gpuwhy run --no-audit`` leaves it out."""

    name = section = "placement"
    reads_from = ("tracing", "tfdata", "steps", "distribute")
    options = (AUDIT,)
    what = "placement audit"
    needs_tensorflow = True

    def fill(self, gathering: Gathering) -> PlacementFacts | None:
        """The audit of the functions the program spent its time in. A strategy made
        over this machine's CPUs (no GPU here: MirroredStrategy() picks the CPU) places
        its replicas there; the audit predicts them as a GPU machine's strategy would
        place them."""
        facts = gathering.facts
        if facts.tracing is None:
            return None
        ran = sorted((f for f in facts.tracing.functions if f.calls), key=lambda f: -f.call_s)
        if len(ran) > AUDIT_FUNCTIONS:
            left = ", ".join(f"{f.name} ({f.location})" for f in ran[AUDIT_FUNCTIONS:][:5])
            gathering.note(
                f"placement audit: {len(ran) - AUDIT_FUNCTIONS} tf.functions with the least "
                f"time in calls were not audited ({left})"
            )
        wanted = [(f.name, f.location) for f in ran[:AUDIT_FUNCTIONS]]
        targets = gathering.peer(FunctionWatcher).audit_targets(wanted) if wanted else []
        if not targets:
            if wanted and not any(f.traces for f in ran):
                # a notebook's cell run again, or a session opened after the first call
                names = ", ".join(name for name, _ in wanted[:3])
                gathering.note(
                    f"placement audit: {names} ran already traced (before gpuwhy watched: an "
                    "earlier cell, or before the session began), so their graphs were not "
                    "seen; watch the first run that traces them"
                )
            return None
        ignored: frozenset[str] = frozenset()
        gpu_here = bool(tf_gpus())
        if facts.distribute is not None and not gpu_here:
            ignored = frozenset(d for d in facts.distribute.devices if "CPU" in d.upper())
        if not gpu_here:
            steps = gathering.peer(StepCollector)
            targets = [_as_keras_compiles_it(t, steps) for t in targets]
        batch = delivered_batch(facts.tfdata, facts.steps)
        placement = audit_functions(targets, batch=batch, ignored_devices=ignored)[0]
        # RNN loops whose iterations the model knows, the graph not: each model read once
        # (Keras' training and validation steps share theirs)
        models = {id(t.model): t.model for t in targets if t.model is not None}
        time_steps = {
            name: n for model in models.values() for name, n in rnn_time_steps(model).items()
        }
        return with_time_steps(placement, time_steps)


def _as_keras_compiles_it(target: AuditTarget, steps: StepCollector) -> AuditTarget:
    """A Keras step function placed as a GPU machine runs it. Its model's compile, where
    gpuwhy saw it, says whether "auto" means XLA there: then the per-batch step (train,
    test) or the whole predict function is one XLA cluster. A compile not seen (the
    model was compiled before gpuwhy watched) leaves it placed as traced, with a note."""
    label = target.label
    if label not in KERAS_STEP_FUNCTIONS:
        return target
    seen, would_xla, cudnn = steps.keras_compile_of(target.model)
    if not seen:
        # Keras 3's Trainer says whether compile() ever ran; gpuwhy's hook saw none of it
        never = getattr(target.model, "compiled", None) is False
        unseen = KERAS_UNCOMPILED_NOTE if never else KERAS_UNSEEN_NOTE
        return dataclasses.replace(target, note=_joined(target.note, unseen))
    if would_xla is False and cudnn:
        note = KERAS_CUDNN_NOTE.format(layers=", ".join(cudnn))
        return dataclasses.replace(target, note=_joined(target.note, note))
    if not would_xla:
        return target
    bodies = (label,) if label in KERAS_PREDICT_FUNCTIONS else (KERAS_STEP_BODY,)
    return dataclasses.replace(target, xla_bodies=bodies, note=_joined(target.note, KERAS_XLA_NOTE))


def _joined(*notes: str | None) -> str:
    return "; ".join(n for n in notes if n)
