"""launch.eager-ops from small eager facts, and its way through run_rules."""

from __future__ import annotations

from gpuwhy.facts import EagerFacts, EagerOpSite, Facts
from gpuwhy.rules import run_rules
from gpuwhy.rules.launch.eager_ops import EagerOps
from tests import builders as b

NOTE = "counted on thread 'MainThread' only: ..."


def run(facts: Facts, **options):
    return EagerOps().check(facts, {**EagerOps.options, **options})


def site(
    op="AddV2", location="train.py:12", count=1000, elements=64, device="GPU:0"
) -> EagerOpSite:
    return EagerOpSite(
        op=op, location=location, count=count, median_elements=elements, device=device
    )


def eager(sites=(), sampled_steps=10, dispatch_fraction=0.8, **changes) -> Facts:
    """Eager facts over ``sampled_steps`` steps; ``ops`` and ``per_step`` follow the sites."""
    ops = sum(s.count for s in sites)
    fields = dict(
        sampled_steps=sampled_steps,
        ops=ops,
        per_step=ops / sampled_steps if sampled_steps else None,
        dispatch_fraction=dispatch_fraction,
        median_gap_us=31.5,
        counted_s=2.0,
        sites=tuple(sites),
        outside_steps=4,
        note=NOTE,
    )
    fields.update(changes)
    return Facts(eager=EagerFacts(**fields))


# A Python loop over 50 small layers without tf.function: 150 small ops per step.
LOOP = (
    site("MatMul", "train.py:14", 500, 4096),
    site("Relu", "train.py:14", 500, 4096),
    site("AddV2", "train.py:15", 500, 4096),
)


def test_a_custom_loop_of_small_eager_ops_is_named_with_its_sites():
    (finding,) = run(eager(LOOP))
    assert finding.id == "launch.eager-ops"
    assert finding.severity == "high"
    assert finding.title == (
        "Each step dispatches ~150 small ops eagerly from Python "
        "(80% of the step spent issuing them)"
    )
    assert finding.location == "train.py:14"
    assert finding.gain_value == 0.8
    assert finding.evidence["small_ops_per_step"] == 150.0
    assert finding.evidence["sampled_steps"] == 10
    assert finding.evidence["share_of_time_issuing_them"] == "80%"
    assert finding.evidence["median_gap_between_eager_ops_us"] == 31.5
    assert finding.evidence["counted"] == NOTE
    assert finding.evidence["sites"][0] == {
        "op": "MatMul",
        "location": "train.py:14",
        "per_step": 50.0,
        "median_elements": 4096,
        "device": "GPU:0",
    }
    assert "@tf.function(jit_compile=True)" in finding.fix
    assert "#   MatMul at train.py:14" in finding.fix
    assert "run_eagerly=False" in finding.fix
    assert "80%" in finding.estimated_gain


def test_a_compiled_step_with_a_few_eager_ops_is_quiet():
    # Keras fit: one tf.function call per step, a handful of eager metric ops around it.
    assert run(eager((site("AddV2", "train.py:30", 40),), dispatch_fraction=0.02)) == []


def test_the_threshold_counts_small_ops_only():
    big = (site("MatMul", "train.py:14", 1500, 1_000_000),)
    assert run(eager(big)) == []
    half = (site("MatMul", "train.py:14", 1000, 1_000_000), site("Relu", "train.py:15", 1000, 64))
    (finding,) = run(eager(half))
    assert finding.evidence["small_ops_per_step"] == 100.0
    assert finding.evidence["sites"][0]["small"] is False
    assert finding.location == "train.py:15"
    assert finding.gain_value == 0.4
    assert run(eager(half), min_ops_per_step=101) == []
    assert run(eager(half), small_elements=2_000_000) != []


