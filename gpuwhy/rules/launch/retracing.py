"""launch.retracing: a tf.function is traced again and again."""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.facts import Facts, TracedFunction
from gpuwhy.finding import Finding
from gpuwhy.fixes.pipeline_code import IN_PLACE_OF
from gpuwhy.fixes.python_arguments import called_with_tensors, tensor_arguments
from gpuwhy.rules.base import Rule

MAX_FINDINGS = 5  # the functions with the most tracing time
_PYTHON_VALUE = re.compile(r"\((int|float|bool|str|bytes|complex|NoneType|[A-Za-z_][\w.]*)\)$")
_TENSOR = re.compile(r"^(?:Variable |ragged |sparse )?([a-z]+[0-9]*)\[(.*)\]$")


def _kind_of_change(texts: list[str]) -> str:
    """What differs between the texts one argument had in different traces."""
    if any(t.endswith("(by identity)") for t in texts):
        return "object"
    tensors = [_TENSOR.match(t) for t in texts]
    if all(tensors):
        dtypes = {m.group(1) for m in tensors if m}
        return "dtype" if len(dtypes) > 1 else "shape"
    if any(t == "None" or _PYTHON_VALUE.search(t) for t in texts):
        return "python"
    return "structure"


_KIND_WORDS = {
    "python": "a Python value",
    "shape": "the tensor shape",
    "dtype": "the tensor dtype",
    "object": "a Python object (keyed by identity)",
    "structure": "the structure of the argument",
}


def _changes(fn: TracedFunction) -> dict[str, str]:
    """Changed argument -> kind of change, read from the kept signatures."""
    out = {}
    for name in fn.changed_args:
        texts = [dict(s.args).get(name) for s in fn.signatures]
        present = [t for t in texts if t is not None]
        if len(present) < len(texts):
            out[name] = "structure"  # present in some traces only (*args of varying length)
        else:
            out[name] = _kind_of_change(present)
    return out


def _retraces_on_values(fn: TracedFunction, run_s: float | None, options: dict[str, Any]) -> bool:
    """Fewer traces than ``max_traces``, but each a new Python value of an argument (an
    epoch number, a step, a learning rate) and together a tenth of the run: a heavy step
    that retraces every epoch reaches few traces in a short run, each costing seconds."""
    if fn.traces < options["min_value_retraces"] or not run_s:
        return False
    if "python" not in _changes(fn).values():
        return False
    avoidable = fn.trace_s * (fn.traces - 1) / fn.traces
    return avoidable >= options["min_value_share"] * run_s


# Keras' step functions one compile of one model makes at one place: its train and its
# test function share the def of ``one_step_on_data`` and ``multi_step_on_iterator``
KERAS_OBJECTS_PER_COMPILE = 2


def _recreated(fn: TracedFunction, max_traces: int) -> bool:
    """Many Function objects at one place, each used about once: re-created in a loop.
    Keras' step functions made for many models, no model more than one compile's, are
    each model's own graph: nothing to reuse (a notebook that fits thirteen models)."""
    if fn.models and fn.most_per_model <= KERAS_OBJECTS_PER_COMPILE:
        return False
    return (
        fn.instances > max_traces and fn.calls <= 2 * fn.instances and fn.traces <= 2 * fn.instances
    )


def _signature_row(signature) -> dict[str, Any]:
    row: dict[str, Any] = {
        "at_s": round(signature.at_s, 3),
        "trace_ms": round(signature.seconds * 1000, 1) if signature.seconds is not None else None,
        "arguments": ", ".join(f"{name}: {text}" for name, text in signature.args) or "(none)",
    }
    if signature.caller:
        row["called_from"] = signature.caller
    return row


