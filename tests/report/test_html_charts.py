"""The HTML report's charts are plain dicts written without plotly's Python side
(gpuwhy/report/run/html_charts.py says why): here plotly.graph_objects checks them instead, as
it checked them when the report was written. Every chart of records that take every
branch of html_charts.py and html_timeline.py must be accepted by ``go.Figure`` (a
property name that plotly does not know raises) and come back from it unchanged (the
same properties and values, the template included); plotly.js goes into the page as
plotly's own file, its bytes unchanged and no ``</script`` in it."""

from __future__ import annotations

import io
import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.collect.sampler import GpuSampler, ReplaySource
from gpuwhy.facts import Facts, GpuSamplesFacts, ProgramFacts, StepFacts
from gpuwhy.finding import Finding
from gpuwhy.record import Record
from gpuwhy.report.downsample import MAX_POINTS
from gpuwhy.report.plotly_files import package_data, plotly_js_blocks, script_safe_blocks
from gpuwhy.report.run.html import HtmlRenderer, _Page
from gpuwhy.report.run.html_charts import figure_json
from tests import builders as b
from tests.report import builders as rb

NVML = Path(__file__).parents[1] / "data" / "nvml"


def replay(name: str, windows: int) -> GpuSamplesFacts:
    source = ReplaySource(NVML / name)
    sampler = GpuSampler(source=source, pids=source.watched_pids, windows=windows)
    sampler.start(time.perf_counter())
    assert sampler.wait(10)
    sampler.stop()
    return sampler.facts()


def keras_fit() -> StepFacts:
    """Steps of Model.fit: several per call, no input wait measured."""
    steps = rb.steps(count=300)
    return replace(
        steps, source="keras-fit", count=1200, warmup=4, steps_per_call=4, input_waits=(None,) * 300
    )


def by_self_time() -> Record:
    """A pipeline whose stages have no rate of their own: drawn by self time, linear."""
    tfdata = rb.watched_run().facts.tfdata
    p = rb.pipeline()
    stages = tuple(replace(s, root_elements_per_s=None) for s in p.stages)
    return rb.watched_run(tfdata=replace(tfdata, pipelines=(replace(p, stages=stages),)))


def projected() -> Record:
    """A projection with every optional bar: CPU ops, eager ops, the input twice."""
    projection = b.projection(
        input_batch_s=0.004,
        input_batch_measured_s=0.014,
        eager_s=0.001,
        cpu_ops_s=0.002,
        cpu_ops_low_s=0.001,
        cpu_ops_high_s=0.003,
        cpu_ops=2,
    )
    return Record.diagnose("run", replace(rb.watched_run().facts, projection=projection))


def marked() -> Record:
    """A long run with findings that point at moments: a drift's start, stalls."""
    record = rb.long_run()
    drift = Finding(
        id="steps.drift",
        severity="high",
        title="From step 9,000 (at 40 s) the time per step went from 10.0 ms to 16.0 ms (+60%)",
        evidence={"at_s": 40.0, "until_s": 90.0},
    )
    stall = Finding(
        id="steps.periodic-stall",
        severity="medium",
        title="Every 200 steps training stalls for 1.8 s",
        evidence={
            "first_stalls": [{"step": 200 * n, "at_s": t} for n, t in enumerate((10.0, 20.5, 31.0))]
        },
    )
    return replace(record, findings=[*record.findings, drift, stall])


def watched(recording: str, windows: int) -> Record:
    facts = Facts(program=ProgramFacts(command=("train",)), gpu_samples=replay(recording, windows))
    return Record.diagnose("watch", facts)


RECORDS = {
    "full": lambda: rb.with_input_fixes(rb.watched_run()),  # four rows, log rates, fixes
    "large": rb.large_run,  # downsampled: bands, the slowest step per bucket
    "long": rb.long_run,  # windows, a pause, the last steps, the capped step row
    "marked": marked,  # findings' moments: lines across the rows, marks named on hover
    "keras-fit": lambda: rb.watched_run(keras_fit()),
    "steps-only": lambda: rb.watched_run(samples=rb.NO_DRIVER_SAMPLES, placement=None),
    "self-time": by_self_time,
    "projection": projected,
    "4-gpus-windowed": lambda: watched("constructed_4gpu_one_busy.jsonl", 4),
    "4-gpus": lambda: watched("constructed_4gpu_one_busy.jsonl", 512),
    "h100-windowed": lambda: watched("constructed_h100_busy.jsonl", 4),
}


