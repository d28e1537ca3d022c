"""Renders a saved run record as the HTML report and takes a full-page screenshot of it in
headless Chromium (the picture in the README).

    .venv/bin/python tools/screenshot_report.py                  # out/run.json -> docs/report.png
    .venv/bin/python tools/screenshot_report.py RUN.json OUT.png [--html OUT.html] [--width 1280]
        [--section timeline]     # only one section (findings, timeline, input, placement ...)
        [--height 1600]          # only the top of the page (the README's picture)

Needs playwright (the test extra) and a Chromium: Debian's /usr/bin/chromium (`make setup`
installs it) or $CHROMIUM. Every network request is blocked, as on a cluster without
internet: the picture shows what such a user sees.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuwhy.record import Record  # noqa: E402
from gpuwhy.report.run.html import HtmlRenderer  # noqa: E402


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
) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(), args=["--disable-dev-shm-usage"]
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": 900}, device_scale_factor=1)
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
            if section:
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", nargs="?", default=str(ROOT / "out" / "run.json"))
    parser.add_argument("png", nargs="?", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--html", help="also keep the HTML report here")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--section", help="only this section's id (e.g. timeline)")
    parser.add_argument("--height", type=int, help="only the top of the page, this many pixels")
    args = parser.parse_args(argv)
    record = Record.load(args.record)
    with tempfile.TemporaryDirectory() as tmp:
        html_path = Path(args.html) if args.html else Path(tmp) / "report.html"
        Path(html_path).write_text(HtmlRenderer().render(record), encoding="utf-8")
        screenshot(html_path, Path(args.png), args.width, args.section, args.height)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
