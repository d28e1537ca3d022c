"""distribute.replica-batch and distribute.undistributed-input from small facts."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import DistributedInput, DistributeFacts, Facts, StepFacts
from gpuwhy.rules.distribute.replica_batch import ReplicaBatch
from gpuwhy.rules.distribute.undistributed_input import UndistributedInput

FIT_INPUT = DistributedInput(how="experimental_distribute_dataset", global_batch=64,
                             location="train.py:12", written="ds.batch(64)")  # fmt: skip


def facts(replicas=8, inputs=(FIT_INPUT,), scaled=False, runs=0, steps=0) -> Facts:
    distribute = DistributeFacts(strategy="MirroredStrategy", replicas=replicas,
                                 inputs=tuple(inputs), scaled_by_replicas=scaled, runs=runs,
                                 variable="mirrored")  # fmt: skip
    step_facts = StepFacts(source="tf-data", marker="m", count=steps) if steps else None
    return Facts(distribute=distribute, steps=step_facts)


def check(rule, found):
    return rule.check(found, dict(rule.options))


def test_an_unscaled_batch_over_eight_replicas():
    (finding,) = check(ReplicaBatch(), facts())
    assert finding.severity == "medium" and finding.evidence["per_replica_batch"] == 8
    assert finding.title.endswith("was not scaled by mirrored.num_replicas_in_sync")
    assert finding.fix.splitlines()[:2] == [
        "# train.py:12: in place of: ds.batch(64)",
        "ds.batch(64 * mirrored.num_replicas_in_sync)",
    ]
    (tiny,) = check(ReplicaBatch(), facts(replicas=16))
    assert tiny.severity == "high"  # 4 per replica


def test_no_finding_where_the_batch_is_scaled_large_or_on_one_replica():
    assert not check(ReplicaBatch(), facts(scaled=True))
    (half,) = check(ReplicaBatch(), facts(replicas=2))  # 32 per replica: a tutorial's 64 split
    assert half.severity == "medium"
    big = DistributedInput(how="experimental_distribute_dataset", global_batch=256,
                           location="train.py:12", written="ds.batch(256)")  # fmt: skip
    assert not check(ReplicaBatch(), facts(replicas=2, inputs=(big,)))  # 128 per replica
    assert not check(ReplicaBatch(), facts(replicas=1))
    unknown = DistributedInput(how="distribute_datasets_from_function")
    assert not check(ReplicaBatch(), facts(inputs=(unknown,)))


def test_strategy_run_on_an_undistributed_dataset():
    (finding,) = check(UndistributedInput(), facts(inputs=(), runs=1, steps=200))
    assert finding.severity == "high" and finding.evidence["steps"] == 200
    assert "mirrored.experimental_distribute_dataset(<dataset>)" in finding.fix
    assert "mirrored.run(<step_fn>, args=(batch,))" in finding.fix
    assert not check(UndistributedInput(), facts(runs=1, steps=200))  # it was distributed
    assert not check(UndistributedInput(), facts(inputs=(), runs=0, steps=200))  # no run
    assert not check(UndistributedInput(), facts(inputs=(), runs=1, steps=2))  # no loop
    assert not check(UndistributedInput(), facts(replicas=1, inputs=(), runs=5))


def test_the_batch_calls_own_size_decides_over_a_mention_elsewhere():
    """TF's Keras tutorial prints strategy.num_replicas_in_sync: that mention says nothing
    of a batch(64) two lines later (scaled=False from the call), while a size read from
    elsewhere (scaled=None) falls back to the mention."""
    unscaled = DistributedInput(how="experimental_distribute_dataset", global_batch=64,
                                location="train.py:12", written="ds.batch(BATCH_SIZE)",
                                scaled=False)  # fmt: skip
    (finding,) = check(ReplicaBatch(), facts(replicas=2, inputs=(unscaled,), scaled=True))
    assert finding.evidence["per_replica_batch"] == 32
    scaled = DistributedInput(how="experimental_distribute_dataset", global_batch=64,
                              location="train.py:12", scaled=True)  # fmt: skip
    assert not check(ReplicaBatch(), facts(replicas=2, inputs=(scaled,)))
    unknown = DistributedInput(how="experimental_distribute_dataset", global_batch=64,
                               location="train.py:12", scaled=None)  # fmt: skip
    assert not check(ReplicaBatch(), facts(replicas=2, inputs=(unknown,), scaled=True))
    assert check(ReplicaBatch(), facts(replicas=2, inputs=(unknown,), scaled=False))


def test_the_undistributed_fix_calls_the_step_as_the_program_does():
    """TF's custom-training tutorial: strategy.run(train_step, args=(dataset_inputs,))."""
    from dataclasses import replace

    found = facts(inputs=(), runs=1, steps=200)
    one = replace(found, distribute=replace(found.distribute, run_function="train_step",
                                            run_args=1))  # fmt: skip
    (finding,) = check(UndistributedInput(), one)
    assert "for batch in dist_ds:" in finding.fix
    assert "    mirrored.run(train_step, args=(batch,))" in finding.fix
    two = replace(found, distribute=replace(found.distribute, run_function="step", run_args=2))
    (finding,) = check(UndistributedInput(), two)
    assert (
        "for x, y in dist_ds:" in finding.fix and "mirrored.run(step, args=(x, y))" in finding.fix
    )


def test_train_and_eval_batched_by_one_unscaled_size_are_one_finding():
    """TF's 'Distributed training with Keras' tutorial batches the train and the eval
    dataset by BATCH_SIZE: left unscaled, that is one cause, with both calls fixed."""
    train = DistributedInput(how="experimental_distribute_dataset", global_batch=64,
                             location="tut.py:33", written=".batch(BATCH_SIZE)", scaled=False)  # fmt: skip
    evaluate = replace(train, location="tut.py:34")
    other = replace(train, location="tut.py:40", written=".batch(48)", global_batch=48)
    found = check(ReplicaBatch(), facts(replicas=2, inputs=(train, evaluate, other)))
    assert len(found) == 2
    both = next(f for f in found if f.evidence["global_batch"] == 64)
    assert both.title.endswith("(2 datasets batched by it)")
    assert both.evidence["batched_at"] == ["tut.py:33", "tut.py:34"]
    assert both.fix.count(".batch(BATCH_SIZE * mirrored.num_replicas_in_sync)") == 2
