import html
import json
from dataclasses import replace

import pytest

from gpuwhy.facts import Activity, Facts, LoopStalls, Stall, StallBeat, StallCause, StallFacts
from gpuwhy.record import Record
from gpuwhy.report.renderers import RENDERERS, MisconfigurationError, renderer_class
from gpuwhy.report.run.json_ import JsonRenderer
from gpuwhy.schema import validation_errors
from tests import builders as b
from tests.report import builders as rb
from tests.report.test_html import page_text

EMPTY = Record.diagnose("run", Facts())
FULL = Record.diagnose(
    "check",
    b.facts(
        tf=b.no_gpu_tf(libraries=b.libraries(missing=("cudart",))),
        drv=b.NO_DRIVER,
        devices=(),
        env_vars={"CUDA_VISIBLE_DEVICES": "-1", "TF_GPU_ALLOCATOR": "bogus"},
    ),
)
HEALTHY = Record.diagnose("check", b.facts(devices=[b.gpu(0, processes=(b.process(),))]))


@pytest.mark.parametrize("name", RENDERERS)
@pytest.mark.parametrize("record", [EMPTY, FULL, HEALTHY], ids=["empty", "full", "healthy"])
def test_every_renderer_renders_every_record(name, record):
    text = renderer_class(name)().render(record)
    if name == "json":
        data = json.loads(text)
        assert validation_errors(data) == [] and data["verdict"]["text"] == record.verdict
    elif name == "sarif":  # the findings only, one result each
        run = json.loads(text)["runs"][0]
        assert run["properties"]["verdict"] == record.verdict
        assert [r["ruleId"] for r in run["results"]] == [f.id for f in record.findings]
    elif name == "html":  # the page from the record alone, every finding on it
        page = html.unescape(text)
        assert record.verdict in page
        for finding in record.findings:
            assert finding.id in page and finding.title in page
    else:
        assert record.verdict in text.splitlines()[0]
        for finding in record.findings:
            assert finding.id in text and finding.title in text


def test_terminal_starts_with_the_verdict_and_has_no_colour_when_piped():
    text = renderer_class("terminal")(color=False).render(FULL)
    assert text.splitlines()[0] == f"✗ {FULL.verdict}"
    assert "\x1b[" not in text
    assert all(line == line.rstrip() for line in text.splitlines())
    assert "cause 2: CUDA_VISIBLE_DEVICES='-1' hides every GPU" in text
    assert "     pip install" in text  # the fix, indented, uncut


def test_terminal_colours_on_a_terminal():
    assert "\x1b[" in renderer_class("terminal")(color=True).render(FULL)


def test_healthy_verdict_says_yes_and_names_the_gpu():
    first = renderer_class("terminal")().render(HEALTHY).splitlines()[0]
    assert first.startswith("✓ Yes: TensorFlow 2.21.0 ran a matmul on /job:localhost")
    assert "NVIDIA H100 80GB HBM3 (compute capability 9.0)" in first
    assert "; but: GPU 0 (NVIDIA H100 80GB HBM3) is shared" in first  # the worst finding follows


def test_verbose_adds_the_library_table():
    text = renderer_class("terminal")(verbose=True).render(FULL)
    assert "libcudart.so.12" in text and "missing (nvidia-cuda-runtime-cu12)" in text


def test_plugin_renderer_by_module_and_class():
    assert renderer_class("gpuwhy.report.run.json_:JsonRenderer") is JsonRenderer
    with pytest.raises(MisconfigurationError):
        renderer_class("gpuwhy.record:Record")
    with pytest.raises(MisconfigurationError):
        renderer_class("nope")


