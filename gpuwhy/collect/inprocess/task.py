"""Which task of a training cluster this process is (section ``task``), read from what
the launcher set: TF_CONFIG (by hand, a Kubernetes TFJob, SlurmClusterResolver's
users), else Slurm's ``SLURM_PROCID``, else the host and process id.

Read when the run ends, not when it starts: a script may set TF_CONFIG itself from its
own arguments before it makes its strategy. The name is the record's file name under
``gpuwhy run --out-dir DIR`` and the worker's name in ``gpuwhy merge``; ``cluster``
lets merge say which tasks left no record.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping

from gpuwhy.collect.identity import cluster_task, tf_config
from gpuwhy.collect.inprocess.base import Collector, Gathering
from gpuwhy.facts import TaskFacts

# A task name becomes a file name: anything but these is replaced.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Task(Collector):
    """Section ``task``, read when the program ended (whether or not it imported TF)."""

    name = section = "task"
    what = "task"

    def fill(self, gathering: Gathering) -> TaskFacts:
        return task_facts()


def task_facts(environ: Mapping[str, str] | None = None, pid: int | None = None) -> TaskFacts:
    env = os.environ if environ is None else environ
    pid = os.getpid() if pid is None else pid
    hostname = env.get("NODE_NAME") or socket.gethostname()
    task_type, task_index = cluster_task(env)
    index = _integer(task_index)
    slurm_job = env.get("SLURM_JOB_ID") or None
    if task_type and index is not None:
        from_tf_config = bool(cluster_task({"TF_CONFIG": env.get("TF_CONFIG", "")})[0])
        return TaskFacts(
            name=safe_name(f"{task_type}-{index}"),
            source="TF_CONFIG" if from_tf_config else "Slurm",
            task_type=task_type,
            task_index=index,
            hostname=hostname,
            pid=pid,
            slurm_job_id=slurm_job,
            cluster=_tf_cluster(env) if from_tf_config else _slurm_cluster(env),
        )
    return TaskFacts(
        name=safe_name(f"{hostname}-{pid}"),
        source="process",
        hostname=hostname,
        pid=pid,
        slurm_job_id=slurm_job,
    )


def safe_name(name: str) -> str:
    """``name`` as one file name: no separators, no leading dot."""
    return _UNSAFE.sub("_", name).lstrip(".") or "task"


def _tf_cluster(env: Mapping[str, str]) -> tuple[str, ...]:
    """Every task TF_CONFIG's cluster spec names: {"worker": [a, b], "chief": [c]} gives
    chief-0, worker-0, worker-1 (chief first, as TF numbers its workers)."""
    cluster = tf_config(env).get("cluster")
    if not isinstance(cluster, dict):
        return ()
    order = {"chief": 0, "master": 1, "worker": 2, "ps": 3, "evaluator": 4}
    names = []
    for kind in sorted(cluster, key=lambda k: (order.get(str(k), 5), str(k))):
        hosts = cluster[kind]
        if isinstance(hosts, dict):  # a sparse cluster spec: {"1": "host:port"}
            indices = sorted(i for i in map(_integer, hosts) if i is not None)
        else:
            indices = list(range(len(hosts))) if isinstance(hosts, list) else []
        names += [safe_name(f"{kind}-{i}") for i in indices]
    return tuple(names)


def _slurm_cluster(env: Mapping[str, str]) -> tuple[str, ...]:
    count = _integer(env.get("SLURM_NTASKS") or env.get("SLURM_NPROCS") or "")
    return tuple(f"worker-{i}" for i in range(count)) if count and count < 100_000 else ()


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None
