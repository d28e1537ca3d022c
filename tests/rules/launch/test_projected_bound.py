"""launch.projected-bound from small projection facts."""

from dataclasses import replace

from gpuwhy.facts import Facts
from gpuwhy.rules.launch.projected_bound import ProjectedLaunchBound
from tests import builders as b

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