def _input_bound_run():
    from gpuwhy.facts import PipelineFacts, PipelineStage, ProgramFacts, StepFacts, TfDataFacts

    stages = (
        PipelineStage(name="Range", kind="source", written_as=("range",), elements=81),
        PipelineStage(
            name="Map",
            kind="map",
            written_as=("map",),
            function="parse",
            function_location="train.py:41",
            elements=80,
            python=True,
            self_time_per_element_s=0.06,
            root_elements_per_s=16.6,
        ),
        PipelineStage(name="Prefetch", kind="prefetch", elements=80),
    )
    return Facts(
        program=ProgramFacts(
            command=("train.py",),
            ended="completed",
            exit_code=0,
            seconds=9.0,
            tensorflow_imported=True,
        ),
        steps=StepFacts(
            source="tf-data",
            marker="next() at train.py:60",
            count=80,
            warmup=1,
            median_s=0.1,
            input_wait_fraction=0.63,
            input_wait_median_s=0.063,
        ),
        tfdata=TfDataFacts(
            pipelines=(
                PipelineFacts(
                    id=1,
                    consumer="python-loop",
                    elements=80,
                    stages=stages,
                    bottleneck=1,
                    location="train.py:44",
                ),
                PipelineFacts(
                    id=2, consumer="keras-evaluate", elements=900, stages=stages[:1], bottleneck=0
                ),
            )
        ),
    )


def test_run_verdict_names_the_slowest_stage_of_the_pipeline_the_steps_read():
    from gpuwhy.verdict import verdict

    text = verdict(_input_bound_run(), [])
    assert "63% of their time waiting for input (slowest stage: Map(parse at train.py:41))" in text


def test_run_verdict_says_an_unresolved_wait_as_the_steps_line_does():
    """A fit's wait of 6 % within its uncertainty of ±8.6 %: the Steps line said "not
    resolved from no wait" and the headline "6% of their time waiting for input"."""
    from gpuwhy.verdict import verdict

    run = _input_bound_run()
    assert run.steps is not None
    unresolved = replace(
        run,
        steps=replace(
            run.steps,
            source="keras-fit",
            input_wait_fraction=0.06,
            input_wait_error=0.086,
            input_wait_source="tf.data gap timer",
        ),
    )
    text = verdict(unresolved, [])
    assert "no wait for input shown (measured 6% of their time, ±8.6%: not told from none)" in text
    assert "of their time waiting for input" not in text


def test_terminal_shows_each_pipeline_and_verbose_its_stages_with_the_bottleneck_marked():
    record = Record.diagnose("run", _input_bound_run())
    text = renderer_class("terminal")().render(record)
    assert (
        "tf.data pipeline built at train.py:44, read by the loop over the dataset: 80 elements; runs as "
        "Range → Map → Prefetch*; slowest stage Map(parse at train.py:41) (60.0 ms per "
        "element, sequential)"
    ) in " ".join(text.split())
    assert "Pipeline stages" not in text
    verbose = renderer_class("terminal")(verbose=True).render(record)
    marked = [line for line in verbose.splitlines() if "▶" in line]
    assert len(marked) == 2  # one bottleneck per pipeline with stages
    assert "Map" in marked[0] and "parse at train.py:41" in marked[0] and "python" in marked[0]
    # a cheap stage's time reads in µs, never as a free "0.0 ms"
    run = _input_bound_run()
    assert run.tfdata is not None
    first = run.tfdata.pipelines[0]
    cheap = replace(first.stages[1], self_time_per_element_s=3.8e-5)
    fast = replace(first, stages=(first.stages[0], cheap, *first.stages[2:]))
    quick = replace(run, tfdata=replace(run.tfdata, pipelines=(fast, *run.tfdata.pipelines[1:])))
    text = " ".join(renderer_class("terminal")().render(Record.diagnose("run", quick)).split())
    assert "slowest stage Map(parse at train.py:41) (38.0 µs per element, sequential)" in text
    verbose = renderer_class("terminal")(verbose=True).render(Record.diagnose("run", quick))
    assert "38.0 µs" in verbose


def test_run_verdict_does_not_repeat_input_bound_as_the_worst_problem():
    from gpuwhy.finding import Finding
    from gpuwhy.verdict import verdict

    bound = Finding(id="input.bound", severity="high", title="Steps wait for input 63% of the time")
    retrace = Finding(id="launch.retracing", severity="medium", title="train_step traced 7 times")
    text = verdict(_input_bound_run(), [bound, retrace])
    assert text.count("63%") == 1 and text.endswith("; also: train_step traced 7 times.")


