"""Who is publishing: the labels every gpuwhy series carries, read from the environment
the job runs in, so that a query can join them with dcgm-exporter's GPU series
(``Hostname``, and in Kubernetes ``pod``/``namespace``/``container``) and with the
scheduler's own (the Slurm job id, the TF cluster task).

Every value is bounded per process (no label per step or per op): a job publishes one
label set, and one more per GPU (``gpu``, ``UUID``, ``modelName``, as dcgm-exporter
names them)."""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from pathlib import Path

JOB_LABELS = (
    "Hostname",
    "run_id",
    "task_type",
    "task_index",
    "slurm_job_id",
    "pod",
    "namespace",
    "container",
)
GPU_LABELS = ("gpu", "UUID", "modelName")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def job_labels(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job's labels; "" where the environment does not say (Prometheus drops empty
    labels, so a series outside Kubernetes or Slurm simply lacks them)."""
    env = os.environ if environ is None else environ
    task_type, task_index = cluster_task(env)
    in_kubernetes = bool(env.get("KUBERNETES_SERVICE_HOST"))
    return {
        "Hostname": env.get("NODE_NAME") or socket.gethostname(),
        "run_id": env.get("GPUWHY_RUN_ID") or uuid.uuid4().hex[:12],
        "task_type": task_type,
        "task_index": task_index,
        "slurm_job_id": env.get("SLURM_JOB_ID", ""),
        # the downward API's usual names; a pod's hostname is its name
        "pod": env.get("POD_NAME") or (env.get("HOSTNAME", "") if in_kubernetes else ""),
        "namespace": env.get("POD_NAMESPACE") or (_namespace() if in_kubernetes else ""),
        "container": env.get("CONTAINER_NAME", ""),
    }


def cluster_task(env: Mapping[str, str]) -> tuple[str, str]:
    """(task type, index) of this process in its training cluster: TF_CONFIG's task,
    else Slurm's ``SLURM_PROCID`` as a worker; empty when neither says."""
    task_type, task_index = _tf_task(env.get("TF_CONFIG", ""))
    if not task_type and env.get("SLURM_PROCID"):
        task_type, task_index = "worker", env["SLURM_PROCID"]
    return task_type, task_index


def tf_config(env: Mapping[str, str]) -> dict:
    """TF_CONFIG parsed; {} when unset or unreadable."""
    try:
        config = json.loads(env.get("TF_CONFIG", ""))
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _tf_task(tf_config: str) -> tuple[str, str]:
    """(task type, index) from TF_CONFIG; empty when unset or unreadable."""
    try:
        task = json.loads(tf_config).get("task") or {}
    except (ValueError, AttributeError):
        return "", ""
    if not isinstance(task, dict):
        return "", ""
    kind, index = task.get("type"), task.get("index")
    return (str(kind), str(index)) if kind is not None and index is not None else ("", "")


def _namespace() -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    except OSError:
        return ""
