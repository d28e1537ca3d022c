"""FigureWatch against the installed matplotlib: pyplot's open figures counted, the line
of the program that made them read, and matplotlib's own warnings left naming it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

from gpuwhy.collect.inprocess.open_figures import FigureWatch  # noqa: E402

HERE = Path(__file__).name


def line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.endswith(f"# @{marker}"))


def save_a_picture(plt):
    fig = plt.figure(figsize=(2, 2))  # @made
    plt.plot([1, 2, 3])
    return fig


@pytest.fixture
def plt():
    import matplotlib.pyplot as pyplot

    pyplot.close("all")
    yield pyplot
    pyplot.close("all")


def test_open_figures_are_counted_and_located_at_the_programs_line(plt):
    watch = FigureWatch()
    watch.poll(0.5)
    for _ in range(3):
        save_a_picture(plt)
    figure, _ = plt.subplots(2, 2)  # @subplots
    watch.poll(1.5)
    facts = watch.fact()
    assert facts is not None
    assert (facts.first, facts.last, facts.most) == (0, 4, 4)
    assert facts.made_at is not None and facts.made_at.endswith(f"{HERE}:{line_of('made')}")
    assert facts.made == 3
    assert facts.made_written == "fig = plt.figure(figsize=(2, 2))"
    plt.close("all")
    watch.poll(2.5)
    assert watch.fact().last == 0  # type: ignore[union-attr]
    watch.stop()


def test_matplotlibs_warning_still_names_the_programs_line_and_stop_gives_back(plt):
    from matplotlib import _pylab_helpers

    before = _pylab_helpers.Gcf.__dict__["_set_new_active_manager"]
    watch = FigureWatch()
    watch.poll(0.5)
    assert _pylab_helpers.Gcf.__dict__["_set_new_active_manager"] is not before
    with matplotlib.rc_context({"figure.max_open_warning": 2}):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                save_a_picture(plt)
    (warning,) = [w for w in caught if "figures have been opened" in str(w.message)]
    # where plain python says it: the program's line, not a frame of gpuwhy's
    assert (Path(warning.filename).name, warning.lineno) == (HERE, line_of("made"))
    watch.stop()
    assert _pylab_helpers.Gcf.__dict__["_set_new_active_manager"] is before


def test_nothing_without_pyplot_or_figures():
    watch = FigureWatch()
    assert watch.fact() is None
