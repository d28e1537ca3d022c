"""distribute.straggler from small workers sections: synchronous workers (equal steps,
one waits for input), measured collective time (one computes slower), unsynchronised
workers (step times differ), and what is not enough to name anyone."""

from __future__ import annotations

import pytest

from gpuwhy.facts import Facts, WorkersFacts
from gpuwhy.rules.distribute.straggler import Straggler
from tests.builders_workers import worker_run


def check(*workers, **options):
    rule = Straggler()
    facts = Facts(workers=WorkersFacts(directory="runs", workers=tuple(workers)))
    return rule.check(facts, {**rule.options, **options})


def test_synchronous_workers_with_one_waiting_for_its_input_name_it_and_its_input():
    # all steps last 150 ms (the all-reduce waits for worker-2); worker-2 waits 50 ms for data
    found = check(
        worker_run("worker-0", 0.150, 0.001),
        worker_run("worker-1", 0.150, 0.002),
        worker_run("worker-2", 0.150, 0.051),
    )
    assert len(found) == 1
    f = found[0]
    assert f.severity == "high" and f.evidence["straggler"] == "worker-2"
    assert f.evidence["cause"] == "input"
    assert 1.45 < f.evidence["score"] < 1.55
    assert "worker-2 is the straggler" in f.title and "in its input" in f.title
    assert [row["worker"] for row in f.evidence["workers"]] == ["worker-0", "worker-1", "worker-2"]
    assert "num_parallel_calls=tf.data.AUTOTUNE" in f.fix


def test_evenly_loaded_synchronous_workers_with_noise_name_nobody():
    assert (
        check(
            worker_run("worker-0", 0.152, 0.004),
            worker_run("worker-1", 0.149, 0.009),
            worker_run("worker-2", 0.151, 0.002),
        )
        == []
    )


def test_a_moderate_straggler_is_medium():
    found = check(worker_run("worker-0", 0.125, 0.001), worker_run("worker-1", 0.125, 0.026))
    assert [f.severity for f in found] == ["medium"]


def test_measured_collective_time_names_a_slower_compute():
    # worker-1 computes 1.5x longer; the others wait for it inside the all-reduce
    found = check(
        worker_run("worker-0", 0.150, 0.001, collective_step_s=0.052),
        worker_run("worker-1", 0.150, 0.001, collective_step_s=0.002),
        worker_run("worker-2", 0.150, 0.001, collective_step_s=0.051),
    )
    assert len(found) == 1
    assert found[0].evidence["straggler"] == "worker-1"
    assert found[0].evidence["cause"] == "compute"
    assert "nvidia-smi" in found[0].fix


def test_unsynchronised_workers_compare_step_times():
    found = check(
        worker_run("worker-0", 0.100, None, strategy="ParameterServerStrategy"),
        worker_run("worker-1", 0.150, None, strategy="ParameterServerStrategy"),
        worker_run("worker-2", 0.101, None, strategy="ParameterServerStrategy"),
    )
    assert found[0].evidence["straggler"] == "worker-1"
    assert found[0].evidence["cause"] == "unknown"


def test_synchronous_steps_without_any_input_wait_tell_nothing_apart():
    """Said as info (nothing measured tells them apart), never as an even load."""
    (finding,) = check(worker_run("worker-0", 0.15, None), worker_run("worker-1", 0.15, None))
    assert finding.severity == "info" and finding.title.startswith("No straggler can be told apart")


@pytest.mark.parametrize(
    "slow",
    [
        {"steps": 12},  # a handful of steps
        {"state": "unreadable"},
        {"state": "missing"},
    ],
)
def test_workers_without_enough_steps_or_a_record_are_not_compared(slow):
    steps = slow.pop("steps", 60)
    assert (
        check(
            worker_run("worker-0", 0.150, 0.001),
            worker_run("worker-1", 0.150, 0.080, steps=steps, **slow),
        )
        == []
    )


def test_tiny_differences_in_tiny_steps_are_not_named():
    # 2x, but 0.3 ms a step: below min_extra_ms
    assert (
        check(worker_run("worker-0", 0.0006, 0.0001), worker_run("worker-1", 0.0006, 0.0004)) == []
    )


