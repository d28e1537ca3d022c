"""placement.no-gpu-kernel: an op in the step has no GPU kernel, so it runs on the CPU."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.op_classes import PYTHON_OPS, is_codec
from gpuwhy.facts import Facts, OpGroup, PlacementFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes.op_groups import group_row, op_list, prediction_note
from gpuwhy.rules.base import Rule
from gpuwhy.rules.placement.common import (
    HEAVY_BYTES_PER_STEP,
    copies_evidence,
    copies_made_by,
    jit_compile_fix,
    known_bytes,
    nameable_groups,
)

_NO_KERNEL = ("no-gpu-kernel", "no-gpu-kernel-for-dtype", "resource-on-gpu-no-kernel")
_PRINT_OPS = ("PrintV2", "Print", "StringFormat")


# dtypes XLA does not compile on a GPU: the op stays on the host under jit_compile too
_NOT_XLA_DTYPES = frozenset({"string", "variant", "resource"})


def _step_name(groups: list[OpGroup]) -> str | None:
    """The name of the step function the groups sit in: "train_step" of
    "train_step (train.py:9)"; "tiny.train_step" for a Keras model's own step."""
    for group in groups:
        for label in group.functions:
            return label.split(" (")[0]
    return None


def _loss_scale_check(groups: list[OpGroup], placement: PlacementFacts) -> bool:
    """Keras' LossScaleOptimizer (mixed_float16) checks every gradient for inf/NaN; an
    Embedding's sparse gradient is densified for it with a bool TensorScatterUpdate
    (keras/src/backend/tensorflow/sparse.py), an op TF has no GPU kernel for."""
    return placement.mixed_precision_policy == "mixed_float16" and any(
        g.by_library and g.op == "TensorScatterUpdate" and "bool" in g.in_dtypes for g in groups
    )