def test_fix_record_verdict_gives_the_measured_gain_or_why_there_is_none():
    from gpuwhy.facts import InputFix, InputFixFacts, PipelineChange, PipelineRate
    from gpuwhy.verdict import verdict

    def rate(x):
        return PipelineRate(median=x, min=x, max=x, passes=5, elements_per_pass=128)

    cache = PipelineChange(
        kind="cache",
        stage="batch(32)",
        location="train.py:67",
        code=".cache()",
        why="same elements every pass",
    )
    gained = InputFix(
        dataset="dataset created at train.py:67",
        before=rate(55.7),
        after=rate(6361.3),
        ideal=rate(7099.8),
        gap_closed=0.91,
        speedup=114.2,
        same_elements=True,
        changes=(cache,),
    )
    text = verdict(Facts(input_fixes=InputFixFacts(fixes=(gained,))), [])
    assert text == (
        "Input pipeline 114.2x faster with 1 change (dataset created at train.py:67; "
        "91% of the way to its output cached in memory), elements unchanged "
        "(checked bitwise)."
    )
    no_gain = InputFix(
        dataset="d",
        before=rate(564),
        after=rate(355),
        speedup=0.63,
        changes=(cache,),
        worth_it=False,
    )
    assert verdict(Facts(input_fixes=InputFixFacts(fixes=(no_gain,))), []) == (
        "No safe change makes the input pipeline measurably faster (the changes tried gave no gain)."
    )
    broken = InputFix(dataset="d", error="NotFoundError: data.tfrecord; No such file")
    assert verdict(Facts(input_fixes=InputFixFacts(fixes=(broken,))), []).startswith(
        "Could not optimise the input pipeline: NotFoundError"
    )
    assert "nothing to optimise" in verdict(Facts(input_fixes=InputFixFacts()), [])
    # Keras' fit over a PyDataset: the pipeline is Keras', and gpuwhy fix tries its workers
    keras = verdict(Facts(input_fixes=InputFixFacts(library_only=("train.py:98",))), [])
    assert keras == (
        "No tf.data pipeline of the program's own was iterated (a library built the one read "
        "at train.py:98): nothing for --input to rewrite; gpuwhy fix SCRIPT (without "
        "--input) tries the fixes of the run's findings, a PyDataset's workers among them."
    )


def test_html_is_a_renderer_like_the_others_and_needs_only_the_record(tmp_path):
    import subprocess
    import sys

    from gpuwhy.report.renderers import renderer_class
    from gpuwhy.report.run.html import HtmlRenderer

    assert renderer_class("html") is HtmlRenderer
    alone = tmp_path / "alone"  # the record, and nothing else beside it
    alone.mkdir()
    (alone / "run.json").write_text(FULL.to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "report", "run.json", "-f", "html"],
        capture_output=True,
        text=True,
        cwd=alone,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr  # high findings
    assert proc.stdout.startswith("<!DOCTYPE html>") and FULL.findings[0].id in proc.stdout
    assert sorted(p.name for p in alone.iterdir()) == ["run.json"]


def test_a_long_worst_problem_is_cut_at_a_word_in_the_verdict():
    from gpuwhy.finding import Finding
    from gpuwhy.verdict import verdict

    title = (
        "Each step dispatches ~106 small ops eagerly from Python (20% of the step spent "
        "issuing them) in a loop that could run as one tf.function"
    )
    eager = Finding(id="launch.eager-ops", severity="medium", title=title)
    text = verdict(_input_bound_run(), [eager])
    worst = text.split("; worst: ", 1)[1]
    assert worst.endswith("…") and not worst.endswith("….")
    shown = worst[:-1]
    assert title.startswith(shown) and title[len(shown)] in " ,;:("  # a whole word


def test_a_long_worst_problem_ends_at_its_last_whole_clause():
    from gpuwhy.finding import Finding
    from gpuwhy.verdict import _headline

    title = (
        "Steps wait for input 68% of the time (a mean 66.9 ms of a 99.0 ms step); "
        "the slowest stage is MapAndBatch(load at examples/slow_training.py:36)"
    )
    assert _headline(Finding("input.bound", "high", title).title) == (
        "Steps wait for input 68% of the time (a mean 66.9 ms of a 99.0 ms step)"
    )


