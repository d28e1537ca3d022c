"""distribute.input-sharding from small facts: each way workers divide their input
badly, and the ways that are fine."""

from __future__ import annotations

from gpuwhy.derived.worker_inputs import compare_inputs
from gpuwhy.facts import (
    DistributedInput,
    DistributeFacts,
    Facts,
    StepFacts,
    WorkerInput,
    WorkersFacts,
)
from gpuwhy.rules.distribute.input_sharding import InputSharding, judged_across
from tests.builders_workers import worker_run

RULE = InputSharding()
SLICES = "tf.data.Dataset.from_tensor_slices((images, labels))"


def given(**kwargs) -> DistributedInput:
    base = dict(how="experimental_distribute_dataset", global_batch=128, auto_shard="AUTO",
                source=SLICES, source_location="train.py:20")  # fmt: skip
    return DistributedInput(**(base | kwargs))


def check(*inputs, workers=2, wait=None):
    distribute = DistributeFacts(strategy="MultiWorkerMirroredStrategy", replicas=workers,
                                 workers=workers, inputs=inputs, variable="strategy")  # fmt: skip
    steps = StepFacts(source="keras-fit", marker="m", count=200, input_wait_fraction=wait)
    return RULE.check(Facts(distribute=distribute, steps=steps), dict(RULE.options))


def test_data_fallback_repeating_a_decode_on_every_worker():
    data = given(shard_applied="DATA", shard_reason="Found an unshardable source dataset: "
                 "TensorSliceDataset", repeated_work=("ds.map(decode_jpeg) (train.py:21)",),
                 repeated_heavy=True)  # fmt: skip
    (finding,) = check(data)
    assert finding.severity == "medium" and finding.location == "train.py:20"
    assert "AUTO fell back to DATA" in finding.title and "decode_jpeg" in finding.title
    assert finding.evidence["why_not_by_file"].startswith("Found an unshardable source")
    assert finding.fix.splitlines()[:2] == [
        f"# train.py:20: in place of: {SLICES}",
        f"{SLICES}.shard(2, strategy.cluster_resolver.task_id)",
    ]
    assert "AutoShardPolicy.OFF" in finding.fix
    (starving,) = check(data, wait=0.35)
    assert starving.severity == "high"


def test_data_over_in_memory_slices_is_low():
    (finding,) = check(given(shard_applied="DATA", shard_reason="Found an unshardable source"))
    assert finding.severity == "low" and "cheap" in finding.title


def test_off_without_a_shard_duplicates_the_examples():
    (finding,) = check(given(auto_shard="OFF", shard_applied="OFF"), workers=4)
    assert finding.severity == "high" and "whole dataset in the same order" in finding.title
    (shuffled,) = check(given(auto_shard="OFF", shard_applied="OFF", shuffled=True))
    assert shuffled.severity == "medium"
    assert not check(given(auto_shard="OFF", shard_applied="OFF", sharded_in_code=True))


def test_a_dataset_function_that_never_shards():
    function = given(how="distribute_datasets_from_function", global_batch=None,
                     shard_applied="OFF", source_location="train.py:31")  # fmt: skip
    (finding,) = check(function)
    assert "dataset function never calls shard()" in finding.title
    assert "input_context.num_input_pipelines, input_context.input_pipeline_id" in finding.fix
    assert not check(given(how="distribute_datasets_from_function", shard_applied="OFF",
                           sharded_in_code=True))  # fmt: skip


def test_file_sharding_with_too_few_or_uneven_files():
    (few,) = check(given(shard_applied="FILE", shard_files=1))
    assert few.severity == "high" and "Could not apply FILE based sharding" in few.title
    (uneven,) = check(given(shard_applied="FILE", shard_files=5), workers=4)
    assert uneven.severity == "medium" and uneven.evidence["most_files_per_worker"] == 2
    assert not check(given(shard_applied="FILE", shard_files=64), workers=4)
    assert not check(given(shard_applied="FILE", shard_files=33), workers=4)  # 9 vs 8


def test_file_asked_for_where_tf_cannot():
    (finding,) = check(given(auto_shard="FILE", shard_applied="FILE",
                             shard_error="Found an unshardable source dataset: TensorDataset"))  # fmt: skip
    assert finding.severity == "high" and "AutoShardPolicy.DATA" in finding.fix


def test_one_worker_or_no_strategy_input_is_fine():
    data = given(shard_applied="DATA", repeated_heavy=True)
    assert not check(data, workers=1)
    assert not check(given())  # no plan read: nothing said