def _fix_for(
    groups: list[OpGroup], placement: PlacementFacts, facts: Facts, outside: str | None = None
) -> str:
    """Paste-able advice for the kinds of op found, most specific first. ``outside``:
    the functions they are in, where none is the training step (an evaluate() or
    predict() of a model taking raw strings, built for export)."""
    ops = {g.op for g in groups}
    dtypes = {d for g in groups for d in g.in_dtypes + g.out_dtypes}
    lines: list[str] = []
    strings = "string" in dtypes or any(
        op.startswith(("String", "Regex", "Substr", "Unicode", "AsString")) for op in ops
    )
    if outside and strings:
        # the program's training already takes ids: a template of what it does is no fix
        return "\n".join(
            [
                f"# {outside} is not the training step: a model that takes raw strings (one",
                "# built for export or serving) runs its string ops on the host by design,",
                "# and training does not wait on them. Where its own speed matters, vectorize",
                "# in its input pipeline and give it the ids, as the training step is given.",
            ]
        )
    cudnn = facts.program.keras_cudnn_rnn if facts.program is not None else ()
    if _loss_scale_check(groups, placement):
        lines += [
            "# Keras' loss-scale optimizer (mixed_float16) checks the Embedding's sparse",
            "# gradient for inf/NaN with a bool TensorScatterUpdate, which has no GPU kernel.",
        ]
        if not cudnn:
            lines += [
                "# XLA compiles it on the GPU with the rest of the step:",
                *jit_compile_fix(_step_name(groups)),
                "# or, on",
            ]
        else:
            lines.append(f"# Keras compiles no step with XLA beside cuDNN's {', '.join(cudnn)}; on")
        lines += [
            "# Ampere or newer (compute capability 8.0+), train in bfloat16: no loss scaling",
            'keras.mixed_precision.set_global_policy("mixed_bfloat16")   # before building the model',
        ]
    if ops & PYTHON_OPS:
        lines += [
            "# tf.py_function / tf.numpy_function run Python on the host: write the same",
            "# computation with TF ops, or move it into the input pipeline:",
            "<dataset>.map(<your preprocessing>, num_parallel_calls=tf.data.AUTOTUNE)"
            ".prefetch(tf.data.AUTOTUNE)",
        ]
    if "CTCLoss" in ops:
        lines += [
            "# CTCLoss (tf.compat.v1.nn.ctc_loss, Keras 2's ctc_batch_cost) has no GPU kernel;",
            "# TF2's tf.nn.ctc_loss with dense labels computes on the GPU (blank_index=-1:",
            "# the last class, CTCLoss's blank). <labels>: int32 [batch, max label length]",
            "# (cast float labels: tf.cast(y_true, tf.int32)); <logits>: [batch, time,",
            "# classes], or logits_time_major=True where time comes first (the tensor",
            "# ctc_batch_cost transposes); log-probabilities serve as logits:",
            "loss = tf.nn.ctc_loss(<labels>, <logits>, label_length=<label lengths>,",
            "                      logit_length=<logit lengths>, logits_time_major=False,",
            "                      blank_index=-1)",
        ]
    if ops & set(_PRINT_OPS):
        lines += [
            "# tf.print in the step runs on the host every step: print from Python every N",
            "# steps instead (outside the tf.function), or remove it",
        ]
    if strings:
        lines += [
            "# string work belongs in tf.data: give the step numeric tensors",
            "# (a TextVectorization layer, adapted, called in the map: the step then",
            "# receives int ids only)",
            "<dataset>.map(lambda text, y: (<your TextVectorization layer>(text), y),",
            "              num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)",
            "# and take that layer out of the model: its input is then the ids",
            "inputs = keras.Input((<output_sequence_length>,), dtype='int64')",
        ]
    numeric = [g for g in groups if not set(g.in_dtypes + g.out_dtypes) & _NOT_XLA_DTYPES]
    if numeric and all(g.by_library for g in groups) and not lines and not cudnn:
        # made inside Keras or TF (Keras' loss-scale optimizer checks a sparse gradient
        # with a bool TensorScatterUpdate): there is no tensor of the user's to cast
        kinds = ", ".join(sorted({f"{g.op} ({', '.join(g.in_dtypes) or '-'})" for g in numeric}))
        lines += [
            f"# {kinds}: made inside Keras/TensorFlow, not by your code (nothing to cast);",
            "# XLA compiles it on the GPU with the rest of the step:",
            *jit_compile_fix(_step_name(groups)),
        ]
    if any(g.reason == "no-gpu-kernel-for-dtype" for g in groups) and not lines:
        kinds = ", ".join(
            sorted(
                {
                    f"{g.op} on {', '.join(g.in_dtypes) or '-'}"
                    for g in groups
                    if g.reason == "no-gpu-kernel-for-dtype"
                }
            )
        )
        lines += [
            f"# {kinds}: the GPU has kernels for this op in other dtypes;",
            "# cast to one of them (usually float32) where the value allows it:",
            "tf.cast(<the tensor>, tf.float32)",
        ]
    if any(g.reason == "resource-on-gpu-no-kernel" for g in groups):
        lines += [
            "# a variable on the GPU is used by an op with no GPU kernel for it: TensorFlow",
            "# refuses ('Cannot assign a device for operation'). Create that variable on the CPU:",
            "with tf.device('/CPU:0'):",
            "    table = tf.Variable(...)",
        ]
    if not lines:
        lines = [
            "# run this op in the input pipeline (tf.data) or replace it with ops that have",
            "# GPU kernels; `gpuwhy explain placement.no-gpu-kernel` shows an example",
        ]
    return "\n".join(lines)


def reported_groups(placement: PlacementFacts, ignored: set[str] | frozenset[str] = frozenset()):
    """The op groups this finding names (placement.host-transfers leaves the copies
    they make to it: a consequence, not a cause of its own)."""
    return [
        g
        for g in nameable_groups(placement, _NO_KERNEL, ignored)
        if not is_codec(g.op)  # compression.cpu-codec reports those, with codec advice
        and g.op != "Const"  # a constant computes nothing (an assert's message string)
    ]


