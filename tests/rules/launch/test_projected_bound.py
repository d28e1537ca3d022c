"""launch.projected-bound from small projection facts."""

from dataclasses import replace

from gpuwhy.facts import Facts, PipelineStage, StepFacts
from gpuwhy.rules.launch.projected_bound import ProjectedLaunchBound
from tests import builders as b
from tests import builders_tfdata as t

SMALL = b.projection(
    "H100",
    "train_step (train.py:12)",
    step=(0.0030, 0.002, 0.0045),
    parts=(0.0002, 0.0027, 0.0001),
    kernels=700,
    launch_bound_s=0.0024,
    launch_bound_kernels=600,
)


def check(projection):
    return ProjectedLaunchBound().check(
        Facts(projection=projection), dict(ProjectedLaunchBound.options)
    )


def test_a_step_of_tiny_kernels_is_launch_bound_on_the_target():
    (f,) = check(SMALL)
    assert f.severity == "medium"
    assert f.title == (
        "On H100 (projected), 80% of the step is kernel launches: 600 kernels of "
        "train_step (train.py:12) do less work than it takes to launch them"
    )
    assert "@tf.function(jit_compile=True)" in f.fix
    assert "not a measurement" in f.evidence["what"]
    (compiled,) = check(replace(SMALL, jit_compile=True))
    assert "jit_compile" not in compiled.fix  # already written: not suggested again


def test_a_step_of_real_work_is_not():
    assert check(replace(SMALL, launch_bound_s=0.0010)) == []


def test_a_cudnn_rnn_s_timesteps_get_no_xla_advice():
    """Keras compiles no step with XLA on a GPU for a model with a cuDNN LSTM: the fix
    is the batch, not jit_compile."""
    (f,) = check(replace(SMALL, cudnn_rnn=("encoder",)))
    assert "jit_compile" not in f.fix and "cuDNN runs encoder one timestep" in f.fix
    assert "a larger batch" in f.fix


def test_under_a_mirrored_strategy_xla_is_offered_for_the_gradients_only():
    from gpuwhy.facts import DistributeFacts

    facts = Facts(
        projection=SMALL, distribute=DistributeFacts(strategy="MirroredStrategy", replicas=2)
    )
    (f,) = ProjectedLaunchBound().check(facts, dict(ProjectedLaunchBound.options))
    assert "model.compile(..., jit_compile=True)" not in f.fix
    assert not any(line.startswith("@tf.function(jit_compile") for line in f.fix.splitlines())
    assert "compile only the loss and gradients" in f.fix


def test_an_xla_step_s_fix_says_fusion_is_done_and_gives_the_batch():
    """Keras compiles its step with XLA on a GPU: the fix offers no jit_compile again and
    names the batch to raise, not a bare fragment."""
    (f,) = check(replace(SMALL, jit_compile=True, batch=32))
    assert "jit_compile" not in f.fix
    assert "already XLA-compiled" in f.fix and "batch 32 -> 64" in f.fix


def test_a_step_whose_host_work_outlasts_the_gpu_s_is_the_host_s():
    """A small model at a small batch: the GPU's part 0.2 ms, the host's (measured here)
    0.9 ms: the GPU would wait for the host, and the fix is fewer calls."""
    host = replace(
        SMALL,
        step_s=0.0009,
        launch_bound_s=0.0001,
        device_s=0.0002,
        host_s=0.0009,
        host_between_s=0.0002,
        call_overhead_s=0.0007,
        function="multi_step_on_iterator (train.py:40)",
    )
    (f,) = check(host)
    assert f.title == (
        "On H100 (projected), the GPU would wait for its host 78% of the step: the host's "
        "own work takes 0.9 ms a step (0.2 ms between its calls and 0.7 ms in each call "
        "outside its ops, measured here), the GPU's 0.2 ms in multi_step_on_iterator "
        "(train.py:40)"
    )
    assert f.location == "train.py:40"
    assert "@tf.function\ndef train_steps(iterator, steps):" in f.fix  # a custom loop
    fit = StepFacts(source="keras-fit", marker="Model.fit (train.py:40)", count=100)
    (keras,) = ProjectedLaunchBound().check(
        Facts(projection=host, steps=fit), dict(ProjectedLaunchBound.options)
    )
    assert keras.fix.startswith("model.compile(..., steps_per_execution=32)")
    # what else it changes: per-batch callbacks see one batch a call
    assert "on_train_batch_begin/end once a call" in keras.fix
    assert "sees every 32nd batch" in keras.fix
    # the GPU's part the larger: no host finding
    assert check(replace(host, device_s=0.0008, host_s=0.0006)) == []


