"""launch.eager-ops: the step function the eager ops come from, traced as one graph.

The function is the one the run read as holding most of the eager ops
(``EagerFacts.step_code``); the fix is the decorator above its ``def``, plain and with
XLA. A step that is a loop body in no function is not rewritten (moving a loop's body
into a function changes which names are local): it is refused with that reason. Whether
the traced step computes what the eager one did (Python side effects, objects made anew
in a loop) is not guessed here: the trial compares the losses.
"""

from __future__ import annotations

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import add_decorator, function_at, import_tensorflow, segment

XLA_TOLERANCE = 0.05
XLA_WHY = (
    "each quantity's mean over the run: XLA fuses and reorders the float math, so its "
    "rounding differs and a long training drifts apart point by point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    code = facts.eager.step_code if facts.eager is not None else None
    if code is None:
        return [], [NotTried(finding.id, "the run did not find the code the eager ops come from")]
    if code.function is None:
        return [], [
            NotTried(
                finding.id,
                f"the ops come from a loop's body at {code.location}, in no function: "
                "gpuwhy only decorates a def (move the body into one, then run fix again)",
            )
        ]
    where = location_parts(code.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return [], [NotTried(finding.id, f"{code.location} is not a file of the program's")]
    source, lines, tree = read
    fn = function_at(tree, where[1])
    if fn is None:
        return [], [NotTried(finding.id, f"no def at {code.location}")]
    written = [segment(source, d) for d in fn.decorator_list]
    if any("function" in d for d in written):
        return [], [NotTried(finding.id, f"{fn.name} is already a tf.function")]
    tf, imports = import_tensorflow(tree, where[0])
    plain = FixCandidate(
        finding=finding.id,
        fix=f"{fn.name} traced: @{tf}.function",
        edits=(*imports, add_decorator(where[0], lines, fn, f"{tf}.function")),
        location=code.location,
    )
    xla = FixCandidate(
        finding=finding.id,
        fix=f"{fn.name} traced and XLA-compiled",
        edits=(*imports, add_decorator(where[0], lines, fn, f"{tf}.function(jit_compile=True)")),
        location=code.location,
        tolerance=XLA_TOLERANCE,
        tolerance_why=XLA_WHY,
        by_mean=True,
    )
    return [plain, xla], []
