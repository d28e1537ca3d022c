"""A saved record that passes the schema renders; one that does not is refused, naming
the field (issue #12, item 9).

Every leaf and every container of real records (`gpuwhy check`, `gpuwhy run` on
examples/slow_training.py) and of synthetic ones with what this machine lacks (GPUs,
NVML samples, a verified audit, measured input fixes) is replaced, one at a time, by
values of other JSON types. Each mutant must either be refused with a short, one-line
RecordError that names the mutated field, or load and go through every renderer and
`--recheck` without an exception: never `internal error: TypeError`.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuwhy.record import Record, RecordError
from gpuwhy.report.run.html import HtmlRenderer
from gpuwhy.report.run.json_ import JsonRenderer
from gpuwhy.report.run.terminal import TerminalRenderer

ROOT = Path(__file__).resolve().parents[1]
# Values of each JSON type, with the awkward ones: negative, huge, empty.
VALUES: dict[str, tuple[Any, ...]] = {
    "integer": (7, -3),
    "number": (1.5, 1e308),
    "string": ("x", ""),
    "boolean": (True,),
    "null": (None,),
    "array": ([], [1, 2], ["a", "b"]),
    "object": ({}, {"a": 1}),
}
MAX_MESSAGE = 300
HTML_EVERY = 50  # the HTML page (~0.15 s) for every 50th mutant that loads
SEED = 12

Path_ = tuple[Any, ...]


# -- the records -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_records(tmp_path_factory) -> dict[str, dict]:
    """The JSON of a real `gpuwhy check` and a real `gpuwhy run` of
    examples/slow_training.py on this machine, made side by side (~15 s)."""
    out = tmp_path_factory.mktemp("fuzz-records")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    commands = {
        "check": ["check", "--json", str(out / "check.json")],
        "run": ["run", "--json", str(out / "run.json"), "examples/slow_training.py"],
    }
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "gpuwhy", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in commands.items()
    }
    records = {}
    for name, proc in procs.items():
        _, stderr = proc.communicate(timeout=600)
        assert proc.returncode in (0, 1), stderr[-3000:]  # check: 1 when no GPU is usable
        records[name] = json.loads((out / f"{name}.json").read_text())
    return records


def synthetic_records() -> dict[str, dict]:
    """Records with the sections this machine's real ones lack: GPUs and NVML samples, TF's
    GPU details, a verified placement audit, measured input-pipeline fixes."""
    from gpuwhy.facts import (
        Disagreement,
        Facts,
        InputFix,
        InputFixFacts,
        PipelineChange,
        PipelineRate,
        PlacementCheck,
        ProgramFacts,
        TfDataFacts,
    )
    from tests import builders as b
    from tests.report import builders as rb

    def rate(x: float) -> PipelineRate:
        return PipelineRate(median=x, min=x * 0.9, max=x * 1.1, passes=5, elements_per_pass=128)

    cache = PipelineChange(
        kind="cache",
        stage="batch(32)",
        location="train.py:67",
        code=".cache()",
        why="same elements every pass",
        source_line="ds = ds.batch(32)",
    )
    fixes = InputFixFacts(
        fixes=(
            InputFix(
                dataset="dataset created at train.py:67",
                location="train.py:67",
                iterated_at=("train.py:80",),
                before=rate(55.7),
                after=rate(6361.3),
                ideal=rate(7099.8),
                gap_closed=0.91,
                speedup=114.2,
                same_elements=True,
                elements_checked="bitwise, 3 passes",
                changes=(cache,),
                left_alone=("train.py:60 shuffle: changes the order",),
                notes=("a note",),
            ),
            InputFix(
                dataset="d",
                before=rate(564),
                after=rate(355),
                speedup=0.63,
                changes=(cache,),
                refused="elements differ",
            ),
            InputFix(dataset="e", error="NotFoundError: data.tfrecord"),
        ),
        library_only=("keras",),
    )
    check = PlacementCheck(
        ran=True,
        device="/GPU:0",
        nodes_compared=12,
        disagreements=(
            Disagreement(node="train_step/Mean", op="Mean", predicted="CPU", actual="GPU"),
        ),
    )
    audit = b.placement(
        groups=[b.op_group("MatMul"), b.op_group("Mean", reason="forced-cpu")],
        copies=[b.host_copy()],
        tensor_ops=[b.tensor_op()],
        predicted=False,
        compute_capability=(9, 0),
        gpu_name="NVIDIA H100",
        verification=check,
        tf32_enabled=True,
        mixed_precision_policy="mixed_float16",
    )
    records = {
        # the real run's placement, tf.data, traces and eager ops are fuzzed there already
        "watched-run": rb.watched_run(
            rb.steps(count=40),
            rb.gpu_samples(rb.gpu_series(samples=30)),
            placement=None,
            tfdata=None,
            tracing=None,
            eager=None,
        ),
        "healthy-check": Record.diagnose(
            "check", b.facts(devices=[b.gpu(0, processes=(b.process(),))])
        ),
        "audit": Record.diagnose("audit", Facts(placement=audit)),
        "fix": Record.diagnose(
            "fix",
            Facts(
                environment=b.environment(),
                program=ProgramFacts(command=("train.py",)),
                tfdata=TfDataFacts(pipelines=(rb.pipeline(),)),
                input_fixes=fixes,
            ),
        ),
        "empty": Record.diagnose("run", Facts()),
    }
    return {name: record.to_dict() for name, record in records.items()}


# -- mutation ----------------------------------------------------------------------------------


def shrink(data: Any) -> Any:
    """Lists of more than three items cut to their first and last: the mutants only touch
    first items, and validating and rendering a shorter record is faster. (Three items
    stay: ``phases`` entries are (name, start, end) triples.)"""
    if isinstance(data, dict):
        return {key: shrink(value) for key, value in data.items()}
    if isinstance(data, list):
        return [shrink(value) for value in (data if len(data) <= 3 else data[:1] + data[-1:])]
    return data


def shape(path: Path_) -> Path_:
    """``findings/*/evidence``: the place of a node, whatever item of a list holds it."""
    return tuple("*" if isinstance(key, int) else key for key in path)


def sites(data: Any, seen: set[Path_], path: Path_ = ()) -> Iterator[Path_]:
    """Every node under the root whose shape (list indices as ``*``) is not in ``seen``
    yet: the first of a series' items stands for all of them, and a section that two
    records share is fuzzed once, in the first record that has it (the real ones come
    first). Findings differ in their evidence, so each still brings its own fields."""
    if path and shape(path) not in seen:
        seen.add(shape(path))
        yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from sites(value, seen, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from sites(value, seen, (*path, index))


def json_type(value: Any) -> str:
    """The JSON type of a value as json.loads gives it (True is not an integer here)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string", list: "array", dict: "object"}[
        type(value)
    ]


def replacements(path: Path_, original: Any) -> list[Any]:
    """Every other value of the original's own type (the likeliest to pass the schema and
    reach a renderer), null (an optional field left out), and a value of another type
    picked by a generator seeded with the path, so every run tries the same mutants.
    (Any wrong type takes the same way to its refusal: one per field shows its message.)"""
    rng = random.Random(f"{SEED}:{slash(path)}")
    own = json_type(original)
    values = [v for v in VALUES[own] if not (type(v) is type(original) and v == original)]
    other = rng.choice([v for kind in VALUES if kind not in (own, "null") for v in VALUES[kind]])
    return values + ([None] if original is not None else []) + [other]


def mutants(data: dict, seen: set[Path_]) -> Iterator[tuple[Path_, Any]]:
    """(path, value) of every mutant of ``data``, in document order."""
    for path in list(sites(data, seen)):
        for value in replacements(path, _get(data, path)):
            yield path, value


def _get(data: Any, path: Path_) -> Any:
    """The node at ``path``."""
    for key in path:
        data = data[key]
    return data


def _set(data: Any, path: Path_, value: Any) -> Any:
    """Put ``value`` at ``path``; returns what was there (the mutation is undone with it)."""
    parent = _get(data, path[:-1])
    old, parent[path[-1]] = parent[path[-1]], value
    return old


def slash(path: Path_) -> str:
    """A path as RecordError messages write it: ``environment/tensorflow/build``."""
    return "/".join(map(str, path))


# -- the property ------------------------------------------------------------------------------


def check(data: dict, path: Path_, html: bool) -> tuple[str | None, bool]:
    """(what went wrong or None, whether it loaded) for ``data``, mutated at ``path``:
    read back as a saved file would be, then every renderer and ``--recheck``."""
    try:
        record = Record.from_dict(json.loads(json.dumps(data)))
    except RecordError as e:
        return _bad_refusal(str(e), path), False
    except Exception:
        return f"from_dict crashed:\n{traceback.format_exc(limit=-3)}", False
    stages = {
        "recheck": record.recheck,
        "terminal": lambda: TerminalRenderer().render(record),
        "terminal --verbose": lambda: TerminalRenderer(verbose=True).render(record),
        "json": lambda: JsonRenderer().render(record),
    }
    if html:
        stages["html"] = lambda: HtmlRenderer().render(record)
    for name, stage in stages.items():
        try:
            stage()
        except Exception:
            return f"{name} crashed:\n{traceback.format_exc(limit=-4)}", True
    return None, True


def _bad_refusal(message: str, path: Path_) -> str | None:
    """A refusal is good when it is one short line that names the mutated field."""
    if "\n" in message or len(message) > MAX_MESSAGE:
        return f"refused with a message of {len(message)} chars: {message[:MAX_MESSAGE]!r}"
    if slash(path) not in message:
        return f"refused without naming {slash(path)}: {message}"
    return None


def fuzz(data: dict, seen: set[Path_]) -> tuple[list[str], int, int]:
    """(problems, mutants, mutants that loaded) over ``data``, which is left as it was."""
    found, count, loaded = [], 0, 0
    for path, value in list(mutants(data, seen)):
        old = _set(data, path, value)
        try:
            bad, ok = check(data, path, html=loaded % HTML_EVERY == HTML_EVERY - 1)
        finally:
            _set(data, path, old)
        count, loaded = count + 1, loaded + ok
        if bad:
            found.append(f"{slash(path)} = {json.dumps(value)}: {bad}")
    return found, count, loaded


# -- the tests ---------------------------------------------------------------------------------


def test_every_mutant_is_refused_with_its_field_named_or_renders(real_records):
    """~2,000 mutants, ~1,100 of which load and are rendered: under a minute here."""
    records = {
        **{name: shrink(data) for name, data in real_records.items()},
        **{name: shrink(data) for name, data in synthetic_records().items()},
    }
    seen: set[Path_] = set()
    problems, count, loaded = [], 0, 0
    for name, data in records.items():
        bad, _ = check(data, (), html=True)
        assert bad is None, f"{name} itself: {bad}"
        found, n, ok = fuzz(data, seen)
        problems += [f"[{name}] {p}" for p in found]
        count, loaded = count + n, loaded + ok
    assert not problems, f"{len(problems)} of {count} mutants:\n" + "\n".join(problems[:25])
    assert count > 1500 and loaded > 800, (count, loaded)  # it reached the renderers


def test_a_wrong_type_deep_in_an_optional_section_names_the_field_and_the_type(real_records):
    data = json.loads(json.dumps(real_records["check"]))
    data["environment"]["tensorflow"]["build"]["cuda_compute_capabilities"] = 7
    with pytest.raises(RecordError) as refused:
        Record.from_dict(data)
    message = str(refused.value)
    assert message == (
        "invalid run record: environment/tensorflow/build/cuda_compute_capabilities: "
        "expected an array of strings or null, got integer (7)"
    )


def test_a_wrong_section_is_quoted_short():
    """jsonschema quotes the whole instance; the message keeps 60 characters of it."""
    from tests import builders as b

    data = Record.diagnose("check", b.facts()).to_dict()
    data["environment"] = [data["environment"]] * 3
    with pytest.raises(RecordError) as refused:
        Record.from_dict(data)
    message = str(refused.value)
    assert message.startswith(
        "invalid run record: environment: expected an object or null, got array ([{"
    )
    assert len(message) < 160 and "\n" not in message


def test_the_cli_prints_the_refusal_on_one_line(tmp_path, capsys):
    """`gpuwhy report` on such a file: one `gpuwhy: error:` line and exit status 2."""
    from gpuwhy.cli import EXIT_ERROR, main
    from tests import builders as b

    data = Record.diagnose("check", b.facts()).to_dict()
    data["environment"]["tensorflow"]["build"]["cuda_compute_capabilities"] = 7
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    assert main(["report", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" not in err
    assert "environment/tensorflow/build/cuda_compute_capabilities: expected an array" in err
