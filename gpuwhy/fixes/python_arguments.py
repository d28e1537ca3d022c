"""The Python scalars a tf.function was called with that changed from call to call, read
from its traces, and the call that passes them as tensors: launch.retracing's fix,
host.memory-growth's and steps.drift's examples, and the dtypes gpuwhy fix tries."""

from __future__ import annotations

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
    return f"{fn.name}(..., {tensor_arguments(fn, list(python_kinds(fn)))})"
