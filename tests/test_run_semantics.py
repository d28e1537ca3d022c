"""`gpuwhy run SCRIPT` must behave as `python SCRIPT` does: argv, __main__, cwd, output,
exit status, tracebacks, threads, multiprocessing. Real subprocesses; these scripts do not
import TensorFlow, so each run costs well under a second."""

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


def script(tmp_path, body: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def both(path: Path, *args, cwd=None):
    """The same script under python and under gpuwhy run (report in a JSON file)."""
    report = Path(cwd or path.parent) / "report.json"
    plain = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, cwd=cwd, timeout=60
    )
    watched = subprocess.run(
        [GPUWHY, "run", "--json", str(report), str(path), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    record = json.loads(report.read_text()) if report.exists() else None
    return plain, watched, record


def test_argv_main_cwd_path_stdout_and_exit_status_are_those_of_python(tmp_path):
    path = script(
        tmp_path,
        """
        import os, sys
        print("argv", sys.argv)
        print("name", __name__, os.path.basename(__file__))
        print("cwd", os.getcwd())
        print("path0", sys.path[0])
        print("main is me", sys.modules["__main__"].__dict__ is globals())
        sys.exit(3)
    """,
    )
    work = tmp_path / "elsewhere"
    work.mkdir()
    plain, watched, record = both(path, "--epochs", "2", "-v", cwd=work)
    assert plain.returncode == watched.returncode == 3
    assert watched.stdout == plain.stdout
    assert "main is me True" in watched.stdout
    assert record["program"]["exit_code"] == 3 and record["program"]["ended"] == "exit"
    assert record["program"]["command"] == [str(path), "--epochs", "2", "-v"]
    assert watched.stderr.lstrip().startswith("•")  # the report, on stderr


def test_an_exception_prints_python_s_traceback_and_keeps_the_report(tmp_path):
    path = script(
        tmp_path,
        """
        print("before")
        def inner():
            raise ValueError("boom")   # line 4
        inner()
    """,
    )
    plain, watched, record = both(path)
    assert plain.returncode == watched.returncode == 1
    assert watched.stdout == plain.stdout == "before\n"
    traceback_text = (
        watched.stderr.split("\n\n", 1)[0]
        if watched.stderr.startswith("Traceback")
        else watched.stderr
    )
    assert plain.stderr in watched.stderr  # the very same traceback
    assert "gpuwhy" not in plain.stderr and "runner.py" not in traceback_text
    assert record["program"]["ended"] == "exception"
    # with the program's own line the exception was raised at
    assert record["program"]["error"] == f"ValueError: boom; raised at {path}:4"
    assert f"The program failed (ValueError: boom; raised at {path}:4)" in record["verdict"]["text"]


def test_sys_exit_with_a_message_prints_it_and_exits_1(tmp_path):
    path = script(tmp_path, "import sys\nsys.exit('bad config')\n")
    plain, watched, record = both(path)
    assert plain.returncode == watched.returncode == 1
    assert watched.stderr.startswith("bad config\n")
    assert record["program"]["ended"] == "exit"


def test_non_daemon_threads_finish_before_the_report(tmp_path):
    path = script(
        tmp_path,
        """
        import threading, time
        def work():
            time.sleep(0.3)
            print("thread done", flush=True)
        threading.Thread(target=work).start()
        print("main done", flush=True)
    """,
    )
    plain, watched, record = both(path)
    assert watched.returncode == 0
    assert watched.stdout == plain.stdout == "main done\nthread done\n"
    assert record["program"]["seconds"] >= 0.3


def test_multiprocessing_spawn_finds_the_script_s_functions(tmp_path):
    path = script(
        tmp_path,
        """
        import multiprocessing as mp
        def square(x):
            return x * x
        if __name__ == "__main__":
            with mp.get_context("spawn").Pool(2) as pool:
                print(pool.map(square, [1, 2, 3]))
    """,
    )
    plain, watched, _ = both(path)
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout == plain.stdout == "[1, 4, 9]\n"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "nope.py: no such file"),
        (b"\x7fELF\x00\x01\x02", "is not a Python script (binary file)"),
        (b"def broken(:\n", "is not valid Python: invalid syntax"),
    ],
)
def test_a_script_that_cannot_run_is_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "nope.py"
    if content is not None:
        path.write_bytes(content)
    result = subprocess.run([GPUWHY, "run", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("gpuwhy: error: ")
    assert message in result.stderr


def test_ctrl_c_mid_run_writes_the_partial_report_and_dies_of_sigint_as_python_does(tmp_path):
    path = script(
        tmp_path,
        """
        import time
        print("ready", flush=True)
        time.sleep(60)
    """,
    )
    report = tmp_path / "report.json"
    proc = subprocess.Popen(
        [GPUWHY, "run", "--json", str(report), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGINT  # a shell sees 130, make sees an interrupt
    assert "KeyboardInterrupt" in err
    record = json.loads(report.read_text())
    assert record["program"]["ended"] == "interrupted"
    assert record["verdict"]["text"].startswith("Interrupted after")


def test_a_program_without_tensorflow_is_reported_as_such(tmp_path):
    path = script(tmp_path, "print(sum(range(10)))\n")
    plain, watched, record = both(path)
    assert watched.stdout == "45\n" and watched.returncode == 0
    assert record["program"]["tensorflow_imported"] is False
    assert record["steps"] is None and record["placement"] is None
    assert "tensorflow" not in json.dumps(record["program"]["command"])
    assert record["verdict"]["text"].startswith("The program never imported TensorFlow")


def test_report_to_a_file_leaves_stderr_to_the_program(tmp_path):
    path = script(tmp_path, "import sys\nprint('err line', file=sys.stderr)\n")
    out = tmp_path / "report.txt"
    result = subprocess.run(
        [GPUWHY, "run", "-o", str(out), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 0
    assert result.stderr == "err line\n"
    assert out.read_text().startswith("• The program never imported TensorFlow")


def test_os_exit_still_writes_the_report(tmp_path):
    path = script(
        tmp_path,
        """
        import os
        print("bye", flush=True)
        os._exit(7)
    """,
    )
    plain, watched, record = both(path)
    assert plain.returncode == watched.returncode == 7
    assert watched.stdout == "bye\n"
    assert record["program"]["exit_code"] == 7


def test_file_is_absolute_as_in_python(tmp_path):
    path = script(tmp_path, "import os\nos.chdir('/')\nprint(os.path.isabs(__file__))\n")
    result = subprocess.run(
        [GPUWHY, "run", "-o", os.devnull, "prog.py"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert result.stdout == "True\n"


def test_an_unwritable_report_path_fails_before_the_script_runs(tmp_path):
    path = script(tmp_path, "print('ran')\n")
    (tmp_path / "afile").write_text("")
    result = subprocess.run(
        [GPUWHY, "run", "--json", str(tmp_path / "afile" / "such" / "r.json"), str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("gpuwhy: error: cannot write")


def test_gpuwhy_s_options_after_the_script_are_the_script_s_with_a_note(tmp_path):
    path = script(tmp_path, "import sys\nprint(sys.argv[1:])\n")
    plain, watched, record = both(path, "--fail-on", "high", "--epochs=3")
    assert watched.stdout == plain.stdout == "['--fail-on', 'high', '--epochs=3']\n"
    assert record is not None
    assert (
        "gpuwhy: note: --fail-on after SCRIPT is passed to the script, not to gpuwhy: "
        "gpuwhy's options go before SCRIPT" in watched.stderr
    )
    (note,) = [line for line in watched.stderr.splitlines() if line.startswith("gpuwhy: note:")]
    assert "--epochs" not in note  # the script's own option: nothing said


def test_the_program_s_collections_walk_its_own_objects_not_gpuwhy_s(tmp_path):
    """gpuwhy's objects (made before the script) are frozen out of the collector's
    generations; the script's __main__ and all it makes stay in them, as under python,
    and a cycle it drops is still collected."""
    path = script(
        tmp_path,
        """
        import gc, sys
        tracked = gc.get_objects()
        own = sum(type(o).__module__.startswith("gpuwhy") for o in tracked)
        print("gpuwhy tracked", "under 10" if own < 10 else own)
        print("main tracked", any(o is vars(sys.modules["__main__"]) for o in tracked))
        class Node:
            pass
        a, b = Node(), Node()
        a.other, b.other = b, a
        del a, b
        print("cycle freed", gc.collect() >= 2)
        print("frozen", gc.get_freeze_count() > 0)
    """,
    )
    plain, watched, record = both(path)
    assert plain.stdout.splitlines()[1:3] == ["main tracked True", "cycle freed True"]
    # not frozen: 184 of its objects (collectors, windows, sketches), and more of theirs
    assert watched.stdout.splitlines() == [
        "gpuwhy tracked under 10",
        "main tracked True",
        "cycle freed True",
        "frozen True",
    ]
    assert record is not None


def test_nothing_of_gpuwhy_s_is_below_the_script_s_frame_as_under_python(tmp_path):
    """TensorFlow reads the line of every frame on the stack at each eager op (a scan of
    each frame's location table): the script runs on a stack of its own (a greenlet), its
    ``<module>`` frame the bottom one, as under ``python script.py``. gpuwhy's five frames
    below it (console script, command line, run command, drive, runner) cost the program's
    thread 18,700 instructions a step of 0.35 ms, 2 % of its own (callgrind,
    docs/speed.md)."""
    path = script(
        tmp_path,
        """
        import sys
        frame, below = sys._getframe().f_back, []
        while frame is not None:
            below.append(frame.f_code.co_name)
            frame = frame.f_back
        print(*below)
    """,
    )
    plain, watched, record = both(path)
    assert plain.stdout.split() == []
    assert watched.stdout.split() == []
    assert record is not None and record["program"]["ended"] == "completed"


def test_context_variables_the_script_set_stay_set_for_its_atexit_handlers(tmp_path):
    """The script runs on a greenlet of its own, in the main thread's context: what it
    sets in context variables (decimal's precision is one) is what its atexit handlers
    and its objects' finalisers see at the end, as under python."""
    path = script(
        tmp_path,
        """
        import atexit, contextvars, decimal
        var = contextvars.ContextVar("var", default="default")
        var.set("set by the script")
        decimal.getcontext().prec = 5
        atexit.register(lambda: print("atexit", var.get(), decimal.Decimal(1) / 7))
    """,
    )
    plain, watched, record = both(path)
    assert plain.stdout == "atexit set by the script 0.14286\n"
    assert watched.stdout == plain.stdout
    assert record is not None


def test_a_thread_or_process_pool_left_open_ends_the_run_as_it_ends_python(tmp_path):
    """Python runs threading's own atexit callbacks before it joins the threads left: an
    executor the script never shut down stops its workers there. The run joined them
    first and waited for ever."""
    path = script(
        tmp_path,
        """
        from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
        threads, processes = ThreadPoolExecutor(2), ProcessPoolExecutor(2)
        print(threads.submit(pow, 2, 10).result(), processes.submit(pow, 3, 3).result())
    """,
    )
    plain = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60)
    watched = subprocess.run(
        [GPUWHY, "run", "-o", os.devnull, str(path)], capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == watched.returncode == 0
    assert watched.stdout == plain.stdout == "1024 27\n"


def test_a_broken_excepthook_is_said_as_python_says_it_and_the_last_exception_is_kept(tmp_path):
    path = script(
        tmp_path,
        """
        import atexit, sys
        def hook(kind, value, tb):
            raise RuntimeError("the hook broke")
        sys.excepthook = hook
        atexit.register(lambda: print("last", repr(sys.last_value)))
        raise ValueError("the script's own")
    """,
    )
    plain, watched, record = both(path)
    assert plain.returncode == watched.returncode == 1
    assert watched.stdout == plain.stdout == 'last ValueError("the script\'s own")\n'
    said = watched.stderr[: watched.stderr.index("ValueError: the script's own") + 28]
    assert said == plain.stderr.strip()
    assert said.startswith("Error in sys.excepthook:\nTraceback (most recent call last):\n")
    assert "\nOriginal exception was:\n" in said and "gpuwhy" not in said


def test_a_symlinked_script_finds_the_modules_beside_its_real_file(tmp_path):
    """python puts the script's directory, symlinks resolved, first on sys.path; its
    __main__ has __annotations__ from the start."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.mkdir()
    (real / "helper.py").write_text("WORD = 'found'\n")
    path = script(real, "import helper\nprint(helper.WORD, __annotations__)\n")
    (link / "prog.py").symlink_to(path)
    plain, watched, record = both(link / "prog.py")
    assert plain.stdout == "found {}\n"
    assert watched.returncode == 0 and watched.stdout == plain.stdout


def test_gpuwhy_s_copy_of_stderr_neither_warns_nor_takes_the_script_s_first_descriptor(tmp_path):
    """gpuwhy keeps a duplicate of stderr for its report: numbered high, never closed, so
    -W default says nothing python would not, and the script's first open gets 3."""
    path = script(tmp_path, "import os\nprint(os.open(os.devnull, os.O_RDONLY))\n")
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    plain = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=60, env=env
    )
    watched = subprocess.run(
        [GPUWHY, "run", "-o", os.devnull, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert watched.stdout == plain.stdout == "3\n"
    assert "ResourceWarning" not in watched.stderr