def test_fewer_ops_that_take_most_of_the_step_are_a_finding():
    # A small model's eager GradientTape step: 61 ops, 97% of the step issuing them
    # (tests/corpus/programs/eager_loop.py measured so)
    step = (site("ReadVariableOp", "train.py:23", 300, 1), site("MatMul", "train.py:20", 310))
    (finding,) = run(eager(step, dispatch_fraction=0.97))
    assert finding.severity == "high"
    assert finding.evidence["small_ops_per_step"] == 61.0
    # the same ops taking a fifth of the step: a model whose kernels dominate
    assert run(eager(step, dispatch_fraction=0.2)) == []
    # a handful of metric ops around a compiled step stays quiet however long they take
    few = (site("AddV2", "train.py:30", 150),)
    assert run(eager(few, dispatch_fraction=0.9)) == []
    assert run(eager(step, dispatch_fraction=0.97), min_ops_when_busy=62) == []


def test_ops_without_outputs_count_as_small():
    updates = (site("AssignAddVariableOp", "train.py:40", 2000, None),)
    (finding,) = run(eager(updates))
    assert finding.evidence["small_ops_per_step"] == 200.0


def test_severity_follows_the_share_of_the_step_spent_issuing_ops():
    assert run(eager(LOOP, dispatch_fraction=0.5))[0].severity == "high"
    assert run(eager(LOOP, dispatch_fraction=0.3))[0].severity == "medium"
    assert run(eager(LOOP, dispatch_fraction=0.05))[0].severity == "low"
    unknown = run(eager(LOOP, dispatch_fraction=None))[0]
    assert unknown.severity == "medium" and unknown.gain_value is None
    assert "(? of the step" in unknown.title


def test_a_bare_python_loop_without_steps_fires_on_its_busy_share():
    # Example 3 of the seeds: `for _ in range(n): c = a + b`, no step anywhere.
    loop = (site("AddV2", "bench.py:9", 80_000, 100, "CPU:0"),)
    (finding,) = run(eager(loop, sampled_steps=0, dispatch_fraction=0.9))
    assert finding.title == (
        "Small ops dispatched eagerly from Python, ~40,000 per second, "
        "took 90% of the time (no training step found)"
    )
    assert finding.evidence["small_ops_per_second"] == 40_000
    assert finding.evidence["sites"][0]["per_second"] == 40_000
    assert finding.location == "bench.py:9"
    assert run(eager(loop, sampled_steps=0, dispatch_fraction=0.3)) == []
    assert run(eager(loop, sampled_steps=0, dispatch_fraction=0.3), min_busy_fraction=0.25) != []
    assert run(eager(loop, sampled_steps=0, dispatch_fraction=None)) == []


def test_nothing_counted_is_quiet():
    assert run(eager(())) == []
    assert run(eager((), sampled_steps=0, dispatch_fraction=None)) == []


def test_run_rules_runs_it_on_eager_facts_alone():
    findings, not_checked = run_rules(eager(LOOP))
    assert [f.id for f in findings if f.id == "launch.eager-ops"] == ["launch.eager-ops"]
    assert "launch.eager-ops" not in not_checked
    _, not_checked = run_rules(Facts())
    assert not_checked["launch.eager-ops"] == "needs eager"


def test_ops_counted_only_outside_the_steps_found_are_set_up_code_not_a_finding():
    # Keras fit ran 72 steps, but the counted windows fell on the record-writing loop
    # before it: those ops are not in the training steps.
    import dataclasses

    from gpuwhy.facts import StepFacts

    loop = (site("EncodePng", "make_data.py:42", 342, 1, "CPU:0"),)
    setup = eager(loop, sampled_steps=0, dispatch_fraction=0.53)
    assert run(setup) != []
    steps = StepFacts(source="keras-fit", marker="Model.fit at train.py:86", count=72, warmup=1)
    assert run(dataclasses.replace(setup, steps=steps)) == []


