"""Real multi-worker clusters on localhost for tests: N processes, each a worker of one
TF_CONFIG cluster on free ports, each under ``gpuwhy run``."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.test_run_tensorflow import GPUWHY, ROOT

MEAN_SQUARED_ERROR = "tf.reduce_mean(tf.square(model(xr, training=True) - yr))"


def train_step(loss: str = MEAN_SQUARED_ERROR) -> str:
    """Script source of a custom training step as users write it under a tf.distribute
    strategy: one tf.function, ``train_step(xb, yb)``, whose per-replica ``step`` runs
    by ``strategy.run`` and minimises ``loss`` (an expression of the replica's ``xr``,
    ``yr``). The test scripts share it, so the step gpuwhy sees is the same in each; it
    needs ``model``, ``optimizer`` and ``strategy``, and is indented as the scripts
    that include it are before their dedent."""
    return f"""
    @tf.function
    def train_step(xb, yb):
        def step(xr, yr):
            with tf.GradientTape() as tape:
                loss = {loss}
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        return strategy.run(step, args=(xb, yb))
"""


def free_ports(count: int) -> list[int]:
    """Ports free now on localhost (held open together so that they differ)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("localhost", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def tf_config(ports: Sequence[int], index: int, task_type: str = "worker") -> str:
    return json.dumps(
        {
            "cluster": {"worker": [f"localhost:{p}" for p in ports]},
            "task": {"type": task_type, "index": index},
        }
    )


@dataclass
class Worker:
    index: int
    returncode: int
    stdout: str
    stderr: str


def run_cluster(
    script: Path,
    workers: int,
    gpuwhy_args: Callable[[int], Sequence[str]],
    cwd: Path,
    timeout: float = 240,
    extra_env: dict[str, str] | None = None,
) -> list[Worker]:
    """Start ``workers`` processes of ``gpuwhy run ARGS script`` (ARGS per worker index),
    one cluster; wait for all; once one fails or the time is up, stop the others."""
    ports = free_ports(workers)
    processes: list[subprocess.Popen] = []
    try:
        for index in range(workers):
            env = {
                "TF_CPP_MIN_LOG_LEVEL": "2",
                "PATH": "/usr/bin:/bin",
                "TF_CONFIG": tf_config(ports, index),
                "PYTHONPATH": str(ROOT),  # this checkout's gpuwhy
                **(extra_env or {}),
            }
            command = [GPUWHY, "run", *map(str, gpuwhy_args(index)), str(script)]
            processes.append(
                subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        return _wait_all(processes, timeout)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def _wait_all(processes: list[subprocess.Popen], timeout: float) -> list[Worker]:
    """Every worker's result; once one fails, the others (blocked on their peer) are
    stopped rather than waited for. Output is read as it comes (a full pipe would block
    a worker)."""
    import threading

    outputs: dict[int, tuple[str, str]] = {}

    def read(index: int, process: subprocess.Popen) -> None:
        outputs[index] = process.communicate()

    readers = [
        threading.Thread(target=read, args=(i, p), daemon=True) for i, p in enumerate(processes)
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in processes):
        if any(p.returncode not in (None, 0) for p in processes) or time.monotonic() > deadline:
            for process in processes:
                if process.poll() is None:
                    process.kill()
            break
        time.sleep(0.2)
    for reader in readers:
        reader.join(timeout=30)
    return [Worker(i, p.returncode, *outputs.get(i, ("", ""))) for i, p in enumerate(processes)]


def describe(workers: list[Worker]) -> str:
    """Each worker's status and the end of its stderr, for an assertion message."""
    return "\n".join(f"worker {w.index}: {w.returncode}\n{w.stderr[-2500:]}" for w in workers)
