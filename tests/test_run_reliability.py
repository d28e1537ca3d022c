"""Every way a watched run can end or be pointed at the wrong file, in real subprocesses
with real signals: gpuwhy never writes over the user's files, checks its outputs before
the script runs, resolves them where it was started, ends on SIGTERM and Ctrl-C as Python
does (with the report written), reports on the stderr it was started with, and keeps the
script's modules and its own apart. None of these scripts imports TensorFlow."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
SCRIPT = "import pathlib\npathlib.Path('ran.marker').write_text('ran')\nprint('script ran')\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def gpuwhy(*args, cwd, timeout=120, **kw):
    return subprocess.run(
        [GPUWHY, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout, **kw
    )


def python(*args, cwd, timeout=60):
    return subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


# -- 1, 2: outputs are judged before the script runs -----------------------------------

REFUSED = [
    (["run", "--json", "s.py", "s.py"], "is the command's own input"),
    (["run", "-o", "s.py", "s.py"], "is the command's own input"),
    (["run", "--html", "./s.py", "s.py"], "is the command's own input"),
    (["run", "--json", "link.py", "s.py"], "is the command's own input"),  # a symlink to it
    (["run", "--json", "x", "--html", "x", "s.py"], "--json and --html both name x"),
    (["run", "--json", "x.json", "-f", "json", "-o", "x.json", "s.py"], "both name x.json"),
    (["run", "--json", "data.csv", "s.py"], "already exists next to the script"),
    (["run", "--html", "sub/notes.txt", "s.py"], "already exists next to the script"),
    (["run", "--json", "adir", "s.py"], "it is a directory"),
    (["run", "--json", "s.py/r.json", "s.py"], "is a file, not a directory"),
    (["run", "--json", "data.csv/sub/r.json", "s.py"], "data.csv is a file, not a directory"),
    (["fix", "--input", "--json", "s.py", "s.py"], "is the command's own input"),
    (["fix", "--input", "--html", "data.csv", "s.py"], "already exists next to the script"),
    (["watch", "-o", "s.py", "--", sys.executable, "s.py"], "is the command's own input"),
    (["watch", "--record", "data.csv", "--", sys.executable, "s.py"], "already exists"),
]


@pytest.fixture
def project(tmp_path):
    write(tmp_path / "s.py", SCRIPT)
    (tmp_path / "link.py").symlink_to(tmp_path / "s.py")
    write(tmp_path / "data.csv", "a,b\n1,2\n")
    write(tmp_path / "sub" / "notes.txt", "my notes\n")
    (tmp_path / "adir").mkdir()
    return tmp_path


@pytest.mark.parametrize("args, message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_an_output_that_could_cost_the_user_a_file_is_refused_before_anything_runs(
    project, args, message
):
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    result = gpuwhy(*args, cwd=project)
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and not (project / "ran.marker").exists()
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("gpuwhy: error: ")
    assert message in result.stderr
    assert {p: p.read_bytes() for p in project.rglob("*") if p.is_file()} == before


def test_report_refuses_to_write_over_the_record_it_reads(project):
    record = project / "r.json"
    assert gpuwhy("run", "--json", record, "s.py", cwd=project).returncode == 0
    saved = record.read_bytes()
    result = gpuwhy("report", record, "--html", record, cwd=project)
    assert result.returncode == 2 and "is the command's own input" in result.stderr
    assert record.read_bytes() == saved


def test_gpuwhy_s_own_earlier_outputs_next_to_the_script_are_replaced(project):
    outputs = ["--json", "out.json", "--html", "out.html", "-o", "out.txt"]
    first = gpuwhy("run", *outputs, "s.py", cwd=project)
    assert first.returncode == 0, first.stderr
    again = gpuwhy("run", *outputs, "s.py", cwd=project)
    assert again.returncode == 0, again.stderr
    json_again = gpuwhy("run", "-f", "json", "-o", "out.txt", "s.py", cwd=project)
    assert json_again.returncode == 0, json_again.stderr  # a text report becomes JSON ...
    assert gpuwhy("run", "-o", "out.txt", "s.py", cwd=project).returncode == 0  # ... and back


def test_missing_directories_of_an_output_are_made(project):
    result = gpuwhy("run", "--json", "out/a/r.json", "-o", "out/b/r.txt", "s.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "out/a/r.json").exists() and (project / "out/b/r.txt").exists()


def test_outputs_resolve_against_the_directory_gpuwhy_started_in(tmp_path):
    write(tmp_path / "prog.py", "import os\nos.makedirs('sub', exist_ok=True)\nos.chdir('sub')\n")
    result = gpuwhy("run", "--json", "r.json", "-o", "r.txt", "prog.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "r.json").exists() and (tmp_path / "r.txt").exists()
    assert not (tmp_path / "sub" / "r.json").exists()


def test_an_output_that_becomes_unwritable_during_the_run_is_written_elsewhere_not_lost(tmp_path):
    write(
        tmp_path / "prog.py",
        """
        import shutil, sys
        shutil.rmtree("out")          # the run puts a file where the report's directory was
        open("out", "w").close()
        sys.exit(3)
    """,
    )
    (tmp_path / "out").mkdir()
    result = gpuwhy("run", "--json", "out/r.json", "prog.py", cwd=tmp_path)
    assert result.returncode == 3  # the script's status, unchanged
    line = next(ln for ln in result.stderr.splitlines() if "cannot write --json out/r.json" in ln)
    diverted = Path(line.rsplit("wrote it to ", 1)[1].split(" instead")[0])
    try:
        assert json.loads(diverted.read_text())["program"]["exit_code"] == 3
    finally:
        diverted.unlink()


def test_a_bad_format_is_refused_before_the_script_runs(project):
    result = gpuwhy("run", "-f", "nosuch", "s.py", cwd=project)
    assert result.returncode == 2 and not (project / "ran.marker").exists()
    assert result.stderr.startswith("gpuwhy: error: unknown format 'nosuch'")


def test_gpuwhy_failing_while_reporting_keeps_the_script_s_exit_status(tmp_path):
    write(
        tmp_path / "boom_renderer.py",
        """
        from gpuwhy.report.base import Renderer
        class Boom(Renderer):
            name = "boom"
            def render(self, record):
                raise RuntimeError("renderer bug")
    """,
    )
    write(tmp_path / "prog.py", "import sys\nprint('trained')\nsys.exit(4)\n")
    result = gpuwhy(
        "run",
        "--json",
        "r.json",
        "-f",
        "boom_renderer:Boom",
        "prog.py",
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 4 and result.stdout == "trained\n"
    assert result.stderr.strip() == (
        "gpuwhy: error: internal error while reporting: "
        "RuntimeError: renderer bug (GPUWHY_DEBUG=1 shows the traceback)"
    )
    assert json.loads((tmp_path / "r.json").read_text())["program"]["exit_code"] == 4


def test_a_forked_child_that_exits_through_the_script_does_not_report(tmp_path):
    write(
        tmp_path / "prog.py",
        """
        import os, sys
        pid = os.fork()
        if pid == 0:
            print("child", flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent", flush=True)
    """,
    )
    plain = python("prog.py", cwd=tmp_path)
    watched = gpuwhy("run", "--json", "r.json", "prog.py", cwd=tmp_path)
    assert watched.returncode == plain.returncode == 0
    assert watched.stdout == plain.stdout == "child\nparent\n"
    assert watched.stderr.count("The program never imported TensorFlow.") == 1


# -- 4, 5: signals -----------------------------------------------------------------------

SLEEPER = """
    import atexit, signal, sys, tempfile, time
    tmp = tempfile.TemporaryDirectory(prefix="gpuwhy-test-")
    print(tmp.name, flush=True)
    atexit.register(lambda: print("atexit ran", flush=True))
    print("ready", flush=True)
    time.sleep(60)
"""


def _signalled(cmd, cwd, signum):
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    tmp = proc.stdout.readline().strip()
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.3)
    proc.send_signal(signum)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()  # a run that went on past the signal must not outlive the test
        proc.communicate()
        raise
    return proc.returncode, out, err, Path(tmp)


def test_sigterm_writes_the_partial_report_then_dies_of_sigterm_as_python_does(tmp_path):
    path = write(tmp_path / "prog.py", SLEEPER)
    plain = _signalled([sys.executable, str(path)], tmp_path, signal.SIGTERM)
    watched = _signalled([GPUWHY, "run", "--json", "r.json", str(path)], tmp_path, signal.SIGTERM)
    assert plain[0] == watched[0] == -signal.SIGTERM
    assert "atexit ran" not in plain[1] and "atexit ran" not in watched[1]
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["program"]["ended"] == "terminated"
    assert record["verdict"]["text"].startswith("Terminated (SIGTERM) after")
    assert "Terminated (SIGTERM)" in watched[2]  # the report, on stderr


def test_a_script_that_catches_everything_still_dies_of_sigterm_with_its_report(tmp_path):
    """A bare ``except:`` around the work caught the Terminated gpuwhy raises at SIGTERM
    and the script ran on (for ever here) where Python dies at the signal; it is
    reported and dies of SIGTERM a grace period later, its atexit handlers not run."""
    path = write(
        tmp_path / "prog.py",
        SLEEPER.replace(
            "time.sleep(60)",
            "while True:\n        try:\n            time.sleep(0.05)\n"
            "        except:\n            pass",
        ),
    )
    plain = _signalled([sys.executable, str(path)], tmp_path, signal.SIGTERM)
    watched = _signalled([GPUWHY, "run", "--json", "r.json", str(path)], tmp_path, signal.SIGTERM)
    assert plain[0] == watched[0] == -signal.SIGTERM
    assert "atexit ran" not in watched[1]
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["program"]["ended"] == "terminated"
    assert "Terminated (SIGTERM)" in watched[2]


CATCHING_LOOP = """
    import tempfile
    import tensorflow as tf

    print(tempfile.gettempdir(), flush=True)
    ds = tf.data.Dataset.from_tensor_slices(tf.random.uniform((256, 32))).repeat().batch(8)
    w = tf.Variable(tf.zeros([32, 32]))


    @tf.function
    def step(x):
        w.assign_add(tf.matmul(tf.transpose(x), x) * 1e-6)


    for i, x in enumerate(ds):
        try:
            step(x)
        except:  # noqa: E722 - what the test is about
            continue
        if i == 200:
            print("ready", flush=True)
"""


def test_a_tf_loop_that_catches_everything_in_its_step_dies_of_sigterm_with_its_steps(tmp_path):
    """The same in a tf.data loop of tf.function steps, where the main thread spends
    its time in gpuwhy's hooks (next(), the function's call) and TensorFlow's code."""
    path = write(tmp_path / "prog.py", CATCHING_LOOP)
    watched = _signalled([GPUWHY, "run", "--json", "r.json", str(path)], tmp_path, signal.SIGTERM)
    assert watched[0] == -signal.SIGTERM, watched[2][-2000:]
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["program"]["ended"] == "terminated"
    assert record["steps"]["count"] > 200


