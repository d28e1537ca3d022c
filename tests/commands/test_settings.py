"""Each command reads its arguments once, at its start, into frozen settings
(``settings_from`` in gpuwhy/commands/<name>.py, the shared groups in
commands/settings.py): a bad option is a usage error there, before anything runs, and
nothing later reads or writes the ``argparse.Namespace``. The gate's outcome is a value
that ``report_after_script`` returns, from which ``gpuwhy run`` decides its exit status."""

from __future__ import annotations

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpuwhy.commands as commands_package
from gpuwhy.cli import build_parser
from gpuwhy.collect.registry import run_options
from gpuwhy.commands import command_modules
from gpuwhy.commands.reporting import EXIT_OK, EXIT_PROBLEM, UsageError
from gpuwhy.commands.script_command import report_after_script
from gpuwhy.commands.settings import Gate, OutDir, ReportSettings
from gpuwhy.comparison.gate import parse
from tests.report import builders as rb

COMMANDS = Path(commands_package.__file__).parent


def settings(*argv: str):
    args = build_parser().parse_args(list(argv))
    return command_modules()[args.command].settings_from(args)


def _args_misuses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "delattr", "vars") and any(
                isinstance(a, ast.Name) and a.id == "args" for a in node.args[:1]
            ):
                found.append(f"{node.func.id}(args, ...) at line {node.lineno}")
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name):
                if t.value.id == "args":
                    found.append(f"args.{t.attr} = ... at line {t.lineno}")
    return found


@pytest.mark.parametrize("path", sorted(COMMANDS.glob("*.py")), ids=lambda p: p.name)
def test_no_command_writes_its_arguments_or_reads_them_back(path):
    assert _args_misuses(ast.parse(path.read_text())) == []


@pytest.mark.parametrize("name", list(command_modules()))
def test_execute_never_sees_the_arguments(name):
    """cli.py runs ``execute(settings_from(args))``: only settings_from reads ``args``."""
    module = command_modules()[name]
    tree = ast.parse(Path(module.__file__).read_text())
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    execute = functions["execute"]
    assert not any(isinstance(n, ast.Name) and n.id == "args" for n in ast.walk(execute))


def _assert_frozen(value) -> None:
    assert dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen
    for field in dataclasses.fields(value):
        inner = getattr(value, field.name)
        if dataclasses.is_dataclass(inner) and not isinstance(inner, type):
            _assert_frozen(inner)


@pytest.mark.parametrize(
    "argv",
    [
        ("check",),
        ("audit", "."),
        ("run", "train.py", "--epochs", "2"),
        ("watch", "--", "sleep", "1"),
        ("merge", "out"),
        ("diff", "a.json", "b.json"),
        ("rules",),
        ("explain", "input.bound"),
        ("report", "run.json"),
        ("fix", "--input", "train.py"),
    ],
    ids=lambda argv: argv[0],
)
def test_every_command_s_settings_are_frozen(argv):
    built = settings(*argv)
    _assert_frozen(built)
    hash(built)  # nothing inside can change either: no dict, no list


def test_run_settings_hold_every_option_as_given_and_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    got = settings(
        "run",
        "--hz",
        "20",
        "--no-audit",
        "--eager-duty",
        "0.5",
        "--target",
        "A100",
        "--fail-on",
        "high",
        "--fail-ignore",
        "env.*",
        "--out-dir",
        "records",
        "--metrics-interval",
        "5",
        "-f",
        "json",
        "-v",
        "--json",
        "r.json",
        "--html",
        "r.html",
        "train.py",
        "--epochs",
        "2",
    )
    assert got.script.path == "train.py" and got.script.args == ("--epochs", "2")
    chosen = dict(got.collector_options)
    assert set(chosen) == {o.name for o in run_options()}  # every collector's, given or not
    assert {k: chosen[k] for k in ("hz", "audit", "eager", "eager_duty", "target")} == {
        "hz": 20.0,
        "audit": False,
        "eager": True,
        "eager_duty": 0.5,
        "target": "A100",
    }
    assert got.gate == Gate((dataclasses.replace(parse("high", True), ignore=("env.*",)),))
    assert got.out_dir == OutDir(given="records", path=str(tmp_path / "records"))
    assert got.metrics.interval_s == 5.0 and not got.metrics.wanted
    assert got.report == ReportSettings(
        format="json", verbose=True, json="r.json", output=None, html="r.html"
    )