def _fix(fn: TracedFunction, changes: dict[str, str], recreated: bool) -> str:
    name = fn.name
    if recreated and fn.library:
        return "\n".join(
            [
                "# Keras makes its step functions anew at each compile() (and for each new model),",
                "# and traces them again: compile each model once, before its fits, not in the loop",
                "model.compile(optimizer=..., loss=...)   # once",
                "for ...:",
                "    model.fit(...)                       # reuses the traced step",
            ]
        )
    if recreated:
        return "\n".join(
            [
                f"# {name} is a new tf.function object each time: create it once, outside the loop",
                f"{name} = tf.function(step_fn)            # once, at module or __init__ level",
                "for batch in dataset:",
                f"    {name}(batch)                       # reuses the traced graph",
                "# not: tf.function(step_fn)(batch) or @tf.function on a function defined inside the loop",
            ]
        )
    if fn.library:
        return "\n".join(
            [
                "# Keras retraces its step when a batch has another structure, dtype or rank than before:",
                "# give every batch the same structure and dtypes (cast in the input pipeline), e.g.",
                "ds = ds.map(lambda x, y: (tf.cast(x, tf.float32), tf.cast(y, tf.int32)))",
                "# and pad variable-length inputs to a few fixed lengths (bucket_by_sequence_length)",
            ]
        )
    lines = []
    python = [a for a, k in changes.items() if k == "python"]
    shaped = [a for a, k in changes.items() if k in ("shape", "dtype")]
    objects = [a for a, k in changes.items() if k in ("object", "structure")]
    if python:
        args = ", ".join(python)
        every = "every one of them" if len(python) > 1 else "it"
        written = called_with_tensors(fn, python)
        if written is not None:  # the program's own call, its own names
            caller, call, changed = written
            lines += [
                f"# {args}: a new Python value makes a new trace; pass {every} as a tensor of "
                "one dtype: one trace",
                f"# {caller}: {IN_PLACE_OF}{call}",
                changed,
            ]
        else:
            passed = tensor_arguments(fn, python)
            callers = sorted({s.caller for s in fn.signatures if s.caller})
            where = f" where {name} is called ({callers[0]})" if callers else ""
            lines += [
                f"# {args}: a new Python value makes a new trace; pass {every} as a tensor{where}",
                f"{name}(..., {passed})   # same dtype every call: one trace",
            ]
        lines.append(
            "# or keep it in a tf.Variable updated with .assign() and read inside the function"
        )
    if shaped:
        args = ", ".join(shaped)
        specs = _input_signature(fn)
        lines += [
            f"# {args}: a new shape or dtype makes a new trace; declare the dims that vary as None",
            f"@tf.function(input_signature=[{specs}])"
            if specs
            else "@tf.function(input_signature=[tf.TensorSpec([None, ...], tf.float32)])  # one per argument",
            f"def {name}(...):",
            "    ...",
        ]
        if not fn.reduce_retracing:
            lines.append(
                "# or @tf.function(reduce_retracing=True): TF generalises the shapes after a few traces"
            )
        if any(changes[a] == "dtype" for a in shaped):
            lines.append(
                "# and cast to one dtype before the call (tf.cast) so the dtype never changes"
            )
    if objects or not lines:
        lines += [
            "# pass tensors (or a fixed set of hashable Python values), not new Python objects or",
            "# containers of changing length: each new one is a new cache key and a new trace",
        ]
    return "\n".join(lines)


def _run_seconds(facts: Facts) -> float | None:
    if facts.steps is not None and facts.steps.run_s:
        return facts.steps.run_s
    if facts.program is not None and facts.program.seconds:
        return facts.program.seconds
    return None


