"""distribute.input-sharding from small facts: each way workers divide their input
badly, and the ways that are fine."""

from __future__ import annotations

from gpuwhy.facts import DistributedInput, DistributeFacts, Facts, StepFacts
from gpuwhy.rules.distribute.input_sharding import InputSharding

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
