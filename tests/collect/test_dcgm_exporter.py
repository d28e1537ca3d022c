"""gpuwhy.collect.dcgm_exporter against a real HTTP server on 127.0.0.1 serving a
dcgm-exporter exposition (tests/data/dcgm/exporter_h100.prom, written from the exporter's
documented format) and the ways a scrape fails: refused, too slow, an HTTP error, a body
that is not Prometheus text, an exporter without the profiling fields."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuwhy.collect import dcgm_exporter
from gpuwhy.collect.dcgm_exporter import FIELDS, Poller, match, metrics_url, parse, scrape
from gpuwhy.facts import GpuDevice

FIXTURE = (Path(__file__).parents[1] / "data" / "dcgm" / "exporter_h100.prom").read_text()
UUID0 = "GPU-6f1c8d2a-4b7e-9a03-5c1d-2e8f7a6b4c90"
UUID1 = "GPU-a3e05b71-8c2d-4f96-1b7a-d04c9e3f2a18"
GENEROUS = 10.0  # a loaded CI machine still answers a local request well within this


def without(text: str, *prefixes: str) -> str:
    return "".join(
        line for line in text.splitlines(keepends=True) if not any(p in line for p in prefixes)
    )


def no_uuids(text: str) -> str:
    return text.replace(f'UUID="{UUID0}",', "").replace(f'UUID="{UUID1}",', "")


class Exporter:
    """Routes: path -> (status, body, delay before answering)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, float]] = {"/metrics": (200, FIXTURE, 0.0)}
        self.paths: list[str] = []
        routes, paths = self.routes, self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                paths.append(self.path)
                status, body, delay = routes.get(self.path, (404, "404 page not found\n", 0.0))
                if delay:
                    time.sleep(delay)
                data = body.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (the timeout test)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(GENEROUS)


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    server = Exporter()
    yield server
    server.close()


def devices(*uuids: str | None) -> list[GpuDevice]:
    return [GpuDevice(index=i, name="NVIDIA H100 80GB HBM3", uuid=u) for i, u in enumerate(uuids)]


def test_scrape_reads_both_gpus_as_fractions(exporter, monkeypatch):
    # an HTTP proxy in the environment is not used for the exporter
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    before = time.time()
    result = scrape(exporter.url + "/metrics", timeout_s=GENEROUS)
    assert result.ok, result.error
    assert result.error is None and result.notes == ()
    assert result.url.endswith("/metrics")
    by_uuid = {g.uuid: g for g in result.gpus}
    assert set(by_uuid) == {UUID0, UUID1}
    busy, idle = by_uuid[UUID0], by_uuid[UUID1]
    assert (busy.index, idle.index) == (0, 1)
    assert busy.hostname == idle.hostname == "gpu-node-7"
    assert busy.pci_bus_id == "00000000:18:00.0"
    assert busy.model_name == "NVIDIA H100 80GB HBM3"
    assert dict(busy.values) == {
        "gr_engine_active": 0.912345,
        "sm_active": 0.784512,
        "sm_occupancy": 0.301877,
        "tensor_active": 0.456789,
    }
    assert dict(idle.values) == dict.fromkeys(FIELDS.values(), 0.0)
    for gpu in result.gpus:
        assert all(0.0 <= v <= 1.0 for v in gpu.values.values())
    # no timestamp in an exporter's exposition: the values stand at the scrape's time
    assert result.time_source == "scrape"
    assert before <= result.time_s <= time.time()
    assert 0 < result.elapsed_s < GENEROUS


def test_a_url_without_a_path_or_scheme_gets_metrics(exporter):
    host_port = exporter.url.removeprefix("http://")
    for url in (exporter.url, exporter.url + "/", host_port):
        result = scrape(url, timeout_s=GENEROUS)
        assert result.ok, result.error
        assert result.url == exporter.url + "/metrics"
    assert exporter.paths == ["/metrics"] * 3
    assert (
        metrics_url("http://node:9400/federate?match[]=x") == "http://node:9400/federate?match[]=x"
    )


