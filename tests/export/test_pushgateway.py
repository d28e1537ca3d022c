"""Short jobs push: a real Pushgateway (Debian's prometheus-pushgateway) receives a
`gpuwhy run` and a `gpuwhy watch` job's series when they end, grouped by host and run
id; a gateway that is down is one line and the job's own result stands."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.export.conftest import binary, free_port


@pytest.fixture
def pushgateway(tmp_path):
    port = free_port()
    process = subprocess.Popen(
        [binary("prometheus-pushgateway", "PUSHGATEWAY"), f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2):
                break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(10)


def pushed(url: str) -> dict[str, list]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        f.name: f.samples
        for f in text_string_to_metric_families(text)
        if f.name.startswith("gpuwhy")
    }


def test_a_run_and_a_watched_command_push_when_they_end(tmp_path, pushgateway):
    script = tmp_path / "train.py"
    script.write_text(
        "import tensorflow as tf\n"
        "@tf.function\ndef step(x):\n    return x * 2\n"
        "for i in range(5):\n    step(tf.constant([float(i)] * (i + 1)))\n"  # retraces
        "print('ok')\n"
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "GPUWHY_RUN_ID": "push-run"}
    run = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--metrics-push", pushgateway, str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert run.returncode == 0 and run.stdout == "ok\n", run.stderr[-2000:]
    watch_env = {**env, "GPUWHY_RUN_ID": "push-watch"}
    watch = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "watch", "--metrics-push", pushgateway, "--",
         sys.executable, "-c", "print('child')"],
        cwd=tmp_path, env=watch_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert watch.returncode == 0 and watch.stdout == "child\n", watch.stderr[-2000:]
    found = pushed(pushgateway)
    info = {s.labels["run_id"]: s.labels for s in found["gpuwhy_run_info"]}
    assert info["push-run"]["mode"] == "run" and info["push-watch"]["mode"] == "watch"
    assert info["push-run"]["job"] == "gpuwhy" and info["push-run"]["Hostname"]
    traces = [s for s in found["gpuwhy_tf_function_traces"] if s.name.endswith("_total")]
    assert any(s.labels["function"] == "step" and s.value >= 2 for s in traces)


def test_a_gateway_that_is_down_is_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    result = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", "--metrics-push", f"127.0.0.1:{free_port()}",
         str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "ran\n"
    (line,) = [text for text in result.stderr.splitlines() if "metrics" in text]
    assert line.startswith("gpuwhy: metrics: cannot push to 127.0.0.1:")
