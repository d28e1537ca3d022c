"""distribute.collective-bound and distribute.unbalanced-ps from small facts objects.

The NCCL/NVLink branches run from documented facts, not from a machine: the NVML
topology dicts below are written per nvml.h (nvmlGpuTopologyLevel_t, NVLink state and
remote PCI info) for an 8-GPU NVLink board and a PCIe-only pair, and the GPU bandwidths
come from the table's datasheet figures (gpuwhy/gpu_specs.py)."""

from __future__ import annotations

from gpuwhy.collect.inprocess.collective_link import link_for, ring_allreduce_s
from gpuwhy.facts import DistributeFacts, Facts, ReducedValue, StepFacts
from gpuwhy.gpu_specs import find_gpu
from gpuwhy.rules.distribute.collective_bound import CollectiveBound
from gpuwhy.rules.distribute.unbalanced_ps import UnbalancedPs

GPUS = tuple(f"/job:localhost/replica:0/task:0/device:GPU:{i}" for i in range(2))
KERNEL = ReducedValue(
    name="dense/kernel", shape=(4096, 4096), dtype="float32", bytes=4096 * 4096 * 4
)


def facts(steps_median=None, **given) -> Facts:
    fields = dict(strategy="MirroredStrategy", replicas=2, devices=GPUS, variable="mirrored",
                  reduced=(KERNEL,), reduced_values=1, reduced_bytes=KERNEL.bytes)  # fmt: skip
    fields.update(given)
    steps = StepFacts(source="keras-fit", marker="m", count=100, median_s=steps_median)
    return Facts(distribute=DistributeFacts(**fields), steps=steps if steps_median else None)


def check(rule, found, **options):
    return rule.check(found, dict(rule.options) | options)


def test_measured_share_names_the_fallback_and_fixes_with_the_programs_names():
    (finding,) = check(CollectiveBound(), facts(
        collective_step_s=0.04, collective_share=0.62, cross_device="ReductionToOneDevice",
        collective_measured_by="TF profiler host trace"))  # fmt: skip
    assert finding.severity == "high"
    assert "62%" in finding.title and "ReductionToOneDevice" in finding.title
    assert "fallback where it has no NCCL" in finding.title
    assert "mirrored = tf.distribute.MirroredStrategy(" in finding.fix
    assert (
        "tf.distribute.NcclAllReduce(" in finding.fix and "HierarchicalCopyAllReduce" in finding.fix
    )
    assert "mirrored.num_replicas_in_sync" in finding.fix and "float16" in finding.fix
    (medium,) = check(CollectiveBound(), facts(collective_step_s=0.01, collective_share=0.35))
    assert medium.severity == "medium" and "fallback" not in medium.title


def test_a_late_replica_is_said_to_be_waiting_not_transferring():
    (finding,) = check(CollectiveBound(), facts(
        collective_step_s=0.02, collective_share=0.4, collective_wait_s=0.015))  # fmt: skip
    assert "15.0 ms of it waiting for a late replica" in finding.title


def test_kilobytes_across_processes_are_latency_not_bandwidth():
    """Two workers of a small model on one host: 84% of the step in collectives (a
    measured figure of tests/commands/test_merge_multiworker.py's healthy control), of
    2.3 KiB a step: low, and said to be latency."""
    small = ReducedValue(name="dense/kernel", shape=(16, 32), dtype="float32", bytes=2372)
    (finding,) = check(CollectiveBound(), facts(
        strategy="MultiWorkerMirroredStrategy", reduced=(small,), reduced_bytes=2372,
        allreduce_expected_s=1.2e-6, collective_step_s=0.004, collective_share=0.84))  # fmt: skip
    assert finding.severity == "low" and "latency or a wait for a peer" in finding.title
    assert "gpuwhy merge" in finding.fix
    # the same share with megabytes whose transfer explains the time stays high
    (wide,) = check(CollectiveBound(), facts(
        strategy="MultiWorkerMirroredStrategy", allreduce_expected_s=0.03,
        collective_step_s=0.04, collective_share=0.84))  # fmt: skip
    assert wide.severity == "high"


def test_no_finding_for_a_small_or_short_measured_share():
    assert not check(CollectiveBound(), facts(collective_step_s=0.02, collective_share=0.12))
    assert not check(CollectiveBound(), facts(collective_step_s=0.0005, collective_share=0.6))
    assert not check(
        CollectiveBound(), facts(replicas=1, collective_step_s=1.0, collective_share=0.9)
    )


def test_a_prediction_is_said_to_be_one_and_never_high():
    # 64 MiB over PCIe (NVML-measured link) at the T4's 16 GB/s host link: 4.2 ms predicted
    t4 = find_gpu("T4")
    expected = ring_allreduce_s(KERNEL.bytes, 2, t4.host_link)
    assert expected is not None and abs(expected - KERNEL.bytes / t4.host_link) < 1e-12
    (nvml,) = check(CollectiveBound(), facts(
        steps_median=0.01, allreduce_expected_s=expected, link="PCIe (hostbridge)",
        link_source="NVML topology"))  # fmt: skip
    assert nvml.severity == "medium" and nvml.title.startswith("Predicted:")
    assert "(not measured)" in nvml.title
    (assumed,) = check(CollectiveBound(), facts(
        steps_median=0.01, allreduce_expected_s=expected, link="PCIe",
        link_source="predicted: no NVML topology"))  # fmt: skip
    assert assumed.severity == "low"
    assert not check(CollectiveBound(), facts(steps_median=1.0, allreduce_expected_s=expected))


