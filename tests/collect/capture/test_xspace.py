"""``xspace.read`` (the capture reader that needs no TensorFlow) against TensorFlow's own
parser on every committed capture: the same planes, lines, events, times and stats; its
chunked walk of long lines against its whole-line parse; and the files that are not a
capture (empty, cut short, another format) refused with ``FormatError``."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpuwhy.collect.capture import analysis, xplane_descriptor, xspace
from tests.collect.capture import reference
from tests.collect.capture.reference import CAPTURES

NAMES = sorted(CAPTURES)


def test_the_generated_descriptor_is_the_one_tensorflows_wheel_compiles(xplane_pb2):
    # a TensorFlow that changes xplane.proto breaks here: regenerate with
    # tools/generate_xplane_descriptor.py
    assert xplane_descriptor.SERIALIZED == bytes(xplane_pb2.DESCRIPTOR.serialized_pb)
    message_classes = xspace.classes()
    assert [c.DESCRIPTOR.full_name for c in message_classes] == [
        "tensorflow.profiler.XPlane",
        "tensorflow.profiler.XLine",
        "tensorflow.profiler.XSpace",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_every_plane_line_and_event_is_read_as_tensorflow_parses_it(name, tf_spaces):
    space = xspace.read(CAPTURES[name])
    truth = tf_spaces[name]
    assert [p.name for p in space.planes] == [p.name for p in truth.planes]
    assert space.hostnames == list(truth.hostnames)
    assert space.errors == list(truth.errors) and space.warnings == list(truth.warnings)
    events = 0
    for got, want in zip(space.planes, truth.planes):
        assert got.names == {k: m.name for k, m in want.event_metadata.items()}
        assert got.display == {
            k: m.display_name for k, m in want.event_metadata.items() if m.display_name
        }
        assert [line.name for line in got.lines] == [reference.line_name(x) for x in want.lines]
        for got_line, want_line in zip(got.lines, want.lines):
            where = f"{want.name} / {reference.line_name(want_line)}"
            assert got_line.id == want_line.id, where
            assert len(got_line) == len(want_line.events), where
            np.testing.assert_array_equal(got_line.starts, reference.starts_ps(want_line), where)
            np.testing.assert_array_equal(
                got_line.durations, reference.durations_ps(want_line), where
            )
            np.testing.assert_array_equal(got_line.ids, reference.metadata_ids(want_line), where)
            assert got_line.stats == {}, "no stats read where none were wanted"
            events += len(got_line)
        # the plane's own stats: every one whose metadata the plane has, by its name
        for key, value in reference.stats(want, want.stats).items():
            assert got.stats[key] == value, (want.name, key)
    assert events == sum(len(x.events) for p in truth.planes for x in p.lines) > 0


def test_the_h100_captures_lines_and_plane_stats_are_what_its_source_says():
    # tests/data/xplane/SOURCE.md, from TF's parser: the device lines' names and sizes,
    # the GPU's model and the capture's clock
    space = xspace.read(CAPTURES["h100_slow_input"])
    gpu = space.plane("/device:GPU:0")
    assert {line.name: len(line) for line in gpu.lines} == {
        "Stream #14(Memset,MemcpyD2D,Compute)": 867,
        "Stream #15(MemcpyH2D)": 48,
        "Stream #19(MemcpyD2H)": 11,
        "Stream #17(MemcpyD2H)": 10,
    }
    assert gpu.stats["gpu_device_name"] == "NVIDIA H100 80GB HBM3"
    assert gpu.stats["core_count"] == 132
    environment = space.plane("Task Environment").stats
    assert environment["profile_start_time"] == 1795801121298569229
    assert environment["profile_stop_time"] - environment["profile_start_time"] == 511302052
    host = space.plane("/host:CPU")
    assert [line.name for line in host.lines].count("python3") == 3  # names are not unique
    assert sum(len(line) for line in host.lines) == 25737


def copies_wanted(plane: str, name: str) -> bool:
    return name == "MemcpyH2D"


def test_stats_are_read_for_the_wanted_events_only_with_references_read_as_names(tf_spaces):
    space = xspace.read(CAPTURES["h100_slow_input"], copies_wanted)
    truth = tf_spaces["h100_slow_input"]
    details = {}
    for got, want in zip(space.planes, truth.planes):
        for got_line, want_line in zip(got.lines, want.lines):
            expected = {
                index: reference.stats(want, event.stats)  # the event's own stats
                for index, event in enumerate(want_line.events)
                if reference.event_name(want, event) == "MemcpyH2D"
            }
            assert got_line.stats == expected, (want.name, want_line.name)
            for stats in expected.values():
                details.setdefault(want.name, []).append(stats["memcpy_details"])
    # memcpy_details is a ref_value: the name of a stat metadata, read as that string
    device = details["/device:GPU:0"]
    assert len(device) == 48
    assert all(d.startswith("kind_src:pinned kind_dst:device size:") for d in device)
    assert sum(int(d.split("size:")[1].split()[0]) for d in device) == 66065688
    # the host's own MemcpyH2D events (the launches) are wanted too: the device's kind unknown
    assert details["/host:CPU"] and all(
        d.startswith("kind_src:unknown kind_dst:unknown") for d in details["/host:CPU"]
    )


def test_wants_is_asked_per_plane_and_event_name():
    asked: list[tuple[str, str]] = []

    def wants(plane: str, name: str) -> bool:
        asked.append((plane, name))
        return False

    space = xspace.read(CAPTURES["custom_loop_step_markers"], wants)
    assert sorted(asked) == sorted((p.name, n) for p in space.planes for n in p.names.values())
    assert all(not line.stats for p in space.planes for line in p.lines)


def assert_same_space(chunked: xspace.Space, whole: xspace.Space) -> None:
    assert [p.name for p in chunked.planes] == [p.name for p in whole.planes]
    for a, b in zip(chunked.planes, whole.planes):
        assert (a.names, a.display, a.metadata_stats, a.stats) == (
            b.names,
            b.display,
            b.metadata_stats,
            b.stats,
        )
        assert [(x.id, x.name, len(x)) for x in a.lines] == [
            (x.id, x.name, len(x)) for x in b.lines
        ]
        for x, y in zip(a.lines, b.lines):
            np.testing.assert_array_equal(x.starts, y.starts)
            np.testing.assert_array_equal(x.durations, y.durations)
            np.testing.assert_array_equal(x.ids, y.ids)
            assert x.stats == y.stats, (a.name, x.name)
            assert x.constant == y.constant, (a.name, x.name)


@pytest.mark.parametrize(
    ("whole_line_bytes", "chunk_bytes"),
    [(1024, 1), (1024, 700), (0, 8 << 10)],
    ids=["one-event-chunks", "small-chunks", "every-line-walked"],
)
def test_the_chunked_walk_of_long_lines_equals_the_whole_line_parse(
    monkeypatch, tf_spaces, whole_line_bytes, chunk_bytes
):
    path = CAPTURES["h100_slow_input"]
    whole = xspace.read(path, analysis.wants)
    # the walk is taken for the lines longer than WHOLE_LINE_BYTES: the GPU's compute
    # stream and the busy host threads here, the longest (435 KB) in many chunks
    sizes = [x.ByteSize() for p in tf_spaces["h100_slow_input"].planes for x in p.lines]
    assert sum(size > whole_line_bytes for size in sizes) >= 5
    assert max(sizes) > 20 * max(chunk_bytes, 1024)
    monkeypatch.setattr(xspace, "WHOLE_LINE_BYTES", whole_line_bytes)
    monkeypatch.setattr(xspace, "CHUNK_BYTES", chunk_bytes)
    chunked = xspace.read(path, analysis.wants)
    assert_same_space(chunked, whole)
    # the wanted stats survived the walk (they are indexed across chunks): every GPU
    # event has its own or its kind's
    gpu = chunked.plane("/device:GPU:0")
    with_stats = sum(1 for x in gpu.lines for i in range(len(x)) if x.stats_of(i))
    assert with_stats == sum(len(x) for x in gpu.lines) == 936


# -- what is not a capture ----------------------------------------------------------------
def test_an_empty_file_is_refused(tmp_path):
    empty = tmp_path / "vm.xplane.pb"
    empty.write_bytes(b"")
    with pytest.raises(xspace.FormatError, match="empty"):
        xspace.read(empty)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9, "last byte"])
def test_a_capture_cut_short_is_refused(tmp_path, name, fraction):
    data = CAPTURES[name].read_bytes()
    cut = len(data) - 1 if fraction == "last byte" else int(len(data) * fraction)
    truncated = tmp_path / "vm.xplane.pb"
    truncated.write_bytes(data[:cut])
    with pytest.raises(xspace.FormatError, match="cut short"):
        xspace.read(truncated, analysis.wants)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"schema": 1, "command": "capture", "capture": {"steps": []}}, indent=2),
        "[]",
        '{"traceEvents": [{"ph": "X", "name": "MemcpyH2D", "ts": 1, "dur": 2}]}',
    ],
    ids=["record", "empty-list", "chrome-trace"],
)
def test_a_json_file_is_refused(tmp_path, text):
    path = tmp_path / "vm.xplane.pb"
    path.write_text(text)
    with pytest.raises(xspace.FormatError):
        xspace.read(path, analysis.wants)


def test_the_projects_own_schema_file_is_refused(tmp_path):
    path = tmp_path / "run.schema.json"
    shutil.copy(Path(xspace.__file__).parents[2] / "schema" / "run.schema.json", path)
    with pytest.raises(xspace.FormatError):
        xspace.read(path)


def test_a_capture_with_corrupt_bytes_is_refused_with_format_error(tmp_path):
    data = CAPTURES["custom_loop_step_markers"].read_bytes()
    rng = random.Random(0)
    escaped = []
    for trial in range(30):
        corrupt = bytearray(data)
        position = rng.randrange(len(data) // 2, len(data))
        corrupt[position] ^= 0xFF  # one byte of the events' half of the file
        path = tmp_path / f"corrupt_{trial}.xplane.pb"
        path.write_bytes(bytes(corrupt))
        try:
            xspace.read(path, analysis.wants)
        except xspace.FormatError:
            pass
        except Exception as error:  # what a caller catching FormatError would not catch
            escaped.append(f"byte {position}: {type(error).__module__}.{type(error).__name__}")
    assert escaped == []
