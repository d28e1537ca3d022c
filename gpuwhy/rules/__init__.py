"""The rule registry: one explicit list, sorted by id (after ruff's codes.rs).

Adding a rule means adding its module and one line here; ``tests/rules/test_registry.py``
checks the list against the catalogue in ``docs/findings.md``, which
tools/generate_findings_doc.py generates from the rules.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule
from gpuwhy.rules.compression.cpu_codec import CpuCodec
from gpuwhy.rules.distribute.collective_bound import CollectiveBound
from gpuwhy.rules.distribute.cpu_starved_input import CpuStarvedInput
from gpuwhy.rules.distribute.idle_gpus import IdleGpus
from gpuwhy.rules.distribute.input_sharding import InputSharding
from gpuwhy.rules.distribute.replica_batch import ReplicaBatch
from gpuwhy.rules.distribute.straggler import Straggler
from gpuwhy.rules.distribute.unbalanced_ps import UnbalancedPs
from gpuwhy.rules.distribute.undistributed_input import UndistributedInput
from gpuwhy.rules.env.allocator_settings import AllocatorSettings
from gpuwhy.rules.env.gpu_shared import GpuShared
from gpuwhy.rules.env.no_gpu import NoGpu
from gpuwhy.rules.env.ptx_jit import PtxJit
from gpuwhy.rules.gpu.pcie_degraded import PcieDegraded
from gpuwhy.rules.gpu.throttled import GpuThrottled
from gpuwhy.rules.gpu.underutilized import GpuUnderutilized
from gpuwhy.rules.grouping import group_by_cause
from gpuwhy.rules.host.memory_growth import MemoryGrowth
from gpuwhy.rules.input.bound import InputBound
from gpuwhy.rules.input.iterator_end_wait import IteratorEndWait
from gpuwhy.rules.input.no_cache import NoCache
from gpuwhy.rules.input.no_prefetch import NoPrefetch
from gpuwhy.rules.input.projected_bound import ProjectedInputBound
from gpuwhy.rules.input.python_function import PythonFunction
from gpuwhy.rules.input.sequential_map import SequentialMap
from gpuwhy.rules.input.sequential_reads import SequentialReads
from gpuwhy.rules.input.shuffle_memory import ShuffleMemory
from gpuwhy.rules.launch.eager_ops import EagerOps
from gpuwhy.rules.launch.host_bound import HostBound
from gpuwhy.rules.launch.projected_bound import ProjectedLaunchBound
from gpuwhy.rules.launch.retracing import Retracing
from gpuwhy.rules.memory.near_limit import MemoryNearLimit
from gpuwhy.rules.memory.underused import MemoryUnderused
from gpuwhy.rules.placement.float64 import Float64
from gpuwhy.rules.placement.forced_cpu import ForcedCpu
from gpuwhy.rules.placement.host_transfers import HostTransfers
from gpuwhy.rules.placement.measured_cpu_ops import MeasuredCpuOps
from gpuwhy.rules.placement.no_gpu_kernel import NoGpuKernel
from gpuwhy.rules.steps.drift import StepDrift
from gpuwhy.rules.steps.keras_call_per_step import KerasCallPerStep
from gpuwhy.rules.steps.periodic_stall import PeriodicStall
from gpuwhy.rules.tensorcore.misaligned import TensorCoreMisaligned
from gpuwhy.rules.tensorcore.unused import TensorCoreUnused
from gpuwhy.rules.thresholds import marked_near

ALL_RULES: list[type[Rule]] = [
    CpuCodec,  # compression.cpu-codec
    CollectiveBound,  # distribute.collective-bound
    CpuStarvedInput,  # distribute.cpu-starved-input
    IdleGpus,  # distribute.idle-gpus
    InputSharding,  # distribute.input-sharding
    ReplicaBatch,  # distribute.replica-batch
    Straggler,  # distribute.straggler
    UnbalancedPs,  # distribute.unbalanced-ps
    UndistributedInput,  # distribute.undistributed-input
    AllocatorSettings,  # env.allocator-settings
    GpuShared,  # env.gpu-shared
    NoGpu,  # env.no-gpu
    PtxJit,  # env.ptx-jit
    PcieDegraded,  # gpu.pcie-degraded
    GpuThrottled,  # gpu.throttled
    GpuUnderutilized,  # gpu.underutilized
    MemoryGrowth,  # host.memory-growth
    InputBound,  # input.bound
    IteratorEndWait,  # input.iterator-end-wait
    NoCache,  # input.no-cache
    NoPrefetch,  # input.no-prefetch
    ProjectedInputBound,  # input.projected-bound
    PythonFunction,  # input.python-function
    SequentialMap,  # input.sequential-map
    SequentialReads,  # input.sequential-reads
    ShuffleMemory,  # input.shuffle-memory
    EagerOps,  # launch.eager-ops
    HostBound,  # launch.host-bound
    ProjectedLaunchBound,  # launch.projected-bound
    Retracing,  # launch.retracing
    MemoryNearLimit,  # memory.near-limit
    MemoryUnderused,  # memory.underused
    Float64,  # placement.float64
    ForcedCpu,  # placement.forced-cpu
    HostTransfers,  # placement.host-transfers
    MeasuredCpuOps,  # placement.measured-cpu-ops
    NoGpuKernel,  # placement.no-gpu-kernel
    StepDrift,  # steps.drift
    KerasCallPerStep,  # steps.keras-call-per-step
    PeriodicStall,  # steps.periodic-stall
    TensorCoreMisaligned,  # tensorcore.misaligned
    TensorCoreUnused,  # tensorcore.unused
]

RULES_BY_ID: dict[str, type[Rule]] = {r.id: r for r in ALL_RULES}
REDIRECTS: dict[str, str] = {old: r.id for r in ALL_RULES for old in r.redirect_from}


class UnknownRuleError(LookupError):
    """An id that names no rule; ``close`` holds the nearest ids for the message."""

    def __init__(self, rule_id: str, close: list[str]) -> None:
        self.rule_id, self.close = rule_id, close
        hint = f"; did you mean {', '.join(close)}?" if close else "; `gpuwhy rules` lists them"
        super().__init__(f"unknown finding id {rule_id!r}{hint}")


def get_rule(rule_id: str) -> type[Rule]:
    rule_id = REDIRECTS.get(rule_id, rule_id)
    if rule_id in RULES_BY_ID:
        return RULES_BY_ID[rule_id]
    ids = list(RULES_BY_ID)
    close = difflib.get_close_matches(rule_id, ids, n=3, cutoff=0.5)
    close += [i for i in ids if rule_id and rule_id in i and i not in close][:3]
    raise UnknownRuleError(rule_id, close)


def run_rules(facts: Facts) -> tuple[list[Finding], dict[str, str]]:
    """Every runnable rule over ``facts``.

    Returns (findings sorted by severity then expected gain, {rule id: why not checked}).
    A rule is not checked when it is planned or removed, or when a fact section it needs
    was not collected: a report must say what it did not look at. One cause found in
    several pipelines is one finding (rules/grouping.py).
    """
    findings: list[Finding] = []
    not_checked: dict[str, str] = {}
    for rule_cls in ALL_RULES:
        if rule_cls.status in ("planned", "removed"):
            not_checked[rule_cls.id] = rule_cls.status
            continue
        missing = missing_sections(rule_cls, facts)
        if missing:
            not_checked[rule_cls.id] = "needs " + ", ".join(missing)
            continue
        found = rule_cls().check(facts, dict(rule_cls.options))
        findings.extend(marked_near(rule_cls, found, functools.partial(_check, rule_cls, facts)))
    return sorted(group_by_cause(findings), key=Finding.sort_key), not_checked


def _check(rule_cls: type[Rule], facts: Facts, options: dict[str, Any]) -> list[Finding]:
    return rule_cls().check(facts, options)


def missing_sections(rule_cls: type[Rule], facts: Facts) -> list[str]:
    """The fact sections ``rule_cls`` needs that ``facts`` lacks (empty: it can run). A
    need is a section, or a value the derivation stage derives (``projection``)."""
    missing = [s for s in rule_cls.needs if not _present(facts, s)]
    if rule_cls.needs_any and not any(_present(facts, s) for s in rule_cls.needs_any):
        missing.append(" or ".join(rule_cls.needs_any))
    return missing


# needs a rule may name that the derivation stage derives rather than a collector fills
DERIVED_NEEDS = ("projection",)


def _present(facts: Facts, need: str) -> bool:
    if need in DERIVED_NEEDS:
        return getattr(derived(facts), need) is not None
    return facts.has(need)


def run_rule(rule_cls: type[Rule], facts: Facts, options: dict[str, Any]) -> list[Finding]:
    """One rule over ``facts`` with ``options`` (none where it cannot run), its findings
    grouped by cause as :func:`run_rules` groups them: ``gpuwhy diff`` asks one rule
    again at looser thresholds (comparison/near_threshold.py)."""
    if rule_cls.status in ("planned", "removed") or missing_sections(rule_cls, facts):
        return []
    return group_by_cause(rule_cls().check(facts, options))