def test_match_by_uuid_whatever_the_index(exporter):
    result = scrape(exporter.url, timeout_s=GENEROUS)
    # a container that was given the node's GPU 1 sees it as NVML index 0
    assert match(result, devices(UUID1)) == {0: dict.fromkeys(FIELDS.values(), 0.0)}
    both = match(result, devices(UUID0, UUID1.lower()))
    assert both[0]["gr_engine_active"] == 0.912345
    assert both[1]["gr_engine_active"] == 0.0
    # a GPU the exporter does not list (another node's) is not matched by its index
    assert match(result, devices("GPU-00000000-0000-0000-0000-000000000000")) == {}


def test_match_by_index_where_uuids_are_absent(exporter):
    result = scrape(exporter.url, timeout_s=GENEROUS)
    assert match(result, devices(None, None)) == {
        0: dict(result.gpus[0].values),
        1: dict(result.gpus[1].values),
    }
    # an exposition without UUIDs: NVML's UUID has nothing to meet, the index does
    assert match(parse(no_uuids(FIXTURE)), devices(UUID0)) == {0: dict(result.gpus[0].values)}


def test_several_hosts_keep_this_hosts_rows_for_the_index(monkeypatch):
    other = FIXTURE.replace('Hostname="gpu-node-7"', 'Hostname="gpu-node-8"')
    other = other.replace("0.912345", "0.111111")
    # no UUIDs: the index is all there is
    text = no_uuids(FIXTURE + other)
    two_hosts = parse(text)
    assert {g.hostname for g in two_hosts.gpus} == {"gpu-node-7", "gpu-node-8"}
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.setattr(dcgm_exporter.socket, "gethostname", lambda: "gpu-node-8.cluster.local")
    assert match(two_hosts, devices(None))[0]["gr_engine_active"] == 0.111111
    # in a pod the host name is the pod's; the node's name comes from NODE_NAME
    monkeypatch.setattr(dcgm_exporter.socket, "gethostname", lambda: "resnet-train-0")
    assert match(two_hosts, devices(None)) == {}
    monkeypatch.setenv("NODE_NAME", "gpu-node-7")
    assert match(two_hosts, devices(None))[0]["gr_engine_active"] == 0.912345
    # one host in the exposition: its rows are this machine's whatever the names
    monkeypatch.setattr(dcgm_exporter.socket, "gethostname", lambda: "elsewhere")
    monkeypatch.delenv("NODE_NAME")
    one_host = parse(no_uuids(FIXTURE))
    assert match(one_host, devices(None))[0]["gr_engine_active"] == 0.912345


def test_exporter_without_profiling_fields(exporter):
    exporter.routes["/metrics"] = (200, without(FIXTURE, "DCGM_FI_PROF_"), 0.0)
    result = scrape(exporter.url, timeout_s=GENEROUS)
    assert not result.ok and result.gpus == ()
    assert "\n" not in result.error
    assert "no DCGM_FI_PROF_* profiling fields" in result.error
    assert "dcp-metrics-included.csv" in result.error and "-f " in result.error
    assert match(result, devices(UUID0)) == {}


def test_default_counters_of_exporter_4_give_some_fields(exporter):
    # 4.x's default counters list GR_ENGINE_ACTIVE and PIPE_TENSOR_ACTIVE, not SM_*
    text = without(FIXTURE, "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY")
    exporter.routes["/metrics"] = (200, text, 0.0)
    result = scrape(exporter.url, timeout_s=GENEROUS)
    assert result.ok, result.error
    assert match(result, devices(UUID0)) == {
        0: {"gr_engine_active": 0.912345, "tensor_active": 0.456789}
    }
    (note,) = result.notes
    assert "sm_active, sm_occupancy" in note and "-f " in note


