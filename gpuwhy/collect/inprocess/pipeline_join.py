"""Joining the two views of a pipeline: TF's run nodes (after its default rewrites:
map_and_batch_fusion, map_parallelization, noop_elimination, inject_prefetch ...) with
the transformations as the user wrote them, so each stage carries its file:line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwhy.tfapi.tfdata.node_names import run_family, written_families

LOOKAHEAD = 3  # run nodes searched ahead for a written transformation's node


@dataclass
class JoinedStage:
    """A run node and the written transformations it runs."""

    run: Any = None  # RunNode of the reference iterator (None: not in the model)
    written: list = field(default_factory=list)
    absorbed: list = field(default_factory=list)  # run nodes folded in (a generator's dummy input)


def match_stages(written: list, run: list) -> list[JoinedStage]:
    """Pair each written transformation with the run node that runs it, source first.

    Fusions are recognised by the fused node's name; a written transformation whose node
    is not among the next few run nodes was removed by TF; run nodes nobody wrote
    (an injected ``Prefetch``) become stages of their own, except those upstream of the
    first match, which belong to the source (a reader's file names, the dummy element
    ``from_generator`` flat-maps)."""
    steps = [w for w in written if w.node and not w.noop]
    if steps and len(run) < len(steps) and not _has_node(steps[0], run):
        return _match_from_output(steps, run)
    stages: list[JoinedStage] = []
    j = 0
    i = 0
    first = True
    while i < len(steps):
        step = steps[i]
        following = steps[i + 1] if i + 1 < len(steps) else None
        if j < len(run) and following is not None and _fused_before(run[j], step, following):
            stages.append(JoinedStage(run=run[j], written=[step, following]))
            i, j, first = i + 2, j + 1, False
            continue
        wanted = written_families(step.api)
        found = None
        for k in range(j, min(len(run), j + LOOKAHEAD + 1) if not first else len(run)):
            if run_family(run[k].name) in wanted:
                found = k
                break
        if found is None:
            if first:  # a source whose node TF dropped once it was exhausted
                stages.append(JoinedStage(written=[step]))
            i += 1  # else no node of its own: eliminated by TF (an identity map ...)
            continue
        skipped = run[j:found]
        stage = JoinedStage(run=run[found], written=[step])
        if first and skipped:
            stage.absorbed = list(skipped)  # the source's own inputs (file names, dummy)
        else:
            stages.extend(JoinedStage(run=n) for n in skipped)  # added by TF
        stages.append(stage)
        i, j, first = i + 1, found + 1, False
    stages.extend(JoinedStage(run=n) for n in run[j:])  # injected prefetch, ...
    return stages


def _has_node(step: Any, run: list) -> bool:
    return any(run_family(n.name) in written_families(step.api) for n in run)


def _fused_before(node: Any, earlier: Any, step: Any) -> bool:
    """``earlier`` and ``step``, written one after the other, run as one fused node."""
    family = run_family(node.name)
    return (family == "map_and_batch" and earlier.api == "map" and step.api == "batch") or (
        family == "shuffle_and_repeat" and earlier.api == "shuffle" and step.api == "repeat"
    )


def _match_from_output(steps: list, run: list) -> list[JoinedStage]:
    """The join read from the output side, where the source and more of the stages after
    it have left TF's model: their input was exhausted (a shuffle whose buffer took the
    whole dataset: ``batch(101).map(split).shuffle(10000).batch(64)`` keeps only the last
    batch and the prefetch once the buffer is full). Read from the source, the last
    batch was the first one written. A written transformation upstream of every node
    still there is a stage with no node (left the model); one with no node between two
    that are there was removed by TF, as in :func:`match_stages`."""
    reversed_stages: list[JoinedStage] = []
    i, j = len(steps) - 1, len(run) - 1
    while i >= 0:
        step = steps[i]
        if j < 0:  # upstream of every node the model still has
            reversed_stages.append(JoinedStage(written=[step]))
            i -= 1
            continue
        if i > 0 and _fused_before(run[j], steps[i - 1], step):
            reversed_stages.append(JoinedStage(run=run[j], written=[steps[i - 1], step]))
            i, j = i - 2, j - 1
            continue
        wanted = written_families(step.api)
        found = next(
            (
                k
                for k in range(j, max(-1, j - LOOKAHEAD - 1), -1)
                if run_family(run[k].name) in wanted
            ),
            None,
        )
        if found is None:
            i -= 1  # no node of its own: eliminated by TF
            continue
        reversed_stages.extend(JoinedStage(run=n) for n in reversed(run[found + 1 : j + 1]))
        reversed_stages.append(JoinedStage(run=run[found], written=[step]))
        i, j = i - 1, found - 1
    if j >= 0 and reversed_stages:  # nodes before the first stage's: the source's inputs
        reversed_stages[-1].absorbed = list(run[: j + 1])
    return list(reversed(reversed_stages))