def test_a_script_s_own_sigterm_handler_is_the_one_that_runs(tmp_path):
    path = write(
        tmp_path / "prog.py",
        SLEEPER.replace(
            "time.sleep(60)",
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(5))\n    time.sleep(60)",
        ),
    )
    plain = _signalled([sys.executable, str(path)], tmp_path, signal.SIGTERM)
    watched = _signalled([GPUWHY, "run", "--json", "r.json", str(path)], tmp_path, signal.SIGTERM)
    assert plain[0] == watched[0] == 5
    assert plain[1] == watched[1]  # what follows "ready": the same
    record = json.loads((tmp_path / "r.json").read_text())
    assert record["program"]["exit_code"] == 5


def test_ctrl_c_runs_the_script_s_atexit_handlers_and_cleanup_as_python_does(tmp_path):
    path = write(tmp_path / "prog.py", SLEEPER)
    plain = _signalled([sys.executable, str(path)], tmp_path, signal.SIGINT)
    watched = _signalled([GPUWHY, "run", "--json", "r.json", str(path)], tmp_path, signal.SIGINT)
    assert plain[0] == watched[0] == -signal.SIGINT
    assert plain[1].endswith("atexit ran\n") and watched[1].endswith("atexit ran\n")
    assert not plain[3].exists() and not watched[3].exists()  # TemporaryDirectory cleaned up
    assert json.loads((tmp_path / "r.json").read_text())["program"]["ended"] == "interrupted"
    assert watched[2].count("KeyboardInterrupt") == plain[2].count("KeyboardInterrupt") == 1


