"""tensorcore.unused: Keras' mixed precision policy, set before the model is built.

``keras.mixed_precision.set_global_policy(...)`` after the script's imports above its
first statement that runs code (the model is built after it), and
each model's output layer kept float32 (``dtype='float32'``, as the finding's fix writes
it: the loss reads a float32 output):
``mixed_bfloat16`` (no loss scaling: nothing to add to a custom loop, and no skipped
first steps while a loss scale settles), except for a ``fit`` projected onto a GPU
without bfloat16 tensor cores (``--target`` T4 or V100: compute capability below 8.0),
where it is ``mixed_float16`` (fit scales the loss itself; a model whose own
``train_step`` scales none is not tried: its float16 gradients would underflow). bfloat16 also runs at speed
on a CPU, so the trial's runs here finish; float16 there is emulated, many times slower. A model that reads token ids through an ``Input`` of the default
float dtype breaks under the policy (the ids are cast to float16 and an id like 20000
is no longer exact): where the program has an ``Embedding``, a second candidate gives
every ``Input`` written without a dtype ``dtype="int32"``, and the trial says which ran.
Its effect is on a GPU's tensor cores: on a machine without one it is measured for
runs and results, its step projected onto ``--target``.
"""

from __future__ import annotations

import ast
import os

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.gpu_specs import UnknownGpuError, find_gpu
from gpuwhy.rules.tensorcore.unused import FLOAT32
from gpuwhy.source_calls import keras_spelling, output_layers
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.source_edits import (
    Edit,
    calls_named,
    import_tensorflow,
    set_keywords,
    top_line,
)

TOLERANCE = 0.1
WHY = (
    "each quantity's mean over the run: 16-bit math rounds sooner, so the curves match, "
    "not each point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    read = files.read(files.script)
    if read is None:
        return [], [NotTried(finding.id, "the script cannot be read")]
    source, lines, tree = read
    if "set_global_policy" in source:
        return [], [NotTried(finding.id, "the script already sets a precision policy")]
    fit = facts.steps is not None and any(loop.source == "keras-fit" for loop in facts.steps.loops)
    policy = "mixed_float16" if fit and _before_bfloat16(facts) else "mixed_bfloat16"
    if policy == "mixed_float16" and _unscaled_train_step(tree):
        return [], [
            NotTried(
                finding.id,
                "the model's own train_step computes its gradients: under mixed_float16 "
                "Keras scales no loss there (self.optimizer.scale_loss(loss) before the "
                "gradients is the program's to write), and unscaled float16 gradients "
                "underflow",
            )
        ]
    keras, imports = _keras_name(tree, files.script)
    line = max(_policy_line(tree, keras.split(".")[0]), top_line(tree, source))
    setter = Edit(
        files.script, line, 0, line, 0, f'{keras}.mixed_precision.set_global_policy("{policy}")\n'
    )
    outputs = _float32_outputs(files.script, lines)
    base = (*imports, setter, *outputs)
    # the line it goes after (the last import), not the one it goes before: that may
    # be blank ("at prog.py:51" named an empty line)
    at = f"{files.script}:{max(1, line - 1)}"
    out = [
        FixCandidate(
            finding.id,
            f"mixed precision ({policy})",
            base,
            location=at,
            device_effect=True,
            tolerance=TOLERANCE,
            tolerance_why=WHY,
            by_mean=True,
        )
    ]
    if "Embedding(" in source:
        typed: list[Edit] = []
        for call in calls_named(tree, "Input"):
            if not any(k.arg == "dtype" for k in call.keywords):
                typed += set_keywords(source, lines, files.script, call, dtype='"int32"')
        if typed:
            out.append(
                FixCandidate(
                    finding.id,
                    f"mixed precision ({policy}), the Inputs of token ids int32",
                    (*base, *typed),
                    location=at,
                    device_effect=True,
                    tolerance=TOLERANCE,
                    tolerance_why=WHY,
                    by_mean=True,
                )
            )
    return out, []


def _before_bfloat16(facts: Facts) -> bool:
    """The GPU the step is for (--target's, or this machine's) has no bfloat16 tensor
    cores (compute capability below 8.0)."""
    projection = derived(facts).projection
    name = projection.gpu if projection is not None else None
    if name is None and facts.devices:
        name = facts.devices[0].name
    if name is None:
        return False
    try:
        return find_gpu(name).compute_capability < (8, 0)
    except UnknownGpuError:
        return False


def _keras_name(tree: ast.Module, path: str) -> tuple[str, list[Edit]]:
    """``keras`` where the script imports it so, else ``tf.keras`` (TensorFlow imported
    where the script does not)."""
    spelling = keras_spelling(tree)
    if spelling is not None:
        return spelling, []
    tf, imports = import_tensorflow(tree, path)
    return f"{tf}.keras", imports


def _unscaled_train_step(tree: ast.Module) -> bool:
    """A class of the script overrides ``train_step`` and scales no loss in it (no
    ``scale_loss``/``get_scaled_loss`` call): fit's loss scaling is in the train_step it
    replaces."""
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for method in cls.body:
            if isinstance(method, ast.FunctionDef) and method.name == "train_step":
                scaled = any(
                    isinstance(n, ast.Attribute) and n.attr in ("scale_loss", "get_scaled_loss")
                    for n in ast.walk(method)
                )
                if not scaled:
                    return True
    return False


def _policy_line(tree: ast.Module, name: str) -> int:
    """Where the policy goes: after the last top-level import above the module's first
    statement that runs code (one with a call: a layer built, ``fit``, ``main()``), and
    after the import that binds ``name`` (Keras' or TensorFlow's). After the file's last
    import it could come once the model had trained (``import matplotlib.pyplot`` below
    a VAE's ``fit``): a trial of a line that changed nothing. 1 where it imports nothing."""
    last = binding = 0
    running = False
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            end = node.end_lineno or node.lineno
            if not running:
                last = end
            bound = {(a.asname or a.name).split(".")[0] for a in node.names}
            if name in bound and not binding:
                binding = end
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        running = running or any(isinstance(n, ast.Call) for n in ast.walk(node))
    return max(last, binding) + 1


def _float32_outputs(path: str, lines: list[str]) -> list[Edit]:
    """Each model's output layer kept float32: the lines the finding's fix prints
    (:func:`~gpuwhy.source_calls.output_layers`), each edited where it differs from the
    line as written (the keyword's insertion: an edit at the line's start would meet
    the policy's line when the model is built right after the imports)."""
    edits = []
    for number, written, typed in output_layers(path, f"dtype={FLOAT32}"):
        start = lines[number - 1].index(written)
        same = len(os.path.commonprefix([written, typed]))
        tail = len(os.path.commonprefix([written[same:][::-1], typed[same:][::-1]]))
        end = len(written) - tail
        edits.append(
            Edit(path, number, start + same, number, start + end, typed[same : len(typed) - tail])
        )
    return edits
