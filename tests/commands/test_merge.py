"""gpuwhy merge DIR on directories of worker records as clusters leave them: all there,
one cut short, one interrupted, one never written, one killed while writing; and
gpuwhy run --out-dir writing them (named after the task, whole, never failing the
worker). Real records, real subprocesses (none of these scripts imports TensorFlow)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from gpuwhy.facts import DistributedInput, Facts
from gpuwhy.record import Record
from tests.builders_workers import INPUT_BOUND, save, worker_record

ROOT = Path(__file__).resolve().parents[2]


def gpuwhy(*args, cwd, env=None, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **(env or {})},
    )


def merged(tmp_path, *extra) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "merged.json"
    result = gpuwhy("merge", "runs", "--json", out, *extra, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    return result, json.loads(out.read_text())


def rows(record: dict) -> dict[str, dict]:
    return {w["name"]: w for w in record["workers"]["workers"]}


def test_a_straggler_its_table_and_the_findings_once_with_their_workers(tmp_path):
    runs = tmp_path / "runs"
    cluster = ("chief-0", "worker-0", "worker-1")
    save(runs, worker_record("chief-0", 0.15, 0.001, cluster=cluster))
    save(runs, worker_record("worker-0", 0.15, 0.002, cluster=cluster))
    slow = worker_record("worker-1", 0.15, 0.051, cluster=cluster, findings=(INPUT_BOUND,))
    save(runs, slow)
    result, record = merged(tmp_path, "--html", tmp_path / "merged.html")
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert "3 worker records merged: worker-1 is the straggler" in first
    assert "in its input" in first
    table = result.stdout[result.stdout.index("Workers (runs)") :]
    assert table.index("chief-0") < table.index("worker-0") < table.index("worker-1")
    assert "34% (51.0 ms)" in table  # worker-1's input wait share
    straggler = next(f for f in record["findings"] if f["id"] == "distribute.straggler")
    assert straggler["evidence"]["straggler"] == "worker-1"
    carried = next(f for f in record["findings"] if f["id"] == "input.bound")
    assert carried["evidence"]["workers"] == ["worker-1"]
    assert carried["title"].endswith("(on worker-1)")
    html = (tmp_path / "merged.html").read_text()
    assert 'id="workers-table"' in html and "worker-1 is the straggler" in html
    # the merged record is a record: it re-renders, and rechecks to the same findings
    again = Record.load(tmp_path / "merged.json")
    assert [f.id for f in again.recheck().findings] == [f["id"] for f in record["findings"]]


def test_the_same_finding_on_every_worker_is_listed_once(tmp_path):
    runs = tmp_path / "runs"
    for name in ("worker-0", "worker-1"):
        save(runs, worker_record(name, findings=(INPUT_BOUND,)))
    _, record = merged(tmp_path)
    carried = [f for f in record["findings"] if f["id"] == "input.bound"]
    assert len(carried) == 1
    assert carried[0]["evidence"]["workers"] == ["worker-0", "worker-1"]
    assert carried[0]["title"].endswith("(on all 2 workers)")
    assert not any(f["id"] == "distribute.straggler" for f in record["findings"])
    assert "no straggler" in record["verdict"]["text"]


def dataset_function_records(runs, digests: list[str]) -> None:
    """Workers of one dataset function that never calls shard(): each judges from its
    own pipeline (the rule on its own facts), and records what its pipeline reads."""
    from gpuwhy.rules.distribute.input_sharding import InputSharding

    rule = InputSharding()
    for index, digest in enumerate(digests):
        given = DistributedInput(
            how="distribute_datasets_from_function", shard_applied="OFF", shuffled=True,
            source="tf.data.TFRecordDataset(FILES[task::2])", source_location="train.py:22",
            reads_digest=digest, read_files=(f"/data/part-{index}",),
        )  # fmt: skip
        record = worker_record(f"worker-{index}", inputs=(given,))
        found = rule.check(record.facts, dict(rule.options))
        assert [f.severity for f in found] == ["medium"]  # its own view: never shards
        record.findings = found
        save(runs, record)


def test_the_merge_compares_what_the_workers_read(tmp_path):
    """Files chosen per worker by its task index (no shard(), no input context): the
    workers' own findings are refuted by the merge, which sees they read other files."""
    dataset_function_records(tmp_path / "runs", ["a1", "b2"])
    _, record = merged(tmp_path)
    assert not [f for f in record["findings"] if f["id"] == "distribute.input-sharding"]
    for worker in rows(record).values():
        (given,) = worker["inputs"]
        assert given["reads_digest"] and given["read_files"]


def test_the_merge_confirms_workers_reading_the_same_data(tmp_path):
    dataset_function_records(tmp_path / "runs", ["a1", "a1"])
    _, record = merged(tmp_path)
    (finding,) = [f for f in record["findings"] if f["id"] == "distribute.input-sharding"]
    assert finding["title"].startswith("Each of the 2 workers trains on the same data")
    assert finding["evidence"]["workers"] == ["worker-0", "worker-1"]


