"""Every reader of the GPU samples reads a windowed series (a long run's) as it reads the
raw one: the recordings in tests/data/nvml/ replayed once with every sample kept and once
in 4 windows (of 16 samples: missing values, PCIe resets, GPM's empty first tick and
process memory on every 10th tick all fall inside windows), then read by the summary
line, the verdict, the HTML report, the live metrics, ``gpuwhy merge`` and a saved
record's round trip."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuwhy.collect.sampler import GpuSampler, ReplaySource, gpu_line
from gpuwhy.derived.gpu_busy import busy_column
from gpuwhy.derived.stage import derived
from gpuwhy.export.metrics import busy_sums, values
from gpuwhy.facts import Facts, GpuSamplesFacts, ProgramFacts
from gpuwhy.modes.merge.read import read_worker
from gpuwhy.record import Record
from gpuwhy.report.renderers import renderer_class
from gpuwhy.report.run.html_sections import GPU_METRICS, gpu_table
from gpuwhy.report.run.html_timeline import timeline

DATA = Path(__file__).parents[1] / "data" / "nvml"
RECORDINGS = (
    "constructed_h100_busy.jsonl",
    "constructed_a100_input_starved.jsonl",
    "constructed_4gpu_one_busy.jsonl",
)


def replay(name: str, windows: int) -> GpuSamplesFacts:
    source = ReplaySource(DATA / name)
    sampler = GpuSampler(source=source, pids=source.watched_pids, windows=windows)
    sampler.start(time.perf_counter())
    assert sampler.wait(10)
    sampler.stop()
    return sampler.facts()


def busy(samples: GpuSamplesFacts):
    """The derivation stage's busy blocks of these samples, by GPU index."""
    return derived(Facts(gpu_samples=samples)).gpu_busy


def close(value, exact) -> bool:
    return value is None if exact is None else value == pytest.approx(exact, rel=1e-12)


@pytest.fixture(params=RECORDINGS)
def pair(request) -> tuple[GpuSamplesFacts, GpuSamplesFacts]:
    raw, windowed = replay(request.param, 512), replay(request.param, 4)
    assert all(not g.windowed for g in raw.gpus)
    assert all(g.windowed and len(g.t) <= 4 for g in windowed.gpus)
    return raw, windowed


def test_the_series_keep_counts_means_peaks_and_the_span(pair):
    raw, windowed = pair
    for r, w in zip(raw.gpus, windowed.gpus):
        assert w.sample_count() == r.sample_count() == len(r.t)
        assert (w.t[0], w.ends()[-1]) == (r.t[0], r.t[-1])
        for _, name, _, _ in GPU_METRICS:
            assert close(w.mean(name), r.mean(name)), name
            assert w.peak(name) == r.peak(name), name
            assert sum(w.column(name).known) == sum(v is not None for v in getattr(r, name))
        assert w.others == r.others


def test_summary_verdict_and_metrics_read_every_sample(pair):
    raw, windowed = pair
    assert gpu_line(windowed, busy(windowed)) == gpu_line(raw, busy(raw))
    facts = [Facts(gpu_samples=s) for s in (raw, windowed)]
    for r, w in zip(raw.gpus, windowed.gpus):  # the busy series, every sample once
        assert busy_column(w) == busy_column(r)
        assert close(w.mean(busy_column(w)), r.mean(busy_column(r)))
    run = [values(f, (), run_s=10.0).gpu_busy for f in facts]
    assert [b for _, b in run[1]] == pytest.approx([b for _, b in run[0]], rel=1e-12)
    # since an update that had read every sample but the last window's: those samples
    last = windowed.gpus[0]
    known = last.column("utilization").known[-1]
    total, n = busy_sums(facts[1])[last.index]
    mean = last.utilization[-1]
    before = {last.index: (total - (mean or 0.0) * known, n - known)}
    recent = values(facts[1], (), 10.0, None, before).gpu_busy
    assert [b for _, b in recent][:1] == pytest.approx([mean] if mean is not None else [])


