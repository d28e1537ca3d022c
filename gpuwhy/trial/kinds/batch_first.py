"""Batch first: a cheap map of a tf.data pipeline, most of whose time is tf.data's own
cost per element, run once per batch instead (TF's guide, "Vectorizing mapping").

Where the slowest stage is such a map (``vectorisable``: many calls, each cheaper than
the rule's threshold) and the program writes its batch right after it, the two swap:
``.map(parse).batch(256)`` becomes ``.batch(256).map(parse)``, in one chain or in two
statements one after the other (``ds = ds.map(parse)`` / ``ds = ds.batch(256)``). The
function then receives a batch: ``tf.io.parse_single_example`` becomes
``tf.io.parse_example`` (the one change TF's own parsers need); other ops either
broadcast over the leading dimension or fail, and a fix that fails or computes other
results is refused by the trial, not kept. A shuffle, filter or anything else between
the map and the batch would change what the batches hold: not tried.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from gpuwhy.derived.pipeline_stages import vectorisable
from gpuwhy.facts import Facts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes.pipeline_evidence import pipeline_name
from gpuwhy.rules.input.sequential_map import SequentialMap
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import (
    Edit,
    calls_at,
    function_named,
    node_span,
    segment,
)

BELOW_S = SequentialMap.options["vectorise_below_us"] * 1e-6
SINGLE, BATCHED = "parse_single_example", "parse_example"


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if facts.tfdata is None:
        return [], []
    out: list[FixCandidate] = []
    why: list[NotTried] = []
    named = finding.evidence.get("pipeline")
    for pipeline in facts.tfdata.pipelines:
        if named is not None and named != pipeline_name(pipeline):
            continue
        index = pipeline.bottleneck
        if index is None or index >= len(pipeline.stages):
            continue
        stage = pipeline.stages[index]
        if stage.by_library or not vectorisable(pipeline, index, BELOW_S):
            continue
        found = _swap(stage, files)
        if isinstance(found, str):
            why.append(NotTried(finding.id, f"batch before map({stage.function}): {found}"))
            continue
        edits, line = found
        out.append(
            FixCandidate(
                finding.id,
                f"batch before map({stage.function}) at line {line}, run once per batch",
                tuple(edits),
                location=f"{edits[0].path}:{line}",
                note=f"{stage.function} then receives a whole batch: its ops must work on "
                "a leading batch dimension (tf.io.parse_example for parse_single_example)",
            )
        )
    return out, why


def _swap(stage: PipelineStage, files: SourceFiles) -> tuple[list[Edit], int] | str:
    """The edits that batch before the stage's map, and the map's line; or why not."""
    place = location_parts(stage.location)
    read = files.read(place[0]) if place else None
    if place is None or read is None:
        return "its code is not in the program's files"
    path, line = place
    source, lines, tree = read
    maps = calls_at(tree, line, "map")
    if len(maps) != 1:
        return f"no single .map(...) call at line {line}"
    (map_call,) = maps
    assert isinstance(map_call.func, ast.Attribute)
    swapped = _in_one_chain(path, lines, tree, map_call)
    if swapped is None:
        swapped = _in_two_statements(path, lines, tree, map_call)
    if swapped is None:
        return "the program does not batch right after it (a shuffle or another stage between)"
    edits = list(swapped)
    # a lambda written in the map's call is changed with it; a named function, at its def
    if SINGLE not in segment(source, map_call):
        edits += _batched_parsers(files, stage, lines, tree, path)
    return edits, line


def _in_one_chain(
    path: str, lines: list[str], tree: ast.Module, map_call: ast.Call
) -> list[Edit] | None:
    """``X.map(f).batch(n)`` -> ``X.batch(n).map(f)``: one edit over both calls."""
    batch = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "batch"
            and node.func.value is map_call
        ),
        None,
    )
    if batch is None:
        return None
    (start, _), map_part = _method_part(lines, map_call)
    (_, end), batch_part = _method_part(lines, batch)
    return [Edit(path, *start, *end, batch_part + _batched(map_part))]


def _in_two_statements(
    path: str, lines: list[str], tree: ast.Module, map_call: ast.Call
) -> list[Edit] | None:
    """``ds = X.map(f)`` followed by ``ds = ds.batch(n)``: the map's statement batches
    and the next one maps."""
    for body in _bodies(tree):
        for first, second in zip(body, body[1:], strict=False):
            if not (isinstance(first, ast.Assign) and isinstance(second, ast.Assign)):
                continue
            if first.value is not map_call:
                continue
            name = _target(first)
            batch = second.value
            if not (
                isinstance(batch, ast.Call)
                and isinstance(batch.func, ast.Attribute)
                and batch.func.attr == "batch"
                and isinstance(batch.func.value, ast.Name)
                and batch.func.value.id == name
                and _target(second) == name
            ):
                return None
            (map_start, map_end), map_part = _method_part(lines, map_call)
            (batch_start, batch_end), batch_part = _method_part(lines, batch)
            return [
                Edit(path, *map_start, *map_end, batch_part),
                Edit(path, *batch_start, *batch_end, _batched(map_part)),
            ]
    return None


def _bodies(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                yield body


def _target(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    return None


def _method_part(
    lines: list[str], call: ast.Call
) -> tuple[tuple[tuple[int, int], tuple[int, int]], str]:
    """The span and the text of ``call`` after its receiver: ``.map(parse, ...)`` of
    ``ds.map(parse, ...)``, from the receiver's end to the call's."""
    assert isinstance(call.func, ast.Attribute)
    receiver, whole = node_span(call.func.value, lines), node_span(call, lines)
    start, end = (receiver.end_line, receiver.end_col), (whole.end_line, whole.end_col)
    if start[0] == end[0]:
        return (start, end), lines[start[0] - 1][start[1] : end[1]]
    text = (
        lines[start[0] - 1][start[1] :]
        + "".join(lines[start[0] : end[0] - 1])
        + lines[end[0] - 1][: end[1]]
    )
    return (start, end), text


def _batched(text: str) -> str:
    return text.replace(f".{SINGLE}(", f".{BATCHED}(")


def _batched_parsers(
    files: SourceFiles,
    stage: PipelineStage,
    lines: list[str],
    tree: ast.Module,
    path: str,
) -> list[Edit]:
    """``parse_single_example`` -> ``parse_example`` in the map's function, at its def
    (in the file that defines it)."""
    defined = location_parts(stage.function_location)
    if defined is not None and defined[0] != path:
        read = files.read(defined[0])
        if read is None:
            return []
        path, (_, lines, tree) = defined[0], read
    fn = function_named(tree, stage.function or "")
    if fn is None:
        return []
    edits = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Attribute) and node.attr == SINGLE:
            end = node_span(node, lines)
            edits.append(
                Edit(
                    path,
                    end.end_line,
                    end.end_col - len(SINGLE),
                    end.end_line,
                    end.end_col,
                    BATCHED,
                )
            )
    return edits