def test_a_colon_inside_parentheses_does_not_end_the_worst_problem_s_head():
    """The head ended at the first ": ", inside "(a step of 8 batches: ...)": the
    verdict said "...every step (a step of 8 batches", its parenthesis open."""
    from gpuwhy.finding import Finding
    from gpuwhy.verdict import _headline

    title = (
        "The loop calls self.model.predict() every step (a step of 8 batches: "
        "steps_per_execution=8): 60.7 ms a call, between steps of 5.8 ms: 79% of the loop's time"
    )
    # the head to "=8)" is 93 characters: cut at a word, outside the parentheses
    assert _headline(Finding("steps.keras-call-per-step", "high", title).title) == (
        "The loop calls self.model.predict() every step…"
    )
    short = "Steps stall (every 8 batches: a call): 60.7 ms a call"
    assert _headline(short, limit=40) == "Steps stall (every 8 batches: a call)"


def test_a_worst_problem_cut_inside_a_stage_s_name_leaves_the_name_out():
    """A cut inside "MapAndBatch(parse at data/pipeline.py:…" would end mid-path: the
    name in parentheses goes whole or not at all."""
    from gpuwhy.finding import Finding
    from gpuwhy.verdict import verdict

    title = (
        "Input stage MapAndBatch(parse_and_augment_the_images at src/data/input/pipeline_v2.py:118) "
        "runs Python: 97% of the pipeline's time"
    )
    python = Finding(id="input.python-function", severity="medium", title=title)
    worst = verdict(_input_bound_run(), [python]).split("; worst: ", 1)[1]
    assert worst == "Input stage MapAndBatch…", worst


def test_the_default_view_is_brief_and_verbose_has_it_all():
    from gpuwhy.finding import Finding

    evidence = {f"figure_{i}": i for i in range(12)}
    evidence["pipelines"] = [{"pipeline": f"p{i}", "severity": "low"} for i in range(6)]
    findings = [
        Finding(id="input.no-cache", severity="medium", title="Medium one", evidence=evidence),
        Finding(id="input.no-prefetch", severity="low", title="Low one", evidence=evidence),
    ]
    record = Record(command="run", facts=Facts(), findings=findings)
    brief = renderer_class("terminal")().render(record)
    full = renderer_class("terminal")(verbose=True).render(record)
    # the medium finding: 8 evidence lines, then what --verbose adds
    assert "figure_7: 7" in brief and "figure_8" not in brief
    assert "   … 5 more (--verbose)" in brief
    # the low one: its head line alone
    low = brief.split("2. LOW")[1].split("\n(finding")[0]  # its block, not the note after it
    assert "figure_0" not in low and "gpuwhy explain" not in low
    assert all(f"figure_{i}: {i}" in full.split("2. LOW")[1] for i in range(12))
    assert "p5" in full and "more (--verbose)" not in full


def test_after_the_first_five_findings_each_is_one_line():
    from gpuwhy.finding import Finding

    findings = [
        Finding(
            id="input.no-cache",
            severity="medium",
            title=f"Medium {n}",
            evidence={"figure": n},
            fix=f"fix_{n}()",
        )
        for n in range(1, 8)
    ]
    brief = renderer_class("terminal")().render(
        Record(command="run", facts=Facts(), findings=findings)
    )
    assert "fix_5()" in brief and "fix_6()" not in brief and "fix_7()" not in brief
    assert "7. MEDIUM input.no-cache  Medium 7" in brief
    assert "(findings 6-7 in one line; --verbose, or `gpuwhy explain ID`" in brief
    # a low one among the first five is one line too, and the note says which
    findings[2] = replace(findings[2], severity="low")
    mixed = renderer_class("terminal")().render(
        Record(command="run", facts=Facts(), findings=findings)
    )
    assert "fix_3()" not in mixed and "(findings 3 and 6-7 in one line;" in mixed
    full = renderer_class("terminal")(verbose=True).render(
        Record(command="run", facts=Facts(), findings=findings)
    )
    assert "fix_7()" in full and "in detail" not in full


