"""A rewrite that caches, said pass by pass: its first pass fills the cache, the rest
read it; the gain over the program's own passes counts the first once."""

from dataclasses import replace

from gpuwhy.derived.cache_passes import cache_passes
from gpuwhy.facts import Facts, InputFix, InputFixFacts, PipelineChange, PipelineRate
from gpuwhy.verdict import verdict

CACHE = PipelineChange(
    kind="cache", stage="map(parse)", location="train.py:37", code=".cache()", why="decoded once"
)


def rate(median: float, first: float | None = None) -> PipelineRate:
    return PipelineRate(
        median=median, min=median, max=median, passes=5, elements_per_pass=47, first=first
    )


def rewrite(**changes) -> InputFix:
    base = InputFix(
        dataset="dataset created at train.py:37",
        iterators=3,
        before=rate(100.0, 100.0),
        after=rate(19_740.0, 110.0),  # 4 passes read the cache, the first filled it
        speedup=197.4,
        same_elements=True,
        changes=(CACHE,),
    )
    return replace(base, **changes)


def test_the_first_pass_is_said_apart_and_the_program_s_passes_count_it_once():
    split = cache_passes(rewrite())
    assert split is not None
    assert split.text == (
        "3.3x faster over the program's 3 passes (the first pass, which fills the cache, "
        "1.1x; each pass after it 197.4x)"
    )
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(rewrite(),))), [])
    assert text.startswith("Input pipeline 3.3x faster over the program's 3 passes (")
    assert "197.4x faster with" not in text


def test_a_cache_whose_later_passes_are_twice_as_fast_still_counts_its_first_pass():
    """keras-io's speaker recognition, its training set: a cache after the decode, an
    FFT map and a shuffle after it still live. The later passes ran 1.82x the original,
    the first (filling the cache) 0.91x: over the program's 6 passes, 1.6x."""
    speaker = rewrite(iterators=6, before=rate(31.21, 30.9), after=rate(56.66, 28.37), speedup=1.82)
    split = cache_passes(speaker)
    assert split is not None and round(split.over_run, 2) == 1.56
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(speaker,))), [])
    assert text.startswith("Input pipeline 1.6x faster over the program's 6 passes (")


def test_passes_not_counted_give_the_later_passes_gain_named_so():
    split = cache_passes(rewrite(iterators=0))
    assert split is not None and split.over_run is None
    assert split.text.startswith("197.4x faster on the passes after the first (")


def test_a_dataset_read_once_gets_its_first_pass_and_no_claimed_gain():
    once = rewrite(iterators=1)
    split = cache_passes(once)
    assert split is not None and split.over_run == split.first
    assert split.text.startswith(f"{split.first:,.1f}x faster over the program's one pass")
    # the verdict claims no gain a cache read back only by the timed passes gave
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(once,))), [])
    assert not text.startswith("Input pipeline"), text


def test_no_cache_or_a_first_pass_as_fast_as_the_rest_is_no_split():
    parallel = replace(CACHE, kind="parallel-map", code="num_parallel_calls=AUTOTUNE")
    assert cache_passes(rewrite(changes=(parallel,))) is None
    assert cache_passes(rewrite(after=rate(19_740.0, 18_000.0))) is None  # cached already
    assert cache_passes(rewrite(after=rate(19_740.0))) is None  # a record from before


def test_a_preview_timed_one_element_a_pass_is_not_the_headline():
    """A take(1) preview's rewrite timed over passes of one element: its rate is the
    pipeline's start-up; the training pipeline's result is what the verdict says."""
    prefetch = PipelineChange(
        "prefetch", "batch(32)", "train.py:12", ".prefetch(tf.data.AUTOTUNE)", "why"
    )
    peek = replace(
        rewrite(),
        dataset="dataset created at train.py:50",
        iterators=1,
        before=PipelineRate(100.0, 90.0, 110.0, 5, 1),
        after=PipelineRate(108.0, 95.0, 120.0, 5, 1),
        speedup=1.08,
        changes=(prefetch,),
    )
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(peek,))), [])
    assert not text.startswith("Input pipeline"), text
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(peek, rewrite()))), [])
    assert "train.py:37" in text and "train.py:50" not in text