def test_workers_on_a_saturated_host_are_said_to_be_indistinguishable():
    """Two workers sharing a 2-core host that was busy the whole run: the slower input
    of one competes with the other's compute for the same cores, their own times come out
    alike, and the silence is explained (info), not left as an even load."""
    busy = dict(hostname="node-a", host_cores=2, host_cpu_busy=0.97)
    (found,) = check(worker_run("worker-0", 0.150, 0.004, **busy),
                     worker_run("worker-1", 0.150, 0.012, **busy))  # fmt: skip
    assert found.severity == "info"
    assert "node-a (worker-0, worker-1): 97% of 2 cores" in found.title
    assert found.evidence["saturated_hosts"] == [
        {"host": "node-a", "workers": ["worker-0", "worker-1"], "cpu_busy": "97%", "cores": 2}
    ]
    assert found.evidence["workers"][1]["host_cpu_busy"] == "97%"
    idle = dict(hostname="node-a", host_cores=2, host_cpu_busy=0.55)
    assert not check(worker_run("worker-0", 0.150, 0.004, **idle),
                     worker_run("worker-1", 0.150, 0.012, **idle))  # fmt: skip
    # a straggler that shows through the load is still named
    (named,) = check(worker_run("worker-0", 0.150, 0.002, **busy),
                     worker_run("worker-1", 0.150, 0.052, **busy))  # fmt: skip
    assert named.evidence["straggler"] == "worker-1"


def test_a_steady_straggler_is_named_through_stalls_every_worker_shares():
    """A loaded host stalls a few synchronous steps for seconds on every worker: the
    mean step (243 ms) is seven times the median (34 ms): counted as compute, the stalls
    would hide a straggler waiting 25 ms a step (a real run's figures)."""
    common = dict(median_s=0.034, hostname="vm")  # step_s 0.243: the mean
    found = check(
        worker_run("worker-0", 0.243, 0.0030, input_wait_median_s=0.0012, **common),
        worker_run("worker-1", 0.243, 0.0247, input_wait_median_s=0.0245, **common),
    )
    (f,) = found
    assert f.evidence["straggler"] == "worker-1" and f.evidence["cause"] == "input"
    assert "in a typical step" in f.evidence["own_time_by"]
    assert "24.7 ms a step waiting for data against 3.0 ms" in f.title
    # the same means without the stalls (mean = median): the means decide, as before
    steady = dict(median_s=0.034, hostname="vm")
    (g,) = check(
        worker_run("worker-0", 0.034, 0.0030, input_wait_median_s=0.0012, **steady),
        worker_run("worker-1", 0.034, 0.0247, input_wait_median_s=0.0245, **steady),
    )
    assert "typical" not in g.evidence["own_time_by"]
    # stalls and an even load: nobody (the saturated-host note only where a host was busy)
    assert not check(
        worker_run("worker-0", 0.243, 0.0030, input_wait_median_s=0.0012, **common),
        worker_run("worker-1", 0.243, 0.0041, input_wait_median_s=0.0015, **common),
    )


def _merge_verdict(*workers) -> str:
    from gpuwhy.verdict import verdict

    facts = Facts(workers=WorkersFacts(directory="runs", workers=tuple(workers)))
    return verdict(facts, check(*workers))


def test_the_merge_verdict_names_the_straggler_or_says_why_none_can_be_told_apart():
    """The verdict asks the comparison the rule makes (never its evidence) and says the
    same: the straggler with its score and cause, a saturated host, or nothing measured."""
    text = _merge_verdict(
        worker_run("worker-0", 0.150, 0.001),
        worker_run("worker-1", 0.150, 0.002),
        worker_run("worker-2", 0.150, 0.051),
    )
    found = check(
        worker_run("worker-0", 0.150, 0.001),
        worker_run("worker-1", 0.150, 0.002),
        worker_run("worker-2", 0.150, 0.051),
    )
    assert text == (
        f"3 worker records merged: worker-2 is the straggler ({found[0].evidence['score']}x"
        " the others' own work per step, in its input)"
    )
    busy = dict(hostname="node-a", host_cores=2, host_cpu_busy=0.97)
    text = _merge_verdict(
        worker_run("worker-0", 0.150, 0.004, **busy), worker_run("worker-1", 0.150, 0.012, **busy)
    )
    assert "no straggler can be told apart (the hosts' cores were all busy)" in text
    text = _merge_verdict(worker_run("worker-0", 0.15, None), worker_run("worker-1", 0.15, None))
    assert "no straggler can be told apart (own work per step not measurable)" in text
