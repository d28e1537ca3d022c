"""Writing the HTML report: the peak RSS it adds and its time, at any run length.

gpuwhy's whole budget over plain python is 64 MB (issue #25), and the HTML report is
written at the end of every ``gpuwhy run --html``, so its peak counts in full. Each
record is written in a fresh ``python`` (nothing of the report imported yet, as at the
end of a run) the way ``gpuwhy run --html`` / ``gpuwhy report --html`` writes it
(``emit`` in gpuwhy/commands/reporting.py); the child loads the record, resets the kernel's
high-water mark (``echo 5 > /proc/self/clear_refs``), writes the page and prints VmHWM
minus the VmRSS it had before, and the time. Every figure is the median over ``--runs``
children.

``--breakdown`` splits the same peak in one child per record, in the order the renderer
goes (gpuwhy/report/run/html.py): jinja imported and the template compiled, the page's
context built (its tables and the charts' JSON), then the page written (jinja's pieces and
plotly.js copied from plotly's package file); each step's peak is measured from the RSS
before it, after a reset, and what a step keeps counts under the steps after it.

The records: by default two built as tests/report/builders.py builds them, saved as JSON
first (``full``: every section, three charts; ``large``: 100,000 steps and 36,000 GPU
samples per metric); ``--record PATH`` adds a saved record (``gpuwhy run --json PATH``).

    .venv/bin/python benchmarks/bench_html_render.py [--runs 5] [--record run.json]
        [--breakdown] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

MB = 1e6


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> int:
    """The high-water mark back to the RSS now; returns that RSS (bytes)."""
    import gc

    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_kb("VmRSS") * 1024


def peak_since(rss_before: int) -> int:
    return status_kb("VmHWM") * 1024 - rss_before


def child(record_path: str, out: str, breakdown: bool) -> None:
    """One measurement in this fresh process; prints one JSON line."""
    from gpuwhy.commands.output_paths import Output
    from gpuwhy.commands.reporting import _write_rendered  # what emit() calls for --html
    from gpuwhy.record import Record
    from gpuwhy.report.renderers import renderer_class

    record = Record.load(record_path)
    steps: dict[str, float] = {}
    if breakdown:
        from gpuwhy.report.run import html

        before = reset_peak()
        html._template()
        steps["import jinja2, compile the template"] = peak_since(before)
        before = reset_peak()
        context = html._Page(html.MAX_POINTS).context(record)
        steps["the page's context (tables, charts)"] = peak_since(before)
        del context
    output = Output("--html", out, os.path.abspath(out))
    before = reset_peak()
    t0 = time.perf_counter()
    _write_rendered(renderer_class("html")(), record, output)
    seconds = time.perf_counter() - t0
    steps["write the page" if breakdown else "render"] = peak_since(before)
    print(json.dumps({"peaks": steps, "seconds": seconds, "bytes": os.path.getsize(out)}))


def measure(record_path: Path, out: Path, breakdown: bool) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", str(record_path), str(out)]
        + (["--breakdown"] if breakdown else []),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def built_records(directory: Path) -> dict[str, Path]:
    from tests.report import builders as rb

    records = {
        "full": rb.with_input_fixes(rb.watched_run()),
        "large": rb.large_run(),
    }
    paths = {}
    for name, record in records.items():
        paths[name] = directory / f"{name}.json"
        record.save(paths[name])
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--record", action="append", default=[], help="a saved run record")
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--keep", help="write the records and pages here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, breakdown=args.breakdown)
        return
    directory = Path(args.keep or tempfile.mkdtemp(prefix="bench-html-"))
    directory.mkdir(parents=True, exist_ok=True)
    records = built_records(directory)
    for path in args.record:
        records[Path(path).stem] = Path(path)
    print(f"python {sys.version.split()[0]}; {args.runs} fresh process(es) per record")
    for name, path in records.items():
        out = directory / f"{name}.html"
        if args.breakdown:
            result = measure(path, out, breakdown=True)
            print(f"{name}: page {result['bytes'] / MB:.2f} MB, {result['seconds']:.2f} s")
            for step, peak in result["peaks"].items():
                print(f"  {step:<34} +{peak / MB:6.1f} MB")
            continue
        runs = [measure(path, out, breakdown=False) for _ in range(args.runs)]
        peaks = [r["peaks"]["render"] / MB for r in runs]
        seconds = [r["seconds"] for r in runs]
        print(
            f"{name:<8} record {path.stat().st_size / MB:5.2f} MB  page "
            f"{runs[0]['bytes'] / MB:5.2f} MB  peak +{statistics.median(peaks):5.1f} MB "
            f"(runs {min(peaks):.1f}..{max(peaks):.1f})  time "
            f"{statistics.median(seconds):.2f} s"
        )


if __name__ == "__main__":
    main()
