"""distribute.cpu-starved-input: input-bound with every host core busy."""

from gpuwhy.rules.distribute.cpu_starved_input import CpuStarvedInput
from tests import builders_tfdata as t


def check(facts, **options):
    return CpuStarvedInput().check(facts, {**CpuStarvedInput.options, **options})


def saturated(**changes):
    return {"host_cpu_busy_fraction": 0.97, "process_cpu_fraction": 0.95, **changes}


def test_input_bound_with_all_cores_busy_gets_tf_data_service():
    (f,) = check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), **saturated()))
    assert f.severity == "high"
    assert f.title == (
        "Steps wait for input 40% of the time while all 8 host cores are 97% "
        "busy: more input threads cannot help"
    )
    assert f.location == "train.py:47"
    assert f.evidence["bottleneck"] == "stage Map(augment at train.py:47)"
    assert f.evidence["program_cpu_fraction"] == 0.95
    assert "other_processes_cpu_fraction" not in f.evidence
    # after the pipeline's last call as written (the prefetch TF injected is not written)
    assert (
        "# train.py:65: in place of: ds.repeat()\n"
        "ds.repeat().apply(tf.data.experimental.service.distribute("
        "processing_mode='parallel_epochs', service='grpc://<dispatcher host>:5050'))"
        ".prefetch(tf.data.AUTOTUNE)"
    ) in f.fix
    assert "DispatchServer" in f.fix and "WorkerServer" in f.fix
    assert "run augment once offline" in f.fix
    assert "stop them" not in f.fix
    assert f.gain_value == 0.4


def test_other_processes_taking_the_cores_are_named():
    (f,) = check(
        t.facts(
            t.example_pipeline(), steps=t.fit_steps(0.40), **saturated(process_cpu_fraction=0.30)
        )
    )
    assert f.evidence["other_processes_cpu_fraction"] == 0.67
    assert f.title == (
        "Steps wait for input 40% of the time while all 8 host cores are 97% busy, 67% of "
        "them by other processes: more input threads cannot help"
    )
    assert f.fix.startswith("# other processes hold much of the CPU")


def test_python_bottleneck_cannot_move_to_service_workers_as_is():
    (f,) = check(
        t.facts(
            t.py_function_pipeline(consumer="python-loop"), steps=t.loop_steps(0.3), **saturated()
        )
    )
    assert "tf.data service workers cannot run it" in f.fix


def test_idle_cores_or_no_wait_are_quiet():
    assert (
        check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), host_cpu_busy_fraction=0.60))
        == []
    )
    assert check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.03), **saturated())) == []
    assert (
        check(t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), host_cpu_busy_fraction=None))
        == []
    )


def test_host_cores_fall_back_to_the_environment():
    from gpuwhy.facts import Facts
    from tests import builders as b

    base = t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), **saturated(host_cores=None))
    facts = Facts(steps=base.steps, tfdata=base.tfdata, environment=b.environment(cpu_count=16))
    (f,) = check(facts)
    assert f.evidence["host_cores"] == 16 and "all 16 host cores" in f.title


def test_quiet_when_the_model_itself_runs_on_the_cpu():
    import dataclasses

    from tests import builders as b

    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), **saturated())
    assert check(dataclasses.replace(facts, environment=b.environment())) != []
    assert check(dataclasses.replace(facts, environment=b.environment(tf=b.no_gpu_tf()))) == []


def test_workers_each_running_the_whole_input_come_first():
    """Consistent with distribute.input-sharding: where every worker of the cluster runs
    the whole pipeline, sharding it is the first fix, before more CPUs."""
    from dataclasses import replace

    from gpuwhy.facts import DistributedInput, DistributeFacts

    facts = t.facts(t.example_pipeline(), steps=t.fit_steps(0.40), **saturated())
    data = DistributedInput(how="experimental_distribute_dataset", shard_applied="DATA",
                            repeated_heavy=True)  # fmt: skip
    cluster = DistributeFacts(strategy="MultiWorkerMirroredStrategy", replicas=4, workers=4,
                              inputs=(data,))  # fmt: skip
    (f,) = check(replace(facts, distribute=cluster))
    assert f.title.endswith("and each of the 4 workers runs the whole input")
    assert f.fix.startswith("# first: each of the 4 workers runs the whole pipeline")
    assert f.evidence["workers_each_running_the_whole_input"] == 4
    sharded = replace(cluster, inputs=(replace(data, shard_applied="FILE", repeated_heavy=False),))
    (plain,) = check(replace(facts, distribute=sharded))
    assert "workers" not in f.title.split(":")[0] and "first" not in plain.fix