def test_host_work_beside_an_input_that_holds_the_step_or_the_gil_is_not_the_host_s():
    host = replace(
        SMALL, step_s=0.004, launch_bound_s=0.0001, device_s=0.001, host_s=0.004,
        call_overhead_s=0.004,
    )  # fmt: skip
    assert len(check(host)) == 1
    # the steps would wait for their input: input.projected-bound says it
    assert check(replace(host, input_wait_fraction=0.9)) == []
    # a numpy_function in the steps' pipeline: the call waited for the GIL it held
    python = t.example_pipeline(
        stages=(PipelineStage("ParallelMapV2", "map", ("map",), "t.py:3", python=True),),
        consumer="python-loop",
    )
    facts = t.facts(python, steps=t.loop_steps())
    found = ProjectedLaunchBound().check(
        replace(facts, projection=host), dict(ProjectedLaunchBound.options)
    )
    assert found == []


def test_a_step_of_unknown_sizes_is_an_upper_bound_and_low():
    """A video model fed by a generator whose signature leaves every dimension unknown:
    half its convolutions left out and 1,167 of 2,853 kernels counted as launches only:
    the launches' share is an upper bound, low; the verdict's step is "at least"."""
    from gpuwhy.verdict import projection_clause

    unsized = replace(SMALL, tensor_ops=132, tensor_ops_unsized=67)
    (f,) = check(unsized)
    assert f.severity == "low"
    assert f.title.endswith(
        "(an upper bound: 67 of 132 matmuls/convolutions of unknown size left out)"
    )
    many = replace(SMALL, kernels=2853, kernels_unsized=1167)
    (g,) = check(many)
    assert g.severity == "low" and "1,167 of 2,853 kernels of unknown size" in g.title
    assert check(replace(SMALL, kernels_unsized=100))[0].severity == "medium"  # a seventh
    assert "step at least 3.0 ms" in projection_clause(unsized)
    assert "step at least" not in projection_clause(SMALL)


def test_a_function_that_loops_over_a_dataset_gets_xla_on_the_step_it_runs():
    """The distribute tutorial's distributed_train_epoch loops over its dataset inside:
    jit_compile=True on it raised InvalidArgumentError (no OptionsDataset kernel for
    XLA), pasted by a new user; the step it runs compiles."""
    from gpuwhy.facts import (
        AuditedFunction,
        OpGroup,
        PlacementFacts,
        TracedFunction,
        TracingFacts,
    )

    epoch = "distributed_train_epoch (train.py:194)"
    placement = PlacementFacts(
        predicted=True,
        functions=(
            AuditedFunction("distributed_train_step", 700, 600, 90, 10, trains=True),
            AuditedFunction("eval_step", 170, 108, 62, 0, trains=False),
        ),
        groups=(
            OpGroup(op="IteratorGetNextAsOptional", in_dtypes=("resource",), out_dtypes=("variant",), device="CPU", computes_on="CPU",
                    reason="colocated", count=2, functions=(epoch,)),
            OpGroup(op="MatMul", in_dtypes=("float32",), out_dtypes=("float32",), device="GPU", computes_on="GPU", reason="kernel",
                    count=4, functions=(epoch,)),
        )
    )  # fmt: skip
    tracing = TracingFacts(
        functions=(
            TracedFunction("distributed_train_step", "train.py:122", calls=208),
            TracedFunction("eval_step", "train.py:166", calls=300),  # more calls, no training
            TracedFunction("distributed_train_epoch", "train.py:194", calls=2),
        )
    )
    facts = Facts(projection=replace(SMALL, function=epoch), placement=placement, tracing=tracing)
    (f,) = ProjectedLaunchBound().check(facts, dict(ProjectedLaunchBound.options))
    assert "@tf.function(jit_compile=True)   # on distributed_train_step (train.py:122)" in f.fix
    assert f"on {epoch}" not in f.fix
    # a step with no dataset op in it: XLA on the step itself, as before
    plain = replace(facts, placement=replace(placement, groups=placement.groups[1:]))
    (f,) = ProjectedLaunchBound().check(plain, dict(ProjectedLaunchBound.options))
    assert f"@tf.function(jit_compile=True)   # on {epoch}" in f.fix


def test_the_compile_line_names_the_model_the_program_fits(tmp_path):
    """keras-io's VAE fits ``vae``: the line to paste is ``vae.compile(...)``, not a
    ``model`` the program does not have."""
    script = tmp_path / "vae.py"
    script.write_text(
        "vae = VAE(encoder, decoder)\nvae.fit(mnist_digits, epochs=2, batch_size=128)\n"
    )
    host = replace(
        SMALL, step_s=0.0023, launch_bound_s=0.0001, device_s=0.0007, host_s=0.0023,
        call_overhead_s=0.0016, function=f"multi_step_on_iterator ({script}:2)",
    )  # fmt: skip
    fit = StepFacts(source="keras-fit", marker=f"Model.fit at {script}:2", count=110)
    (keras,) = ProjectedLaunchBound().check(
        Facts(projection=host, steps=fit), dict(ProjectedLaunchBound.options)
    )
    assert keras.fix.startswith("vae.compile(..., steps_per_execution=32)")
