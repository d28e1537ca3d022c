"""input.no-cache's fix for a pipeline a Keras dataset helper built
(``image_dataset_from_directory``, ``timeseries_dataset_from_array`` ...), tried as the
finding prints it.

Such a pipeline can only be cached after the helper's call, and a helper that shuffles
(its elements change between passes, so no cache goes at the pipeline's end) is rebuilt
unbatched, cached, then shuffled and batched after the cache (or, with ``subset="both"``,
each of its two datasets cached after the statement that names them): the finding's fix
says all of that as the call to write in place of the one the program wrote. This kind makes exactly that edit, so the fix that is proven is
the one the user reads, not a second version of it. What it cannot place (the call not
found once at its line, a fix of another shape) is not tried, and says why.
"""

from __future__ import annotations

from gpuwhy.facts import Facts, PipelineFacts
from gpuwhy.finding import Finding
from gpuwhy.fixes.pipeline_code import IN_PLACE_OF, THEN_AFTER
from gpuwhy.fixes.pipeline_evidence import pipeline_name
from gpuwhy.rules.grouping import pipelines_named
from gpuwhy.source_calls import statement_holding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import Edit, calls_at, indent_of, node_span

# The cache is shuffled anew after it, not in the helper's seeded order: each batch holds
# other examples than the original's, so the loss curve matches, not each batch's loss
ORDER_TOLERANCE = 0.1
ORDER_WHY = (
    "each quantity's mean over the run: the cached examples are shuffled in another order "
    "than the helper's, so each batch holds others; the curves match, not each point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    """The finding's own fix as edits, where it names a helper's pipeline."""
    pipelines = facts.tfdata.pipelines if facts.tfdata is not None else ()
    by_name = {pipeline_name(p): p for p in pipelines}
    named = [by_name[n] for n in pipelines_named(finding) if n in by_name]
    # one cause in a helper's two subsets: the training one shuffles, the fix is the call's
    helper_call = next((p.helper_call for p in named if reshuffles(p)), None)
    if helper_call is None or not finding.fix:
        return [], []  # input_pipeline's to try: a cache at the end of the pipeline
    parts = _fix_parts(finding.fix)
    if parts is None:
        return [], [NotTried(finding.id, "its fix is not one call written in place of another")]
    location, replacement, after = parts
    place = location_parts(location)
    read = files.read(place[0]) if place is not None else None
    if place is None or read is None:
        return [], [
            NotTried(finding.id, f"the helper's call at {location} is not in the program's files")
        ]
    _, lines, tree = read
    name = helper_call.split("(", 1)[0].rsplit(".", 1)[-1]
    calls = calls_at(tree, place[1], name)
    if len(calls) != 1:
        return [], [NotTried(finding.id, f"{name} is not called once at {location}")]
    span = node_span(calls[0], lines)
    edits = [Edit(place[0], span.line, span.col, span.end_line, span.end_col, replacement)]
    if after:
        statement = statement_holding(tree, calls[0])
        if statement is None:
            return [], [
                NotTried(finding.id, f"the statement of the call at {location} was not found")
            ]
        end = node_span(statement, lines)
        indent = indent_of(lines[statement.lineno - 1])
        text = "".join(f"\n{indent}{line}" for line in after)
        edits.append(Edit(place[0], end.end_line, end.end_col, end.end_line, end.end_col, text))
    return [
        FixCandidate(
            finding.id,
            f".cache() after {name} at line {span.line} (input.no-cache's fix)",
            tuple(edits),
            location=f"{place[0]}:{span.line}",
            note="the helper's elements kept in memory after the first epoch",
            tolerance=ORDER_TOLERANCE,
            tolerance_why=ORDER_WHY,
            by_mean=True,
        )
    ], []


def reshuffles(pipeline: PipelineFacts) -> bool:
    """A helper's pipeline whose elements change between passes (its own shuffle): no
    cache at its end, the finding's rebuilt call instead. One that does not is cached
    at its end, as any other (input_pipeline)."""
    return pipeline.helper_call is not None and any(s.repeats is False for s in pipeline.stages)


def _fix_parts(fix: str) -> tuple[str, str, list[str]] | None:
    """(the replaced call's location, the call written in its place, the statements that
    go after its statement) read from the fix's text; None for a fix of another shape."""
    lines = fix.splitlines()
    marks = [i for i, line in enumerate(lines) if line.startswith("# ") and IN_PLACE_OF in line]
    if len(marks) != 1:
        return None
    mark = marks[0]
    location = lines[mark][2:].split(IN_PLACE_OF, 1)[0].rstrip(": ")
    rest = lines[mark + 1 :]
    if THEN_AFTER in rest:
        cut = rest.index(THEN_AFTER)
        code, after = rest[:cut], rest[cut + 1 :]
    else:
        code, after = rest, []
    if len(code) != 1 or code[0].startswith("#") or any(a.startswith("#") for a in after):
        return None
    return location, code[0], after
