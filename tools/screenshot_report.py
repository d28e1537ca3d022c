"""Renders a record as its HTML report and takes a screenshot of it in headless Chromium
(the pictures in the README and docs/).

    .venv/bin/python tools/screenshot_report.py                  # out/run.json -> out/report.png
    .venv/bin/python tools/screenshot_report.py RECORD OUT.png [--html OUT.html] [--width 1280]
        [--section timeline]     # only one section (findings, timeline, input, placement ...)
        [--height 1600]          # only the top of the page (the README's picture)
        [--first-screen]         # what a 1400x1000 window shows when the page opens
    .venv/bin/python tools/screenshot_report.py --diff BEFORE.json AFTER.json OUT.png
    .venv/bin/python tools/screenshot_report.py --first-screens    # docs/first-screen-*.png

RECORD is what ``gpuwhy report`` reads: a run's or a merge's JSON record, a profiler
capture (a TensorBoard log directory or a *.xplane.pb), an NVML recording (*.jsonl); or
an HTML page already written. ``--first-screens`` makes the first screen of each kind of
report from real records: the demo's (examples/slow_training.py, run here, with
--target A100), the H100 capture and recording of tests/data, three workers merged, and
a diff of two runs of the demo.

Needs playwright (the test extra) and a Chromium: Debian's /usr/bin/chromium (`make setup`
installs it) or $CHROMIUM. Every network request is blocked, as on a cluster without
internet: the picture shows what such a user sees.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST_SCREEN = (1400, 1000)  # the window issue #48 judges a page's first screen in
DATA = ROOT / "tests" / "data"


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(path).exists():
        sys.exit(f"no Chromium at {path}: `apt-get install chromium` or set CHROMIUM")
    return path


def screenshot(
    html_path: Path,
    png_path: Path,
    width: int = 1280,
    section: str | None = None,
    height: int | None = None,
    viewport_height: int | None = None,
) -> None:
    """A full-page picture, or one section's, or the page's top ``height`` pixels, or
    (``viewport_height``) what a window of that size shows when the page opens."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(), args=["--disable-dev-shm-usage"]
        )
        try:
            page = browser.new_page(
                viewport={"width": width, "height": viewport_height or 900},
                device_scale_factor=1,
            )
            page.route(
                "**/*",
                lambda route: route.continue_()
                if route.request.url.startswith("file:")
                else route.abort(),
            )
            page.goto(html_path.resolve().as_uri())
            page.wait_for_load_state("load")
            page.wait_for_timeout(300)  # Plotly's first layout pass
            png_path.parent.mkdir(parents=True, exist_ok=True)
            if viewport_height:
                page.screenshot(path=str(png_path))
            elif section:
                page.locator(f"section#{section}").screenshot(path=str(png_path))
            elif height:
                page.screenshot(
                    path=str(png_path),
                    full_page=True,
                    clip={"x": 0, "y": 0, "width": width, "height": height},
                )
            else:
                page.screenshot(path=str(png_path), full_page=True)
        finally:
            browser.close()


def gpuwhy(*args: str | Path, cwd: Path = ROOT) -> None:
    """The real command, in its own process (``gpuwhy report``, ``run``, ``diff``, ``merge``);
    its exit status says what it found, not whether it worked: only a missing output fails."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}
    subprocess.run(
        [sys.executable, "-m", "gpuwhy", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        timeout=900,
        check=False,
    )


def html_of(source: Path, html_path: Path) -> Path:
    """The HTML page of what ``gpuwhy report`` reads, or the page itself."""
    if source.suffix == ".html":
        return source
    gpuwhy("report", source, "--html", html_path)
    if not html_path.exists():
        sys.exit(f"gpuwhy report {source} wrote no page")
    return html_path


def first_screens(out: Path, work: Path) -> None:
    """docs/first-screen-{run,capture,recording,merge,diff}.png from real records."""
    from tests.builders_workers import INPUT_BOUND, save, worker_record

    # worker records as `gpuwhy run --out-dir` writes them (tests/builders_workers.py): a
    # cluster of three, worker-1 waiting for its input (gpuwhy merge's own test's)

    demo = "examples/slow_training.py"  # as a user types it, from the checkout (cwd)
    runs = [work / "run.json", work / "run-again.json"]
    gpuwhy("run", "--target", "A100", "--json", runs[0], "--html", work / "run.html", demo)
    gpuwhy("run", "--json", runs[1], demo)
    workers = work / "workers"
    cluster = ("chief-0", "worker-0", "worker-1")
    kept = dict(cluster=cluster, timeline=True)
    save(workers, worker_record("chief-0", 0.15, 0.001, **kept))
    save(workers, worker_record("worker-0", 0.15, 0.002, **kept))
    save(workers, worker_record("worker-1", 0.15, 0.051, findings=(INPUT_BOUND,), **kept))
    gpuwhy("merge", workers, "--html", work / "merge.html")
    # from their folder: the page names the records as a user who ran them there
    gpuwhy("diff", runs[0].name, runs[1].name, "--html", work / "diff.html", cwd=work)
    pages = {
        "run": work / "run.html",
        "capture": html_of(DATA / "xplane" / "h100_slow_input", work / "capture.html"),
        "recording": html_of(
            DATA / "nvml" / "h100" / "torch_resnet18_launch_bound.nvml.jsonl",
            work / "recording.html",
        ),
        "merge": work / "merge.html",
        "diff": work / "diff.html",
    }
    for kind, page in pages.items():
        if not page.exists():
            sys.exit(f"no {kind} page: {page}")
        png = out / f"first-screen-{kind}.png"
        screenshot(page, png, FIRST_SCREEN[0], viewport_height=FIRST_SCREEN[1])
        print(f"wrote {png} ({page.stat().st_size:,} bytes of HTML)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", nargs="?", default=str(ROOT / "out" / "run.json"))
    parser.add_argument("png", nargs="?", default=str(ROOT / "out" / "report.png"))
    parser.add_argument("--html", help="also keep the HTML report here")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--section", help="only this section's id (e.g. timeline)")
    parser.add_argument("--height", type=int, help="only the top of the page, this many pixels")
    parser.add_argument(
        "--first-screen", action="store_true", help="only what a 1400x1000 window shows"
    )
    parser.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"), help="gpuwhy diff's page")
    parser.add_argument(
        "--first-screens",
        action="store_true",
        help="docs/first-screen-*.png: each kind of report's first screen, from real records",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.first_screens:
            first_screens(ROOT / "docs", Path(tmp))
            return 0
        html_path = Path(args.html) if args.html else Path(tmp) / "report.html"
        if args.diff:
            png = args.record if args.record != parser.get_default("record") else args.png
            gpuwhy("diff", *args.diff, "--html", html_path)
            args.png = png
        else:
            html_path = html_of(Path(args.record), html_path)
        width, height = (args.width, args.height)
        viewport = None
        if args.first_screen:
            width, viewport = FIRST_SCREEN
        screenshot(html_path, Path(args.png), width, args.section, height, viewport)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
