"""The step profile's type, as the collector fills it and the projection reads it."""

from gpuwhy.facts.step_profile import NodeTime, StepProfile


def test_a_profile_says_how_it_was_measured():
    profile = StepProfile(
        function="train_step",
        steps=4,
        step_s=0.02,
        nodes=(NodeTime("StringToNumber", "StringToNumber", 0.001),),
        nodes_left_out=0,
        kernels=(("StringToNumber", 0.001),),
    )
    assert profile.measured_by == "TF profiler host trace of 4 step(s) of train_step"
    assert profile.collective_steps == 0 and profile.collective_wait_s is None
