"""Ops that stay on the CPU on any GPU, costed at their measured time: the matching of
the audit's groups against a profiled step, from small facts."""

import pytest

from gpuwhy.facts import Facts, StepFacts
from gpuwhy.facts.step_profile import NodeTime, StepProfile
from gpuwhy.projection.cpu_ops import HOST_FACTOR, measured_cpu_ops
from gpuwhy.projection.step import projection_facts
from gpuwhy.report.run.summary import projection_lines
from gpuwhy.verdict import projection_clause
from tests import builders as b
from tests.projection.test_cost import TRAIN, placement

MS = 1e-3


def profiled(nodes=(), kernels=None, function="train_step"):
    """A profile of a few steps of ``function``: (node, kernel, seconds per step)."""
    times = tuple(NodeTime(n, k, s) for n, k, s in nodes)
    if kernels is None:
        kernels = {}
        for node in times:
            kernels[node.kernel] = kernels.get(node.kernel, 0.0) + node.seconds
    return StepProfile(
        function=function,
        steps=4,
        step_s=0.05,
        nodes=times,
        nodes_left_out=0,
        kernels=tuple(kernels.items()),
    )


def cpu_group(op, examples, count=None, reason="no-gpu-kernel", **kw):
    return b.op_group(
        op,
        reason=reason,
        in_dtypes=("string",),
        count=count or len(examples),
        examples=tuple(examples),
        functions=(TRAIN,),
        **kw,
    )


def test_a_kernel_type_all_on_the_cpu_is_costed_whole_whatever_its_examples():
    # seven StringToNumber nodes, five examples kept by the audit: the type's time counts
    groups = [cpu_group("StringToNumber", [f"parse_{i}" for i in range(5)], count=7)]
    profile = profiled([(f"parse_{i}", "StringToNumber", 2 * MS) for i in range(7)])
    measured = measured_cpu_ops(placement(groups=groups), TRAIN, profile)
    assert measured is not None
    assert (measured.ops, measured.matched, measured.by_kernel) == (7, 7, ("StringToNumber",))
    assert measured.seconds == pytest.approx(14 * MS)
    low, mid, high = HOST_FACTOR
    assert (measured.band.low, measured.band.high) == pytest.approx((low * 14 * MS, high * 14 * MS))


def test_a_kernel_type_also_on_the_gpu_is_matched_node_by_node():
    # MatMul pinned to the CPU by the code, and MatMuls on the GPU: only the pinned one's
    # node counts; the kernel TF ran on the CPU is renamed (_MklMatMul): its node tells
    groups = [
        cpu_group("MatMul", ["cpu_block/MatMul"], reason="forced-cpu", requested="CPU"),
        b.op_group("MatMul", count=3, functions=(TRAIN,)),
    ]
    profile = profiled(
        [("cpu_block/MatMul", "_MklMatMul", 5 * MS), ("dense/MatMul", "_MklMatMul", 9 * MS)]
    )
    measured = measured_cpu_ops(placement(groups=groups), TRAIN, profile)
    assert measured is not None and (measured.ops, measured.matched) == (1, 1)
    assert measured.seconds == pytest.approx(5 * MS) and measured.by_kernel == ()


def test_nested_bodies_match_under_their_inlined_call_and_nothing_else_does():
    # the audit names a nested body's nodes by the FunctionDef ("__inference_inner_14/",
    # "while_body_18/"); TF runs them inlined under the call ("PartitionedCall/",
    # "while/body/_4/"). A node that only ends alike elsewhere is not them.
    groups = [
        cpu_group(
            "AsString",
            ["__inference_inner_14/AsString", "while_body_18/while/AsString"],
        ),
        b.op_group("AsString", reason="gpu", functions=(TRAIN,)),  # keeps it by name
    ]
    profile = profiled(
        [
            ("PartitionedCall/AsString", "AsString", 1 * MS),
            ("while/body/_4/while/AsString", "AsString", 3 * MS),
            ("model/AsString", "AsString", 50 * MS),  # another node of the same tail
        ]
    )
    measured = measured_cpu_ops(placement(groups=groups), TRAIN, profile)
    assert measured is not None and (measured.ops, measured.matched) == (2, 2)
    assert measured.seconds == pytest.approx(4 * MS)


def test_the_projected_step_adds_the_measured_cpu_ops_and_says_how_many():
    groups = [cpu_group("StringToNumber", ["parse"])]
    facts = Facts(placement=placement(groups=groups))
    without = projection_facts(facts, "A100")
    profile = profiled([("parse", "StringToNumber", 20 * MS), ("dense/MatMul", "MatMul", MS)])
    costed = projection_facts(facts, "A100", profile=profile)
    assert costed.cpu_ops_s == pytest.approx(20 * MS)
    assert (costed.cpu_ops, costed.cpu_ops_measured) == (1, 1)
    assert costed.cpu_ops_measured_by == "TF profiler host trace of 4 step(s) of train_step"
    assert costed.step_s == pytest.approx(without.step_s + 20 * MS)
    assert costed.step_low_s == pytest.approx(without.step_low_s + HOST_FACTOR[0] * 20 * MS)
    assert costed.step_high_s == pytest.approx(without.step_high_s + HOST_FACTOR[2] * 20 * MS)
    (note,) = [n for n in costed.notes if "stay on the CPU" in n]
    assert "1 of them measured here, 20.0 ms per step" in note
    assert "ops on the CPU 20.0 ms (measured here: 1 of 1)" in projection_lines(costed)[0]
    assert ", 20.0 ms of it ops that stay on the CPU (measured here)" in projection_clause(costed)
    # the input wait is projected against the longer step: a 25 ms batch no longer starves it
    steps = StepFacts("tf-data", "loop", count=50, warmup=1, total_s=49 * 0.025,
                      input_wait_fraction=0.9)  # fmt: skip
    assert projection_facts(facts, "A100", steps=steps).input_wait_fraction > 0.9
    assert projection_facts(facts, "A100", steps=steps, profile=profile).input_wait_fraction < 0.3


@pytest.mark.parametrize(
    ("profile", "why"),
    [
        (None, "not measured: the run ended before its steps warmed up"),
        (profiled([], function="eval_step"), "the profiled steps were of eval_step, not train"),
        (profiled([("other", "Relu", MS)]), "not measured: none of them among the profiled ops"),
    ],
)
def test_where_not_measured_the_note_says_why_and_nothing_is_added(profile, why):
    facts = Facts(placement=placement(groups=[cpu_group("StringToNumber", ["parse"])]))
    projection = projection_facts(
        facts, "A100", profile=profile, unprofiled="the run ended before its steps warmed up"
    )
    assert projection.cpu_ops_s == 0.0 and projection.cpu_ops == 1
    assert projection.step_s == projection_facts(facts, "A100").step_s
    (note,) = [n for n in projection.notes if "stay on the CPU" in n]
    assert "their CPU time is not in the projection" in note and why in note
