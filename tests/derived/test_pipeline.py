"""The steps' pipeline, one choice for the rules, the verdict, the projection and the
run's collectors; and its slowest stage."""

from dataclasses import replace

from gpuwhy.derived.pipeline import NEXT_TIMING, bottleneck, culprit_location, steps_pipeline
from gpuwhy.derived.pipeline_stages import batched_later, vectorisable
from gpuwhy.facts import PipelineFacts, PipelineStage
from tests import builders_tfdata as t


def timed_loop(pipeline_id: int, elements: int, wait_s: float, **changes) -> PipelineFacts:
    """A Python loop's pipeline whose next() calls were timed: ``wait_s`` per element."""
    base = t.example_pipeline(
        id=pipeline_id,
        consumer="python-loop",
        elements=elements,
        wait_per_element_s=wait_s,
        wait_source=NEXT_TIMING,
    )
    return replace(base, **changes)


def chosen(*pipelines: PipelineFacts, steps=None) -> int | None:
    facts = t.facts(*pipelines, steps=steps or t.loop_steps())
    found = steps_pipeline(facts.tfdata, facts.steps)
    return None if found is None else found.id


def test_keras_fit_reads_its_fit_pipeline_with_the_most_elements():
    validation = t.example_pipeline(id=1, elements=30)
    train = t.example_pipeline(id=2, elements=300)
    evaluate = t.example_pipeline(id=3, consumer="keras-evaluate", elements=900)
    loop = timed_loop(4, elements=900, wait_s=0.1)
    assert chosen(validation, train, evaluate, loop, steps=t.fit_steps()) == 2


def test_a_loop_without_next_timings_reads_the_pipeline_with_the_most_elements():
    small = t.example_pipeline(id=1, consumer="python-loop", elements=40)
    large = t.example_pipeline(id=2, consumer="python-loop", elements=400)
    fit = t.example_pipeline(id=3, elements=4000)
    assert chosen(small, large, fit) == 2


def test_timed_loops_read_the_pipeline_they_waited_for_longest_not_the_largest():
    """Where the two old definitions differed: the projection's (collect/inprocess/
    input_wait.py) took the loop's pipeline with the most elements (here 1), the rules'
    the one the loop spent longest in next() for (2: 40 x 10 ms against 80 x 1 ms)."""
    largest = timed_loop(1, elements=80, wait_s=0.001)
    waited = timed_loop(2, elements=40, wait_s=0.010)
    assert chosen(largest, waited) == 2
    # an untimed pipeline is not compared by its wait, however large
    untimed = t.example_pipeline(id=3, consumer="python-loop", elements=4000)
    assert chosen(largest, waited, untimed) == 2
    # a timed pipeline that never waited is not timed
    assert chosen(timed_loop(1, elements=80, wait_s=0.0), untimed) == 3


def test_one_cause_wrapped_by_several_pipelines_adds_up_its_waits():
    """Three pipelines around one generator (train.py:12) waited 3 x 0.4 s in all; a
    map-heavy pipeline 0.8 s alone: the generator is the cause, and its pipeline that
    waited longest speaks for it."""

    def generator(pipeline_id, elements):
        return timed_loop(
            pipeline_id,
            elements=elements,
            wait_s=0.010,
            stages=(t.generator_source(), t.batch()),
            bottleneck=0,
        )

    other = timed_loop(9, elements=80, wait_s=0.010)
    assert chosen(generator(1, 40), generator(2, 45), generator(3, 40), other) == 2
    # apart (three places), each generator pipeline waited less than the other one
    apart = [
        replace(p, stages=(t.generator_source(function_location=f"gen.py:{p.id}"), t.batch()))
        for p in (generator(1, 40), generator(2, 45), generator(3, 40))
    ]
    assert chosen(*apart, other) == 9


def test_pipelines_without_a_bottleneck_are_each_their_own_cause():
    first = timed_loop(1, elements=40, wait_s=0.010, bottleneck=None)
    second = timed_loop(2, elements=50, wait_s=0.010, bottleneck=None)
    assert chosen(first, second) == 2


def test_no_steps_no_tfdata_or_no_pipeline_of_the_steps_is_none():
    pipeline = t.example_pipeline()
    assert steps_pipeline(t.tfdata(pipeline), None) is None
    assert steps_pipeline(None, t.fit_steps()) is None
    assert chosen(pipeline, steps=t.loop_steps()) is None  # fit's pipeline, a loop's steps


def test_the_bottleneck_is_the_stage_at_the_collector_s_index():
    pipeline = t.example_pipeline()
    stage = bottleneck(pipeline)
    assert stage is pipeline.stages[2] and stage.function == "augment"
    assert bottleneck(replace(pipeline, bottleneck=None)) is None
    # a saved record's index out of range names no stage
    assert bottleneck(replace(pipeline, bottleneck=len(pipeline.stages))) is None
    assert bottleneck(replace(pipeline, bottleneck=-1)) is None


def test_the_culprit_is_the_function_else_the_transformation():
    stage = t.augment(function_location="aug.py:3", location="train.py:47")
    assert culprit_location(stage) == "aug.py:3"
    assert culprit_location(replace(stage, function_location=None)) == "train.py:47"
    assert culprit_location(t.prefetch()) is None


def test_a_map_is_batched_first_only_where_the_batch_follows_it():
    cheap = PipelineStage(
        "ParallelMapV2", "map", ("map",), "t.py:3", function="parse", elements=12800,
        self_time_s=0.1,
    )  # fmt: skip
    batch = PipelineStage("BatchV2", "batch", ("batch",), "t.py:3")
    shuffle = PipelineStage("Shuffle", "shuffle", ("shuffle",), "t.py:3")
    prefetch = PipelineStage("Prefetch", "prefetch", (), None)  # one TF added
    direct = PipelineFacts(1, stages=(cheap, prefetch, batch))
    assert batched_later(direct, 0) and vectorisable(direct, 0, 50e-6)
    # batched first, the shuffle would shuffle whole batches
    between = PipelineFacts(1, stages=(cheap, shuffle, batch))
    assert not batched_later(between, 0) and not vectorisable(between, 0, 50e-6)
    unwritten = PipelineFacts(1, stages=(cheap, PipelineStage("Shuffle", "shuffle"), batch))
    assert not batched_later(unwritten, 0)