def test_on_the_target_gpu_the_projection_adds_that_python_takes_the_step():
    from dataclasses import replace

    # on the CPU the ops' kernels took most of the step: issuing them only 20%
    measured = eager(LOOP, dispatch_fraction=0.2)
    (before,) = run(measured)
    assert before.severity == "medium" and "projected" not in before.evidence
    projected = b.projection(
        function="the eager step (m)",
        step=(0.0048, 0.0033, 0.0057),
        parts=(0.0, 0.0, 0.0),
        eager_s=0.0048,
        eager_ops_per_step=150.0,
        graph=False,
    )
    (after,) = run(replace(measured, projection=projected))
    assert after.severity == "high"
    assert after.evidence["projected"] == (
        "on A100 (projected): issuing them takes 4.8 ms of a 4.8 ms step (100%); "
        "the GPU would wait for Python"
    )
    assert after.estimated_gain.endswith("; on A100 (projected) up to 100% of the step")


def test_the_fix_names_the_step_function_and_the_metrics_the_loop_re_creates():
    from gpuwhy.facts import ReboundName, StepCode

    code = StepCode(
        "train_step",
        "train.py:10",
        "def train_step(x, y):",
        (ReboundName("train_loss", "train.py:31", "train.py:30", metric=True),),
    )
    (finding,) = run(eager(LOOP, step_code=code))
    assert "# train.py:10: above `def train_step(x, y):`\n@tf.function(jit_compile=True)" in (
        finding.fix
    )
    assert "# train_loss: made anew by the loop at train.py:30 (train.py:31);" in finding.fix
    assert "\ntrain_loss.reset_state()\n" in finding.fix
    assert "def <your train step>" not in finding.fix
    loop = StepCode(None, "walk.py:15", "def train_step(x, y):")
    (finding,) = run(eager(LOOP, step_code=loop))
    assert "# walk.py:15: the body of this loop as one function" in finding.fix
    assert "# and the loop's body becomes: train_step(x, y)" in finding.fix


def test_under_a_mirrored_strategy_the_fix_leaves_xla_out():
    from dataclasses import replace

    from gpuwhy.facts import DistributeFacts

    mirrored = DistributeFacts(strategy="MirroredStrategy", replicas=2)
    facts = replace(eager(LOOP), distribute=mirrored)
    (finding,) = run(facts)
    code = [line for line in finding.fix.splitlines() if not line.startswith("#")]
    assert not any("jit_compile=True" in line.partition("#")[0] for line in code)
    assert "@tf.function   # not jit_compile=True under MirroredStrategy (2 replicas)" in (
        finding.fix
    )
    assert "compile only the loss and gradients" in finding.fix
    one = replace(facts, distribute=replace(mirrored, replicas=1))
    assert "@tf.function(jit_compile=True)" in run(one)[0].fix


def test_keras_fit_run_eagerly_is_fixed_by_the_switch_not_by_a_tf_function():
    """fit's ops come from Keras' train step (no code of the program's to wrap): fit
    traces it unless run_eagerly=True or run_functions_eagerly(True) said not to."""
    from dataclasses import replace

    from gpuwhy.facts import ProgramFacts, StepFacts, StepLoop

    fit = StepLoop("keras-fit", "Model.fit at train.py:30", 100, 0.0)
    steps = StepFacts("keras-fit", "Model.fit", 100, loops=(fit,))
    facts = replace(eager(LOOP), steps=steps)
    (finding,) = run(facts)
    assert "model.compile(..., run_eagerly=False)" in (finding.fix or "")
    assert "def <your train step>" not in (finding.fix or "")
    # the compile that said run_eagerly=True is the line to change, not fit's
    said = replace(facts, program=ProgramFacts(("train.py",), keras_run_eagerly_at="train.py:24"))
    (finding,) = run(said)
    assert finding.location == "train.py:24"
    assert "the compile at train.py:24 runs fit's train step eagerly" in finding.fix
    assert "run_functions_eagerly" not in finding.fix  # not what this script did
