"""A real Prometheus scrapes a real `gpuwhy run` of a training script with a planted
input problem: its query API returns the documented series, with the job's labels, and
the finding's gauge while the script still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from gpuwhy.collect.identity import JOB_LABELS
from gpuwhy.export.metrics import METRICS
from tests.export.conftest import free_port
from tests.export.test_deploy import dashboard_expressions

STARVED_FIT = textwrap.dedent("""
    import os
    import time
    import numpy as np
    import tensorflow as tf

    def load(i):
        time.sleep(0.01)                       # a slow decode, one element at a time
        return np.random.rand(16).astype("float32"), np.float32(1.0)

    ds = tf.data.Dataset.range(100_000).map(
        lambda i: tf.numpy_function(load, [i], (tf.float32, tf.float32)))
    ds = ds.map(lambda x, y: (tf.ensure_shape(x, [16]), tf.ensure_shape(y, [])))
    ds = ds.batch(8).take(25)
    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    for epoch in range(60):           # until the test has queried what it needs
        model.fit(ds, epochs=1, verbose=0)
        if os.path.exists("stop"):
            break
    print("trained")
""")


def series_names(metric) -> set[str]:
    if metric.kind == "histogram":
        return {f"{metric.name}_{part}" for part in ("bucket", "sum", "count")}
    return {metric.name}


def test_prometheus_scrapes_the_documented_series_and_the_finding(tmp_path, prometheus):
    script = tmp_path / "train.py"
    script.write_text(STARVED_FIT)
    port = free_port()
    server = prometheus(port)
    config = {"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "GPUWHY_RUN_ID": "scrape-test",
           "TF_CONFIG": json.dumps(config)}  # fmt: skip
    run = subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", "run", "--metrics-port", str(port),
         "--metrics-interval", "1", str(script)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        (finding,) = server.wait_for('gpuwhy_finding{id="input.bound"}')
        assert finding["metric"]["severity"] in ("high", "medium")
        (steps,) = server.wait_for('gpuwhy_steps_total{run_id="scrape-test"} > 5')
        (wait,) = server.query("gpuwhy_input_wait_ratio")
        names = set(server.api("label/__name__/values"))
        for expr in dashboard_expressions():  # every panel's query runs on the live data
            expr = expr.replace("$Hostname", ".*").replace("$run_id", ".*")
            if "gpu_busy" in expr or "eager" in expr or "DCGM" in expr:
                server.query(expr)  # no GPU here; eager ops per step need a sampled step
            else:
                server.wait_for(expr, timeout_s=30)
    finally:
        (tmp_path / "stop").touch()
        stdout, stderr = run.communicate(timeout=240)
    assert run.returncode == 0, stderr[-3000:]
    assert stdout == "trained\n"  # the program's output, unchanged
    labels = steps["metric"]
    assert labels["task_type"] == "worker" and labels["task_index"] == "0"
    assert labels["Hostname"] and labels["job"] == "gpuwhy"
    assert set(labels) - {"__name__", "job", "instance"} <= set(JOB_LABELS)
    assert float(wait["value"][1]) > 0.5  # the steps wait for the slow map
    documented = set().union(*(series_names(m) for m in METRICS))
    published = {name for name in names if name.startswith("gpuwhy_")}
    assert published <= documented, published - documented
    expected = {"gpuwhy_run_info", "gpuwhy_run_seconds", "gpuwhy_steps_total",
                "gpuwhy_step_seconds_count", "gpuwhy_input_wait_ratio",
                "gpuwhy_tf_function_traces_total", "gpuwhy_finding"}  # fmt: skip
    assert expected <= published, expected - published


def test_a_port_in_use_is_one_line_and_the_run_goes_on(tmp_path):
    import socket

    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "gpuwhy", "run", "--metrics-port", str(port), str(script)],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 0 and result.stdout == "ran\n"
    (line,) = [text for text in result.stderr.splitlines() if "metrics" in text]
    assert line == f"gpuwhy: metrics: port {port} is in use: the run goes on without /metrics"


def test_prometheus_reads_a_gpus_state_under_dcgm_exporters_names(prometheus):
    """No GPU here: the live series come from a replayed recording of a GPU at its power
    cap (tests/data/nvml), served by the same endpoint a run serves."""
    from gpuwhy.export.metrics import values
    from gpuwhy.export.prometheus import Endpoint, PrometheusMetrics
    from gpuwhy.facts import Facts
    from tests.collect.test_sampler import replay

    capped, _ = replay("constructed_a100_power_cap.jsonl")
    metrics = PrometheusMetrics({"Hostname": "node-7", "run_id": "dcgm-test"},
                                {"mode": "watch", "command": "train.py", "version": "0"})  # fmt: skip
    metrics.update(values(Facts(gpu_samples=capped), [], 300.0))
    port = free_port()
    endpoint = Endpoint(metrics, port, addr="127.0.0.1")
    assert endpoint.start()
    try:
        server = prometheus(port)
        # an alert's test for one bit of the mask: SW power cap (0x4) active
        (capped_now,) = server.wait_for("floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 4) % 2 == 1")
        (gen,) = server.query('DCGM_FI_DEV_PCIE_LINK_GEN{run_id="dcgm-test"}')
        (power,) = server.query("DCGM_FI_DEV_POWER_USAGE")
        names = set(server.api("label/__name__/values"))
    finally:
        endpoint.stop()
    labels = capped_now["metric"]
    assert (labels["gpu"], labels["modelName"], labels["Hostname"]) == (
        "0", "NVIDIA A100-PCIE-40GB", "node-7",
    )  # fmt: skip
    assert float(gen["value"][1]) == 4 and float(power["value"][1]) == 299
    published = {name for name in names if name.startswith("DCGM_")}
    assert published == {m.name for m in METRICS if m.name.startswith("DCGM_")}
