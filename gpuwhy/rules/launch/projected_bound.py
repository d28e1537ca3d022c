"""launch.projected-bound: on the target GPU (projected), kernel launches take the step."""

from __future__ import annotations

import re
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, ProjectionFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import traced_step
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule
from gpuwhy.source_calls import written_call


class ProjectedLaunchBound(Rule):
    """On the GPU named with `--target`, most of the projected step is kernel launches:
    kernels too small to keep the GPU busy, one after another.

    ## What it detects
    The projection of the training step (`gpuwhy run --target A100`) costs every GPU
    kernel other than the matmuls and convolutions by the bytes it moves and its fixed
    cost per kernel: without XLA the larger of its bytes and one launch (TF's executor
    issues one op after another, 2.5-6 µs each); under XLA each fused kernel's start and
    drain on top of its work, by the target's generation (1.6 µs on Hopper and
    Blackwell, measured on an H100; 2.5 µs before). This fixed cost per step is what
    makes throughput fall at small batches. Where the kernels whose fixed cost
    outweighs their bytes take at least `min_share` of the projected step, the step on
    that GPU would mostly wait on kernel launches. Medium: a projection, said as one.
    Low where the cost model could not size the step's work (matmuls of unknown size
    left out, or more than a fifth of its kernels counted as launches only: a dataset
    traced with unknown shapes): the launches' share is then an upper bound, and the
    title says so.

    ## Why is this slow?
    Each kernel costs a few microseconds to launch whatever it computes. A model of
    small layers, or a step of many elementwise ops on small tensors (optimizer updates
    of many small variables, a small batch), runs kernels shorter than their launch: a
    faster GPU then makes the step no faster, and the GPU's utilisation stays low.

    ## Example
    ```python
    @tf.function
    def train_step(x, y):          # 3,000 kernels of a few µs each on a batch of 16
        ...
    ```

    Use instead:
    ```python
    @tf.function(jit_compile=True)  # XLA fuses the small ops into far fewer kernels
    def train_step(x, y):
        ...
    # and a larger batch: the same launches then do more work each
    ```
    Keras: `model.compile(..., jit_compile=True)`. Not for a model whose LSTM/GRU layers
    cuDNN runs on the GPU (Keras turns XLA off for it there): its timesteps run one
    after another, and only a larger batch gives each launch more work. Under a
    `tf.distribute` strategy with several replicas XLA cannot compile the whole step (it
    fails reaching the other replicas' variables): the fix then compiles only the
    gradient computation. A function that loops over a dataset inside (an epoch in one
    call) holds dataset ops, which XLA does not compile: the fix compiles the step it
    runs.

    Where the launches do not take the step but the host's own work does (what
    `projection/host.py` measured here: the time between calls of the step's function
    and each call's own set-up), at least `min_share` of the projected step and more
    than the GPU's part, the GPU would wait for its host each step: then the fix runs
    several steps per call (Keras: `steps_per_execution`), paying the host's cost of a
    call once for many batches (Keras then calls a callback's `on_train_batch_begin`
    and `on_train_batch_end` once a call, not once a batch: a callback that acts per
    batch sees every 32nd; the fix says so). Not where the steps would wait for their input, nor
    where the pipeline runs Python: the host's work measured here then holds the time
    the step waited for the GIL the pipeline's Python held (the input's, not the host's).

    ## Options
    - `min_share`: share of the projected step spent in launch-bound kernels, or in the
      host's own work, that makes the finding (0.5).
    """

    id = "launch.projected-bound"
    measured_thresholds = {"min_share": "floor"}
    severity = "medium"
    status = "stable"
    since = "0.2.0"
    needs = ("projection",)
    options = {"min_share": 0.5}
    question = "Will my model keep the GPU busy?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        projection = derived(facts).projection
        assert projection is not None  # in `needs`: never run without it
        if projection.step_s <= 0:
            return []
        share = projection.launch_bound_s / projection.step_s
        if share < options["min_share"]:
            return self._host_bound(facts, options)
        title = (
            f"On {projection.gpu} (projected), {share:.0%} of the step is kernel launches: "
            f"{projection.launch_bound_kernels:,} kernels of {projection.function} do less "
            "work than it takes to launch them"
        )
        unsized = _unsized(projection)
        if unsized:  # their work unknown: the launches' share is at most this
            title += f" (an upper bound: {unsized})"
        fix = []
        if projection.cudnn_rnn:
            # Keras turns XLA off on a GPU for a model with a cuDNN LSTM/GRU
            fix.append(
                f"# cuDNN runs {', '.join(projection.cudnn_rnn)} one timestep after another "
                "(a few kernels each): XLA is not an option for it"
            )
        elif not projection.jit_compile and traced_step.replicas(facts) > 1:
            fix += traced_step.xla_under_strategy(facts)  # XLA on the whole step fails there
        elif not projection.jit_compile and _iterates_a_dataset(facts, projection.function):
            step = _step_inside(facts, projection.function)
            fix += [
                f"# XLA fuses the small ops into far fewer kernels, but {projection.function}",
                "# iterates a dataset and XLA compiles no dataset op (jit_compile=True on it",
                "# fails: no registered OpKernel for XLA): compile the step it runs instead,",
                f"@tf.function(jit_compile=True)   # on {step}",
            ]
        elif not projection.jit_compile:
            fix += [
                "# XLA fuses the small ops into far fewer kernels:",
                f"@tf.function(jit_compile=True)   # on {projection.function}; Keras: "
                f"{_fitted_name(projection.function)}.compile(..., jit_compile=True)",
            ]
        if projection.jit_compile and not projection.cudnn_rnn:
            fix.append(
                f"# {projection.function} is already XLA-compiled on the GPU: fusion is done,"
            )
        batch = projection.batch
        fix.append(
            "# a larger batch: the same launches then do more work each"
            + (
                f" (batch {batch:,} -> {2 * batch:,} where memory allows; scale the "
                "learning rate with it)"
                if batch
                else " (where memory allows; scale the learning rate with it)"
            )
        )
        return [
            self.finding(
                title,
                evidence={
                    **_projected(projection),
                    "launch_bound_ms": round(projection.launch_bound_s * 1000, 3),
                    "launch_bound_kernels": projection.launch_bound_kernels,
                    "kernels": projection.kernels,
                    "jit_compile": projection.jit_compile,
                    "what": "a projection from the traced graph and the GPU's published "
                    f"peaks ({duration(projection.launch_bound_s)} of launches), not a "
                    "measurement",
                },
                fix="\n".join(fix),
                estimated_gain=f"projection: up to {share:.0%} of the GPU step",
                gain_value=round(share, 4),
                severity="low" if unsized else self.severity,
            )
        ]

    def _host_bound(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        """The host's own work, measured here, takes most of the projected step: the
        GPU would wait for the host (a small model at a small batch)."""
        projection = derived(facts).projection
        assert projection is not None
        device = projection.device_s
        host = projection.host_s
        if device is None or host <= device:
            return []
        if (projection.input_wait_fraction or 0.0) >= options["min_share"] / 2:
            return []  # the steps would wait for the input: input.projected-bound's
        if _python_input(facts):
            # the call's own cost measured here holds the time it waited for the GIL
            # while the pipeline's Python ran: the input's, not the host's own work
            return []
        share = 1 - device / projection.step_s  # of the step, the GPU without work
        if share < options["min_share"]:
            return []
        parts = []
        if projection.host_between_s is not None:
            parts.append(f"{duration(projection.host_between_s)} between its calls")
        if projection.call_overhead_s is not None:
            parts.append(f"{duration(projection.call_overhead_s)} in each call outside its ops")
        measured = f" ({' and '.join(parts)}, measured here)" if parts else " (measured here)"
        title = (
            f"On {projection.gpu} (projected), the GPU would wait for its host {share:.0%} "
            f"of the step: the host's own work takes {duration(host)} a step{measured}, "
            f"the GPU's {duration(device)} in {projection.function}"
        )
        fit = facts.steps is not None and facts.steps.source == "keras-fit"
        fix = (
            [
                f"{_fitted_name(projection.function)}.compile(..., steps_per_execution=32)"
                "   # 32 batches per call: the host's",
                "# cost of a call (fit's loop, callbacks, the call's set-up) paid once for 32;",
                "# Keras then calls the callbacks' on_train_batch_begin/end once a call: a",
                "# callback that acts per batch (logs, a learning rate per batch, stopping",
                "# on a batch's loss) sees every 32nd batch",
            ]
            if fit
            else [
                "# the host's cost of a step (the Python loop, the call's set-up) is paid per",
                "# call: run several steps in one call, the loop inside a tf.function",
                "@tf.function",
                "def train_steps(iterator, steps):",
                "    for _ in tf.range(steps):",
                "        train_step(*next(iterator))",
            ]
        )
        batch = projection.batch
        fix.append(
            "# and a larger batch: each call then does more work"
            + (f" (batch {batch:,} -> {4 * batch:,}; scale the learning rate)" if batch else "")
        )
        return [
            self.finding(
                title,
                evidence={
                    **_projected(projection),
                    "host_ms": round(host * 1000, 3),
                    "host_between_calls_ms": _ms(projection.host_between_s),
                    "call_overhead_ms": _ms(projection.call_overhead_s),
                    "device_ms": round(device * 1000, 3),
                    "what": "the host's work measured on this machine, costed on the "
                    "target's host; the GPU's part a projection from the traced graph",
                },
                fix="\n".join(fix),
                estimated_gain=f"projection: up to {share:.0%} of the GPU step",
                gain_value=round(share, 4),
                location=_location(projection.function),
            )
        ]


def _projected(projection: ProjectionFacts) -> dict[str, Any]:
    """The evidence both kinds give: the target, the function, the projected step."""
    return {
        "gpu": projection.gpu,
        "function": projection.function,
        "projected_step_ms": round(projection.step_s * 1000, 3),
    }


def _python_input(facts: Facts) -> bool:
    """The steps' pipeline runs Python (py_function, numpy_function, a generator)."""
    pipeline = derived(facts).steps_pipeline
    return pipeline is not None and any(s.python for s in pipeline.stages)


# ops of a dataset or its iterator: a graph with one XLA cannot compile (TF registers no
# XLA kernel for them), as a tf.function that loops over a dataset inside has
DATASET_OPS = re.compile(r"Dataset|Iterator|^Optional(GetValue|HasValue)$")


def _iterates_a_dataset(facts: Facts, function: str) -> bool:
    """The projected function's graph holds dataset or iterator ops (placement's op
    groups, by function): a loop over a dataset inside it (the distribute tutorial's
    ``distributed_train_epoch``), where jit_compile=True on it raised
    InvalidArgumentError (no OptionsDataset kernel for XLA_CPU_JIT)."""
    placement = facts.placement
    name = _name(function)
    traced = facts.tracing.functions if facts.tracing is not None else ()
    if placement is None or any(f.library and f.name == name for f in traced):
        return False  # Keras' step reads its iterator and compiles its inner step itself
    return any(
        function in group.functions and DATASET_OPS.search(group.op) for group in placement.groups
    )


def _step_inside(facts: Facts, function: str) -> str:
    """The step the dataset loop runs: the program's own tf.function, other than
    ``function``, that trains (placement's audit says which) and is called most often
    (the distribute tutorial's ``distributed_train_step``, not its eval step), else a
    description of it."""
    others = [
        f
        for f in (facts.tracing.functions if facts.tracing is not None else ())
        if not f.library and f.name != _name(function) and (f.calls or f.inside)
    ]
    placement = facts.placement
    trains = {f.name for f in placement.functions if f.trains} if placement is not None else set()
    best = max(others, key=lambda f: (f.name in trains, f.calls), default=None)
    if best is None:
        return "the function that runs one step (the one strategy.run calls)"
    return f"{best.name} ({best.location})" if best.location else best.name


def _name(function: str) -> str:
    """``train_step`` of the projected function's label ``train_step (train.py:40)``."""
    return function.split(" (")[0]


def _location(function: str) -> str | None:
    """file:line of ``name (file:line)``, the projected function's label."""
    found = re.search(r"\(([^()]+:\d+)\)$", function)
    return found.group(1) if found else None


def _fitted_name(function: str) -> str:
    """The name the program calls ``fit`` on where the projected function was made
    (``vae`` of ``vae.fit(x, epochs=2)``): the compile line to paste is that model's.
    ``model`` where the line cannot be read or holds no such call."""
    site = _location(function)
    path, _, line = site.rpartition(":") if site else ("", "", "")
    call = written_call(path, int(line), "fit") if path and line.isdigit() else None
    owner = call.split(".fit(", 1)[0] if call and ".fit(" in call else ""
    return owner if owner and all(part.isidentifier() for part in owner.split(".")) else "model"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


# the share of the step's kernels of unknown size beyond which the launches' share is
# said to be an upper bound (each such kernel is counted as a launch alone)
UNSIZED_KERNELS_AT = 0.2


def _unsized(projection: ProjectionFacts) -> str | None:
    """What the cost model could not size, where it makes the launches' share an upper
    bound: matmuls left out (the step is longer), or many kernels counted as launches
    only (their work unknown: a generator's dataset traced with unknown shapes)."""
    parts = []
    if projection.tensor_ops_unsized:
        parts.append(
            f"{projection.tensor_ops_unsized} of {projection.tensor_ops} matmuls/convolutions "
            "of unknown size left out"
        )
    if projection.kernels and projection.kernels_unsized > UNSIZED_KERNELS_AT * projection.kernels:
        parts.append(
            f"{projection.kernels_unsized:,} of {projection.kernels:,} kernels of unknown size "
            "counted as launches only"
        )
    return "; ".join(parts) or None
