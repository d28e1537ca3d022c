"""A real headless Chromium for the HTML report tests, and one real `gpuwhy run`.

The browser is the system's Chromium (Debian's /usr/bin/chromium; `make setup` installs
it, $CHROMIUM overrides the path) driven by playwright, which then downloads nothing.
Every page is opened with the network blocked, as on a cluster without internet, and
records what it tried to fetch and what it logged as an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WEB_SCHEMES = ("http:", "https:", "ws:", "wss:", "ftp:")
DRAWN = "() => [...document.querySelectorAll('.plot')].every(d => d.querySelector('.main-svg'))"


def chromium_path() -> str:
    return os.environ.get("CHROMIUM") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def browser():
    path = chromium_path()
    missing = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (pip install -e '.[test]')"
    if missing is None and not Path(path).exists():
        missing = f"no Chromium at {path} (`make setup` installs Debian's chromium)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)  # CI must run these: a skip there would hide them
        pytest.skip(missing)
    with sync_playwright() as p:
        # containers often have a 64 MB /dev/shm, too small for a large page
        chromium = p.chromium.launch(executable_path=path, args=["--disable-dev-shm-usage"])
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class OpenedReport:
    page: object
    errors: list[str] = field(default_factory=list)  # console errors, uncaught exceptions
    fetched: list[str] = field(default_factory=list)  # network requests it attempted


@pytest.fixture
def open_report(browser):
    """open_report(path) -> OpenedReport: the file loaded offline, its charts drawn."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    contexts = []

    def open_(path: Path, width: int = 1280) -> OpenedReport:
        context = browser.new_context(
            viewport={"width": width, "height": 900},
            permissions=["clipboard-read", "clipboard-write"],
        )
        contexts.append(context)
        page = context.new_page()
        opened = OpenedReport(page)

        context.route(
            "**/*",
            lambda route: route.abort()
            if route.request.url.startswith(WEB_SCHEMES)
            else route.continue_(),
        )
        page.on(
            "request",
            lambda r: opened.fetched.append(r.url) if r.url.startswith(WEB_SCHEMES) else None,
        )
        page.on(
            "console",
            lambda m: opened.errors.append(f"console: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: opened.errors.append(f"exception: {e}"))
        page.goto(path.resolve().as_uri(), wait_until="load")
        try:  # Plotly draws while the page loads; a chart that fails is asserted on
            page.wait_for_function(DRAWN, timeout=10_000)
        except PlaywrightTimeout:
            pass
        return opened

    yield open_
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def slow_training_run(tmp_path_factory) -> dict:
    """`gpuwhy run --json --html` on examples/slow_training.py, once per session (~20 s)."""
    out = tmp_path_factory.mktemp("slow-training")
    json_path, html_path = out / "run.json", out / "run.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuwhy",
            "run",
            "--json",
            str(json_path),
            "--html",
            str(html_path),
            "examples/slow_training.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"json": json_path, "html": html_path, "stderr": proc.stderr}