def test_a_low_finding_another_s_fix_refers_to_keeps_its_fix():
    """input.projected-bound's fix says "(input.no-cache gives the line)": the low
    input.no-cache it names is shown with its fix, not in one line."""
    from gpuwhy.finding import Finding

    findings = [
        Finding(id="input.projected-bound", severity="high", title="Bound",
                fix="cache where it fits (input.no-cache gives the line)"),
        Finding(id="input.no-cache", severity="low", title="No cache", fix="ds = ds.cache()"),
        Finding(id="tensorcore.unused", severity="low", title="Float32", fix="mixed_precision()"),
    ]  # fmt: skip
    text = renderer_class("terminal")().render(
        Record(command="run", facts=Facts(), findings=findings)
    )
    assert "ds = ds.cache()" in text and "mixed_precision()" not in text
    assert "(finding 3 in one line;" in text


def test_a_run_s_stalls_are_one_row_in_the_terminal_and_the_html():
    cause = StallCause(kind="checkpoint", seconds=16.2, share=0.97, location="train.py:57",
                       detail="tf.train.Checkpoint.write")  # fmt: skip
    beat = StallBeat(kind="checkpoint", count=9, stall_s=16.2, lost_s=16.2, lost_share=0.09,
                     typical_stall_s=1.8, every_steps=200, period_fit=1.0)  # fmt: skip
    loop = LoopStalls(source="tf-data", name="train.py:40", between_steps=False, count=9,
                      loop_steps=1800, loop_s=180.0, typical_step_s=0.1, stall_s=16.2,
                      lost_s=16.2, lost_share=0.09, beats=(beat,), causes=(cause,))  # fmt: skip
    gc = Activity(kind="gc", count=613, seconds=0.63, max_s=0.16)
    record = rb.watched_run(stalls=StallFacts(activities=(gc,), loops=(loop,)))
    row = (
        "9 stalls every 200 steps, 1,800.0 ms each: tf.train.Checkpoint.write at train.py:57, "
        "9% of the loop; GC 0.63 s in 613 collections"
    )
    terminal = renderer_class("terminal")().render(record)
    assert any(line.startswith("Stalls") and row in line for line in terminal.splitlines())
    assert row in page_text(renderer_class("html")().render(record))
    assert "Stalls" not in renderer_class("terminal")().render(rb.watched_run())


def _between_steps_line(
    count, stall_s, typical_s, every_steps, period_fit, kind=None
) -> str | None:
    """The Stalls line of one loop whose ``count`` stalls between steps, ``stall_s`` in
    all (their median ``typical_s``), no timed activity explains (or ``kind`` did)."""
    from gpuwhy.collect.inprocess.activities import stalls_line

    beat = StallBeat(kind=kind, count=count, stall_s=stall_s, lost_s=stall_s, lost_share=0.2,
                     typical_stall_s=typical_s, every_steps=every_steps,
                     period_fit=period_fit)  # fmt: skip
    loop = LoopStalls(source="tf-data", name="train.py:40", between_steps=True, count=count,
                      loop_steps=1000, loop_s=9.0, typical_step_s=0.005, stall_s=stall_s,
                      lost_s=stall_s, lost_share=0.2, beats=(beat,), causes=())  # fmt: skip
    return stalls_line(StallFacts(loops=(loop,)))


def test_fit_s_steps_that_wait_for_input_on_a_beat_are_said_as_the_input_s():
    """Two PyDataset workers of 10 ms a batch feed fit's 2 ms steps: every second step
    waits 8 ms. Fit's measured wait covers the beat: the line says so, where it said
    "nothing timed in them" beside a report of 72 % of the steps waiting."""
    from gpuwhy.collect.inprocess.activities import stalls_line
    from tests import builders_tfdata as t

    beat = StallBeat(kind=None, count=48, stall_s=0.43, lost_s=0.33, lost_share=0.32,
                     typical_stall_s=0.009, every_steps=2, period_fit=0.98)  # fmt: skip
    loop = LoopStalls(source="keras-fit", name="Model.fit at train.py:28", between_steps=False,
                      count=48, loop_steps=128, loop_s=1.0, typical_step_s=0.002, stall_s=0.43,
                      lost_s=0.33, lost_share=0.32, beats=(beat,), causes=())  # fmt: skip
    stalls = StallFacts(loops=(loop,))
    waits = t.fit_steps(0.72, total_s=0.6, input_wait_source="generator timing")
    line = stalls_line(stalls, waits)
    assert line is not None and ": the steps' waits for input (fit's measured wait" in line
    assert "nothing timed" in (stalls_line(stalls) or "")
    assert "nothing timed" in (stalls_line(stalls, replace(waits, input_wait_fraction=0.1)) or "")


