"""`gpuwhy run --repeat N`: each run a fresh process with its own numbered outputs, the
script's arguments untouched, a failing run stops the repeats with its exit status, a
signal reaches the run (its report written) and ends gpuwhy as it ended the run, and
options that cannot repeat are refused before anything runs."""

import json
import signal
import subprocess
import textwrap
import time

import pytest

from gpuwhy.commands.repeat import numbered, run_argv
from tests.test_run_tensorflow import GPUWHY, ROOT, run


def test_each_run_gets_its_own_numbered_files_and_no_repeat():
    options = ["--repeat", "3", "--json", "r/base.json", "-o", "rep.txt", "--html=r/p.html", "-v"]
    assert run_argv(options, 2, None) == [
        "--json",
        "r/base-2.json",
        "-o",
        "rep-2.txt",
        "--html=r/p-2.html",
        "-v",
    ]
    assert run_argv(["--repeat=2", "-oout.txt", "--output", "x"], 1, "/tmp/s/run-1.json") == [
        "-oout-1.txt",
        "--output",
        "x-1",
        "--json",
        "/tmp/s/run-1.json",
    ]
    assert numbered("runs/base", 4) == "runs/base-4"


FAILS_SECOND_TIME = textwrap.dedent(
    """
    import os, sys
    import tensorflow as tf

    marker = sys.argv[1]
    print("args", sys.argv[1:])
    if os.path.exists(marker):
        sys.exit(3)
    open(marker, "w").close()
    ds = tf.data.Dataset.range(64).batch(2)
    for x in ds:
        tf.reduce_sum(x)
    """
)


def test_a_run_that_fails_stops_the_repeats_with_its_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(FAILS_SECOND_TIME)
    marker = tmp_path / "ran-once"
    result = run("--repeat", "3", "--json", tmp_path / "r.json", script, marker, "--repeat", "9")
    assert result.returncode == 3, result.stderr[-2000:]
    # the script's own arguments (its --repeat too) reached it unchanged, each time
    assert result.stdout.count(f"args ['{marker}', '--repeat', '9']") == 2
    assert (tmp_path / "r-1.json").exists() and (tmp_path / "r-2.json").exists()
    assert not (tmp_path / "r-3.json").exists()
    assert "gpuwhy: 2 of 3 runs (stopped: run 2 exited with status 3)" in result.stderr
    assert "run 2: no training steps, exited with status 3" in result.stderr
    assert "a record without training steps is left out by gpuwhy diff" in result.stderr
    # a shorter repeat to the same path would leave r-3.json... from this one: refused
    (tmp_path / "r-3.json").write_text("{}")
    stale = run("--repeat", "2", "--json", tmp_path / "r.json", script, marker)
    assert stale.returncode == 2 and stale.stderr.count("\n") == 1
    assert f"{tmp_path}/r-3.json is left from an earlier run" in stale.stderr


@pytest.mark.parametrize(
    "options, said",
    [
        (["--repeat", "0"], "--repeat 0: between 1 and 100"),
        (["--repeat", "2", "--out-dir", "x"], "--repeat and --out-dir"),
    ],
)
def test_a_repeat_that_cannot_be_is_refused_before_the_script_runs(tmp_path, options, said):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    result = run(*options, script)
    assert result.returncode == 2 and said in result.stderr
    assert "ran" not in result.stdout and result.stderr.count("\n") == 1


SLEEPER = textwrap.dedent(
    """
    import time
    print("ready", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_gpuwhy_reaches_the_run_which_writes_its_report_and_nothing_more_runs(
    tmp_path, signum
):
    script = tmp_path / "prog.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen(
        [GPUWHY, "run", "--repeat", "3", "--json", "r.json", str(script)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,  # no terminal: the signal is gpuwhy's alone to pass on
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signum  # as Python (and gpuwhy run) end on it
    ended = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}[signum]
    assert json.loads((tmp_path / "r-1.json").read_text())["program"]["ended"] == ended
    assert not (tmp_path / "r-2.json").exists() and "ready" not in out
    assert f"gpuwhy: 1 of 3 runs (stopped: run 1 ended by {signal.Signals(signum).name})" in err
    assert f"run 1: no training steps, ended by {signal.Signals(signum).name}" in err
