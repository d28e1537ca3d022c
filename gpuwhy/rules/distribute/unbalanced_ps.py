"""distribute.unbalanced-ps: one parameter server holds far more variables than the rest."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule

MiB = 1024 * 1024


class UnbalancedPs(Rule):
    """One parameter server holds far more variable bytes than the others.

    ## What it detects
    A ParameterServerStrategy whose variables, as it placed them, put at least
    `ratio` times the mean bytes per parameter server on one of them (and at least
    `min_bytes`). Medium; high from `high_ratio`, or where that server holds
    `high_share` of all the bytes (with two servers the ratio cannot pass 2). Keras 3
    layers cannot take the sharded variables a partitioner makes ('ShardedVariable'
    object has no attribute 'handle'): under Keras 3 the fix says to build the model
    with tf_keras (Keras 2) for the partitioner, or to split the large layer.

    ## Why is this slow?
    ParameterServerStrategy places each whole variable on one server, round-robin in
    creation order. One large variable (an embedding table, a wide dense kernel) then
    lands on one server, and every worker reads and updates it there each step: that
    server's network link and CPU serve most of the traffic while the others idle.

    ## Example
    ```python
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    ```

    Use instead:
    ```python
    strategy = tf.distribute.ParameterServerStrategy(
        resolver,
        variable_partitioner=tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=256 << 10, max_shards=num_ps))
    ```

    ## Options
    - `ratio`: the largest server's bytes over the mean per server that is unbalanced (1.5).
    - `high_ratio`: the ratio that is high (2.5).
    - `high_share`: the largest server's share of all the bytes that is high (0.8).
    - `min_bytes`: the largest server's bytes below which nothing is said (4 MiB).
    """

    id = "distribute.unbalanced-ps"
    severity = "medium"
    status = "stable"
    since = "0.3.0"
    needs = ("distribute",)
    options = {"ratio": 1.5, "high_ratio": 2.5, "high_share": 0.8, "min_bytes": 4 * MiB}
    question = "My parameter-server training is slow"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        distribute = facts.distribute
        assert distribute is not None  # in `needs`: never run without it
        if len(distribute.ps_bytes) < 2:
            return []
        placed = distribute.ps_bytes
        mean = sum(placed) / len(placed)
        largest = max(placed)
        if not mean or largest < options["min_bytes"] or largest / mean < options["ratio"]:
            return []
        index = placed.index(largest)
        ratio = largest / mean
        strategy = distribute.variable or "strategy"
        servers = len(placed)
        share = largest / sum(placed)
        high = ratio >= options["high_ratio"] or share >= options["high_share"]
        keras = facts.program.keras_version if facts.program is not None else None
        return [
            self.finding(
                f"Parameter server {index} holds {largest / MiB:.1f} MiB of variables, "
                f"{share:.0%} of all ({ratio:.1f}x the mean of the {servers} servers)",
                severity="high" if high else "medium",
                evidence={
                    "ps_bytes": list(placed),
                    "largest_ps": index,
                    "ratio_to_mean": round(ratio, 2),
                    "share_of_all": round(share, 3),
                    "keras": keras,
                },
                fix=_fix(strategy, servers, keras),
                estimated_gain=(
                    f"the busiest server's traffic down to about the mean (1/{ratio:.1f})"
                ),
            )
        ]


def _fix(strategy: str, servers: int, keras: str | None) -> str:
    partitioned = (
        f"{strategy} = tf.distribute.ParameterServerStrategy(\n"
        "    <cluster_resolver>,\n"
        "    variable_partitioner=tf.distribute.experimental.partitioners."
        f"MinSizePartitioner(\n        min_shard_bytes=256 << 10, max_shards={servers}))\n"
        "# or FixedShardsPartitioner(num_shards="
        f"{servers}): each large variable split across every server"
    )
    if keras is None or not keras.startswith(("3", "4")):
        return partitioned
    return (
        "# Keras 3 layers cannot use partitioned (sharded) variables: build the model with\n"
        "# tf_keras (Keras 2) to partition them: pip install tf_keras, then run with\n"
        "# TF_USE_LEGACY_KERAS=1 (tf.keras is then tf_keras) and\n"
        + partitioned
        + "\n# or, staying on Keras 3, split the large layer (an embedding table as several\n"
        f"# smaller ones): whole variables are placed round-robin over the {servers} servers"
    )
