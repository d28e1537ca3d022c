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
    stages: list[JoinedStage] = []
    j = 0
    i = 0
    first = True
    while i < len(steps):
        step = steps[i]
        following = steps[i + 1] if i + 1 < len(steps) else None
        if j < len(run):
            family = run_family(run[j].name)
            if following is not None and (
                (family == "map_and_batch" and step.api == "map" and following.api == "batch")
                or (
                    family == "shuffle_and_repeat"
                    and step.api == "shuffle"
                    and following.api == "repeat"
                )
            ):
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
