"""host.memory-growth named by matplotlib's open figures: pyplot keeps each figure until
plt.close, which no heap census names (its registry is matplotlib's)."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import OpenFigures
from gpuwhy.rules.host.memory_growth import MemoryGrowth
from tests.rules.host.test_memory_growth import MiB, facts

# a short run's growth (40 s, 2 MiB a second): too short for growth nothing names
GROWING = [900 * MiB + i * 2 * MiB for i in range(40)]


def with_figures(figures, rss=GROWING, first_s=0.0):
    built = facts(rss, first_s=first_s)
    assert built.timeline is not None
    return replace(built, timeline=replace(built.timeline, open_figures=figures))


def check(f):
    return MemoryGrowth().check(f, dict(MemoryGrowth.options))


def kept(**changes):
    figures = OpenFigures(
        first=0,
        last=40,
        most=40,
        first_at_s=1.0,
        last_at_s=39.0,
        made_at="dcgan.py:187",
        made_written="fig = plt.figure(figsize=(4, 4))",
        made=40,
    )
    return replace(figures, **changes)


def test_figures_left_open_name_the_growth_at_the_line_that_made_them():
    """TF's DCGAN tutorial (a figure an epoch, saved, never closed): the growth read
    "something keeps what each step makes" with a fix about a list of losses the
    program does not have, and no location; unnamed, this short a run says nothing."""
    assert check(facts(GROWING)) == []
    (finding,) = check(with_figures(kept()))
    assert finding.title.endswith(
        "about 1.9 MiB per figure): 40 matplotlib figures are open (made at dcgan.py:187, "
        "none closed): pyplot keeps every figure until plt.close"
    )
    assert "per step" not in finding.title
    assert finding.location == "dcgan.py:187"
    assert finding.fix.splitlines()[-3:] == [
        "fig = plt.figure(figsize=(4, 4))   # dcgan.py:187",
        "...   # drawn and saved (plt.savefig(...)) as before, then:",
        "plt.close(fig)",
    ]
    assert "losses" not in finding.fix
    assert finding.evidence["open_figures_last"] == 40
    assert finding.evidence["figures_made_at"] == "dcgan.py:187"


def test_the_fix_takes_the_programs_names_for_pyplot_and_the_figure():
    subplots = kept(made_written="figure, axes = pyplot.subplots(4, 4)")
    (finding,) = check(with_figures(subplots))
    assert finding.fix.splitlines()[-1] == "pyplot.close(figure)"
    unassigned = kept(made_written="plt.figure(figsize=(4, 4))")
    (finding,) = check(with_figures(unassigned))
    assert finding.fix.splitlines()[-1] == "plt.close()   # the current figure"


def test_figures_open_before_training_or_too_few_name_nothing():
    assert check(with_figures(kept(last=2, most=2))) == []
    # all made and read before the training (and its growth) began
    assert check(with_figures(kept(last_at_s=3.0), first_s=5.0)) == []
    (finding,) = check(with_figures(kept(first=10, first_at_s=2.0)))
    assert "40 matplotlib figures are open (made at dcgan.py:187, 30 more than at 2.0 s)" in (
        finding.title
    )