class NoGpuKernel(Rule):
    """An op in the training step has no GPU kernel for its dtypes, so TF runs it on the CPU.

    ## What it detects
    An op inside the step (the `tf.function` that `fit` or a custom loop runs, nested
    functions included) for which TensorFlow registers no GPU kernel for its input and
    output dtypes: string ops (`tf.strings.*`, `StringLookup`, `TextVectorization`),
    `tf.py_function` / `tf.numpy_function`, image decoders, and some integer ops. The
    finding names each op, its dtypes and the file:line that created it. Some are made
    by Keras or TF, not by the user's code: with `mixed_float16`, Keras' loss-scale
    optimizer checks an `Embedding`'s sparse gradient for inf/NaN with a `bool`
    `TensorScatterUpdate`, which has no GPU kernel; the fix then names what the user can
    change (XLA compiles it on the GPU; bfloat16 needs no loss scaling). A Keras step
    that XLA compiles on a GPU (`jit_compile=True`, or "auto" without cuDNN RNN layers)
    has no per-op placement and no such finding. Where the run
    has a training step (a function with a backward pass) and the ops are only in
    other functions (evaluate's or predict's: an export model that takes raw strings),
    the finding is low and says so: the training step does not wait on them. String
    constants are left out: they compute nothing and never cross to the GPU (the
    messages of the asserts in `tf.nn.compute_average_loss`, say), and so are ops TF
    keeps on the host on every machine (tf.data iterators, resource handles, summary
    writes, checkpoints, `tf.print`). The host<->GPU copies these ops make are counted
    here, as their consequence; above 64 MiB a step the finding is high.

    ## Why is this slow?
    Soft placement (on by default) silently puts such an op on the CPU. Its inputs are
    copied device-to-host over PCIe, which waits until the GPU has produced them; the op
    runs on the host while the GPU has nothing queued; its result is copied back. Each
    round trip adds a synchronisation point and GPU idle time to every step, and with
    `jit_compile=True` an op XLA cannot compile either (strings, `tf.py_function`) makes
    XLA compilation fail.

    ## Example
    ```python
    @tf.function
    def train_step(words, y):                  # words: a tf.string tensor
        ids = tf.strings.to_hash_bucket_fast(words, 100_000)   # CPU only
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(ids, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    ```

    Use instead:
    ```python
    ds = ds.map(lambda w, y: (tf.strings.to_hash_bucket_fast(w, 100_000), y),
                num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    @tf.function
    def train_step(ids, y):                    # numeric inputs only: all on the GPU
        ...
    ```

    ## Options
    - `ignore_ops`: op types never reported, e.g. ops you keep on the CPU on purpose
      (`[]`).
    """

    id = "placement.no-gpu-kernel"
    severity = "medium"
    status = "stable"
    needs = ("placement",)
    options = {"ignore_ops": []}
    question = "Why are ops on the CPU?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        placement = facts.placement
        assert placement is not None  # in `needs`: never run without it
        ignored = set(options["ignore_ops"])
        groups = reported_groups(placement, ignored)
        if not groups:
            return []
        groups.sort(key=lambda g: (g.reason != "resource-on-gpu-no-kernel", -g.count, g.op))
        moved = [g for g in placement.groups if g.reason == "colocated" and g.op not in ignored]
        total = sum(g.count for g in groups)
        fails = any(g.reason == "resource-on-gpu-no-kernel" for g in groups)
        copies = copies_made_by(placement, groups)
        copied = known_bytes(copies)
        in_loop = any(g.in_loop for g in groups)
        severity = "high" if fails or in_loop or copied > HEAVY_BYTES_PER_STEP else self.severity
        training = {op.function for op in placement.tensor_ops if op.gradient}
        outside = (
            bool(training)
            and not any(set(g.functions) & training for g in groups if g.functions)
            and all(g.functions for g in groups)
        )
        if outside and not fails:
            # only in evaluate()/predict()'s functions: not what the training step waits on
            severity = "low"
        evidence: dict[str, Any] = {
            "ops_on_cpu": total,
            "ops": [group_row(g) for g in groups],
            **prediction_note(placement),
        }
        if moved:
            evidence["colocated_ops_moved_with_them"] = sum(g.count for g in moved)
        evidence.update(copies_evidence(copies))
        if fails:
            title = f"{total} op{'s' if total > 1 else ''} cannot run where {'their' if total > 1 else 'its'} variable lives: {op_list(groups)}"
        else:
            # outside the training step, the functions they are in are named after the ops
            where = "" if outside else f" in {_where(groups)}"
            title = f"{total} op{'s' if total > 1 else ''}{where} {'have' if total > 1 else 'has'} no GPU kernel and run{'' if total > 1 else 's'} on the CPU: {op_list(groups)}"
        gain = "removes a host round trip and its GPU idle time from every step"
        if outside and not fails:
            functions = ", ".join(sorted({f for g in groups for f in g.functions}))
            title += f"; in {functions}, not the training step"
            gain = f"removes a host round trip from each call of {functions}; the training step does not wait on them"
        location = next((g.locations[0] for g in groups if g.locations), None)
        beside = ", ".join(sorted({f for g in groups for f in g.functions}))
        return [
            self.finding(
                title,
                severity=severity,
                evidence=evidence,
                fix=_fix_for(groups, placement, facts, beside if outside and not fails else None),
                estimated_gain=gain,
                location=location,
            )
        ]


def _where(groups: list[OpGroup]) -> str:
    """Where the ops are, for the title: "the step", or the functions by name where they
    are in several (train_step and eval_step: an op in both counts once in each)."""
    names = sorted({f.split(" (", 1)[0] for g in groups for f in g.functions})
    if len(names) < 2:
        return "the step"
    return ", ".join(names[:-1]) + " and " + names[-1]
