"""distribute.undistributed-input: strategy.run fed from a dataset never distributed."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule


class UndistributedInput(Rule):
    """A custom loop calls `strategy.run` on batches of a dataset it never distributed.

    ## What it detects
    The program made a strategy of two or more replicas and ran `strategy.run` for at
    least `min_runs` steps (called from Python that often, or traced into a
    `tf.function` the steps call), but never distributed a dataset
    (`strategy.experimental_distribute_dataset` or `distribute_datasets_from_function`,
    which Keras `fit` also calls). Every replica is then given the same whole batch.
    High.

    ## Why is this slow?
    `strategy.run(step, args=(x, y))` with plain tensors hands each replica the same
    `x` and `y`: N GPUs compute the same batch N times, and the gradients averaged over
    them are one batch's. Training is no faster than on one GPU (slower, with the
    copies and the all-reduce), and each batch is paid for N times.

    ## Example
    ```python
    for x, y in ds:                                   # a plain dataset
        strategy.run(train_step, args=(x, y))         # every replica: the whole batch
    ```

    Use instead:
    ```python
    dist_ds = strategy.experimental_distribute_dataset(ds)
    for x, y in dist_ds:                              # each replica: its share
        strategy.run(train_step, args=(x, y))
    ```

    ## Options
    - `min_runs`: steps that make a loop (3).
    """

    id = "distribute.undistributed-input"
    severity = "high"
    status = "stable"
    since = "0.3.0"
    needs = ("distribute",)
    options = {"min_runs": 3}
    question = "I added GPUs and training is no faster"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        distribute = facts.distribute
        assert distribute is not None  # in `needs`: never run without it
        if distribute.replicas < 2 or distribute.inputs:
            return []
        steps = facts.steps.count if facts.steps is not None else 0
        # strategy.run inside a tf.function runs (in Python) once per trace: then the
        # steps say how often it ran
        if distribute.runs < 1 or max(distribute.runs, steps) < options["min_runs"]:
            return []
        strategy = distribute.variable or "<strategy>"
        return [
            self.finding(
                f"{strategy}.run is fed batches of a dataset that was never distributed: "
                f"each of the {distribute.replicas} replicas computes the same whole batch, "
                f"{max(distribute.runs, steps):,} steps",
                evidence={
                    "strategy": distribute.strategy,
                    "replicas": distribute.replicas,
                    "strategy_run_calls_from_python": distribute.runs,
                    "steps": steps,
                    "distributed_datasets": 0,
                },
                fix=_fix(strategy, distribute.run_function, distribute.run_args),
                estimated_gain=f"up to x{distribute.replicas}: each replica computes its own share",
            )
        ]


def _fix(strategy: str, step: str | None, args: int | None) -> str:
    """The loop over the distributed dataset, calling the step function as the program
    calls it (its name, and as many arguments as strategy.run was given)."""
    step = step if step and step.isidentifier() else "<step_fn>"
    if args == 2:
        loop, passed = "for x, y in dist_ds:", "args=(x, y)"
    else:  # one argument (a tuple of features and labels, as TF's tutorials pass it)
        loop, passed = "for batch in dist_ds:", "args=(batch,)"
    return "\n".join(
        [
            f"dist_ds = {strategy}.experimental_distribute_dataset(<dataset>)",
            f"{loop}                 # each replica: its share",
            f"    {strategy}.run({step}, {passed})",
            "# the loop and strategy.run where they are now (inside your @tf.function step,",
            "# if it calls strategy.run); per-replica losses: reduce with",
            f"# {strategy}.reduce(tf.distribute.ReduceOp.SUM, ..., axis=None)",
        ]
    )
