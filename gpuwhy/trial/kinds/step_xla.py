"""launch.projected-bound, launch.host-bound and gpu.underutilized in a custom loop: the
training step the program already traces, XLA-compiled (``@tf.function`` becomes
``@tf.function(jit_compile=True)``), the fix their findings print. Keras fit gets XLA
from ``compile(jit_compile=True)`` (keras_compile.py) instead.

Not under a tf.distribute strategy with several replicas: XLA cannot reach the
variables on the other replicas' devices there and the step fails (traced_step.py)."""

from __future__ import annotations

import ast

from gpuwhy.facts import Facts, TracedFunction
from gpuwhy.finding import Finding
from gpuwhy.fixes import traced_step
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.kinds.step_graph import XLA_TOLERANCE, XLA_WHY
from gpuwhy.trial.source_edits import Edit, function_at, node_span, segment, set_keywords


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    steps = facts.steps
    if steps is None or steps.source == "keras-fit":
        return [], []  # fit: compile(jit_compile=True), keras_compile.py
    if traced_step.replicas(facts) > 1:
        return [], [
            NotTried(finding.id, "XLA under a strategy with several replicas fails: not tried")
        ]
    function = _training_function(facts)
    if function is None or function.location is None:
        return [], [NotTried(finding.id, "no tf.function of the program's runs the steps")]
    where = location_parts(function.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return [], [NotTried(finding.id, f"{function.location} is not a file of the program's")]
    source, lines, tree = read
    fn = function_at(tree, where[1])
    decorator = _tf_function(source, fn) if fn is not None else None
    if fn is None or decorator is None:
        return [], [NotTried(finding.id, f"no @tf.function def at {function.location}")]
    if any(k.arg == "jit_compile" for k in getattr(decorator, "keywords", ())):
        return [], [NotTried(finding.id, f"{fn.name} sets jit_compile already")]
    if isinstance(decorator, ast.Call):
        edits = set_keywords(source, lines, where[0], decorator, jit_compile="True")
    else:  # @tf.function: the call with the keyword
        span = node_span(decorator, lines)
        text = f"{segment(source, decorator)}(jit_compile=True)"
        edits = [Edit(where[0], span.line, span.col, span.end_line, span.end_col, text)]
    return [
        FixCandidate(
            finding=finding.id,
            fix=f"{fn.name} XLA-compiled: @tf.function(jit_compile=True)",
            edits=tuple(edits),
            location=function.location,
            tolerance=XLA_TOLERANCE,
            tolerance_why=XLA_WHY,
            by_mean=True,
        )
    ], []


def _training_function(facts: Facts) -> TracedFunction | None:
    """The program's own tf.function the steps spent most of their calls' time in."""
    functions = [
        f for f in (facts.tracing.functions if facts.tracing else ()) if not f.library and f.calls
    ]
    return max(functions, key=lambda f: f.call_s, default=None)


def _tf_function(source: str, fn: ast.FunctionDef) -> ast.expr | None:
    """The def's ``tf.function`` decorator (written ``@tf.function`` or called)."""
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if segment(source, target).rsplit(".", 1)[-1] == "function":
            return decorator
    return None
