"""distribute.unbalanced-ps: one parameter server holds far more variables than the rest."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.rules.base import Finding, Rule

MiB = 1024 * 1024


class UnbalancedPs(Rule):
    """One parameter server holds far more variable bytes than the others.

    ## What it detects
    A ParameterServerStrategy whose variables, as it placed them, put at least
    `ratio` times the mean bytes per parameter server on one of them (and at least
    `min_bytes`). Medium; high from `high_ratio`.

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
    - `min_bytes`: the largest server's bytes below which nothing is said (4 MiB).
    """

    id = "distribute.unbalanced-ps"
    severity = "medium"
    status = "stable"
    since = "0.3.0"
    needs = ("distribute",)
    options = {"ratio": 1.5, "high_ratio": 2.5, "min_bytes": 4 * MiB}
    question = "My parameter-server training is slow"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        distribute = facts.distribute
        if distribute is None or len(distribute.ps_bytes) < 2:
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
        return [
            self.finding(
                f"Parameter server {index} holds {largest / MiB:.1f} MiB of variables, "
                f"{ratio:.1f}x the mean of the {servers} servers",
                severity="high" if ratio >= options["high_ratio"] else "medium",
                evidence={
                    "ps_bytes": list(placed),
                    "largest_ps": index,
                    "ratio_to_mean": round(ratio, 2),
                },
                fix=(
                    f"{strategy} = tf.distribute.ParameterServerStrategy(\n"
                    "    <cluster_resolver>,\n"
                    "    variable_partitioner=tf.distribute.experimental.partitioners."
                    f"MinSizePartitioner(\n        min_shard_bytes=256 << 10, max_shards={servers}))\n"
                    "# or FixedShardsPartitioner(num_shards="
                    f"{servers}): each large variable split across every server"
                ),
                estimated_gain=(
                    f"the busiest server's traffic down to about the mean (1/{ratio:.1f})"
                ),
            )
        ]