class Retracing(Rule):
    """A `tf.function` is traced again and again instead of reusing its graph.

    ## What it detects
    A `tf.function` traced more than `max_traces` times during the run (TF itself warns
    "... calls to <function> triggered tf.function retracing"), or more than
    `max_traces` `tf.function` objects created from the same Python function at the
    same place and each used about once: a `tf.function` created anew inside a loop.
    Keras' own step functions count as re-created only where one model has more of
    them than one compile makes (a `compile()` inside the loop): a program that fits
    thirteen models makes thirteen graphs it needs. The finding names the function and its file:line (for Keras' own step functions,
    the `fit` call), the arguments whose type changed between traces (a Python scalar
    or object, a tensor shape or dtype), the first traces' signatures, and the time
    spent tracing against the time spent in calls. It points at the call that passes
    the changing Python values where only those changed (the line the fix changes),
    else at the function.

    ## Why is this slow?
    A trace runs the Python function to build a new graph, then TF optimises it (and
    with `jit_compile=True` XLA compiles it again): milliseconds to seconds during
    which the GPU has no work. A function that retraces on every call pays this on
    every step, and each new concrete function also keeps its graph in memory. TF keys
    its cache on every Python value passed (each new `lr=0.001` is a new graph), on
    each tensor shape and dtype, and on the `tf.function` object itself: a new object
    starts with an empty cache. Tensor arguments with a stable signature are traced
    once and reused.

    ## Example
    ```python
    @tf.function
    def train_step(x, y, lr):
        ...

    for step, (x, y) in enumerate(ds):           # variable-length sequences
        train_step(x, y, lr=schedule(step))      # new Python float: new trace
    ```

    Use instead:
    ```python
    @tf.function(input_signature=[
        tf.TensorSpec([None, None], tf.int32),   # any batch and sequence length
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.float32)])          # lr as a tensor, not a constant
    def train_step(x, y, lr):
        ...
    # or @tf.function(reduce_retracing=True) to generalise shapes automatically
    ```

    Severity is high when the avoidable tracing time (every trace but one) is at least
    10% of the run, medium from 1% or when the run's length is unknown, low below.

    Fewer traces are reported too where a Python value changed between them and the
    tracing they cost beyond the first is `min_value_share` of the run: a heavy step
    given the epoch number retraces once an epoch, seconds each.

    ## Options
    - `max_traces`: traces of one `tf.function` object, or objects created at one place
      and each used about once, above which it is reported (5).
    - `min_value_retraces`: traces from which a changing Python value is reported where
      the tracing is a large share of the run (3).
    - `min_value_share`: that share: tracing beyond the first trace over the run (0.10).
    """

    id = "launch.retracing"
    severity = "high"
    status = "stable"
    needs = ("tracing",)
    options = {"max_traces": 5, "min_value_retraces": 3, "min_value_share": 0.10}
    question = "Why is tf.function slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        assert facts.tracing is not None  # in `needs`: never run without it
        max_traces = options["max_traces"]
        run_s = _run_seconds(facts)
        flagged = []
        for fn in facts.tracing.functions:
            recreated = _recreated(fn, max_traces)
            per_object = fn.traces / max(fn.instances, 1)
            if recreated or per_object > max_traces or _retraces_on_values(fn, run_s, options):
                flagged.append((fn, recreated))
        flagged.sort(key=lambda item: -item[0].trace_s)
        return [self._finding(fn, recreated, run_s) for fn, recreated in flagged[:MAX_FINDINGS]]

    def _finding(self, fn: TracedFunction, recreated: bool, run_s: float | None) -> Finding:
        changes = {} if recreated else _changes(fn)
        avoidable = fn.trace_s * (fn.traces - 1) / fn.traces if fn.traces else 0.0
        gain = avoidable / run_s if run_s else None
        where = f" ({fn.location})" if fn.location else ""
        if fn.jit_compile:  # each trace is also an XLA compilation: say so where it is named
            where += ", compiled with XLA (jit_compile=True),"
        if recreated and fn.models:
            title = (
                f"Keras' {fn.name}{where} is made anew at each compile: {fn.instances} objects "
                f"for {fn.models} model{'s' if fn.models > 1 else ''}, {fn.traces} traces"
            )
        elif recreated:
            title = (
                f"{fn.name}{where} is a new tf.function object each time: "
                f"{fn.instances} objects, {fn.traces} traces"
            )
        else:
            reason = "; ".join(f"{a}: {_KIND_WORDS[k]} changed" for a, k in changes.items())
            title = f"{fn.name}{where} was traced {fn.traces} times" + (
                f" ({reason})" if reason else ""
            )
        evidence: dict[str, Any] = {
            "function": fn.name,
            "location": fn.location,
            "traces": fn.traces,
            "tf_function_objects": fn.instances,
            **({"keras_models": fn.models} if fn.models else {}),
            "calls_from_eager_code": fn.calls,
            "trace_seconds": round(fn.trace_s, 3),
            "call_seconds": round(fn.call_s, 3),
        }
        if fn.calls and fn.call_s > 0:
            evidence["tracing_share_of_call_time"] = round(min(fn.trace_s / fn.call_s, 1.0), 3)
        if run_s:
            evidence["avoidable_tracing_share_of_run"] = round(gain or 0.0, 3)
        if changes:
            evidence["changed_arguments"] = {a: _KIND_WORDS[k] for a, k in changes.items()}
        evidence["reduce_retracing"] = fn.reduce_retracing
        if fn.jit_compile:
            evidence["jit_compile"] = True
        if fn.library:
            evidence["defined_by"] = "Keras/TensorFlow (location: the call that traced it)"
        if fn.signatures:
            evidence["first_traces"] = [_signature_row(s) for s in fn.signatures]
        if gain is None:
            severity = "medium"
        else:
            severity = "high" if gain >= 0.10 else "medium" if gain >= 0.01 else "low"
        return self.finding(
            title,
            severity=severity,
            evidence=evidence,
            fix=_fix(fn, changes, recreated),
            estimated_gain=(
                f"up to {avoidable:.2f} s of tracing saved"
                + (f" ({gain:.0%} of the run)" if gain is not None else "")
                + "; the GPU idles while TF traces"
            ),
            location=_cause_location(fn, changes),
            gain_value=gain,
        )


