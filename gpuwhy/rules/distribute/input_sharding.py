"""distribute.input-sharding: how the workers divide the data wastes input work or
duplicates examples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpuwhy.derived.worker_inputs import Compared, compare_inputs
from gpuwhy.facts import DistributedInput, DistributeFacts, Facts, WorkerInput
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule

POLICY = "tf.data.experimental.AutoShardPolicy"


class InputSharding(Rule):
    """The workers of a multi-worker strategy divide their input badly: every worker
    reads all the data, trains on the same examples, or gets no files.

    ## What it detects
    For each dataset a multi-worker strategy (two or more workers in the cluster)
    distributes, gpuwhy repeats TF's own auto-shard walk (grappler's `tf_auto_shard`) over
    the pipeline's graph and reports what it will do on every worker:
    - FILE sharding asked for, or chosen by AUTO, with fewer files than workers: TF
      stops with "Could not apply FILE based sharding" (high); files that do not divide
      evenly (one worker reads `uneven_at` times the files of another: medium).
    - DATA sharding (asked for, or AUTO's fallback when no file reader is found, with
      TF's reason): every worker reads and preprocesses the whole dataset and keeps
      1/N. Medium where the repeated stages read files, decode or run Python, or where
      this worker's steps waited `medium_wait` of their time for input (any repeated
      map: image augmentation in TF ops is costly too); high from `high_wait`; low
      otherwise (in-memory data, cheap stages, no wait).
    - OFF, or a `distribute_datasets_from_function` dataset that never selects its
      own share: no `shard()` anywhere in the pipeline (an interleave's function
      included) and a dataset function that never reads
      `input_context.input_pipeline_id` (to slice its files or records, or filter by
      it): every worker trains on the same examples (high; medium where a shuffle
      gives each worker another order).
    - Across workers (`gpuwhy merge`): each worker's record holds a digest of what its
      pipeline reads (its sources' file names and slices, and every shard, filter,
      skip and take with its arguments and predicate). Workers whose digests are
      equal read the same data whatever their code looks like (a pipeline id read
      only to seed a shuffle): the finding above, confirmed. Digests that differ are
      sharding (one worker's finding from its own view is then dropped); files read
      by two workers of a pipeline that does not shard them further are named
      (medium).

    ## Why is this slow?
    With DATA sharding the input work of the whole cluster is N times what it needs:
    each worker's CPUs decode and augment every image to throw N-1 of N away, so the
    input pipeline, not the GPUs, sets the step time as workers are added. With OFF
    (or an unsharded dataset function) the workers' gradients are computed on the
    same batches: N machines do one machine's learning per step. FILE with fewer
    files than workers cannot run at all, and uneven files make the worker with the
    most files the straggler every synchronous step waits for.

    ## Example
    ```python
    ds = tf.data.Dataset.from_tensor_slices(paths).map(load_and_decode)  # AUTO -> DATA
    dist_ds = strategy.experimental_distribute_dataset(ds.batch(global_batch))
    ```

    Use instead:
    ```python
    def dataset_fn(input_context):
        ds = tf.data.Dataset.from_tensor_slices(paths)
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        ds = ds.map(load_and_decode, num_parallel_calls=tf.data.AUTOTUNE)
        return ds.batch(input_context.get_per_replica_batch_size(global_batch)).prefetch(2)

    dist_ds = strategy.distribute_datasets_from_function(dataset_fn)
    # or write the data as (many more than N) TFRecord files: AUTO then shards by FILE
    ```

    ## Options
    - `uneven_at`: most files per worker over fewest at which uneven FILE sharding is
      medium (1.25).
    - `medium_wait`: this worker's input-wait share of its steps at which any repeated
      map under DATA sharding is medium (0.05).
    - `high_wait`: the share at which it is high (0.2).
    """

    id = "distribute.input-sharding"
    measured_thresholds = {"medium_wait": "floor", "high_wait": "floor"}
    severity = "high"
    status = "stable"
    since = "0.3.0"
    needs_any = ("distribute", "workers")
    options = {"uneven_at": 1.25, "medium_wait": 0.05, "high_wait": 0.2}
    question = "I added a second machine and training is no faster"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        if facts.workers is not None:
            return [f for c in compare_inputs(facts.workers.workers) if (f := _across(self, c))]
        distribute = facts.distribute
        if distribute is None or distribute.workers < 2:
            return []
        wait = facts.steps.input_wait_fraction if facts.steps is not None else None
        findings = []
        for given in distribute.inputs:
            found = _judge(self, distribute, given, wait, options)
            if found is not None:
                findings.append(found)
        return findings


def _judge(
    rule: InputSharding,
    distribute: DistributeFacts,
    given: DistributedInput,
    wait: float | None,
    options: dict[str, Any],
) -> Finding | None:
    workers = distribute.workers
    evidence: dict[str, Any] = {
        "strategy": distribute.strategy,
        "workers": workers,
        "distributed_by": given.how,
        "auto_shard_policy_asked": given.auto_shard or "AUTO",
        "auto_shard_policy_applied": given.shard_applied,
        "source": given.source,
        "source_at": given.source_location,
    }
    where = given.source_location or given.location
    if given.shard_error:
        return rule.finding(
            f"FILE sharding over {workers} workers is asked for but TF cannot apply it "
            f"({given.shard_error}): the iterator fails to start",
            severity="high",
            evidence=evidence | {"tensorflow_error": given.shard_error},
            fix=_policy_fix("DATA") + "\n" + _shard_early_fix(given, workers, distribute.variable),
            location=where,
        )
    if given.shard_applied == "FILE" and given.shard_files is not None:
        return _file_finding(rule, distribute, given, evidence, options, where)
    if given.shard_applied == "DATA":
        return _data_finding(rule, distribute, given, evidence, wait, options, where)
    if given.shard_applied == "OFF" and not given.sharded_in_code:
        how = (
            "its dataset function never calls shard() nor reads input_context.input_pipeline_id"
            if given.how == "distribute_datasets_from_function"
            else "auto-sharding is OFF and the pipeline never calls shard()"
        )
        severity = "medium" if given.shuffled else "high"
        order = (
            " (in other orders: the pipeline shuffles)" if given.shuffled else " in the same order"
        )
        return rule.finding(
            f"Each of the {workers} workers trains on the whole dataset{order}: {how}",
            severity=severity,
            evidence=evidence | {"sharded_in_code": False, "shuffled": given.shuffled},
            fix=_shard_early_fix(given, distribute.workers, distribute.variable),
            estimated_gain=f"x{workers} examples per step: each worker learns from its own share",
            gain_value=round((workers - 1) / workers, 3),
            location=where,
        )
    return None


def _file_finding(
    rule: InputSharding,
    distribute: DistributeFacts,
    given: DistributedInput,
    evidence: dict[str, Any],
    options: dict[str, Any],
    where: str | None,
) -> Finding | None:
    workers, files = distribute.workers, given.shard_files or 0
    evidence = evidence | {"files": files}
    if files < workers:
        return rule.finding(
            f"FILE sharding gives {workers} workers {files} file(s): TF stops with "
            "'Could not apply FILE based sharding' (every worker needs one)",
            severity="high",
            evidence=evidence,
            fix="\n".join(
                [
                    f"# write the data as {workers * 8} or more files (a multiple of {workers}),",
                    "# or shard by element:",
                    _policy_fix("DATA"),
                ]
            ),
            location=where,
        )
    most, fewest = math.ceil(files / workers), files // workers
    if most / fewest < options["uneven_at"]:
        return None
    return rule.finding(
        f"{files} files over {workers} workers: some read {most}, others {fewest} "
        f"(x{most / fewest:.2g}), and every synchronous step waits for the slowest",
        severity="medium",
        evidence=evidence | {"most_files_per_worker": most, "fewest_files_per_worker": fewest},
        fix=f"# write the data as a multiple of {workers} files of similar size "
        f"({workers * max(4, most)} files: {max(4, most)} per worker)",
        estimated_gain=f"up to {1 - fewest / most:.0%} less time per epoch on the slowest worker",
        gain_value=round(1 - fewest / most, 3),
        location=where,
    )


def _data_finding(
    rule: InputSharding,
    distribute: DistributeFacts,
    given: DistributedInput,
    evidence: dict[str, Any],
    wait: float | None,
    options: dict[str, Any],
    where: str | None,
) -> Finding:
    workers = distribute.workers
    why = (
        f"AUTO fell back to DATA ({given.shard_reason})"
        if given.shard_reason
        else "DATA sharding was asked for"
    )
    waited = wait is not None and wait >= options["medium_wait"]
    if (given.repeated_heavy or given.repeated_work) and wait and wait >= options["high_wait"]:
        severity = "high"
    elif given.repeated_heavy or (given.repeated_work and waited):
        severity = "medium"
    else:
        severity = "low"
    evidence = evidence | {
        "stages_every_worker_runs_on_all_data": list(given.repeated_work),
        "this_worker_input_wait_percent": None if wait is None else round(100 * wait, 1),
    }
    if given.shard_reason:
        evidence["why_not_by_file"] = given.shard_reason  # TF's own reason, from its walk
    work = (
        f", {', '.join(given.repeated_work[:3])} included"
        if given.repeated_work
        else " (only in-memory slices: cheap)"
    )
    return rule.finding(
        f"Every one of the {workers} workers reads the whole dataset and keeps 1/{workers}: "
        f"{why}{work}",
        severity=severity,
        evidence=evidence,
        fix=_shard_early_fix(given, workers, distribute.variable),
        estimated_gain=f"each worker's input work / {workers}",
        gain_value=round((workers - 1) / workers * (wait or 0.0), 3),
        location=where,
    )


def _policy_fix(policy: str) -> str:
    return "\n".join(
        [
            "options = tf.data.Options()",
            f"options.experimental_distribute.auto_shard_policy = {POLICY}.{policy}",
            "<dataset> = <dataset>.with_options(options)",
        ]
    )


def _shard_early_fix(
    given: DistributedInput | WorkerInput, workers: int, variable: str | None
) -> str:
    """Shard right after the source, before any per-element work, and turn the
    automatic sharding off so that TF does not shard again."""
    strategy = variable or "<strategy>"
    source = given.source or "<source dataset>"
    if given.how == "distribute_datasets_from_function":
        lines = [f"# in the dataset function, right after {source}:"]
        if given.source_location:
            lines[0] = f"# {given.source_location}: in the dataset function, after {source}:"
        lines.append(
            "ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)"
        )
        return "\n".join(lines)
    lines = []
    if given.source_location and given.source:
        lines.append(f"# {given.source_location}: in place of: {source}")
    lines += [
        f"{source}.shard({workers}, {strategy}.cluster_resolver.task_id)",
        "# each worker reads its own share from the start; tell TF not to shard again:",
        _policy_fix("OFF"),
    ]
    return "\n".join(lines)


# -- across workers (gpuwhy merge) ------------------------------------------------------


def _across(rule: InputSharding, compared: Compared) -> Finding | None:
    """The finding the comparison of the workers' pipelines holds, if any."""
    first = compared.inputs[0]
    count = len(compared.workers)
    evidence: dict[str, Any] = {
        "workers": list(compared.workers),
        "distributed_by": compared.how,
        "source": first.source,
        "source_at": first.source_location,
        "compared": "what each worker's pipeline reads (sources, shard/filter/skip/take)",
        "sharded_by": sorted({i.sharded_by for i in compared.inputs if i.sharded_by}) or None,
    }
    if compared.verdict == "same":
        read_id = any(i.sharded_by == "input_pipeline_id" for i in compared.inputs)
        shuffled = any(i.shuffled for i in compared.inputs)
        because = (
            "its dataset function reads input_pipeline_id, but not to choose what it reads"
            if read_id
            else "no worker selects its own share"
        )
        return rule.finding(
            f"Each of the {count} workers trains on the same data: their pipelines read "
            f"the same sources and keep the same part ({because})",
            severity="medium" if shuffled else "high",
            evidence=evidence | {"reads_digest": first.reads_digest, "shuffled": shuffled},
            fix=_shard_early_fix(first, count, None),
            estimated_gain=f"x{count} examples per step: each worker learns from its own share",
            gain_value=round((count - 1) / count, 3),
            location=first.source_location,
        )
    if compared.verdict == "overlap":
        shared = compared.shared_files
        return rule.finding(
            f"{len(shared)} file(s) are read by more than one of the {count} workers "
            f"({', '.join(shared[:3])}{' ...' if len(shared) > 3 else ''}): their "
            "examples are trained on more than once per epoch",
            severity="medium",
            evidence=evidence | {"files_read_by_several_workers": list(shared[:20])},
            fix="# give each worker its own files, e.g. in the dataset function:\n"
            "files = files[input_context.input_pipeline_id::input_context.num_input_pipelines]",
            location=first.source_location,
        )
    return None


def judged_across(finding: dict[str, Any], compared: Sequence[Compared]) -> bool:
    """A worker's own "every worker trains on the whole dataset" finding that the
    comparison across workers settles (confirms or refutes)."""
    evidence = finding.get("evidence") or {}
    if finding.get("id") != InputSharding.id or evidence.get("sharded_in_code") is not False:
        return False
    place = evidence.get("source_at") or evidence.get("source")
    return any(c.how == evidence.get("distributed_by") and c.place == place for c in compared)