def test_the_html_table_and_timeline_cover_the_run(pair):
    raw, windowed = pair
    for r, w in zip(raw.gpus, windowed.gpus):
        exact, kept = gpu_table(r, raw, None), gpu_table(w, windowed, None)
        assert f"{r.sample_count():,} samples" in kept["head"] and "windows of 16" in kept["head"]
        rows = {row[0]: row for row in exact["rows"]}
        for row in kept["rows"]:
            # mean, max and count are the samples' own; median and p90 the windows'
            assert (row[1], row[4], row[5]) == (rows[row[0]][1], rows[row[0]][4], rows[row[0]][5])
    fig = timeline(None, windowed, None)
    assert fig is not None
    xs = [x for trace in fig["data"] for x in trace["x"]]
    first, last = windowed.gpus[0].t[0], windowed.gpus[0].ends()[-1]
    assert first <= min(xs) and max(xs) <= last
    width = windowed.gpus[0].samples_per_window * 0.11
    assert min(xs) - first <= width and last - max(xs) <= width
    names = {trace["name"] for trace in fig["data"] if trace.get("name")}
    assert any("busy" in n for n in names)
    assert any(
        trace.get("fill") == "tonexty" for trace in fig["data"]
    )  # each window's min-max band


def test_a_saved_record_loads_and_merges_to_the_same_gpu_figures(pair, tmp_path):
    raw, windowed = pair
    busy = []
    for samples, name in ((raw, "raw"), (windowed, "windowed")):
        facts = Facts(program=ProgramFacts(command=("train",)), gpu_samples=samples)
        record = Record.diagnose("watch", facts)
        path = record.save(tmp_path / f"{name}.json")
        assert Record.load(path).facts.gpu_samples == record.facts.gpu_samples  # busy kept
        html, text = (renderer_class(kind)().render(record) for kind in ("html", "terminal"))
        assert ("windows of 16 samples" in html) is (name == "windowed")
        assert f"{samples.gpus[0].sample_count()} samples at 10 Hz" in " ".join(text.split())
        busy.append(read_worker(str(path)).run.gpu_busy)
    assert busy[0] is not None and close(busy[1], busy[0])


def test_a_merge_reads_the_one_busy_figure_also_from_a_record_without_its_block(pair, tmp_path):
    """gpuwhy merge says a worker's GPU busy as its own report does (derived/gpu_busy.py),
    and an older record gets the figure derived again from its samples: not another
    definition (its utilization readings' mean), nor the block an older version kept
    inside its samples (the derivation stage derives again where a record is read)."""
    import json

    raw, _ = pair
    facts = Facts(program=ProgramFacts(command=("train",)), gpu_samples=raw)
    record = Record.diagnose("watch", facts)
    path = record.save(tmp_path / "worker-0.json")
    (_, block), *_ = record.derived.program_busy
    assert block.reliable and block.share is not None
    assert read_worker(str(path)).run.gpu_busy == pytest.approx(block.share)
    data = json.loads(path.read_text())
    assert all("busy" not in gpu for gpu in data["gpu_samples"]["gpus"])
    for gpu in data["gpu_samples"]["gpus"]:
        gpu["busy"] = {
            "share": 0.99,
            "source": "nvml-point",
            "measure": "point readings",
            "reliable": True,
            "why": "an older record kept its block here",
        }
    data.pop("derived")  # as a record from before the derivation stage
    older = tmp_path / "worker-1.json"
    older.write_text(json.dumps(data))
    assert read_worker(str(older)).run.gpu_busy == pytest.approx(block.share)


@pytest.mark.parametrize("stem", ["duty_40_160", "duty_100_100"])
def test_a_merge_of_real_h100_workers_says_their_busy_figure_not_their_utilization(stem, tmp_path):
    """The real H100 duty-cycle recordings (ground truth: the kernel's duty, measured by
    the program): a worker record without the busy block (an older one) merges to the
    busy figure its own report gives (18% and 43%, by SM activity), never the mean of
    its utilization readings that merge used to take for it (10% and 15%, against a
    true duty of 21% and 51%)."""
    import json

    samples = replay(f"h100/{stem}.nvml.jsonl", 512)
    facts = Facts(program=ProgramFacts(command=("python3", "duty.py")), gpu_samples=samples)
    record = Record.diagnose("watch", facts)
    (_, block), *_ = record.derived.program_busy
    data = json.loads(record.save(tmp_path / "worker.json").read_text())
    data.pop("derived")  # as a record from before the busy block
    older = tmp_path / "worker-0.json"
    older.write_text(json.dumps(data))
    merged = read_worker(str(older)).run.gpu_busy
    assert merged == pytest.approx(block.share)
    truth = json.loads((DATA / "h100" / f"{stem}.truth.json").read_text())["duty_measured"]
    readings = [u for g in data["gpu_samples"]["gpus"] for u in g["utilization"] if u is not None]
    assert abs(merged - truth) < abs(sum(readings) / len(readings) - truth)