# -- 6: gpuwhy's stderr ------------------------------------------------------------------


def test_the_report_goes_to_the_stderr_gpuwhy_started_with_not_the_script_s(tmp_path):
    write(
        tmp_path / "prog.py",
        """
        import sys
        sys.stderr = open("user_log.txt", "w")
        print("the script's own log line", file=sys.stderr)
    """,
    )
    result = gpuwhy("run", "prog.py", cwd=tmp_path)
    assert result.returncode == 0
    assert (tmp_path / "user_log.txt").read_text() == "the script's own log line\n"
    assert "The program never imported TensorFlow" in result.stderr


def test_a_script_that_closes_stderr_keeps_its_exit_status(tmp_path):
    write(tmp_path / "prog.py", "import os\nos.close(2)\nprint('done')\n")
    plain = python("prog.py", cwd=tmp_path)
    watched = gpuwhy("run", "--json", "r.json", "prog.py", cwd=tmp_path)
    assert plain.returncode == watched.returncode == 0
    assert plain.stdout == watched.stdout == "done\n"
    assert json.loads((tmp_path / "r.json").read_text())["program"]["exit_code"] == 0


# -- 7: the script's modules and gpuwhy's ------------------------------------------------


def test_a_module_next_to_the_script_that_shadows_one_gpuwhy_needs_cannot_break_the_report(
    tmp_path,
):
    for name in ("secrets", "html", "string", "uuid"):
        write(tmp_path / f"{name}.py", f"raise ImportError('the user\\'s own {name}.py')\n")
    write(tmp_path / "prog.py", "print('ok')\n")
    result = gpuwhy("run", "--json", "r.json", "--html", "r.html", "prog.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "error" not in result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["program"]["ended"] == "completed"
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    "name, body",
    [
        ("random.py", "import random\nprint(random.randint(1, 3))\n"),
        ("json.py", "import json\nprint(json.dumps([1]))\n"),
        ("tensorflow.py", "import tensorflow as tf\nprint(tf.constant(1))\n"),
        ("uses_secrets.py", "import secrets\nprint(secrets.MINE)\n"),
    ],
)
def test_a_script_named_like_a_module_fails_or_succeeds_exactly_as_under_python(
    tmp_path, name, body
):
    write(tmp_path / name, body)
    write(tmp_path / "secrets.py", "MINE = 'the script sees its own secrets.py'\n")
    plain = python(name, cwd=tmp_path)
    watched = gpuwhy("run", "-o", os.devnull, name, cwd=tmp_path)
    assert watched.returncode == plain.returncode
    assert watched.stdout == plain.stdout
    assert watched.stderr == plain.stderr  # the same traceback, frame for frame
