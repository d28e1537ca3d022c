"""A fix whose gain the planned rounds left unclear gets more rounds (modes/trial._rounds):
one at a time, only for the unclear fixes, with the original's, until each is called or
MORE_ROUNDS are spent; a fix that failed, differs or is slower gets none."""

from __future__ import annotations

from types import SimpleNamespace

from gpuwhy.facts import Facts, FixTried
from gpuwhy.modes.trial import MORE_ROUNDS, _rounds, _unclear
from gpuwhy.trial.candidate import FixCandidate


def tried(**changes) -> FixTried:
    base = dict(ran=True, same_results=True, speedup=1.43, called="same")
    return FixTried("placement.float64", "float32", **{**base, **changes})


def test_only_a_same_results_gain_whose_interval_reaches_no_change_is_unclear():
    assert _unclear(tried())
    assert not _unclear(tried(called="faster"))  # proven
    assert not _unclear(tried(speedup=1.02))  # no gain to prove
    assert not _unclear(tried(same_results=None))  # nothing compared: more runs won't say
    assert not _unclear(tried(same_results=False))
    assert not _unclear(tried(ran=False))
    assert not _unclear(tried(projected=True))  # its projection does not narrow


def rounds(verdicts, planned=2):
    """Two candidates; ``verdicts(i, n)``: fix i's judgement after n runs of it."""
    candidates = [FixCandidate("a", f"fix {i}", ()) for i in range(2)]
    log: list[str] = []

    def run(name, _edits):
        log.append(name)
        return SimpleNamespace(
            error=None, status=0, seconds=1.0, record=SimpleNamespace(facts=Facts())
        )

    originals: list = ["diagnosis"]
    runs: dict[int, list] = {0: [], 1: []}
    _rounds(candidates, planned, originals, runs, run, lambda i: verdicts(i, len(runs[i])), print)
    return log, runs


def test_the_unclear_fix_runs_again_beside_the_original_until_it_is_called():
    def verdicts(i, n):
        return tried(called="faster" if n >= 3 else "same") if i == 0 else tried(called="faster")

    log, runs = rounds(verdicts)
    assert log == ["fix 0", "fix 1", "original", "fix 0", "fix 1", "original", "fix 0"]
    assert (len(runs[0]), len(runs[1])) == (3, 2)


def test_more_rounds_stop_at_their_limit():
    """4 planned rounds of 2 fixes: 16 runs of cost, 12 spent; the slower fix can join
    no together stage, so the 4 left pay for 2 more rounds of the unclear one."""
    log, runs = rounds(lambda i, n: tried() if i == 0 else tried(called="slower"), planned=4)
    assert (len(runs[0]), len(runs[1])) == (4 + MORE_ROUNDS, 4)
    assert log.count("original") == 3 + MORE_ROUNDS  # the first round's is the diagnosis


def test_more_rounds_stay_within_the_trial_s_cost():
    """(fixes + 2) x runs: with 2 fixes and 2 planned rounds, 8 runs. The planned
    rounds spend 6 (the diagnosis and a second original, 2 x 2 fixes); one more round of
    both unclear fixes costs 3 (9 > 8): none. With one unclear fix and one that was
    refused (slower), a round costs 2 (8): it runs, and no together stage is kept."""
    log, runs = rounds(lambda i, n: tried())
    assert len(runs[0]) == len(runs[1]) == 2

    log, runs = rounds(lambda i, n: tried() if i == 0 else tried(called="slower"))
    assert (len(runs[0]), len(runs[1])) == (3, 2)
