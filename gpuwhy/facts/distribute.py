"""Section ``distribute``: the tf.distribute strategy a watched run made, what it
all-reduces each step and how its datasets feed the replicas.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReducedValue:
    """One value the strategy all-reduces each step: a variable's gradient (or a pack of
    several), in the dtype actually sent."""

    name: str  # the variable it updates ("dense/kernel"), or the reducing op's name
    shape: tuple[int | None, ...] = ()
    dtype: str = "float32"  # as sent (a mixed-precision policy may send float16)
    bytes: int = 0  # per replica, per step


@dataclass(frozen=True)
class DistributedInput:
    """One dataset a loop distributed with the strategy (Keras fit does it too)."""

    how: str  # experimental_distribute_dataset | distribute_datasets_from_function
    global_batch: int | None = None  # the last batch its chain applies
    location: str | None = None  # file:line of that batch call
    auto_shard: str | None = None  # the policy its options ask for: AUTO, FILE, DATA, OFF
    written: str | None = None  # the batch call as written there: "ds.batch(64)"
    # its size names num_replicas_in_sync (directly or through the names it is computed
    # from); None where the source does not tell (a size from an argument or a config)
    scaled: bool | None = None
    # across workers (a cluster of two or more): what TF's auto-shard rewrite does to it
    shard_applied: str | None = None  # FILE, DATA, OFF, HINT (None: one worker, or unread)
    shard_reason: str | None = None  # why AUTO fell back to DATA, in TF's words
    shard_error: str | None = None  # FILE asked for where TF cannot apply it: its error
    shard_files: int | None = None  # FILE: the files the workers divide
    sharded_in_code: bool = False  # the pipeline shards itself (ds.shard, input_context)
    # how: "shard()" (anywhere in it, an interleave's function too) or "input_pipeline_id"
    # (its dataset function reads it: files or records sliced, a filter, by pipeline)
    sharded_by: str | None = None
    # what this worker's pipeline reads, to compare workers (gpuwhy merge): a digest of
    # its sources and selections (None: a generator, unknowable), and its files
    reads_digest: str | None = None
    read_files: tuple[str, ...] = ()
    repeated_work: tuple[str, ...] = ()  # DATA: stages every worker runs on all the data
    repeated_heavy: bool = False  # ... and one of them reads files, decodes or runs Python
    shuffled: bool = False  # the pipeline shuffles (workers reading it all see other orders)
    source: str | None = None  # the pipeline's source as written: "tf.data.Dataset.from_..."
    source_location: str | None = None


@dataclass(frozen=True)
class DistributeFacts:
    """Section ``distribute``: the tf.distribute strategy the program made, how it
    reduces across devices, and how its loops feed the replicas."""

    strategy: str  # class name: MirroredStrategy, MultiWorkerMirroredStrategy ...
    replicas: int  # num_replicas_in_sync
    devices: tuple[str, ...] = ()
    cross_device: str | None = None  # the cross-device ops class (NcclAllReduce ...)
    cross_device_why: str | None = None  # who chose it: given to the strategy, TF's default
    communication: str | None = None  # collective implementation asked for (AUTO, RING, NCCL)
    task_type: str | None = None  # this process's task in the cluster
    task_index: int | None = None
    workers: int = 0  # workers (and chief) in the cluster spec
    parameter_servers: int = 0
    strategies: int = 1  # strategies the program made (the one with most replicas is here)
    runs: int = 0  # strategy.run calls (a custom loop's steps)
    run_function: str | None = None  # the function strategy.run was given: "train_step"
    run_args: int | None = None  # how many positional args it was given
    inputs: tuple[DistributedInput, ...] = ()
    scaled_by_replicas: bool | None = None  # the script's code names num_replicas_in_sync
    variable: str | None = None  # the name the script gives the strategy: "strategy"
    # -- what crosses devices each step (all-reduce of the gradients) ------------------
    reduced: tuple[ReducedValue, ...] = ()  # largest first (capped; totals below are whole)
    reduced_values: int = 0  # values all-reduced per step
    reduced_bytes: int | None = None  # per step, all values, in the dtype sent
    link: str | None = None  # what the all-reduce crosses: NVLink, PCIe, network, host memory
    link_source: str | None = None  # "NVML topology" (measured) or "predicted: why"
    link_gb_per_s: float | None = None  # the link's bandwidth used for the expectation
    allreduce_expected_s: float | None = None  # predicted per step (ring: 2(N-1)/N x bytes / bw)
    # measured where TF lets it be: seconds per step inside collective/all-reduce ops
    # (including any wait for a late peer), their share of the step, and how
    collective_step_s: float | None = None
    collective_share: float | None = None
    collective_measured_by: str | None = None
    collective_wait_s: float | None = None  # of collective_step_s: replicas of this process
    # entering the collective apart (a late peer), where they can be told apart
    # ParameterServerStrategy: variable bytes held by each parameter server, by index
    ps_bytes: tuple[int, ...] = ()
