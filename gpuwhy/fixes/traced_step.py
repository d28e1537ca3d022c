"""The code of a "run the step as one graph" fix, from what the run read of the program.

Not a rule. Two things make the usual ``@tf.function(jit_compile=True)`` advice break
when pasted, and both are read here from the facts:

- Under a ``tf.distribute`` strategy with several replicas, XLA cannot compile a step
  whose variables sit on the other replicas' devices: ``jit_compile=True`` on the
  distributed step, on the replica function given to ``strategy.run``, or
  ``model.compile(jit_compile=True)`` all fail with "Trying to access resource ...
  located in device" (run on a 2-replica MirroredStrategy over two logical CPUs, and
  TF's XLA known issues). Keras turns its own auto XLA off under a strategy for this.
  A ``tf.function(jit_compile=True)`` that only computes the loss and the gradients,
  called from the replica function with ``apply_gradients`` outside it, did run.
- A ``tf.function`` reads the Python objects its code closes over once, when it is
  traced. Where the program re-creates one in a loop (metrics made anew each epoch),
  the traced step keeps updating the first object and the new ones stay empty: the
  fix says to create them once and ``reset_state()`` them, or to pass them as arguments.
"""

from __future__ import annotations

from gpuwhy.facts import Facts, StepCode

XLA = "@tf.function(jit_compile=True)   # plain @tf.function if XLA rejects an op"


def replicas(facts: Facts) -> int:
    """Replicas of the program's tf.distribute strategy (1 without one)."""
    return facts.distribute.replicas if facts.distribute is not None else 1


def decorator(facts: Facts) -> list[str]:
    """The decorator to paste: XLA where it runs, plain ``tf.function`` under a strategy."""
    if replicas(facts) <= 1:
        return [XLA]
    strategy = facts.distribute.strategy if facts.distribute is not None else "the strategy"
    return [
        f"@tf.function   # not jit_compile=True under {strategy} ({replicas(facts)} replicas):",
        "#   XLA cannot reach the variables on the other replicas' devices and fails",
    ]


def xla_under_strategy(facts: Facts) -> list[str]:
    """Where XLA still runs under a strategy: the gradient computation, on its own."""
    return [
        "# XLA under the strategy: compile only the loss and gradients, in a function the",
        "# replica step calls, and call optimizer.apply_gradients outside it:",
        "#   @tf.function(jit_compile=True)",
        "#   def compute_gradients(x, y):  # returns loss, tape.gradient(loss, variables)",
        "# (Keras fit: model.compile(jit_compile=True) fails there the same way: leave it out)",
    ]


def wrap(code: StepCode | None, facts: Facts, lines: list[str] | None = None) -> list[str]:
    """Put the step's code in a ``tf.function``, named as the program names it; under
    ``lines`` as the decorator where given."""
    lines = decorator(facts) if lines is None else lines
    if code is None or code.signature is None:
        return [
            "# run the code around them as one graph:",
            *lines,
            "def <your train step>(x, y):",
            "    ...                          # the same body",
        ]
    if code.function is not None:
        return [f"# {code.location}: above `{code.signature}`", *lines]
    body = [f"    {line}" if line else "" for line in code.body] or [
        "    ...  # the loop's body, returning what it computes: a Python list, counter or",
        "    #      object it changes is changed once, at the trace; change it after the call",
    ]
    whole = not code.part
    what = (
        "the body of this loop" if whole else "the statements of this loop's body that issue them"
    )
    becomes = "the loop's body becomes" if whole else f"{_lines(code)} of the loop become"
    return [
        f"# {code.location}: {what} as one function, defined once before the"
        f" loop at {code.before or code.location}:",
        *lines,
        code.signature,
        *body,
        f"# and {becomes}: {code.call or _call(code.signature)}",
    ]


def _lines(code: StepCode) -> str:
    """``lines 15-19`` of the statements the function takes."""
    if code.moved is None:
        return "those lines"
    first, last = code.moved
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _call(signature: str) -> str:
    """``train_step(x, y)`` for ``def train_step(x, y):``."""
    return signature.removeprefix("def ").removesuffix(":")


def rebound(code: StepCode | None) -> list[str]:
    """Objects the step reads that the program creates anew in a loop: once, instead."""
    if code is None or not code.rebound:
        return []
    lines: list[str] = []
    metrics = [r for r in code.rebound if r.metric]
    others = [r for r in code.rebound if not r.metric]
    if metrics:
        names = ", ".join(r.name for r in metrics)
        where = ", ".join(sorted({r.location for r in metrics}))
        loop = metrics[0].loop
        lines += [
            f"# {names}: made anew by the loop at {loop} ({where});",
            "# a tf.function keeps the first ones (the later ones stay empty): make them",
            "# once, before that loop, and empty them at the top of each pass instead:",
            *(f"{r.name}.reset_state()" for r in metrics),
        ]
    if others:
        names = ", ".join(r.name for r in others)
        where = ", ".join(sorted({r.location for r in others}))
        lines += [
            f"# {names}: made anew in a loop ({where}); a tf.function keeps the first one:",
            "# pass it to the function as an argument instead (one trace per new object)",
        ]
    return lines
