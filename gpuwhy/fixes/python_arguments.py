"""The Python scalars a tf.function was called with that changed from call to call, read
from its traces, and the call that passes them as tensors: launch.retracing's fix,
host.memory-growth's and steps.drift's examples, and the dtypes gpuwhy fix tries."""

from __future__ import annotations

import ast
from collections import Counter

import gpuwhy.source_calls as source_calls
from gpuwhy.facts import Facts, TracedFunction

# the tensor dtype a changing Python scalar is passed as (int64: what tf.summary's step takes)
TENSOR_DTYPES = {"float": "float32", "int": "int64"}


def python_kinds(fn: TracedFunction) -> dict[str, str]:
    """Changed arguments that were Python scalars in every trace: name -> the Python type
    ("float", "int", "bool" ...), read from the traces' "0.1 (float)" texts."""
    kinds: dict[str, str] = {}
    for name in fn.changed_args:
        texts = [dict(s.args).get(name) for s in fn.signatures]
        types = {t.rsplit("(", 1)[-1].rstrip(")") for t in texts if t and t.endswith(")")}
        if len(types) == 1 and all(t and t.endswith(")") for t in texts):
            kinds[name] = types.pop()
    return kinds


def tensor_arguments(fn: TracedFunction, names: list[str]) -> str:
    """``lr=tf.constant(lr, tf.float32), step=tf.constant(step, tf.int64)``: each of the
    Python scalars ``names`` passed as a tensor of its dtype."""
    kinds = python_kinds(fn)
    return ", ".join(
        f"{a}=tf.constant({a}"
        + (f", tf.{TENSOR_DTYPES[kinds[a]]})" if kinds.get(a) in TENSOR_DTYPES else ")")
        for a in names
    )


def called_with_tensors(fn: TracedFunction, names: list[str]) -> tuple[str, str, str] | None:
    """(the caller's file:line, the call as written there, the same call with each of the
    Python scalars ``names`` passed as a tensor of its dtype), in the program's own words:
    ``train_step(x, y, lr, global_step)`` -> ``train_step(x, y, tf.constant(lr,
    tf.float32), tf.constant(global_step, tf.int64))``. The parameters' names are the
    function's, not the caller's: "step=tf.constant(step, tf.int64)", pasted, raised a
    NameError in a loop that passed ``global_step``. None where the call cannot be read
    (no caller, no source, not one call of the function there, arguments passed with
    ``*`` or ``**``)."""
    callers = Counter(s.caller for s in fn.signatures if s.caller)
    if not callers or not fn.signatures:
        return None
    where = callers.most_common(1)[0][0]
    filename, _, line_text = where.rpartition(":")
    if not line_text.isdigit():
        return None
    line = int(line_text)
    callee = fn.name.rsplit(".", 1)[-1]
    calls = [
        call
        for call in source_calls.calls_at(filename, line)
        if (isinstance(call.func, ast.Name) and call.func.id == callee)
        or (isinstance(call.func, ast.Attribute) and call.func.attr == callee)
    ]
    if len(calls) != 1:
        return None
    call = calls[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    order = [name for name, _ in fn.signatures[0].args]
    kinds = python_kinds(fn)

    def tensor(value: ast.expr, name: str) -> ast.expr:
        dtype = f", tf.{TENSOR_DTYPES[kinds[name]]}" if kinds.get(name) in TENSOR_DTYPES else ""
        return ast.parse(f"tf.constant({ast.unparse(value)}{dtype})", mode="eval").body

    wanted = set(names)
    args = [
        tensor(a, order[i]) if i < len(order) and order[i] in wanted else a
        for i, a in enumerate(call.args)
    ]
    keywords = [
        ast.keyword(k.arg, tensor(k.value, k.arg)) if k.arg in wanted else k for k in call.keywords
    ]
    changed = ast.Call(func=call.func, args=args, keywords=keywords)
    written = source_calls.call_as_written(filename, call)
    new = ast.unparse(changed)
    return (where, written, new) if new != ast.unparse(call) else None


def retraced_call(facts: Facts) -> str | None:
    """``train_step(..., lr=tf.constant(lr, tf.float32), step=...)``: the most-traced
    function of the program's whose Python scalars changed, called with every one of
    them as a tensor of its dtype; None where no function of the program's has any."""
    functions = [
        f
        for f in (facts.tracing.functions if facts.tracing else ())
        if not f.library and python_kinds(f)
    ]
    if not functions:
        return None
    fn = max(functions, key=lambda f: f.traces)
    written = called_with_tensors(fn, list(python_kinds(fn)))
    if written is not None:
        return written[2]
    return f"{fn.name}(..., {tensor_arguments(fn, list(python_kinds(fn)))})"
