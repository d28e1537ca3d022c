"""``-f sarif``: the findings of records the real rules made, as a SARIF 2.1.0 log that
the official schema accepts, each result at its file:line with the fix as an exact
replacement where the source is there to find it in."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.modes.merge import merge
from gpuwhy.record import Record
from gpuwhy.report.renderers import renderer_class
from gpuwhy.report.run.sarif import SarifRenderer
from gpuwhy.rules import get_rule
from tests import builders_tfdata as t
from tests.builders_workers import save, worker_record
from tests.report.sarif_checks import apply_fix, sarif_errors
from tests.report.test_renderers import FULL

# examples/slow_input_fit.py's pipeline as tests/builders_tfdata.py describes it: parse
# at line 41, augment at 47, the maps that call them at 61 and 62
SOURCE = {
    41: "def parse(record):",
    47: "def augment(image, label):",
    61: "ds = ds.map(parse)",
    62: "ds = ds.map(augment)",
}
SEQUENTIAL_MAP_FIX = "ds = ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)"


def write_source(folder: Path, lines: dict[int, str], name: str = "train.py") -> Path:
    path = folder / name
    path.write_text("\n".join(lines.get(n, f"# line {n}") for n in range(1, 71)) + "\n")
    return path


def input_run(**augment_changes) -> Record:
    """A Keras fit starved by its sequential augmentation, through the real rules."""
    pipeline = t.example_pipeline()
    stages = list(pipeline.stages)
    stages[2] = t.augment(**augment_changes)
    facts = t.facts(replace(pipeline, stages=tuple(stages)), steps=t.fit_steps())
    program = ProgramFacts(command=("train.py", "--epochs", "3"), exit_code=0)
    return Record.diagnose("run", replace(facts, program=program))


def sarif(record: Record, root: Path) -> dict:
    log = json.loads(SarifRenderer(root=str(root)).render(record))
    assert sarif_errors(log) == []
    return log


def results(log: dict) -> dict[str, dict]:
    return {r["ruleId"]: r for r in log["runs"][0]["results"]}


def test_a_finding_is_a_result_at_its_line_with_its_fix_as_a_replacement(tmp_path):
    source = write_source(tmp_path, SOURCE)
    record = input_run()
    log = sarif(record, tmp_path)
    run = log["runs"][0]
    assert log["version"] == "2.1.0"
    assert run["tool"]["driver"]["name"] == "gpuwhy"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.as_uri() + "/"}}
    assert [r["ruleId"] for r in run["results"]] == [f.id for f in record.findings]
    found = results(log)["input.sequential-map"]
    finding = next(f for f in record.findings if f.id == "input.sequential-map")
    assert found["level"] == "error" and "kind" not in found
    assert found["message"]["text"] == finding.title + f" ({finding.estimated_gain})"
    assert found["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "train.py", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 62},  # the .map() call its replacement changes
            }
        }
    ]
    (fix,) = found["fixes"]
    assert fix["artifactChanges"] == [
        {
            "artifactLocation": {"uri": "train.py", "uriBaseId": "%SRCROOT%"},
            "replacements": [
                {
                    "deletedRegion": {"startLine": 62, "startColumn": 6, "endColumn": 21},
                    "insertedContent": {
                        "text": "ds.map(augment, num_parallel_calls=tf.data.AUTOTUNE)"
                    },
                }
            ],
        }
    ]
    assert apply_fix(source, fix)[61] == SEQUENTIAL_MAP_FIX
    assert found["properties"]["severity"] == "high"
    assert found["properties"]["fix"] == finding.fix
    assert found["properties"]["location"] == "train.py:62"
    assert found["properties"]["evidence"]["input_wait_fraction"] == 0.4
    assert run["invocations"] == [
        {
            "executionSuccessful": True,
            "properties": {
                "program": ["train.py", "--epochs", "3"],
                "ended": "completed",
                "exit_code": 0,
            },
        }
    ]


def test_the_rules_are_those_found_with_the_text_explain_prints(tmp_path):
    record = input_run()
    rules = sarif(record, tmp_path)["runs"][0]["tool"]["driver"]["rules"]
    ids = sorted({f.id for f in record.findings})
    assert [r["id"] for r in rules] == ids
    for result in sarif(record, tmp_path)["runs"][0]["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    sequential = rules[ids.index("input.sequential-map")]
    rule = get_rule("input.sequential-map")
    assert sequential["name"] == "SequentialMap"
    assert sequential["shortDescription"] == {"text": rule.summary()}
    assert sequential["fullDescription"]["text"].startswith(
        "In the pipeline TensorFlow actually runs (after its graph rewrites)"
    )
    assert sequential["help"] == {"text": rule.doc(), "markdown": rule.doc()}
    assert rule.severity == "high" and sequential["defaultConfiguration"] == {"level": "error"}
    assert sequential["properties"]["tags"] == ["performance", "tensorflow", "input"]


@pytest.mark.parametrize(
    "written, why",
    [
        ("ds = ds.map( augment )", "written otherwise"),
        ("a = ds.map(augment); b = ds.map(augment)", "twice on the line"),
        (None, "no source here"),
    ],
)
def test_no_fix_entry_where_the_call_is_not_found_once_as_written(tmp_path, written, why):
    if written is not None:
        write_source(tmp_path, {**SOURCE, 62: written})
    found = results(sarif(input_run(), tmp_path))["input.sequential-map"]
    assert "fixes" not in found, why
    assert SEQUENTIAL_MAP_FIX.removeprefix("ds = ") in found["properties"]["fix"]
    assert found["locations"][0]["physicalLocation"]["region"] == {"startLine": 62}


def test_a_replacement_with_a_placeholder_is_no_fix_entry(tmp_path):
    """from_generator's fix slices "<the arrays the generator yields from>": text for
    a reader to complete, not a replacement a tool may apply."""
    write_source(
        tmp_path, {20: "ds = tf.data.Dataset.from_generator(batches, output_signature=signature)"}
    )
    pipeline = t.pipeline(t.generator_source(), t.batch(), t.prefetch(), bottleneck=0)
    record = Record.diagnose("run", t.facts(pipeline, steps=t.fit_steps()))
    found = results(sarif(record, tmp_path))["input.python-function"]
    assert "in place of: tf.data.Dataset.from_generator(" in found["properties"]["fix"]
    assert "fixes" not in found


@pytest.mark.parametrize("fix", ["filter", "vectorise"])
def test_a_fix_that_is_more_than_its_replacement_is_no_fix_entry(tmp_path, fix):
    """The filter's fix adds statements before the changed line; the vectorised map's
    says to leave out a batch written further down: the replacement alone would break
    the program."""
    write_source(
        tmp_path, {**SOURCE, 62: "ds = ds.filter(keep)" if fix == "filter" else SOURCE[62]}
    )
    if fix == "filter":
        lines = pipeline_code.filter_(
            t.stage(
                name="Filter",
                kind="filter",
                written_as=("filter",),
                written_calls=("ds.filter(keep)",),
                location="train.py:62",
                function="keep",
            )
        )
    else:
        lines = pipeline_code.vectorise(t.example_pipeline(), 2)
    marker = next(n for n, line in enumerate(lines) if "train.py:62: in place of: " in line)

    def result_of(fix: list[str]) -> dict:
        finding = Finding(
            id="input.bound", severity="high", title="t", fix="\n".join(fix), location="train.py:62"
        )
        log = sarif(Record("run", Facts(), findings=[finding]), tmp_path)
        return log["runs"][0]["results"][0]

    assert "fixes" in result_of(lines[marker : marker + 2])  # the replacement alone
    assert "fixes" not in result_of(lines)


def test_the_fingerprint_follows_the_line_s_text_not_its_number(tmp_path):
    write_source(tmp_path, SOURCE)
    before = results(sarif(input_run(), tmp_path))
    moved = {n + 3: text for n, text in SOURCE.items()}  # three lines added above
    write_source(tmp_path, moved)
    after = results(
        sarif(input_run(function_location="train.py:50", location="train.py:65"), tmp_path)
    )
    assert after["input.sequential-map"]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 65
    }
    assert after["input.sequential-map"]["fixes"][0]["artifactChanges"][0]["replacements"][0][
        "deletedRegion"
    ] == {"startLine": 65, "startColumn": 6, "endColumn": 21}
    for rule_id in ("input.sequential-map", "input.bound"):
        assert before[rule_id]["partialFingerprints"] == after[rule_id]["partialFingerprints"]
    assert (
        before["input.bound"]["partialFingerprints"]
        != before["input.sequential-map"]["partialFingerprints"]
    )


def test_places_outside_the_project_and_findings_without_one(tmp_path):
    """An absolute path under the project is made relative; elsewhere it is a file URI.
    A finding with no line (or at <stdin>) is put on the script's first line."""
    project, elsewhere = tmp_path / "project", tmp_path / "lib"
    project.mkdir()
    elsewhere.mkdir()
    placed = {
        "input.bound": f"{project}/models/net.py:12",
        "launch.retracing": f"{elsewhere}/helper.py:3",
        "steps.drift": "<stdin>:4",
        "env.no-gpu": None,
    }
    findings = [
        Finding(id=rule_id, severity="medium", title=rule_id, location=where)
        for rule_id, where in placed.items()
    ]
    program = ProgramFacts(command=("train.py",), ended="exception", exit_code=1)
    record = Record("run", Facts(program=program), findings=findings)
    found = results(sarif(record, project))

    def artifact(rule_id: str) -> dict:
        return found[rule_id]["locations"][0]["physicalLocation"]["artifactLocation"]

    assert artifact("input.bound") == {"uri": "models/net.py", "uriBaseId": "%SRCROOT%"}
    assert artifact("launch.retracing") == {"uri": (elsewhere / "helper.py").as_uri()}
    script = {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    for rule_id in ("steps.drift", "env.no-gpu"):
        assert artifact(rule_id) == script
        assert found[rule_id]["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}
    assert found["steps.drift"]["properties"]["location"] == "<stdin>:4"
    assert "location" not in found["env.no-gpu"]["properties"]


def test_a_check_record_s_findings_have_no_place_and_levels_from_severity(tmp_path):
    log = sarif(FULL, tmp_path)
    levels = {"high": "error", "medium": "warning", "low": "note"}
    for finding, found in zip(FULL.findings, log["runs"][0]["results"], strict=True):
        assert found["ruleId"] == finding.id
        assert found["level"] == levels[finding.severity]
        assert "locations" not in found
    assert log["runs"][0]["properties"] == {"command": "check", "verdict": FULL.verdict}
    assert log["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_a_record_without_findings_has_an_empty_results_array(tmp_path):
    log = sarif(Record.diagnose("run", Facts()), tmp_path)
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


def test_a_merged_record_names_the_workers_and_an_info_finding_is_informational(tmp_path):
    runs = tmp_path / "runs"
    bound = Finding(
        id="input.bound",
        severity="high",
        title="Steps wait for input 34% of the time",
        evidence={"input_wait_fraction": 0.34, "wait": "51 ms"},
        location="train.py:31",
    )
    for name in ("worker-0", "worker-1"):
        save(runs, worker_record(name, findings=(bound,)))
    write_source(tmp_path, {31: "for x in ds:"})
    found = results(sarif(merge(str(runs)), tmp_path))["input.bound"]
    assert found["message"]["text"] == "Steps wait for input 34% of the time (on all 2 workers)"
    assert found["properties"]["evidence"] == {
        "input_wait_fraction": 0.34,
        "workers": ["worker-0", "worker-1"],
    }
    assert found["locations"][0]["physicalLocation"]["region"] == {"startLine": 31}
    info = Finding(id="distribute.straggler", severity="info", title="No straggler")
    (result,) = sarif(Record("merge", Facts(), findings=[info]), tmp_path)["runs"][0]["results"]
    assert result["level"] == "none" and result["kind"] == "informational"


def test_sarif_is_a_registered_format():
    assert renderer_class("sarif") is SarifRenderer
    assert SarifRenderer.file_extension == "sarif"


def test_a_relative_root_and_a_linked_script_stay_in_the_project(tmp_path, monkeypatch):
    (tmp_path / "lib").mkdir()
    (tmp_path / "project").mkdir()
    write_source(tmp_path / "lib", SOURCE)
    (tmp_path / "project" / "train.py").symlink_to(tmp_path / "lib" / "train.py")
    monkeypatch.chdir(tmp_path)
    log = json.loads(SarifRenderer(root="project").render(input_run()))
    assert sarif_errors(log) == []
    run = log["runs"][0]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == (tmp_path / "project").as_uri() + "/"
    found = results(log)["input.sequential-map"]
    artifact = found["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "train.py", "uriBaseId": "%SRCROOT%"}
    assert "fixes" in found  # read through the link


def test_lines_are_counted_as_python_counts_them(tmp_path):
    """A form feed (pages in old sources) ends no line for Python, nor here."""
    write_source(tmp_path, {**SOURCE, 50: "# section two\f"})
    found = results(sarif(input_run(), tmp_path))["input.sequential-map"]
    region = found["fixes"][0]["artifactChanges"][0]["replacements"][0]["deletedRegion"]
    assert region == {"startLine": 62, "startColumn": 6, "endColumn": 21}
