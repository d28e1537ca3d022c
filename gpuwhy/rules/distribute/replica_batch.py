"""distribute.replica-batch: the global batch was not scaled by the replicas."""

from __future__ import annotations

import ast
from typing import Any

from gpuwhy.facts import DistributedInput, Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule
from gpuwhy.source_calls import batch_size_argument


class ReplicaBatch(Rule):
    """Each replica gets a small batch: the global batch was not scaled by
    `strategy.num_replicas_in_sync`.

    ## What it detects
    A `tf.distribute` strategy with two or more replicas splits each global batch among
    them. Where the batch a distributed loop takes (Keras `fit` distributes its dataset
    too; given arrays, `fit(x, y, batch_size=...)` is the batch) leaves each replica fewer than `min_per_replica` examples, and its size is not
    computed from `num_replicas_in_sync` (read from the batch call and the assignments
    of the names it uses; where the size comes from elsewhere, from any mention in the
    code that batched), the batch size is the single-device one, divided. Medium; high below `high_below` per replica. The fix scales the batch
    call as written.

    ## Why is this slow?
    A replica's step costs about the same kernel launches and the same all-reduce of
    every gradient whatever its batch: with a small share of the batch each GPU runs
    short kernels and spends its step launching them and waiting for the all-reduce.
    More GPUs then make each one less busy, and training no faster; with the learning
    rate tuned for the global batch, the model also trains differently than intended.

    ## Example
    ```python
    strategy = tf.distribute.MirroredStrategy()            # 8 GPUs
    ds = ds.batch(64)                                       # 8 examples per GPU
    ```

    Use instead:
    ```python
    ds = ds.batch(64 * strategy.num_replicas_in_sync)       # 64 per GPU, 512 a step
    # and scale the learning rate with the global batch
    ```

    ## Options
    - `min_per_replica`: examples per replica below which the batch is too small (64: a
      tutorial's single-device batch of 64, split over two replicas, is under it).
    - `high_below`: per-replica batch below which the finding is high (8).
    """

    id = "distribute.replica-batch"
    severity = "medium"
    status = "stable"
    since = "0.3.0"
    needs = ("distribute",)
    options = {"min_per_replica": 64, "high_below": 8}
    question = "I added GPUs and training is no faster"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        distribute = facts.distribute
        assert distribute is not None  # in `needs`: never run without it
        if distribute.replicas < 2:
            return []
        # one cause, one finding: calls that batch by the same size (the train and the
        # eval dataset both .batch(BATCH_SIZE)) are one unscaled BATCH_SIZE
        causes: dict[tuple[str, int], list[DistributedInput]] = {}
        for given in distribute.inputs:
            if not given.global_batch:
                continue
            # the batch call's own size, where the source shows it; else any mention of
            # num_replicas_in_sync in the code that batched
            scaled = given.scaled if given.scaled is not None else distribute.scaled_by_replicas
            if scaled or given.global_batch / distribute.replicas >= options["min_per_replica"]:
                continue
            causes.setdefault((_size_text(given), given.global_batch), []).append(given)
        strategy = distribute.variable or "<strategy>"
        findings = []
        for (_, batch), calls in causes.items():
            per_replica = batch / distribute.replicas
            where = [given.location for given in calls]
            findings.append(
                self.finding(
                    f"Each of the {distribute.replicas} replicas gets {per_replica:g} examples "
                    f"a step: the global batch of {batch} was not scaled by "
                    f"{strategy}.num_replicas_in_sync"
                    + (f" ({len(calls)} datasets batched by it)" if len(calls) > 1 else ""),
                    severity="high" if per_replica < options["high_below"] else "medium",
                    evidence={
                        "strategy": distribute.strategy,
                        "replicas": distribute.replicas,
                        "global_batch": batch,
                        "per_replica_batch": per_replica,
                        "batched_at": where[0] if len(where) == 1 else where,
                        "cross_device": distribute.cross_device,
                    },
                    fix=_fix(calls, strategy),
                    estimated_gain=(
                        f"each replica's share x{distribute.replicas}: the same launches and "
                        "all-reduce per step carry that much more work"
                    ),
                    location=calls[0].location,
                )
            )
        return findings


def _size_text(given: DistributedInput) -> str:
    """The batch size as the call writes it ("BATCH_SIZE", "64"); the call's place where
    it cannot be read (then each call is its own cause)."""

    try:
        node = ast.parse((given.written or "").lstrip("."), mode="eval").body
    except SyntaxError:
        node = None
    size = batch_size_argument(node) if isinstance(node, ast.Call) else None
    return ast.unparse(size) if size is not None else f"at {given.location}"


def _fix(calls: list[DistributedInput], strategy: str) -> str:
    scaled = f"{strategy}.num_replicas_in_sync"
    lines = []
    for given in calls:
        rewritten = _scaled_call(given.written, scaled) if given.written else None
        if rewritten is not None:
            lines += [f"# {given.location}: in place of: {given.written}", rewritten]
        else:
            lines.append(f".batch({given.global_batch} * {scaled})")
    lines.append("# and scale the learning rate with the global batch")
    return "\n".join(lines)


def _scaled_call(written: str, scaled: str) -> str | None:
    """``written`` (a ``.batch(...)`` or ``model.fit(...)`` call) with its batch size
    multiplied by ``scaled``; a fit without ``batch_size`` gets Keras' default 32 times
    it. None where the call cannot be read."""

    head, dot, call = ("", "", written) if not written.startswith(".") else ("", ".", written[1:])
    try:
        tree = ast.parse(call, mode="eval")
    except SyntaxError:
        return None
    node = tree.body
    if not isinstance(node, ast.Call):
        return None
    times = ast.parse(scaled, mode="eval").body
    size = batch_size_argument(node)
    fit = isinstance(node.func, ast.Attribute) and node.func.attr == "fit"
    if size is None:
        if not fit:
            return None
        size = ast.Constant(32)
        node.keywords.append(ast.keyword(arg="batch_size", value=size))
    bigger = ast.BinOp(left=size, op=ast.Mult(), right=times)
    for keyword in node.keywords:
        if keyword.value is size:
            keyword.value = bigger
    node.args = [bigger if arg is size else arg for arg in node.args]
    return head + dot + ast.unparse(node)