NVLINK_BOARD = {  # 8 x A100-SXM4 (HGX): every pair on NVLink through NVSwitch
    "ok": True, "error": None,
    "gpus": [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "nvlinks_active": 12} for i in range(8)],
    "pairs": [{"a": a, "b": b, "level": "system" if (a < 4) != (b < 4) else "node", "nvlink": True}
              for a in range(8) for b in range(a + 1, 8)],
}  # fmt: skip
PCIE_PAIR = {  # 2 x T4 on one host bridge, no NVLink
    "ok": True, "error": None,
    "gpus": [{"index": i, "name": "Tesla T4", "nvlinks_active": 0} for i in range(2)],
    "pairs": [{"a": 0, "b": 1, "level": "hostbridge", "nvlink": False}],
}  # fmt: skip


def test_the_link_from_nvml_topology_and_the_predicted_ones():
    nvlink = link_for(GPUS, 0, (), NVLINK_BOARD)
    assert (nvlink.name, nvlink.source) == ("NVLink", "NVML topology")
    assert nvlink.bytes_per_s == find_gpu("A100").peer_link
    pcie = link_for(GPUS, 0, (), PCIE_PAIR)
    assert (pcie.name, pcie.bytes_per_s) == ("PCIe (hostbridge)", find_gpu("T4").host_link)
    no_nvml = link_for(GPUS, 0, (), {"ok": False, "error": "LibraryNotFound"})
    assert no_nvml.source.startswith("predicted: no NVML topology (LibraryNotFound)")
    cpus = link_for(("/device:CPU:0", "/device:CPU:1"), 0, (), None)
    assert cpus.name == "host memory" and cpus.source.startswith("predicted:")
    one_host = link_for((), 2, ("localhost:2222", "localhost:2223"), None)
    assert one_host.name == "loopback" and "10 Gb" not in one_host.source
    hosts = link_for((), 2, ("a.example:2222", "b.example:2222"), None)
    assert hosts.name == "network" and "10 Gb/s Ethernet" in hosts.source
    assert ring_allreduce_s(0, 2, 1e9) is None and ring_allreduce_s(100, 1, 1e9) is None


MiB = 1024 * 1024


def test_one_parameter_server_holding_most_variables():
    ps = facts(strategy="ParameterServerStrategy", replicas=1, variable="ps_strategy",
               ps_bytes=(30 * MiB, 10 * MiB))  # fmt: skip
    (finding,) = check(UnbalancedPs(), ps)
    assert finding.severity == "medium" and finding.evidence["largest_ps"] == 0
    assert "ps_strategy = tf.distribute.ParameterServerStrategy(" in finding.fix
    assert "MinSizePartitioner(" in finding.fix and "max_shards=2" in finding.fix
    assert "tf_keras" not in finding.fix  # no Keras version known: the partitioner as is
    (high,) = check(UnbalancedPs(), facts(ps_bytes=(60 * MiB, 0, 0)))
    assert high.severity == "high"
    # two servers, everything on one: the ratio stops at 2, the share says it all
    (both,) = check(UnbalancedPs(), facts(ps_bytes=(18 * MiB, 0)))
    assert both.severity == "high" and "100% of all" in both.title


def test_under_keras_3_the_partitioner_needs_tf_keras():
    """Keras 3 layers fail on ShardedVariable ('no attribute handle', seen with TF 2.21):
    the fix says so instead of a snippet that crashes."""
    from dataclasses import replace

    from gpuwhy.facts import ProgramFacts

    ps = facts(ps_bytes=(18 * MiB, 0))
    keras3 = replace(ps, program=ProgramFacts(command=("train.py",), keras_version="3.15.0"))
    (finding,) = check(UnbalancedPs(), keras3)
    assert finding.fix.startswith("# Keras 3 layers cannot use partitioned")
    assert "TF_USE_LEGACY_KERAS=1" in finding.fix and "split the large layer" in finding.fix


def test_balanced_or_small_parameter_servers_are_fine():
    assert not check(UnbalancedPs(), facts(ps_bytes=(10 * MiB, 9 * MiB)))
    assert not check(UnbalancedPs(), facts(ps_bytes=(MiB, 1024)))  # under min_bytes
    assert not check(UnbalancedPs(), facts(ps_bytes=(40 * MiB,)))  # one server


def test_a_scaled_batch_is_told_to_grow_per_replica():
    """The program already multiplies by num_replicas_in_sync: the advice is a larger
    per-replica batch, not the multiplication again."""
    from gpuwhy.facts import DistributedInput

    scaled = DistributedInput(how="experimental_distribute_dataset", global_batch=8,
                              location="train.py:20", scaled=True,
                              written="ds.batch(PER_REPLICA * strategy.num_replicas_in_sync)")  # fmt: skip
    (finding,) = check(CollectiveBound(), facts(
        inputs=(scaled,), collective_step_s=0.03, collective_share=0.3))  # fmt: skip
    assert "a larger per-replica batch than 4 (train.py:20:" in finding.fix
    assert "<per-replica batch>" not in finding.fix


def test_tens_of_megabytes_a_step_are_medium_from_a_smaller_share():
    """64 MiB all-reduced a step (KERNEL) at 18% of the step: medium; the same share of a
    2 MiB all-reduce says nothing."""
    (finding,) = check(CollectiveBound(), facts(collective_step_s=0.02, collective_share=0.18))
    assert finding.severity == "medium"
    small = ReducedValue(name="dense/kernel", shape=(512, 1024), dtype="float32", bytes=2 * MiB)
    assert not check(CollectiveBound(), facts(reduced=(small,), reduced_bytes=small.bytes,
                                              collective_step_s=0.02, collective_share=0.18))  # fmt: skip
