"""OTLP export (--metrics-otlp): a real OTLP/HTTP receiver in the test (POST /v1/metrics,
decoded with OpenTelemetry's own protobuf messages) receives a real `gpuwhy run` of a
training script with a planted input problem: the documented names, the job's resource
attributes, the step histogram and the finding. A collector that is down, one that never
answers and a missing extra are one line each, and the run's result stands."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuwhy.collect.identity import JOB_LABELS
from gpuwhy.collect.step_histogram import STEP_BUCKETS, StepHistogram
from gpuwhy.export.metrics import GPU_NOW, METRICS, Values
from gpuwhy.export.otlp import BadEndpoint, OtlpMetrics, endpoint
from tests.export.conftest import free_port
from tests.export.test_prometheus_scrape import STARVED_FIT

metrics_service = pytest.importorskip(
    "opentelemetry.proto.collector.metrics.v1.metrics_service_pb2",
    reason="the otlp extra (pip install -e '.[test]' installs it)",
)
ROOT = Path(__file__).resolve().parents[2]


class Receiver:
    """An OTLP/HTTP metrics receiver on a free localhost port: every request it decoded,
    as (resource attributes, {metric name: protobuf Metric})."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict]] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                encoding = self.headers.get("Content-Encoding", "")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                received.paths.append(self.path)
                request = metrics_service.ExportMetricsServiceRequest()
                request.ParseFromString(body)
                received.add(request)
                reply = metrics_service.ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, request) -> None:
        for resource_metrics in request.resource_metrics:
            resource = {a.key: a.value.string_value for a in resource_metrics.resource.attributes}
            found = {
                metric.name: metric
                for scope in resource_metrics.scope_metrics
                for metric in scope.metrics
            }
            self.requests.append((resource, found))

    def wait_for(self, condition, timeout_s: float = 120.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for resource, found in list(self.requests):
                if condition(resource, found):
                    return resource, found
            time.sleep(0.2)
        raise AssertionError(f"no request satisfied the condition in {len(self.requests)}")


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


def attributes(point) -> dict[str, str]:
    return {a.key: a.value.string_value for a in point.attributes}


def has_finding(finding_id: str):
    def condition(resource, found) -> bool:
        metric = found.get("gpuwhy_finding")
        points = metric.gauge.data_points if metric is not None else ()
        return any(attributes(p).get("id") == finding_id for p in points)

    return condition


def gpuwhy(*args: str, env: dict[str, str] | None = None, cwd: Path, timeout: float = 180):
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args], cwd=cwd, env=env or dict(os.environ),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_a_collector_receives_the_documented_metrics_and_the_finding(tmp_path, receiver):
    script = tmp_path / "train.py"
    script.write_text(STARVED_FIT)
    config = {"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 0}}
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "GPUWHY_RUN_ID": "otlp-test",
           "TF_CONFIG": json.dumps(config)}  # fmt: skip
    run = subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", "run", "--metrics-otlp", receiver.url,
         "--metrics-interval", "1", "--json", "record.json", str(script)],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # while the script still runs: the finding, exported live
        live_resource, live = receiver.wait_for(has_finding("input.bound"))
    finally:
        (tmp_path / "stop").touch()
        stdout, stderr = run.communicate(timeout=240)
    assert run.returncode == 0, stderr[-3000:]
    assert stdout == "trained\n"  # the program's output, unchanged
    assert "metrics" not in stderr  # a collector that accepts: nothing to say
    assert set(receiver.paths) == {"/v1/metrics"}
    assert live_resource["run_id"] == "otlp-test"

    resource, final = receiver.requests[-1]  # the last export, from the final record
    assert resource["service.name"] == "gpuwhy" and resource["Hostname"]
    assert resource["run_id"] == "otlp-test"
    assert resource["task_type"] == "worker" and resource["task_index"] == "0"
    labels = set(resource) - {"service.name", "service.version", "service.instance.id"}
    labels = {k for k in labels if not k.startswith("telemetry.sdk.")}  # the SDK's own
    assert labels <= set(JOB_LABELS), labels - set(JOB_LABELS)
    documented = {m.name: m for m in METRICS}
    assert set(final) <= set(documented), set(final) - set(documented)
    expected = {"gpuwhy_run_info", "gpuwhy_run_seconds", "gpuwhy_steps_total",
                "gpuwhy_step_seconds", "gpuwhy_input_wait_ratio",
                "gpuwhy_tf_function_traces_total", "gpuwhy_finding"}  # fmt: skip
    assert expected <= set(final), expected - set(final)
    for name, metric in final.items():
        assert metric.description == documented[name].help
        kind = {"gauge": "gauge", "counter": "sum", "histogram": "histogram"}
        assert metric.WhichOneof("data") == kind[documented[name].kind], name
    for name in ("gpuwhy_steps_total", "gpuwhy_tf_function_traces_total"):
        total = final[name].sum
        assert total.is_monotonic and total.aggregation_temporality == 2  # cumulative

    (info,) = final["gpuwhy_run_info"].gauge.data_points
    assert attributes(info)["mode"] == "run" and info.as_double == 1.0
    (finding,) = [
        p for p in final["gpuwhy_finding"].gauge.data_points
        if attributes(p)["id"] == "input.bound"
    ]  # fmt: skip
    assert attributes(finding)["severity"] in ("high", "medium")
    (wait,) = final["gpuwhy_input_wait_ratio"].gauge.data_points
    assert wait.as_double > 0.5  # the steps wait for the slow map

    # the step histogram: Prometheus' buckets, one count per step after warm-up
    record = json.loads((tmp_path / "record.json").read_text())
    steps = record["steps"]
    (histogram,) = final["gpuwhy_step_seconds"].histogram.data_points
    assert tuple(histogram.explicit_bounds) == STEP_BUCKETS
    assert sum(histogram.bucket_counts) == histogram.count
    assert histogram.count == steps["count"] - steps["warmup"] > 0
    assert abs(histogram.sum - steps["total_s"]) < 0.05 * steps["total_s"]
    (counted,) = final["gpuwhy_steps_total"].sum.data_points
    assert counted.as_int == steps["count"]