def test_an_activity_that_covered_a_small_part_of_the_stalls_is_said_as_a_part():
    """ModelCheckpoint wrote for 26 ms of stalls of 124 ms at each epoch's end (a PyDataset's
    workers starting again took the rest): the line named the checkpoint as the stalls."""
    from gpuwhy.collect.inprocess.activities import stalls_line

    checkpoint = StallCause(kind="checkpoint", seconds=0.042, share=0.17,
                            detail="keras.callbacks.ModelCheckpoint(save_freq='epoch')",
                            location="train.py:53")  # fmt: skip
    beat = StallBeat(kind="checkpoint", count=2, stall_s=0.247, lost_s=0.24, lost_share=0.09,
                     typical_stall_s=0.124, every_steps=150, period_fit=1.0)  # fmt: skip
    loop = LoopStalls(source="keras-fit", name="Model.fit at train.py:53", between_steps=True,
                      count=2, loop_steps=450, loop_s=2.7, typical_step_s=0.003, stall_s=0.247,
                      lost_s=0.24, lost_share=0.09, beats=(beat,), causes=(checkpoint,))  # fmt: skip
    line = stalls_line(StallFacts(loops=(loop,)))
    assert line is not None
    assert "at train.py:53 (17% of their time; nothing timed in the rest)" in line
    whole = replace(beat, stall_s=0.05)
    line = stalls_line(StallFacts(loops=(replace(loop, beats=(whole,)),)))
    assert line is not None and "nothing timed in the rest" not in line


def test_stalls_in_a_row_are_no_period():
    line = _between_steps_line(4, 1.8, 0.45, every_steps=1, period_fit=1.0)
    assert line is not None and line.startswith("4 stalls, 450.0 ms each: nothing timed")
    assert "every 1 steps" not in line


def test_stalls_of_very_different_lengths_give_their_median_and_total_not_each():
    # 9 stalls of 45-617 ms, 2.59 s in all: "50.3 ms each" would make 0.45 s
    line = _between_steps_line(9, 2.59, 0.0503, every_steps=157, period_fit=0.8)
    assert line is not None
    assert line.startswith("9 stalls every 157 steps, 50.3 ms median, 2,590.0 ms in all: ")


def test_a_loop_s_stalls_between_steps_are_one_series_with_every_cause_in_them():
    """A custom loop's epochs end in a validation loop and the iterator's teardown: each
    of its 4 stalls holds both, the larger one in two and the other in two. Split by
    that, they read "2 stalls every 4,689 steps" and "2 stalls every 1,563 steps" (of
    4, every 1,563 steps) and "280.8 ms median" of two stalls of 282 and 1,793 ms."""
    from gpuwhy.collect.inprocess.activities import stalls_line

    parts = [(1.05, 0.72), (0.36, 0.63), (0.36, 0.56), (0.28, 0.0)]
    first = tuple(
        Stall(step=1563 * (i + 1), start_s=4.0 * i, seconds=a + b,
              causes=(("loop", a), ("teardown", b)) if b else (("loop", a),))
        for i, (a, b) in enumerate(parts)
    )  # fmt: skip
    beats = (
        StallBeat(kind="loop", count=2, stall_s=2.07, lost_s=2.07, lost_share=0.118,
                  typical_stall_s=0.281, every_steps=4689, period_fit=1.0),
        StallBeat(kind="teardown", count=2, stall_s=1.92, lost_s=1.92, lost_share=0.109,
                  typical_stall_s=0.932, every_steps=1563, period_fit=1.0),
        StallBeat(kind=None, count=13, stall_s=0.1, lost_s=0.08, lost_share=0.0045,
                  typical_stall_s=0.0077, every_steps=303, period_fit=0.17),
    )  # fmt: skip
    causes = (
        StallCause(kind="loop", seconds=2.05, share=0.51, location="train.py:108",
                   detail="a loop over another tf.data dataset"),
        StallCause(kind="teardown", seconds=1.91, share=0.48, location="train.py:90",
                   detail="the end of a tf.data iterator"),
        StallCause(kind="gc", seconds=0.03, share=0.01, detail="generation 0"),
    )  # fmt: skip
    loop = LoopStalls(source="tf-data", name="train.py:90", between_steps=True, count=4,
                      loop_steps=7815, loop_s=17.6, typical_step_s=0.002, stall_s=4.0,
                      lost_s=4.0, lost_share=0.227, beats=beats, causes=causes,
                      first=first)  # fmt: skip
    assert stalls_line(StallFacts(loops=(loop,))) == (
        "4 stalls between steps every 1,563 steps, 280.0 ms-1,770.0 ms each, 4,000.0 ms in "
        "all: a loop over another tf.data dataset at train.py:108 (2.05 s) and the end of a "
        "tf.data iterator at train.py:90 (1.91 s), 23% of the loop"
    )  # the 13 short stalls cost 0.45% of it: not said


