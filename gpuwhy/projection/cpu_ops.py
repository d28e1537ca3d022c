"""The ops of the projected step that stay on the CPU on any GPU, at the time they took
on this host's CPU.

Which ops: the placement audit's groups of the function on the CPU because TF has no
GPU kernel for them (or none for their dtype) or because the code pins them there
(``tf.device('/CPU:0')``). Their time: a few steps of the function profiled under TF's
profiler (gpuwhy.collect.inprocess.step_profile), per step. Matched two ways:

- by kernel type, where every op of that type in the function stays on the CPU: the
  type's whole time in the step (every node of it counts as measured);
- else by node name: the groups' examples (function-qualified names) against the nodes
  as they ran. TF inlines a nested function's body under its call node's name
  (``PartitionedCall/``, ``while/body/_4/``) where the audit names the body
  (``__inference_inner_14/``, ``while_body_18/``): the bare name under a call prefix
  matches.

On the target's host the same op takes what its CPU core makes of it:
``HOST_FACTOR`` (low, mid, high) spans a server core twice as fast as this one to one
half again as slow (an assumption, not calibrated: docs/projection.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuwhy.facts import OpGroup, PlacementFacts
from gpuwhy.facts.step_profile import StepProfile
from gpuwhy.projection.cost import Band

CPU_REASONS = ("no-gpu-kernel", "no-gpu-kernel-for-dtype", "forced-cpu")
HOST_FACTOR = (0.5, 1.0, 1.5)
# the last part of the name TF gives an inlined call: "StatefulPartitionedCall",
# "PartitionedCall_3", a while loop's or a cond's branch "while/body/_4", "cond/then/_0"
CALL_PART = re.compile(r"^(?:(?:Stateful)?PartitionedCall(?:_\d+)?|_\d+)$")


@dataclass(frozen=True)
class CpuOpsTime:
    """The step's ops that stay on the CPU: how many, how many were measured, and the
    time of those per step (a band for the target's host)."""

    ops: int
    matched: int
    seconds: float  # per step, as measured here
    band: Band  # on the target's host
    by_kernel: tuple[str, ...]  # kernel types costed whole
    measured_by: str


def cpu_groups(placement: PlacementFacts, function: str) -> list[OpGroup]:
    """The groups of ``function`` (an audit label) that stay on the CPU on a GPU."""
    return [
        g
        for g in placement.groups
        if g.device == "CPU" and g.reason in CPU_REASONS and function in g.functions
    ]


def count_in(group: OpGroup, function: str) -> int:
    """The group's ops in ``function`` (the whole group where not counted apart)."""
    if function in group.functions and len(group.function_counts) == len(group.functions):
        return group.function_counts[group.functions.index(function)]
    return group.count


def _bare(example: str) -> str | None:
    """An example's name inside its function body ("__inference_f_3/x/y" -> "x/y");
    None for a node of the audited function itself (no '/' to drop)."""
    head, _, rest = example.partition("/")
    return rest or None


def _found(example: str, nodes: dict[str, float], taken: set[str]) -> list[str]:
    """The profiled nodes that are ``example``: its own name, else its bare name under
    an inlined call's prefix (one per inlining: a body called twice runs twice)."""
    if example in nodes and example not in taken:
        return [example]
    bare = _bare(example)
    if bare is None:
        return []
    found = []
    for node in nodes:
        if node in taken or not node.endswith("/" + bare):
            continue
        prefix = node[: -len(bare) - 1]
        if CALL_PART.match(prefix.rsplit("/", 1)[-1]):
            found.append(node)
    return found


def measured_cpu_ops(
    placement: PlacementFacts, function: str, profile: StepProfile
) -> CpuOpsTime | None:
    """The CPU ops of ``function`` matched in ``profile``; None where it has none."""
    groups = cpu_groups(placement, function)
    if not groups:
        return None
    # kernel types all of whose ops in the function stay on the CPU
    elsewhere = {
        g.op
        for g in placement.groups
        if function in g.functions and not (g.device == "CPU" and g.reason in CPU_REASONS)
    }
    kernels = dict(profile.kernels)
    whole = sorted({g.op for g in groups if g.op not in elsewhere and g.op in kernels})
    seconds = sum(kernels[k] for k in whole)
    matched = sum(count_in(g, function) for g in groups if g.op in whole)
    nodes = {n.node: n.seconds for n in profile.nodes}
    taken: set[str] = set()
    for group in groups:
        if group.op in whole:
            continue
        # the examples may be other functions' nodes too: no more than the group's here
        found_here = 0
        for example in group.examples:
            found = _found(example, nodes, taken)
            if found and found_here < count_in(group, function):
                found_here += 1
                taken.update(found)
                seconds += sum(nodes[n] for n in found)
        matched += found_here
    low, mid, high = HOST_FACTOR
    return CpuOpsTime(
        ops=sum(count_in(g, function) for g in groups),
        matched=matched,
        seconds=seconds,
        band=Band(low * seconds, mid * seconds, high * seconds),
        by_kernel=tuple(whole),
        measured_by=profile.measured_by,
    )