def test_a_command_without_an_option_has_none_in_its_report_settings():
    assert settings("check", "--json", "c.json").report == ReportSettings(json="c.json")
    assert settings("diff", "a.json", "b.json", "-o", "d.txt").report == ReportSettings(
        output="d.txt"
    )
    assert settings("watch", "--", "true").out_dir is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("run", "--hz", "0", "t.py"), "--hz must be between 0 and 100 samples per second"),
        (("run", "--eager-duty", "2", "t.py"), "--eager-duty must be a fraction in (0, 1]"),
        (("run", "--fail-on", "sometimes", "t.py"), "sometimes"),
        (("run", "--metrics-port", "0", "t.py"), "--metrics-port must be a TCP port"),
        (("run", "--metrics-interval", "0", "t.py"), "--metrics-interval must be a positive"),
        (("watch",), "nothing to watch: give the command after --"),
        (("watch", "--"), "nothing to watch: give the command after --"),
        (("watch", "--hz", "200", "--", "true"), "--hz must be between 0 and 100"),
        (("fix", "--runs", "1", "t.py"), "--runs 1: between 2 and 20"),
        (("fix", "--target", "no-such-gpu", "t.py"), "no-such-gpu"),
        (("fix", "--input", "--patch", "p.diff", "t.py"), "--patch does not work with --input"),
        (("fix", "--input", "--repeats", "0", "t.py"), "--repeats must be at least 1"),
        (("fix", "--input", "--elements", "0", "t.py"), "--elements must be a positive"),
        (("check", "--python", "/no/such/python"), "no Python interpreter at /no/such/python"),
        (("check", "--timeout", "0"), "--timeout must be a positive number of seconds"),
        (("audit", "/no/such/model"), "/no/such/model: no such file or directory"),
        (("audit", ".", "--batch", "0"), "--batch must be a positive number of examples"),
        (("diff", "a.json", "b.json", "--fail-on", "step:fast"), "step:fast"),
        (("explain", "no.such-rule"), "no.such-rule"),
    ],
)
def test_a_bad_option_is_a_usage_error_while_the_settings_are_read(argv, message):
    with pytest.raises(UsageError) as raised:
        settings(*argv)
    assert message in str(raised.value)


def test_report_after_script_returns_the_lines_the_gate_crossed(capsys):
    record = rb.watched_run()
    assert record.findings, "the builder's run has findings"
    gate = Gate((parse("info", findings_only=True),))
    crossed = report_after_script(lambda: record, ReportSettings(), {}, gate=gate)
    assert crossed and len(crossed) == len(record.findings)
    err = capsys.readouterr().err
    assert [f"gpuwhy: gate: {line}" for line in crossed] == [
        x for x in err.splitlines() if x.startswith("gpuwhy: gate:")
    ]
    assert report_after_script(lambda: record, ReportSettings(), {}) == []
    assert report_after_script(lambda: record, ReportSettings(), {}, gate=Gate()) == []


def test_report_after_script_that_fails_is_one_line_and_crosses_nothing(capsys, monkeypatch):
    monkeypatch.delenv("GPUWHY_DEBUG", raising=False)

    def broken():
        raise RuntimeError("no record")

    gate = Gate((parse("info", findings_only=True),))
    assert report_after_script(broken, ReportSettings(), {}, gate=gate) == []
    assert "gpuwhy: error: internal error while reporting: RuntimeError: no record" in (
        capsys.readouterr().err
    )


EXITS_WITH = """
import sys
import tensorflow as tf
tf.constant(1.0) + 1
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize(
    ("gate", "script_status", "expected", "crossed"),
    [
        ((), 0, EXIT_OK, False),
        (("--fail-on", "info"), 0, EXIT_PROBLEM, True),  # the script succeeded; the gate not
        (("--fail-on", "info"), 3, 3, True),  # the script's own failure comes first
        (("--fail-on", "info", "--fail-ignore", "*"), 0, EXIT_OK, False),
    ],
)
def test_run_s_exit_status_is_the_script_s_or_the_gate_s(
    tmp_path, gate, script_status, expected, crossed
):
    """A real ``gpuwhy run`` of a TF script (on a machine without a GPU its env.no-gpu
    finding crosses ``--fail-on info``), in a subprocess."""
    script = tmp_path / "train.py"
    script.write_text(EXITS_WITH)
    done = subprocess.run(
        [sys.executable, "-m", "gpuwhy", "run", *gate, str(script), str(script_status)],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},  # no GPU for TF, one here or not
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == expected, done.stderr
    assert ("gpuwhy: gate:" in done.stderr) == crossed