def test_connection_refused():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = scrape(f"http://127.0.0.1:{port}", timeout_s=GENEROUS)
    assert not result.ok and result.gpus == ()
    assert "connection refused" in result.error
    assert result.error.startswith(f"dcgm-exporter at http://127.0.0.1:{port}/metrics: ")


def test_timeout(exporter):
    exporter.routes["/metrics"] = (200, FIXTURE, 2.0)
    start = time.monotonic()
    result = scrape(exporter.url, timeout_s=0.2)
    assert time.monotonic() - start < 1.9  # gave up before the server answered
    assert not result.ok
    assert "no answer within 0.2 s" in result.error


def test_http_error(exporter):
    result = scrape(exporter.url + "/nothing", timeout_s=GENEROUS)
    assert not result.ok
    assert "HTTP 404" in result.error


@pytest.mark.parametrize(
    "body, words",
    [
        ("<html><body>Welcome to nginx!</body></html>\n", "not Prometheus text"),
        ("\x00\x01\x02 binary{\n", "not Prometheus text"),
        ("", "empty answer"),
        ("# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 12\n", "no DCGM_*"),
    ],
)
def test_not_an_exporters_answer(exporter, body, words):
    exporter.routes["/metrics"] = (200, body, 0.0)
    result = scrape(exporter.url, timeout_s=GENEROUS)
    assert not result.ok and result.gpus == ()
    assert words in result.error
    assert "\n" not in result.error


def test_never_raises_on_a_bad_url():
    for url in ("http://[::1", "ftp://example.invalid/metrics", "http://"):
        result = scrape(url, timeout_s=GENEROUS)
        assert not result.ok and result.error


def test_exposition_timestamp_is_kept():
    stamped = parse('DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0",UUID="GPU-a"} 0.5 1700000000123\n')
    assert stamped.time_source == "exporter"
    assert stamped.time_s == pytest.approx(1700000000.123)


def test_label_spellings_and_repeats():
    text = (
        # the README's own sample spacing, the old namespace's uuid and the renamed hostname
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0", uuid="GPU-a", hostname="n"} 0.25\n'
        # the same GPU once more for a second pod sharing it: one reading
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="0", uuid="GPU-a", hostname="n", pod="b"} 0.25\n'
        # a MIG GPU's rows are per GPU instance
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",UUID="GPU-b",GPU_I_PROFILE="3g.40gb",GPU_I_ID="1"} 0.9\n'
        # not a ratio (a percent relabelled as the field)
        'DCGM_FI_PROF_SM_ACTIVE{gpu="0",uuid="GPU-a",hostname="n"} 87\n'
    )
    result = parse(text)
    (gpu,) = result.gpus
    assert (gpu.uuid, gpu.index, gpu.hostname) == ("GPU-a", 0, "n")
    assert dict(gpu.values) == {"gr_engine_active": 0.25}
    assert any("MIG" in note for note in result.notes)
    assert any("not a 0-1 ratio" in note for note in result.notes)
    assert match(result, devices("GPU-a", "GPU-b")) == {0: {"gr_engine_active": 0.25}}
    only_mig = parse(text.splitlines(keepends=True)[2])
    assert not only_mig.ok and "MIG" in only_mig.error


def test_the_samplers_poller_hands_each_scrape_to_one_tick(exporter):
    # the live source's reader: a scrape a second in its own thread
    gpu0 = "GPU-6f1c8d2a-4b7e-9a03-5c1d-2e8f7a6b4c90"
    poller = Poller(exporter.url, devices(gpu0))
    try:
        deadline = time.monotonic() + GENEROUS
        taken: dict = {}
        while not taken and time.monotonic() < deadline:
            taken = poller.take()
            time.sleep(0.02)
        assert set(taken) == {0} and 0 < taken[0]["gr_engine_active"] <= 1
        assert poller.error is None
        poller.close()
        poller._thread.join(GENEROUS)  # no scrape after this one
        poller.take()
        assert poller.take() == {}  # a scrape is handed to one tick only
    finally:
        poller.close()
