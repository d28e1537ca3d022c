"""Children of a watched script behave as under plain ``python``: each script runs twice,
as ``python prog.py`` and as ``python -m gpuwhy run prog.py`` (report to a file, so that
stderr is the program's alone), and what the script saw of its children must be the same:
their exit codes (-15 for ``terminate()``, KeyboardInterrupt for SIGINT), its stdout, and
a stderr with no gpuwhy frame. Real subprocesses, real signals; only the last two import
TensorFlow (Keras' ``PyDataset`` workers, forked after TF is loaded; a tf.data service
in the process)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

START_METHODS = ["fork", "spawn", "forkserver"]


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(body))
    return path


def both(path: Path, *args: str, timeout: int = 120):
    """The script's outcome under python, then under gpuwhy run, and the run's record."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    report = path.parent / "report.json"

    def run(*command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, *command, str(path), *args],
            capture_output=True,
            text=True,
            cwd=path.parent,
            env=env,
            timeout=timeout,
        )

    plain = run()
    watched = run("-m", "gpuwhy", "run", "--json", str(report), "-o", str(report) + ".txt")
    return plain, watched, json.loads(report.read_text())


def headlines(stderr: str) -> list[str]:
    """The lines of tracebacks that do not depend on where a signal landed: "Process
    ForkProcess-2:", "Traceback (most recent call last):", "KeyboardInterrupt"."""
    return [line for line in stderr.splitlines() if line and not line.startswith(" ")]


def assert_same_as_python(plain, watched, record) -> None:
    assert watched.returncode == plain.returncode, watched.stderr
    assert watched.stdout == plain.stdout, watched.stderr
    assert "gpuwhy" not in watched.stderr, watched.stderr
    assert headlines(watched.stderr) == headlines(plain.stderr)
    assert record["program"]["ended"] == "completed"  # the parent's, once


MULTIPROCESSING = """
    import multiprocessing as mp, os, signal, sys, time

    def sleep_a_minute():  # in short sleeps: a signal that lands just before a long
        for _ in range(600):  # sleep's system call would wait for its end (plain python too)
            time.sleep(0.1)

    def ready_then_sleep(ready):
        ready.set()
        sleep_a_minute()

    def square(x):
        return x * x

    def remember(queue):
        global STARTED
        STARTED = queue

    def busy(i):
        STARTED.put(i)
        sleep_a_minute()

    def stopped(ctx, stop):
        ready = ctx.Event()
        child = ctx.Process(target=ready_then_sleep, args=(ready,))
        child.start()
        ready.wait(60)
        stop(child)
        child.join(60)
        return child.exitcode

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        print("terminate", stopped(ctx, lambda child: child.terminate()), flush=True)
        print("sigint", stopped(ctx, lambda child: os.kill(child.pid, signal.SIGINT)), flush=True)
        started = ctx.Queue()
        with ctx.Pool(2, initializer=remember, initargs=(started,)) as pool:
            print("pool", pool.map(square, range(4)), flush=True)
            pool.map_async(busy, range(2), chunksize=1)
            print("busy", sorted(started.get(timeout=60) for _ in range(2)), flush=True)
            workers = list(pool._pool)
        # left with: Pool.terminate() stopped both workers in their task
        for worker in workers:
            worker.join(60)
        print("pool workers", [worker.exitcode for worker in workers], flush=True)
"""


@pytest.mark.parametrize("method", START_METHODS)
def test_children_stopped_by_signals_end_as_under_python(tmp_path, method):
    plain, watched, record = both(script(tmp_path, MULTIPROCESSING), method)
    assert plain.stdout.splitlines() == [
        "terminate -15",
        "sigint 1",
        "pool [0, 1, 4, 9]",
        "busy [0, 1]",
        "pool workers [-15, -15]",
    ]
    assert_same_as_python(plain, watched, record)


OS_FORK = """
    import atexit, os, signal, sys, time

    def sleep_a_minute():  # in short sleeps: a signal that lands just before a long
        for _ in range(600):  # sleep's system call would wait for its end (plain python too)
            time.sleep(0.1)

    atexit.register(lambda: print("atexit in", "parent" if os.getpid() == PARENT else "child", flush=True))
    PARENT = os.getpid()

    def fork(child):
        r, w = os.pipe()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            child(w)
        os.close(w)
        os.read(r, 1)
        return pid

    def ready_then_sleep(w):
        try:
            os.write(w, b"x")
            sleep_a_minute()
        finally:  # SIGTERM kills at once: no finally; KeyboardInterrupt runs it
            print("finally in child", flush=True)

    def fails(w):
        os.write(w, b"x")
        raise ValueError("boom in the child")

    def exits(w):
        os.write(w, b"x")
        sys.exit(5)

    def ended(pid, signum=None):
        if signum is not None:
            os.kill(pid, signum)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])

    print("sigterm", ended(fork(ready_then_sleep), signal.SIGTERM), flush=True)
    print("sigint", ended(fork(ready_then_sleep), signal.SIGINT), flush=True)
    print("exception", ended(fork(fails)), flush=True)
    print("sys.exit", ended(fork(exits)), flush=True)
"""


