"""The line under a fix that says gpuwhy fix can try it: the command to run, with the
run's --target where the report was made with one (its projected findings need it)."""

from gpuwhy.fixes.tried import tried_line


def test_the_command_carries_the_runs_target():
    assert tried_line("launch.projected-bound").startswith("gpuwhy fix SCRIPT tries")
    assert tried_line("launch.projected-bound", target="A100").startswith(
        "gpuwhy fix --target A100 SCRIPT tries"
    )
    assert "gpuwhy fix --target 'RTX 4090' SCRIPT" in tried_line("input.bound", target="RTX 4090")
    assert tried_line("env.no-gpu", target="A100") is None  # nothing gpuwhy can apply
    assert tried_line("input.bound", proven=True, target="A100").startswith("tried below")