@pytest.mark.parametrize("name", RECORDS)
def test_every_chart_is_what_plotly_graph_objects_writes(name):
    import plotly.graph_objects as go
    import plotly.io as pio

    page = _Page(MAX_POINTS)
    page.context(RECORDS[name]())
    assert page.figures
    for dom_id, text in page.figures:
        ours = json.loads(text)
        config = ours.pop("config")
        checked = go.Figure(ours)  # raises ValueError on a property plotly does not know
        theirs = json.loads(pio.to_json(checked, validate=True))
        assert theirs == ours, dom_id
        assert config == {"displaylogo": False, "responsive": True, "scrollZoom": False}


def test_numbers_that_are_not_finite_are_written_null_as_plotly_writes_them():
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = {"data": [{"type": "scatter", "y": [float("nan"), 1.0, float("inf")]}], "layout": {}}
    ours = json.loads(figure_json(fig))
    assert ours["data"][0]["y"] == [None, 1.0, None]
    assert json.loads(pio.to_json(go.Figure(fig)))["data"] == ours["data"]


def test_plotly_js_goes_into_the_page_as_plotlys_own_file(tmp_path):
    bundle = (package_data() / "plotly.min.js").read_bytes()
    assert b"".join(plotly_js_blocks()) == bundle  # no end tag in it to rewrite today
    record = rb.watched_run()
    with open(tmp_path / "page.html", "wb") as f:
        HtmlRenderer().write(record, f)
    written = (tmp_path / "page.html").read_bytes()
    assert written.count(bundle) == 1
    assert written.decode("utf-8") == HtmlRenderer().render(record)
    assert "gpuwhy:plotly.js" not in written.decode("utf-8")


@pytest.mark.parametrize("size", [3, 7, 8, 9, 64])
def test_an_end_tag_in_a_script_is_rewritten_even_across_two_reads(size):
    script = b"a</script>b</SCRIPT c</scrip t</Script" + b"x" * 20 + b"</script"
    expected = re.sub(rb"</(script)", rb"<\\/\1", script, flags=re.IGNORECASE)
    assert b"".join(script_safe_blocks(io.BytesIO(script), size)) == expected
    assert expected.count(b"<\\/") == 4


def test_the_moments_findings_point_at_are_marked_across_the_timeline():
    page = _Page(MAX_POINTS)
    page.context(marked())
    timeline = json.loads(page.figures[0][1])
    lines = [s for s in timeline["layout"]["shapes"] if s["line"].get("color") == "#d62728"]
    assert sorted(s["x0"] for s in lines) == [10.0, 20.5, 31.0, 40.0]
    assert all((s["yref"], s["y0"], s["y1"]) == ("paper", 0, 1) for s in lines)
    hover = [a["hovertext"] for a in timeline["layout"]["annotations"] if "hovertext" in a]
    assert sum(h.startswith("steps.periodic-stall: Every 200 steps") for h in hover) == 3
    assert any(h.startswith("steps.drift: From step 9,000 (at 40 s)") for h in hover)


def test_the_gpu_table_gives_the_one_busy_figure_with_its_span_steady_work_and_source():
    # the table's rows are every sample of each series; the busy figure is the verdict's
    page = HtmlRenderer().render(watched("constructed_4gpu_one_busy.jsonl", 512))
    assert (
        '<p class="busy"><strong>GPU busy:</strong> 70% of the 4.9 s the program used it '
        "(SM activity, the best integrating figure"
    ) in page
    assert "70% in its 4.9 s of steady work, 0.0 s of start-up and pauses" in page
    assert page.count("<strong>GPU busy:</strong> none: the program never used this GPU.") == 3


def test_the_timeline_says_when_it_marks_only_the_first_traces():
    """The record keeps the first traces one by one: where the function traced more
    often, the marks' legend says they are the first of how many (the retracing finding
    counts them all)."""
    from gpuwhy.report.run.html_timeline import timeline

    record = rb.watched_run()
    kept = rb.tracing()
    fn = replace(kept.functions[0], traces=12)
    more = replace(kept, functions=(fn,))
    for tracing, name in (
        (kept, "tf.function traced"),
        (more, "tf.function traced (the first 3 of 12 traces)"),
    ):
        fig = timeline(record.facts.steps, record.facts.gpu_samples, tracing, MAX_POINTS)
        assert name in {t.get("name") for t in fig["data"]}