def test_a_watched_command_exports_when_it_ends(tmp_path, receiver):
    env = {**os.environ, "GPUWHY_RUN_ID": "otlp-watch"}
    watch = gpuwhy("watch", "--metrics-otlp", receiver.url.removeprefix("http://"), "--",
                   sys.executable, "-c", "print('child')", env=env, cwd=tmp_path)  # fmt: skip
    assert watch.returncode == 0 and watch.stdout == "child\n", watch.stderr[-2000:]
    resource, found = receiver.requests[-1]
    assert resource["run_id"] == "otlp-watch"
    (info,) = found["gpuwhy_run_info"].gauge.data_points
    assert attributes(info)["mode"] == "watch"


def test_a_collector_that_is_down_is_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    port = free_port()
    result = gpuwhy("run", "--metrics-otlp", f"http://127.0.0.1:{port}", str(script),
                    cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and result.stdout == "ran\n"
    (line,) = [text for text in result.stderr.splitlines() if "metrics" in text]
    assert line == (
        f"gpuwhy: metrics: cannot export to http://127.0.0.1:{port}/v1/metrics (OTLP): "
        "[Errno 111] Connection refused"
    )
    assert "Traceback" not in result.stderr and "Transient error" not in result.stderr


def test_every_documented_metric_is_exported_with_its_values(receiver):
    """A metric added to METRICS without an OTLP reading would vanish from OTLP alone."""
    gpu = {"gpu": "0", "UUID": "GPU-abc", "modelName": "NVIDIA H100 80GB HBM3"}
    counted = StepHistogram()
    for seconds in (0.004, 0.2, 0.2):
        counted.add(seconds)
    full = Values(run_s=12.3456, steps=40, step_seconds=counted,
                  input_wait_ratio=0.62, gpu_busy=((gpu, 0.8),), eager_ops_per_step=31.0,
                  traces=(("train_step", 3),), copies_per_step=2.0, collective_ratio=0.31,
                  findings=(("input.bound", "high"),),
                  gpu_now=tuple((name, gpu, 4.0) for name in GPU_NOW))  # fmt: skip
    otlp = OtlpMetrics({"Hostname": "node-7", "run_id": "r1"}, {"mode": "run"}, receiver.url)
    otlp.update(full)
    otlp.export()
    _, first = receiver.wait_for(lambda resource, found: True, timeout_s=10)
    assert set(first) == {m.name for m in METRICS}
    (finding,) = first["gpuwhy_finding"].gauge.data_points
    assert attributes(finding) == {"id": "input.bound", "severity": "high"}
    later = dataclasses.replace(full, steps=39, traces=(), findings=())
    otlp.update(later)  # counts only grow
    otlp.finish()
    resource, found = receiver.requests[-1]
    assert "gpuwhy_finding" not in found  # the finding no longer holds
    assert resource["Hostname"] == "node-7" and "pod" not in resource  # unset: left out
    value = {name: m.gauge.data_points[0].as_double for name, m in found.items()
             if m.WhichOneof("data") == "gauge" and m.gauge.data_points}  # fmt: skip
    assert value["gpuwhy_run_seconds"] == 12.346 and value["gpuwhy_collective_ratio"] == 0.31
    (busy,) = found["gpuwhy_gpu_busy_ratio"].gauge.data_points
    assert attributes(busy) == gpu and busy.as_double == 0.8
    (reasons,) = found["DCGM_FI_DEV_CLOCKS_EVENT_REASONS"].gauge.data_points
    assert attributes(reasons) == gpu and reasons.as_double == 4.0  # SW power cap
    assert found["gpuwhy_steps_total"].sum.data_points[0].as_int == 40
    (traces,) = found["gpuwhy_tf_function_traces_total"].sum.data_points
    assert attributes(traces) == {"function": "train_step"} and traces.as_int == 3
    (histogram,) = found["gpuwhy_step_seconds"].histogram.data_points
    assert histogram.count == 3 and list(histogram.bucket_counts)[:8] == [0, 0, 1, 0, 0, 0, 0, 2]
    assert abs(histogram.sum - 0.404) < 1e-9
    assert found["gpuwhy_step_seconds"].histogram.aggregation_temporality == 2  # cumulative


def test_the_end_of_a_run_waits_two_seconds_at_most_for_a_collector(tmp_path):
    """A collector that accepts connections and never answers: the last export is
    given up after FINAL_TIMEOUT_S, and the failure is one line."""
    with socket.socket() as stalled:
        stalled.bind(("127.0.0.1", 0))
        stalled.listen()
        url = f"http://127.0.0.1:{stalled.getsockname()[1]}/v1/metrics"
        otlp = OtlpMetrics({"Hostname": "node-7", "run_id": "r1"}, {"mode": "run"}, url)
        otlp.update(Values(run_s=3.0, steps=10))
        started = time.perf_counter()
        otlp.finish()
        assert time.perf_counter() - started < 2.5


def test_without_the_extra_the_run_goes_on_after_one_line(tmp_path):
    """The run's interpreter cannot import opentelemetry (a package first on its path
    that raises ImportError, as a missing one does)."""
    hidden = tmp_path / "hidden" / "opentelemetry"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed')\n")
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden.parent), str(ROOT)])}
    result = gpuwhy("run", "--metrics-otlp", "http://127.0.0.1:4318", str(script),
                    env=env, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0 and result.stdout == "ran\n"
    (line,) = [text for text in result.stderr.splitlines() if "otlp" in text.lower()]
    assert line == "gpuwhy: --metrics-otlp needs: pip install 'gpuwhy[otlp]'"
    assert "Traceback" not in result.stderr


def test_the_endpoint_of_a_url_a_host_and_the_environment():
    assert endpoint("http://collector:4318") == "http://collector:4318/v1/metrics"
    assert endpoint("collector:4318/") == "http://collector:4318/v1/metrics"
    assert endpoint("https://otel.example/otlp/v1/metrics") == (
        "https://otel.example/otlp/v1/metrics"
    )  # a path is the user's: kept as given
    assert endpoint("env", {}) == "http://localhost:4318/v1/metrics"
    assert endpoint("env", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == (
        "http://c:4318/v1/metrics"
    )
    both = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://m:9/custom"}  # fmt: skip
    assert endpoint("env", both) == "http://m:9/custom"
    for bad in ("", "ftp://collector:21", "http://"):
        with pytest.raises(BadEndpoint):
            endpoint(bad)


def test_a_bad_url_is_a_usage_error(tmp_path):
    result = gpuwhy("run", "--metrics-otlp", "ftp://collector", "train.py", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "--metrics-otlp needs an http:// or https:// URL (OTLP/HTTP), not 'ftp://collector'"
        )
    )