def test_a_repeated_tf_map_matters_once_the_steps_wait_for_it():
    """Image augmentation in TF ops (no Python, no decode) repeated on every worker: low
    while the steps do not wait, medium at 10% input wait, high at 25%."""
    augment = given(shard_applied="DATA", shard_reason="Found an unshardable source dataset",
                    repeated_work=(".map(augment, num_parallel_calls=-1) (train.py:22)",))  # fmt: skip
    assert check(augment, wait=0.01)[0].severity == "low"
    assert check(augment, wait=0.10)[0].severity == "medium"
    assert check(augment, wait=0.25)[0].severity == "high"


def test_a_dataset_function_reading_its_pipeline_id_shards_itself():
    """Files sliced by ctx.input_pipeline_id, or a filter on it: no shard() call, and no
    finding from the worker's own view (the merge compares what the workers read)."""
    for how in ("input_pipeline_id", "shard()"):
        selecting = given(how="distribute_datasets_from_function", shard_applied="OFF",
                          sharded_in_code=True, sharded_by=how, shuffled=True)  # fmt: skip
        assert not check(selecting)


FROM_FN = "distribute_datasets_from_function"


def across(*inputs: WorkerInput):
    workers = WorkersFacts(
        directory="runs",
        workers=tuple(
            worker_run(f"worker-{i}", 0.05, 0.001, inputs=(given,))
            for i, given in enumerate(inputs)
        ),
    )
    return RULE.check(Facts(workers=workers), dict(RULE.options))


def read(digest, files=(), sharded_by=None, shuffled=False, how=FROM_FN, applied="OFF"):
    return WorkerInput(how=how, source="tf.data.TFRecordDataset(files)",
                       source_location="train.py:30", shard_applied=applied, sharded_by=sharded_by,
                       shuffled=shuffled, reads_digest=digest, read_files=tuple(files))  # fmt: skip


def test_workers_reading_the_same_data_are_named_whatever_their_code_reads():
    (finding,) = across(read("a1", sharded_by="input_pipeline_id", shuffled=True),
                        read("a1", sharded_by="input_pipeline_id", shuffled=True))  # fmt: skip
    assert finding.severity == "medium" and finding.location == "train.py:30"
    assert "Each of the 2 workers trains on the same data" in finding.title
    assert "reads input_pipeline_id, but not to choose what it reads" in finding.title
    assert finding.evidence["workers"] == ["worker-0", "worker-1"]
    assert "input_context.input_pipeline_id" in finding.fix
    (unshuffled,) = across(read("a1"), read("a1"), read("a1"))
    assert unshuffled.severity == "high" and "no worker selects its own share" in unshuffled.title


def test_workers_reading_their_own_files_or_records_are_fine():
    assert not across(read("a1", ["f0", "f2"]), read("b2", ["f1", "f3"]))
    # the same files, each keeping another part (shard after interleave, a filter)
    assert not across(read("a1", ["f0", "f1"], "shard()"), read("b2", ["f0", "f1"], "shard()"))
    assert not across(read("a1", ["f0", "f1"], "input_pipeline_id"),
                      read("b2", ["f0", "f1"], "input_pipeline_id"))  # fmt: skip
    # auto-sharded by TF (FILE/DATA), or unknowable (a generator): not compared
    assert not across(read("a1", how="experimental_distribute_dataset", applied="FILE"),
                      read("a1", how="experimental_distribute_dataset", applied="FILE"))  # fmt: skip
    assert not across(read(None), read(None))


def test_files_read_by_two_workers_are_named():
    (finding,) = across(read("a1", ["f0", "f1", "f2"]), read("b2", ["f2", "f3", "f4"]))
    assert finding.severity == "medium"
    assert finding.evidence["files_read_by_several_workers"] == ["f2"]
    assert finding.title.startswith("1 file(s) are read by more than one of the 2 workers (f2)")


def test_the_merge_settles_a_worker_s_own_judgement():
    whole = {"id": RULE.id, "title": "t", "severity": "medium",
             "evidence": {"sharded_in_code": False, "distributed_by": FROM_FN,
                          "source_at": "train.py:30"}}  # fmt: skip
    compared = compare_inputs(
        [worker_run(f"worker-{i}", 0.05, 0.001, inputs=(read(d),)) for i, d in enumerate("ab")]
    )
    assert judged_across(whole, compared)
    elsewhere = whole | {"evidence": whole["evidence"] | {"source_at": "eval.py:9"}}
    assert not judged_across(elsewhere, compared)
    data = whole | {"evidence": {"distributed_by": FROM_FN, "source_at": "train.py:30"}}
    assert not judged_across(data, compared)  # a DATA/FILE finding: not the comparison's
