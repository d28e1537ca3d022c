"""``gpuwhy watch``: real child processes, their exit codes, output and signals, and the
process tree the sampler follows."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from gpuwhy.collect import nvml
from gpuwhy.collect.process_tree import ProcessTree, descendants, parent_map
from gpuwhy.modes.recording import diagnose_recording, is_recording
from gpuwhy.modes.watch import WatchError, exit_status, watch
from gpuwhy.record import Record
from gpuwhy.schema import validation_errors

PY = sys.executable


def test_exit_code_and_program_facts_pass_through():
    record, code = watch([PY, "-c", "import sys; sys.exit(3)"], hz=20)
    assert code == 3
    program = record.facts.program
    assert program.exit_code == 3 and program.ended == "exit"
    assert program.command == (PY, "-c", "import sys; sys.exit(3)")
    assert program.seconds > 0
    assert record.command == "watch" and record.facts.environment is None


def test_success_is_completed():
    record, code = watch([PY, "-c", "pass"])
    assert code == 0 and record.facts.program.ended == "completed"


def test_output_goes_to_the_terminal_unchanged(capfd):
    watch([PY, "-c", "import sys; print('to stdout'); print('to stderr', file=sys.stderr)"])
    out, err = capfd.readouterr()
    assert out == "to stdout\n" and err == "to stderr\n"


def test_stdin_is_inherited(tmp_path):
    # A child of a child: the inner watch must hand its stdin to the command.
    code = (
        "import sys; from gpuwhy.modes.watch import watch; "
        f"_, c = watch([{PY!r}, '-c', 'import sys; sys.exit(len(sys.stdin.read()))']); "
        "sys.exit(c)"
    )
    done = subprocess.run([PY, "-c", code], input=b"12345", timeout=120)
    assert done.returncode == 5


def test_command_not_found_is_one_clear_line():
    with pytest.raises(WatchError) as e:
        watch(["no-such-command-gpuwhy"])
    assert str(e.value) == "command not found: no-such-command-gpuwhy"
    with pytest.raises(WatchError, match="no command given"):
        watch([])


def test_a_file_that_is_not_executable_is_refused(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    with pytest.raises(WatchError, match="not an executable file"):
        watch([str(script)])


def test_gpu_samples_record_why_there_are_none_and_the_record_is_valid():
    snap = nvml.snapshot()
    record, _ = watch([PY, "-c", "import time; time.sleep(0.3)"], hz=20)
    samples = record.facts.gpu_samples
    if snap["ok"]:
        assert samples.error is None and samples.gpus
    else:
        assert samples.error == snap["error"] and samples.gpus == ()
        assert record.facts.devices == ()
    assert validation_errors(record.to_dict()) == []
    assert Record.from_dict(record.to_dict()).facts == record.facts


def test_killed_child_reports_the_shell_exit_status():
    record, code = watch([PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert code == 128 + signal.SIGKILL == exit_status(-signal.SIGKILL)
    assert record.facts.program.error == "killed by SIGKILL"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_are_forwarded_to_the_child(tmp_path, signum):
    ready = tmp_path / "ready"
    child = (
        "import signal, sys, time, pathlib\n"
        f"signal.signal({int(signum)}, lambda *a: sys.exit(7))\n"
        f"pathlib.Path({str(ready)!r}).write_text('x')\n"
        "time.sleep(60)\n"
        "sys.exit(1)\n"
    )

    def send_when_ready():
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(os.getpid(), signum)  # to gpuwhy, as `kill` or a scheduler would

    sender = threading.Thread(target=send_when_ready)
    sender.start()
    previous = signal.getsignal(signum)
    record, code = watch([PY, "-c", child])
    sender.join()
    assert code == 7
    assert record.facts.program.ended == (
        "terminated" if signum == signal.SIGTERM else "interrupted"
    )
    assert signal.getsignal(signum) == previous  # handlers restored


def test_process_tree_follows_grandchildren_and_orphans(tmp_path):
    marker = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time, pathlib\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        f"pathlib.Path({str(marker)!r}).write_text(str(p.pid))\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([PY, "-c", script])
    try:
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        grandchild = int(marker.read_text())
        tree = ProcessTree(child.pid)
        assert {child.pid, grandchild} <= tree()
        assert os.getpid() not in tree()
        assert parent_map()[grandchild] == child.pid
        child.kill()
        child.wait()
        # The grandchild is re-parented to init, out of the tree, but still watched.
        assert grandchild not in descendants(child.pid)
        assert grandchild in tree()
    finally:
        child.kill()
        if marker.exists():
            try:
                os.kill(int(marker.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_recording_keeps_the_program_and_reads_back_as_the_live_watch(tmp_path):
    path = tmp_path / "run.jsonl"
    live, code = watch([PY, "-c", "import sys; sys.exit(4)"], hz=20, record_path=path)
    assert code == 4 and is_recording(path)
    replayed = diagnose_recording(path)
    assert replayed.facts.program == live.facts.program  # command, ending, status, time
    assert replayed.facts.devices == live.facts.devices
    assert replayed.facts.gpu_samples.error == live.facts.gpu_samples.error
    assert replayed.verdict == live.verdict
