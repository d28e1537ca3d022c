"""input.bound where the wait is the first pass over a cached pipeline: the pass that
runs the preprocessing and fills the cache. The passes after it keep up, so the finding
is low, says so, offers nothing already written, and the verdict places the wait; a
pipeline whose later passes still wait keeps its finding. A pass of unknown length (a
generator's) is read from many passes; a Python stage before the cache is low too."""

from dataclasses import replace

import pytest

from gpuwhy.facts import ProgramFacts
from gpuwhy.rules.input.bound import InputBound
from gpuwhy.rules.input.python_function import PythonFunction
from gpuwhy.verdict import verdict
from tests import builders_tfdata as t

PASS = 100  # steps per pass (the pipeline's cardinality)


def check(facts):
    return InputBound().check(facts, dict(InputBound.options))


def cached_pipeline(**changes):
    stages = (
        t.tfrecord(),
        t.parse(),
        t.stage(name="MemoryCache", kind="cache", written_as=("cache",), location="train.py:52"),
        t.batch(),
        t.prefetch(),
    )
    return t.pipeline(
        *stages,
        **{"bottleneck": 1, "cache_written": True, "cardinality": PASS, "iterators": 4, **changes},
    )


def four_passes(first_ms=30.0, later_ms=2.0, waits=None, **changes):
    """Keras fit over 4 passes: the first pass's steps ``first_ms`` each, the rest
    ``later_ms``; the wait measured over the run by the gap timer (no per-step waits)."""
    durations = tuple([first_ms / 1000] * PASS + [later_ms / 1000] * (3 * PASS))
    total = sum(durations[1:])
    waited = (first_ms - later_ms) / 1000 * (PASS - 1)
    return t.fit_steps(
        wait=round(waited / total, 4),
        count=4 * PASS,
        total_s=total,
        durations=durations,
        input_waits=waits or (None,) * len(durations),
        **changes,
    )


def test_a_wait_that_is_the_first_pass_filling_the_cache_is_low_and_says_so():
    (f,) = check(t.facts(cached_pipeline(), steps=four_passes()))
    assert f.severity == "low"
    assert "in the first pass over the data, which fills its cache at train.py:52" in f.title
    assert "its 99 steps after warm-up took 2,970.0 ms (30.0 ms each)" in f.title
    assert "the 300 after it 2.0 ms each" in f.title
    assert f.evidence["first_pass_steps"] == PASS and f.evidence["later_step_mean_ms"] == 2.0
    assert ".cache()" not in f.fix and "nothing to add" in f.fix  # never repeats what is written
    assert f.location == "train.py:52"


def test_the_verdict_places_the_wait_in_the_first_pass():
    facts = replace(
        t.facts(cached_pipeline(), steps=four_passes()),
        program=ProgramFacts(command=("train.py",), seconds=5.0, tensorflow_imported=True),
    )
    text = verdict(facts, check(facts))
    assert "waiting for input, in the first pass (it fills the cache)" in text
    assert "slowest stage" not in text


def loop_passes(later_wait_s):
    """A Python loop over 4 passes, each step's wait recorded (next() timing): 25 ms of
    each 30 ms first-pass step, ``later_wait_s`` of each 10 ms step after it."""
    durations = tuple([0.030] * PASS + [0.010] * (3 * PASS))
    waits = tuple([0.025] * PASS + [later_wait_s] * (3 * PASS))
    return t.loop_steps(
        wait=0.5, count=4 * PASS, total_s=sum(durations[1:]), durations=durations,
        input_waits=waits,
    )  # fmt: skip


def test_later_passes_that_still_wait_keep_the_finding():
    (f,) = check(t.facts(cached_pipeline(consumer="python-loop"), steps=loop_passes(0.004)))
    assert f.severity == "high" and "first pass" not in f.title


def test_later_passes_measured_to_keep_up_make_it_low():
    (f,) = check(t.facts(cached_pipeline(consumer="python-loop"), steps=loop_passes(0.0001)))
    assert f.severity == "low" and "waiting 1% of the time" in f.title


def test_no_cache_one_pass_or_a_first_pass_no_slower_keep_the_finding():
    assert (
        check(t.facts(cached_pipeline(cache_written=False), steps=four_passes()))[0].severity
        == "high"
    )
    assert check(t.facts(cached_pipeline(iterators=1), steps=four_passes()))[0].severity == "high"
    assert (
        check(t.facts(cached_pipeline(cardinality=None), steps=four_passes()))[0].severity == "high"
    )
    # the first pass only 1.5x slower: its difference does not explain the wait
    slow_later = four_passes(first_ms=30.0, later_ms=20.0)
    steady = replace(slow_later, input_wait_fraction=0.4)
    assert check(t.facts(cached_pipeline(), steps=steady))[0].severity == "high"


