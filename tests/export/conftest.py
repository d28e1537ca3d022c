"""A real Prometheus (Debian's `prometheus` package, which `make setup` installs;
$PROMETHEUS overrides the path), started per test on a free localhost port with a
scrape config pointing at gpuwhy's endpoint, and queried through its HTTP API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name: str, variable: str) -> str:
    path = os.environ.get(variable) or f"/usr/bin/{name}"
    if not Path(path).exists():
        missing = f"no {name} at {path} (`make setup` installs Debian's {name})"
        if os.environ.get("CI"):
            pytest.fail(missing)  # CI must run these: a skip there would hide them
        pytest.skip(missing)
    return path


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def api(self, path: str, **params: str):
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=5) as reply:
            body = json.load(reply)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expression: str) -> list[dict]:
        return self.api("query", query=expression)["result"]

    def wait_for(self, expression: str, timeout_s: float = 90.0) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.query(expression)
            if found:
                return found
            time.sleep(0.5)
        raise AssertionError(f"Prometheus never returned {expression}")


@pytest.fixture
def prometheus(tmp_path):
    """prometheus(target_port) -> a Prometheus scraping 127.0.0.1:target_port every second."""
    started: list[subprocess.Popen] = []

    def start(target_port: int) -> Prometheus:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n"
            "scrape_configs:\n  - job_name: gpuwhy\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{target_port}']\n"
        )
        port = free_port()
        process = subprocess.Popen(
            [binary("prometheus", "PROMETHEUS"), f"--config.file={config}",
             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"),
        )  # fmt: skip
        started.append(process)
        server = Prometheus(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2):
                    return server
            except OSError:
                time.sleep(0.2)
        raise AssertionError((tmp_path / "prometheus.log").read_text()[-2000:])

    yield start
    for process in started:
        process.terminate()
        process.wait(10)
