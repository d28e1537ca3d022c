"""The job's labels from the environments jobs run in: TF_CONFIG, Slurm, Kubernetes."""

import json

from gpuwhy.collect.identity import job_labels


def test_a_tf_config_worker():
    config = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    labels = job_labels({"TF_CONFIG": json.dumps(config), "GPUWHY_RUN_ID": "exp-3"})
    assert (labels["task_type"], labels["task_index"], labels["run_id"]) == ("worker", "1", "exp-3")
    assert labels["pod"] == labels["namespace"] == labels["slurm_job_id"] == ""


def test_a_slurm_task_and_a_kubernetes_pod():
    slurm = job_labels({"SLURM_JOB_ID": "4242", "SLURM_PROCID": "3"})
    assert (slurm["slurm_job_id"], slurm["task_type"], slurm["task_index"]) == (
        "4242",
        "worker",
        "3",
    )
    pod = job_labels({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "train-0",
                      "POD_NAMESPACE": "ml", "NODE_NAME": "gpu-node-3"})  # fmt: skip
    assert (pod["pod"], pod["namespace"], pod["Hostname"]) == ("train-0", "ml", "gpu-node-3")


def test_an_unreadable_tf_config_is_no_task():
    assert job_labels({"TF_CONFIG": "{not json"})["task_type"] == ""
    assert job_labels({"TF_CONFIG": json.dumps({"task": "worker"})})["task_index"] == ""
    assert len(job_labels({})["run_id"]) == 12  # a run id of its own