def _cause_location(fn: TracedFunction, changes: dict[str, str]) -> str | None:
    """Where the retraces come from: the call that passes the changing Python values
    (the line the fix changes) where only those changed and a caller is known; else the
    def (a shape or an object's change: the fix, an input signature, goes there)."""
    callers = [s.caller for s in fn.signatures if s.caller]
    if changes and set(changes.values()) == {"python"} and callers and not fn.library:
        return max(set(callers), key=callers.count)
    return fn.location


_TENSOR_TEXT = re.compile(r"(\w+)\[([^\]]*)\]")  # a plain tensor's "int32[None, 40]"


def _input_signature(fn: TracedFunction) -> str | None:
    """``tf.TensorSpec([None, 40], tf.int32), ...`` from the traces seen: each argument's
    dtype as traced, its dims that changed between traces as None (its shape None where
    its rank did), and its first dim None always: the batch, which an epoch's last
    batch makes smaller after the traces kept were seen (a fixed 32 there fails the
    program at the end of its first epoch); None where an argument is not a tensor (no
    input_signature then) or its dtype changed."""
    if not fn.signatures:
        return None
    names = [name for name, _ in fn.signatures[-1].args]
    specs = []
    for name in names:
        seen = [dict(sig.args).get(name) for sig in fn.signatures]
        parsed = [_TENSOR_TEXT.fullmatch(d) if d else None for d in seen]
        if any(m is None for m in parsed):
            return None
        matches = [m for m in parsed if m is not None]
        dtypes = {m.group(1) for m in matches}
        shapes = [tuple(x.strip() for x in m.group(2).split(",") if x.strip()) for m in matches]
        if len(dtypes) != 1:
            return None
        (dtype,) = dtypes
        if len({len(shape) for shape in shapes}) != 1:
            specs.append(f"tf.TensorSpec(None, tf.{dtype})")
            continue
        dims = [
            dim if i > 0 and len({shape[i] for shape in shapes}) == 1 and dim.isdigit() else "None"
            for i, dim in enumerate(shapes[-1])
        ]
        specs.append(f"tf.TensorSpec([{', '.join(dims)}], tf.{dtype})")
    return ", ".join(specs) if specs else None
