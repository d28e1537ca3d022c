"""steps.periodic-stall, where a loop over another dataset stalled the training (a
validation pass between epochs whose body runs op by op in Python): that loop's body
traced as one function, as launch.eager-ops' fix traces a training loop's body
(step_graph.py). Not XLA: a validation body updates Keras metrics, whose ops XLA may
reject, and the gain sought is Python's dispatch, which a plain trace removes.

A stall of another kind (a checkpoint, a full GC, a summary flush, fit's validation) has
no automatic fix: its own fix is printed with the finding."""

from __future__ import annotations

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.steps.periodic_stall import stall_loop, traced_loop
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.kinds.step_graph import traced


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    cause = stall_loop(finding, facts)
    if cause is None:
        return [], [
            NotTried(finding.id, "stalls of this kind have no automatic fix: see the fix above")
        ]
    if traced_loop(cause, facts):
        return [], [
            NotTried(
                finding.id,
                f"the loop at {cause.location} calls a tf.function already: what is left is "
                "to run it less often, which changes what the program computes",
            )
        ]
    if cause.step_code is None:
        return [], [
            NotTried(
                finding.id,
                f"the loop at {cause.location} reads tensors' values into Python or draws "
                "(or its source could not be read): a graph cannot run it",
            )
        ]
    return traced(finding, cause.step_code, files, xla=False)
