"""launch.projected-bound: on the target GPU (projected), kernel launches take the step."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes import traced_step
from gpuwhy.formatting import duration
from gpuwhy.rules.base import Rule


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
    gradient computation.

    ## Options
    - `min_share`: share of the projected step spent in launch-bound kernels that makes
      the finding (0.5).
    """

    id = "launch.projected-bound"
    severity = "medium"
    status = "stable"
    since = "0.2.0"
    needs = ("projection",)
    options = {"min_share": 0.5}
    question = "Will my model keep the GPU busy?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        projection = facts.projection
        assert projection is not None  # in `needs`: never run without it
        if projection.step_s <= 0:
            return []
        share = projection.launch_bound_s / projection.step_s
        if share < options["min_share"]:
            return []
        title = (
            f"On {projection.gpu} (projected), {share:.0%} of the step is kernel launches: "
            f"{projection.launch_bound_kernels:,} kernels of {projection.function} do less "
            "work than it takes to launch them"
        )
        fix = []
        if projection.cudnn_rnn:
            # Keras turns XLA off on a GPU for a model with a cuDNN LSTM/GRU
            fix.append(
                f"# cuDNN runs {', '.join(projection.cudnn_rnn)} one timestep after another "
                "(a few kernels each): XLA is not an option for it"
            )
        elif not projection.jit_compile and traced_step.replicas(facts) > 1:
            fix += traced_step.xla_under_strategy(facts)  # XLA on the whole step fails there
        elif not projection.jit_compile:
            fix += [
                "# XLA fuses the small ops into far fewer kernels:",
                f"@tf.function(jit_compile=True)   # on {projection.function}; Keras: "
                "model.compile(..., jit_compile=True)",
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
                    "gpu": projection.gpu,
                    "function": projection.function,
                    "projected_step_ms": round(projection.step_s * 1000, 3),
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
            )
        ]