def test_partial_missing_interrupted_and_unfinished_records_are_kept_and_said(tmp_path):
    runs = tmp_path / "runs"
    cluster = tuple(f"worker-{i}" for i in range(5))
    save(runs, worker_record("worker-0", cluster=cluster))
    save(runs, worker_record("worker-1", cluster=cluster, ended="terminated"))
    cut = worker_record("worker-2", cluster=cluster).to_json()
    (runs / "worker-2.json").write_text(cut[: len(cut) // 2])  # written by hand, cut short
    (runs / ".worker-3.json.k2j3.tmp").write_text(cut[:100])  # killed while writing
    (runs / "notes.txt").write_text("not a record")
    result, record = merged(tmp_path)
    workers = rows(record)
    assert workers["worker-0"]["state"] == "ok"
    assert workers["worker-1"]["state"] == "interrupted"
    assert workers["worker-1"]["note"].startswith("terminated after")
    assert workers["worker-2"]["state"] == "unreadable"
    assert workers["worker-2"]["note"] == "partial: unreadable (not complete JSON)"
    assert workers["worker-3"]["note"] == "partial: unreadable (killed while writing its record)"
    assert workers["worker-4"]["state"] == "missing"
    verdict = result.stdout.splitlines()[0]
    for said in (
        "worker-1 interrupted",
        "worker-2 unreadable",
        "worker-3 unreadable",
        "worker-4 missing",
    ):
        assert said in verdict
    assert "note: worker-2: partial: unreadable (not complete JSON)" in result.stdout


def test_a_failed_run_and_a_record_of_another_command_are_named(tmp_path):
    runs = tmp_path / "runs"
    save(runs, worker_record("worker-0"))
    save(runs, worker_record("worker-1", ended="exception"))
    Record(command="check", facts=Facts()).save(runs / "check.json")
    _, record = merged(tmp_path)
    workers = rows(record)
    assert workers["worker-1"]["state"] == "failed"
    assert workers["worker-1"]["note"] == "exception, exit status 1: ValueError: boom"
    assert workers["check"]["note"] == "a gpuwhy check record, not a run's"


def test_a_directory_without_records_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in ("empty", "nowhere"):
        result = gpuwhy("merge", target, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "no gpuwhy records in empty" in gpuwhy("merge", "empty", cwd=tmp_path).stderr


# -- gpuwhy run --out-dir -------------------------------------------------------------

SCRIPT = "import sys\nprint('trained')\nsys.exit(3)\n"


def tf_config(index: int, kind: str = "worker") -> dict[str, str]:
    cluster = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}
    return {"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}})}


def test_out_dir_names_the_record_after_the_tf_config_task(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    result = gpuwhy("run", "--out-dir", "runs", "train.py", cwd=tmp_path, env=tf_config(1))
    assert result.returncode == 3 and result.stdout == "trained\n"
    record = json.loads((tmp_path / "runs" / "worker-1.json").read_text())
    assert record["task"]["name"] == "worker-1" and record["task"]["source"] == "TF_CONFIG"
    assert record["task"]["cluster"] == ["chief-0", "worker-0", "worker-1"]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["worker-1.json"]  # no temp left
    # merge: the chief and worker-0 never wrote theirs
    states = {w["name"]: w["state"] for w in merged(tmp_path)[1]["workers"]["workers"]}
    assert states == {"chief-0": "missing", "worker-0": "missing", "worker-1": "failed"}


def test_out_dir_under_slurm_and_without_a_launcher(tmp_path):
    (tmp_path / "train.py").write_text("print('trained')\n")
    slurm = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_JOB_ID": "777"}
    assert gpuwhy("run", "--out-dir", "runs", "train.py", cwd=tmp_path, env=slurm).returncode == 0
    record = json.loads((tmp_path / "runs" / "worker-2.json").read_text())
    assert record["task"]["slurm_job_id"] == "777" and record["task"]["source"] == "Slurm"
    assert record["task"]["cluster"] == ["worker-0", "worker-1", "worker-2", "worker-3"]
    assert gpuwhy("run", "--out-dir", "solo", "train.py", cwd=tmp_path).returncode == 0
    (solo,) = (tmp_path / "solo").iterdir()
    task = json.loads(solo.read_text())["task"]
    assert solo.name == f"{task['hostname']}-{task['pid']}.json" and task["source"] == "process"


def test_an_unwritable_out_dir_is_one_line_and_the_script_s_exit_status(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "a-file").write_text("not a directory")
    result = gpuwhy("run", "--out-dir", "a-file/runs", "train.py", cwd=tmp_path, env=tf_config(0))
    assert result.returncode == 3 and result.stdout == "trained\n"
    said = [line for line in result.stderr.splitlines() if "--out-dir" in line]
    assert len(said) == 1 and said[0].startswith(
        "gpuwhy: cannot write --out-dir a-file/runs/worker-0.json"
    )
    assert "Traceback" not in result.stderr
    diverted = Path(said[0].rsplit("wrote it to ", 1)[1].split(" instead")[0])
    assert json.loads(diverted.read_text())["task"]["name"] == "worker-0"
    diverted.unlink()


def test_a_file_of_the_user_s_under_the_task_s_name_is_left_alone(tmp_path):
    (tmp_path / "train.py").write_text("print('trained')\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "worker-0.json").write_text('{"mine": true}\n')
    result = gpuwhy("run", "--out-dir", "runs", "train.py", cwd=tmp_path, env=tf_config(0))
    assert result.returncode == 0
    assert (tmp_path / "runs" / "worker-0.json").read_text() == '{"mine": true}\n'
    assert "a file there is not a gpuwhy record" in result.stderr
    Path(result.stderr.rsplit("wrote it to ", 1)[1].split(" instead")[0]).unlink()


SLEEPER = """
    import time
    print("ready", flush=True)
    for step in range(600):
        time.sleep(0.1)
"""


def test_sigterm_still_writes_the_task_s_record(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SLEEPER))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpuwhy", "run", "--out-dir", "runs", "train.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **tf_config(0, "chief")},
    )
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGTERM
    record = json.loads((tmp_path / "runs" / "chief-0.json").read_text())
    assert record["program"]["ended"] == "terminated"
