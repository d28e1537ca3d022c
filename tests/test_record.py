import pytest

from gpuwhy import schema
from gpuwhy.facts import Facts
from gpuwhy.record import Record, RecordError
from gpuwhy.schema import validation_errors
from tests import builders as b


def test_record_round_trips_through_json():
    facts = b.facts(
        tf=b.no_gpu_tf(libraries=b.libraries(missing=("cudnn",))),
        devices=[b.gpu(0, processes=(b.process(),))],
        env_vars={"TF_FORCE_GPU_ALLOW_GROWTH": "1"},
    )
    record = Record.diagnose("check", facts)
    data = record.to_dict()
    assert validation_errors(data) == []
    loaded = Record.from_dict(data)
    assert loaded.facts == record.facts
    assert loaded.findings == record.findings
    assert [f.id for f in loaded.findings] == [
        "env.no-gpu",
        "env.gpu-shared",
        "env.allocator-settings",
    ]


def test_devices_driver_samples_and_reservation_round_trip_and_older_records_load():
    device = b.gpu(
        0,
        memory_used_bytes=0,
        memory_reserved_bytes=480 * 2**20,
        busy_before_samples=(20.0, 0.0, 0.0),
        busy_before_seconds=0.4,
    )
    data = Record.diagnose("check", b.facts(devices=[device])).to_dict()
    assert validation_errors(data) == []
    assert Record.from_dict(data).facts.devices == (device,)
    for key in ("memory_reserved_bytes", "busy_before_samples", "busy_before_seconds"):
        del data["devices"][0][key]  # a record of an older gpuwhy
    data["devices"][0]["utilization_percent"] = 20.0
    old = Record.from_dict(data)
    (loaded,) = old.facts.devices
    assert loaded.memory_reserved_bytes is None and loaded.busy_before_samples is None
    assert "env.gpu-shared" not in [f.id for f in Record.diagnose("check", old.facts).findings]


def test_findings_sorted_by_severity_then_gain():
    facts = b.facts(
        devices=[
            b.gpu(0, processes=(b.process(1, 10.0),)),
            b.gpu(1, processes=(b.process(2, 20.0),)),
        ]
    )
    record = Record.diagnose("check", facts)
    assert [f.evidence["gpu"] for f in record.findings] == [1, 0]


def test_empty_record_is_valid():
    record = Record.diagnose("run", Facts())
    assert validation_errors(record.to_dict()) == []
    assert Record.from_dict(record.to_dict()).facts == Facts()


def test_schema_valid_minimal_process_loads():
    """The schema requires only `pid` for a process: such a file must load."""
    record = Record.diagnose("check", b.facts(devices=[b.gpu(0, processes=(b.process(),))]))
    data = record.to_dict()
    data["devices"][0]["processes"] = [{"pid": 7}]
    assert validation_errors(data) == []
    assert Record.from_dict(data).facts.devices[0].processes[0].pid == 7


def test_schema_run_sections_match_the_facts_dataclasses():
    """The run sections are generated (tools/generate_schema.py); a dataclass change
    without regenerating fails here, not in a user's `gpuwhy report`."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "tools" / "generate_schema.py"
    spec = importlib.util.spec_from_file_location("generate_schema", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    published = schema.load()
    for name, section in module.generated_sections().items():
        assert published["$defs"][name] == section, f"regenerate the schema: {name} changed"


def _refusal(data) -> str:
    """The message a record is refused with."""
    with pytest.raises(RecordError) as refused:
        Record.from_dict(data)
    return str(refused.value)


def test_refusals_name_the_field_what_it_should_be_and_what_it_is():
    data = Record.diagnose("check", b.facts()).to_dict()
    data["environment"]["tensorflow"]["gpu_details"][0]["compute_capability"] = "9.0"
    assert _refusal(data) == (
        "invalid run record: environment/tensorflow/gpu_details/0/"
        "compute_capability: expected an array of integers or null, "
        'got string ("9.0")'
    )
    data = Record.diagnose("check", b.facts()).to_dict()
    del data["findings"]
    assert _refusal(data) == "invalid run record: (top): missing the required field findings"
    data = Record.diagnose("check", b.facts()).to_dict()
    data["environment"]["tensorflow"]["probe_status"] = "x" * 500
    message = _refusal(data)
    assert message.startswith(
        "invalid run record: environment/tensorflow/probe_status: expected "
        'one of "ok", "timeout", "crashed", "error", got string ("xxx'
    )
    assert len(message) < 250


def test_an_integer_field_refuses_an_integral_float():
    """JSON Schema lets 2.0 pass as an integer; it would reach the facts as a float."""
    from tests.report import builders as rb

    data = rb.watched_run().to_dict()
    data["tfdata"]["pipelines"][0]["bottleneck"] = 1.0
    assert _refusal(data).endswith(
        "tfdata/pipelines/0/bottleneck: expected an integer or null, got number (1.0)"
    )


def test_build_info_keys_gpuwhy_does_not_read_are_kept_as_they_are():
    """tf.sysconfig.get_build_info() differs by platform and TF version (Windows DLL names)."""
    data = Record.diagnose("check", b.facts()).to_dict()
    data["environment"]["tensorflow"]["build"]["msvcp_dll_names"] = "msvcp140.dll,msvcp140_1.dll"
    data["environment"]["tensorflow"]["build"]["some_future_key"] = {"any": [1, None]}
    build = Record.from_dict(data).facts.environment.tensorflow.build
    assert build["msvcp_dll_names"] == "msvcp140.dll,msvcp140_1.dll"
    assert build["some_future_key"] == {"any": [1, None]}