def test_a_child_of_os_fork_ends_as_under_python(tmp_path):
    plain, watched, record = both(script(tmp_path, OS_FORK))
    assert plain.stdout.splitlines() == [
        "sigterm -15",
        "finally in child",
        "atexit in child",
        "sigint -2",
        "atexit in child",
        "exception 1",
        "atexit in child",
        "sys.exit 5",
        "atexit in parent",
    ]
    assert_same_as_python(plain, watched, record)
    # the child's own traceback, whole: no frame of gpuwhy's runner under the script's
    boom = plain.stderr[plain.stderr.rindex("Traceback") :]
    assert watched.stderr.endswith(boom)


OWN_HANDLER = """
    import multiprocessing as mp, os, signal, sys, time

    def sleep_a_minute():  # in short sleeps: a signal that lands just before a long
        for _ in range(600):  # sleep's system call would wait for its end (plain python too)
            time.sleep(0.1)

    def ready_then_sleep(ready):
        ready.set()
        sleep_a_minute()

    def exits_7(signum, frame):
        print("handled in the child", flush=True)
        sys.exit(7)

    def chains(signum, frame):
        print("chained in the child", flush=True)
        if callable(PREVIOUS):
            PREVIOUS(signum, frame)
        sys.exit(8)

    def dies_as_before(signum, frame):
        print("put back in the child", flush=True)
        signal.signal(signal.SIGTERM, PREVIOUS)
        os.kill(os.getpid(), signal.SIGTERM)

    def terminated(handler):
        signal.signal(signal.SIGTERM, handler)
        ready = CTX.Event()
        child = CTX.Process(target=ready_then_sleep, args=(ready,))
        child.start()
        ready.wait(60)
        child.terminate()
        child.join(60)
        signal.signal(signal.SIGTERM, PREVIOUS)
        return child.exitcode

    if __name__ == "__main__":
        CTX = mp.get_context("fork")
        PREVIOUS = signal.getsignal(signal.SIGTERM)
        for handler in (exits_7, chains, dies_as_before):
            print(handler.__name__, terminated(handler), flush=True)
"""


def test_a_child_keeps_the_script_s_own_sigterm_handler(tmp_path):
    plain, watched, record = both(script(tmp_path, OWN_HANDLER))
    assert plain.stdout.splitlines() == [
        "handled in the child",
        "exits_7 7",
        "chained in the child",
        "chains 8",
        "put back in the child",
        "dies_as_before -15",
    ]
    assert_same_as_python(plain, watched, record)


PUT_BACK = """
    import os, signal, sys

    PREVIOUS = signal.getsignal(signal.SIGTERM)  # gpuwhy's handler under gpuwhy run
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, PREVIOUS)  # put back what the parent had
        print("default in the child", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_a_child_that_puts_back_the_handler_saved_before_the_fork_gets_python_s_default(
    tmp_path,
):
    """Under python the saved handler is the default, which kills at once; gpuwhy's
    handler put back would be a Python one, run only at the interpreter's next check
    (60 s late behind a sleep): the child gets the default, as under python."""
    plain, watched, record = both(script(tmp_path, PUT_BACK))
    assert plain.stdout == "default in the child True\n"
    assert_same_as_python(plain, watched, record)


KERAS_WORKERS = """
    import numpy as np
    import keras

    class Data(keras.utils.PyDataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return np.full((8, 4), i, "float32"), np.zeros((8, 1), "float32")

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(Data(workers=2, use_multiprocessing=True), epochs=2, verbose=0)
    print("fit done", flush=True)
"""


def test_keras_multiprocessing_workers_forked_after_tensorflow_end_as_under_python(tmp_path):
    """Keras forks its ``PyDataset`` workers (``multiprocessing.Pool``) and terminates
    them at the end of each epoch: no worker may print gpuwhy's ``Terminated``."""
    plain, watched, record = both(script(tmp_path, KERAS_WORKERS))
    assert plain.returncode == 0 and plain.stdout == "fit done\n", plain.stderr
    assert watched.returncode == 0 and watched.stdout == plain.stdout, watched.stderr
    assert "Traceback" not in plain.stderr and "Traceback" not in watched.stderr, watched.stderr
    assert record["program"]["ended"] == "completed"
    assert record["steps"]["count"] > 0  # the parent was still watched


TF_DATA_SERVICE = """
    import tensorflow as tf

    service = tf.data.experimental.service
    dispatcher = service.DispatchServer()
    worker = service.WorkerServer(
        service.WorkerConfig(dispatcher_address=dispatcher.target.split("://")[1])
    )
    dataset = tf.data.Dataset.range(8).map(lambda x: x * 2)
    dataset = dataset.apply(
        service.distribute(processing_mode="parallel_epochs", service=dispatcher.target)
    )
    print(sorted(int(x) for x in dataset), flush=True)
"""

ABSL_PREFIX = re.compile(r"^([IWEF])\d{4} \S+ +\d+ ", re.MULTILINE)  # TF's log: time, thread


def test_a_tf_data_service_in_the_process_runs_as_under_python(tmp_path):
    """A dispatcher and a worker of the tf.data service in the script's own process (their
    threads, their gRPC servers): the same elements, the same stderr."""
    plain, watched, record = both(script(tmp_path, TF_DATA_SERVICE))
    assert plain.returncode == 0 and plain.stdout == "[0, 2, 4, 6, 8, 10, 12, 14]\n", plain.stderr
    assert watched.returncode == 0 and watched.stdout == plain.stdout, watched.stderr
    assert ABSL_PREFIX.sub(r"\1 ", watched.stderr) == ABSL_PREFIX.sub(r"\1 ", plain.stderr)
    assert record["program"]["ended"] == "completed"