def kept_first(steps, kept):
    """``steps`` as a long run's record holds them: the first ``kept`` one by one, the
    sums over all of them."""
    return replace(
        steps,
        durations=steps.durations[:kept],
        input_waits=steps.input_waits[:kept],
        all_kept=False,
    )


def consistent_loop_passes(later_wait_s):
    """:func:`loop_passes` with its wait share the one its steps add up to."""
    steps = loop_passes(later_wait_s)
    waited = sum(w or 0.0 for w in steps.input_waits[1:])
    return replace(steps, input_wait_fraction=waited / steps.total_s)


@pytest.mark.parametrize("later_wait_s", [0.0001, 0.004])
def test_a_long_run_is_judged_on_every_step_after_its_first_pass(later_wait_s):
    # the record keeps the first 150 steps one by one: the first pass, and the run's
    # sums give the 300 steps after it, as when every step is kept
    whole = consistent_loop_passes(later_wait_s)
    pipeline = cached_pipeline(consumer="python-loop")
    (kept,) = check(t.facts(pipeline, steps=whole))
    (long,) = check(t.facts(pipeline, steps=kept_first(whole, 150)))
    assert long.severity == kept.severity == ("low" if later_wait_s < 0.001 else "high")
    assert long.title == kept.title
    assert long.evidence == kept.evidence


def test_a_long_fit_is_judged_on_every_step_after_its_first_pass():
    whole = four_passes()
    (kept,) = check(t.facts(cached_pipeline(), steps=whole))
    (long,) = check(t.facts(cached_pipeline(), steps=kept_first(whole, 150)))
    assert long.severity == kept.severity == "low" and long.title == kept.title
    assert "the 300 after it 2.0 ms each" in long.title


def test_a_first_pass_beyond_the_kept_steps_is_not_split():
    long = kept_first(four_passes(), 50)
    assert check(t.facts(cached_pipeline(), steps=long))[0].severity == "high"


def passes(count, per_pass, last=None, first_ms=30.0, later_ms=2.0):
    """Keras fit over ``count`` passes of ``per_pass`` steps, the last one ``last`` steps
    long (a bounded run stops part-way), timed as :func:`four_passes`."""
    steps = per_pass * (count - 1) + (last or per_pass)
    durations = tuple([first_ms / 1000] * per_pass + [later_ms / 1000] * (steps - per_pass))
    total = sum(durations[1:])
    waited = (first_ms - later_ms) / 1000 * (per_pass - 1)
    return t.fit_steps(
        wait=round(waited / total, 4),
        count=steps,
        total_s=total,
        durations=durations,
        input_waits=(None,) * steps,
    )


@pytest.mark.parametrize("last", [None, 7])
def test_a_pass_of_unknown_length_is_read_from_many_passes(last):
    """A from_generator source: TF does not know the pipeline's length. Over 20 passes
    (one iterator each, the last whole or cut short) it is the steps' only reading."""
    pipeline = cached_pipeline(cardinality=None, iterators=20)
    (f,) = check(t.facts(pipeline, steps=passes(20, 20, last)))
    assert f.severity == "low" and f.evidence["first_pass_steps"] == 20
    assert "its 19 steps after warm-up took 570.0 ms (30.0 ms each)" in f.title


def test_too_few_passes_leave_an_unknown_length_unread():
    # 3 passes of 100 (the last of 100 or of 1 to 100): 100 to 149 steps a pass
    pipeline = cached_pipeline(cardinality=None, iterators=3)
    assert check(t.facts(pipeline, steps=passes(3, 100, 40)))[0].severity == "high"


def generator_cached_pipeline(**changes):
    stages = (
        t.generator_source(),
        t.stage(name="MemoryCache", kind="cache", written_as=("cache",), location="train.py:52"),
        t.batch(),
        t.prefetch(),
    )
    return t.pipeline(
        *stages,
        **{"bottleneck": 0, "cache_written": True, "cardinality": None, "iterators": 20, **changes},
    )


def test_a_python_generator_before_a_cache_filled_in_the_first_pass_is_low():
    """The generator runs in the first pass only: the cache serves every pass after it,
    so its Python is not what the steps wait for."""
    python = PythonFunction()
    options = dict(PythonFunction.options)
    (f,) = python.check(t.facts(generator_cached_pipeline(), steps=passes(20, 20)), options)
    assert f.severity == "low"
    assert "; it runs in the first pass only, which fills the cache at train.py:52: " in f.title
    assert "wait for input" not in f.title
    # the same pipeline with no cache written: its generator is what the steps wait for
    (uncached,) = python.check(
        t.facts(generator_cached_pipeline(cache_written=False), steps=passes(20, 20)), options
    )
    assert uncached.severity == "high" and "first pass" not in uncached.title
