"""The fixes that held, run together (modes/trial._together): what it returns on each
path, so the trial always gets (judgement, the fixes the patch keeps, interrupted)."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwhy.facts import FixTried
from gpuwhy.modes.trial import _together
from gpuwhy.trial.candidate import FixCandidate
from gpuwhy.trial.source_edits import Edit


def _held(finding: str, line: int, speedup: float) -> tuple[FixCandidate, FixTried]:
    edit = Edit("train.py", line, 0, line, 0, "# fixed\n")
    location = f"train.py:{line}"
    candidate = FixCandidate(finding, f"fix {finding}", (edit,), location=location)
    tried = FixTried(finding, f"fix {finding}", location, ran=True, same_results=True)
    return candidate, FixTried(**{**tried.__dict__, "speedup": speedup, "held": True})


def test_one_fix_that_held_is_the_patch_and_nothing_runs():
    candidate, tried = _held("launch.eager-ops", 3, 2.0)

    def run(*_args):
        raise AssertionError("nothing runs together")

    options = SimpleNamespace(runs=2)
    assert _together([candidate], [tried], [], run, options, 10.0, print) == (None, [0], False)


def test_a_ctrl_c_while_they_run_together_keeps_the_best_one_and_says_it_was_interrupted():
    eager, eager_tried = _held("launch.eager-ops", 3, 2.0)
    pipeline, pipeline_tried = _held("input.bound", 9, 3.0)
    said: list[str] = []

    def run(*_args):
        raise KeyboardInterrupt

    options = SimpleNamespace(runs=2)
    combined, kept, interrupted = _together(
        [eager, pipeline], [eager_tried, pipeline_tried], [], run, options, 10.0, said.append
    )
    assert (combined, kept, interrupted) == (None, [1], True)  # the faster one
    assert any("interrupted" in line for line in said)


def test_of_two_fixes_for_one_place_the_patch_keeps_the_one_proven_faster():
    """A plain tf.function at 12.7x (8.3x-19.4x) and XLA at 12.9x (1.9x-88.7x): the
    plain one is known to give more."""
    from dataclasses import replace

    from gpuwhy.modes.trial import _best_held

    plain, plain_tried = _held("launch.eager-ops", 3, 12.71)
    xla, xla_tried = _held("launch.eager-ops", 3, 12.91)
    plain_tried = replace(plain_tried, speedup_low=8.34, speedup_high=19.39)
    xla_tried = replace(xla_tried, speedup_low=1.88, speedup_high=88.73)
    assert _best_held([plain, xla], [plain_tried, xla_tried]) == [0]


def test_a_fix_that_held_and_is_not_in_the_patch_says_why():
    from dataclasses import replace

    from gpuwhy.modes.trial import _left_out

    cache, cache_tried = _held("input.no-cache", 29, 2.5)
    first, first_tried = _held("input.bound", 29, 3.2)
    # the same call rewritten: the edits overlap
    first = replace(first, edits=(Edit("train.py", 29, 0, 29, 12, "ds.batch(8)"),))
    cache_tried = replace(cache_tried, speedup_low=2.1)
    first_tried = replace(first_tried, speedup_low=1.9)
    why = _left_out(1, [cache, first], [cache_tried, first_tried], [0])
    assert why == (
        "not in the patch: fix input.no-cache changes the same code, and held with a surer "
        "gain (at least 2.10x against 1.90x); try this one alone with --finding input.bound"
    )
    other, other_tried = _held("launch.eager-ops", 3, 2.0)
    assert "did not hold" in _left_out(1, [cache, other], [cache_tried, other_tried], [0])