def test_stalls_gpuwhy_s_own_heap_census_made_are_said_as_its_own():
    line = _between_steps_line(8, 0.2178, 0.0104, every_steps=2, period_fit=0.9, kind="gpuwhy")
    assert line == "gpuwhy's own heap census held the loop 217.8 ms (not the program's)"


def test_gpuwhy_s_own_census_time_is_said_even_where_it_made_no_stall_beat():
    """Censuses of a large heap on a loaded host (1.3 s the longest, 4.3 s in all) that
    fell outside the loop's stalls are gpuwhy's cost all the same: said, as its own."""
    from gpuwhy.collect.inprocess.activities import stalls_line
    from gpuwhy.facts import Activity

    census = Activity(kind="gpuwhy", count=5, seconds=4.3, max_s=1.33)
    line = stalls_line(StallFacts(activities=(census,)))
    assert line == (
        "gpuwhy's own heap census 4.30 s in 5 (the longest 1.33 s; it holds the program "
        "while it runs)"
    )
    short = Activity(kind="gpuwhy", count=1, seconds=0.2, max_s=0.2)
    assert stalls_line(StallFacts(activities=(short,))) is None


def test_a_fix_two_findings_share_is_printed_once():
    """input.bound and input.python-function on one generator name one cause and one
    fix: the second finding points at the first's instead of printing it again."""
    from gpuwhy.finding import Finding

    fix = "# make each batch cheaper\nds = ds.prefetch(2)"
    findings = [
        Finding("input.bound", "high", "Steps wait for input 83% of the time", fix=fix),
        Finding("input.python-function", "high", "Input stage runs Python", fix=fix),
    ]
    record = Record(command="run", facts=Facts(), findings=findings)
    text = renderer_class("terminal")().render(record)
    assert text.count("ds = ds.prefetch(2)") == 1
    assert "fix: the same as finding 1's above" in text


def test_a_run_with_no_gpu_and_no_target_says_how_to_see_what_a_gpu_would_wait_on():
    """On a machine without a usable GPU the steps' waits are the CPU's: the note says
    how to project them onto a GPU (a --target), and goes once one was asked for."""
    from gpuwhy.facts import ProgramFacts, StepFacts, TargetFacts
    from gpuwhy.report.run.summary import NO_GPU_NOTE, program_notes

    cpu_only = replace(
        b.facts(tf=b.no_gpu_tf(), drv=b.NO_DRIVER, devices=()),
        program=ProgramFacts(command=("train.py",), seconds=10.0),
        steps=StepFacts(source="tf-data", marker="next()", count=400, median_s=0.009),
    )
    assert program_notes(cpu_only) == [NO_GPU_NOTE]
    text = " ".join(renderer_class("terminal")().render(Record.diagnose("run", cpu_only)).split())
    assert "note: no GPU here: the steps ran on the CPU" in text
    assert "--target A100" in NO_GPU_NOTE
    assert program_notes(replace(cpu_only, target=TargetFacts(requested="A100"))) != [NO_GPU_NOTE]
    assert program_notes(replace(cpu_only, environment=b.environment())) == []  # a GPU here
