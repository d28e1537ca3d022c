"""``--metrics-addr`` (issue #50, item 6): ``/metrics`` listens where the user says
(all interfaces by default, as exporters do; ``127.0.0.1`` keeps it to this host), and
the ``command`` label shows the command line with its secrets masked. A real ``gpuwhy
run`` of a script that waits to be told to stop; the listening socket read from the
kernel's table (/proc/net/tcp), so the test needs no second host."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gpuwhy.cli import EXIT_ERROR, build_parser, main
from gpuwhy.commands import command_modules
from tests.export.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
WAITS = """
import os, sys, time
print(sys.argv[1:], flush=True)
deadline = time.monotonic() + 60
while not os.path.exists("stop") and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def listening_on(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at ``port`` (state 0A: LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def scrape(port: int, timeout_s: float = 30.0) -> str:
    """/metrics at 127.0.0.1:port once it serves the run's info."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
                text = reply.read().decode()
            if "gpuwhy_run_info{" in text:
                return text
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing served on port {port}")
        time.sleep(0.1)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's socket table")
@pytest.mark.parametrize(
    ("given", "listens"), [(("--metrics-addr", "127.0.0.1"), "127.0.0.1"), ((), "0.0.0.0")]
)
def test_metrics_listen_where_asked_and_label_the_masked_command(tmp_path, given, listens):
    script = tmp_path / "duty.py"
    script.write_text(WAITS)
    port = free_port()
    run = subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", "run", "--no-audit", "--metrics-port", str(port),
         *given, "--metrics-interval", "1", str(script), "--hf-token", "SECRET123"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        text = scrape(port)
        bound = listening_on(port)
    finally:
        (tmp_path / "stop").touch()
        stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr[-3000:]
    assert stdout == "['--hf-token', 'SECRET123']\n"  # the script's own argv
    assert bound == {listens}
    (info,) = [line for line in text.splitlines() if line.startswith("gpuwhy_run_info{")]
    assert f'command="{script} --hf-token ***"' in info and "SECRET" not in text


def metrics_settings(*argv: str):
    args = build_parser().parse_args(["run", *argv, "t.py"])
    return command_modules()["run"].settings_from(args).metrics


def test_the_address_is_read_as_the_server_takes_it():
    assert metrics_settings("--metrics-port", "9464").addr == "0.0.0.0"
    assert metrics_settings("--metrics-port", "9464", "--metrics-addr", "127.0.0.1").addr == (
        "127.0.0.1"
    )
    assert metrics_settings("--metrics-port", "9464", "--metrics-addr", "[::1]").addr == "::1"
    assert metrics_settings("--metrics-port", "1", "--metrics-addr", "node-7.local").addr == (
        "node-7.local"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--metrics-port", "9464", "--metrics-addr", "300.1.1.1"), "not '300.1.1.1'"),
        (("--metrics-port", "9464", "--metrics-addr", "host:9464"), "not 'host:9464'"),
        (("--metrics-port", "9464", "--metrics-addr", ""), "not ''"),
        (("--metrics-addr", "127.0.0.1"), "--metrics-addr is where --metrics-port listens"),
    ],
)
def test_a_bad_address_is_one_usage_line_before_the_script_runs(tmp_path, capsys, argv, message):
    script = tmp_path / "t.py"
    script.write_text("open('ran', 'w').close()\n")
    assert main(["run", *argv, str(script)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gpuwhy: error: --metrics-addr"), err
    assert message in err and not (tmp_path / "ran").exists()
