"""The input pipeline's fixes that cannot change its elements, written into the code
where the user built it: ``num_parallel_calls=AUTOTUNE`` on the maps that run one
element at a time (stateless, no Python function: the order stays, ``deterministic`` is
left as written; the maps that run Python are a candidate of their own); ``.cache()`` at the end of a pipeline read more than once whose
elements are the same on every pass and fit in memory (the work of the later passes
saved); and a final ``.prefetch(AUTOTUNE)`` where the pipeline has none.

The same changes ``gpuwhy fix --input`` measures on the pipeline alone; here the whole
program runs with them, so what they give the training is measured, not the pipeline's
throughput. Pipelines a library built (fit's data adapters) are left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from gpuwhy.derived.pipeline_stages import element_size, runs_sequentially
from gpuwhy.facts import Facts, PipelineFacts, PipelineStage
from gpuwhy.finding import Finding
from gpuwhy.fixes import pipeline_code
from gpuwhy.fixes.pipeline_evidence import pipeline_name
from gpuwhy.formatting import byte_size, consumer_words, stage_label
from gpuwhy.rules.grouping import pipelines_named
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.kinds.helper_cache import reshuffles
from gpuwhy.trial.source_edits import (
    Edit,
    calls_at,
    import_tensorflow,
    joined_insertions,
    node_span,
    set_keywords,
    walk_at,
)

CACHE_SHARE = 0.25  # of the host's free memory a cache may take
DATASET_METHODS = frozenset(
    {
        "map",
        "batch",
        "padded_batch",
        "shuffle",
        "repeat",
        "cache",
        "filter",
        "prefetch",
        "interleave",
        "flat_map",
        "take",
        "skip",
        "unbatch",
        "rebatch",
        "from_tensor_slices",
        "from_tensors",
        "from_generator",
        "TFRecordDataset",
        "TextLineDataset",
        "list_files",
        "zip",
        "range",
        "with_options",
        "apply",
        "ignore_errors",
    }
)


# findings whose fix caches after a stage they name, and the evidence key naming it:
# compression.cpu-codec's printed `.cache()` after a decoding map (a review's image
# pipeline: "gpuwhy fix has no automatic fix for it", where that cache, pasted, gave
# the same logs and `gpuwhy fix --input` measured the pipeline 4.3x faster)
CACHES_AFTER = {"input.no-cache": "cache_after", "compression.cpu-codec": "stage"}


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if facts.tfdata is None or not facts.tfdata.pipelines:
        return [], [NotTried(finding.id, "no tf.data pipeline of the program's was read")]
    out: list[FixCandidate] = []
    why: list[NotTried] = []
    names = pipelines_named(finding)
    for pipeline in _pipelines_of(finding, facts.tfdata.pipelines):
        if pipeline.consumer not in ("python-loop", "keras-fit"):
            if pipeline_name(pipeline) in names:
                why.append(
                    NotTried(
                        finding.id,
                        f"the pipeline at {pipeline.location} is read by "
                        f"{consumer_words(pipeline.consumer, False, pipeline.read_at, pipeline.read_via)}"
                        ", beside the training steps: "
                        "gpuwhy fix measures the steps, which it does not feed",
                    )
                )
            continue
        if pipeline.helper_call is None and all(s.by_library for s in pipeline.stages):
            continue  # a library's own (fit slicing arrays): no call of the program's
        if finding.id == "input.no-cache" and reshuffles(pipeline):
            continue  # its cache is the finding's rebuilt call, tried as printed (helper_cache)
        edits, what = _pipeline_edits(pipeline, files, facts.tfdata.host_memory_available_bytes)
        if finding.id in CACHES_AFTER and not any(".cache()" in e.text for e in edits):
            cache = _cache_where_found(finding, pipeline, files)
            if cache is not None:
                edits = joined_insertions([*edits, cache[0]])
                what.append(cache[1])
        if edits:
            out.append(
                FixCandidate(
                    finding.id,
                    " and ".join(what),
                    tuple(edits),
                    location=_changed_at(edits) or pipeline.location,
                )
            )
        python = _python_maps(pipeline, files)
        if python:
            out.append(
                FixCandidate(
                    finding.id,
                    "the maps that run Python functions in parallel",
                    tuple(dict.fromkeys((*edits, *python))),
                    location=_changed_at(python) or pipeline.location,
                    note="a Python function holds the GIL: threads help where it releases it "
                    "(NumPy, I/O); and it must keep no state between calls",
                )
            )
        slices = _generators_sliced(pipeline, files)
        if slices:
            out.append(
                FixCandidate(
                    finding.id,
                    "the generator's arrays sliced by from_tensor_slices",
                    tuple(slices),
                    location=_changed_at(slices) or pipeline.location,
                    note="the same elements, without Python per element",
                )
            )
        if not edits and not python and not slices:
            why.append(
                NotTried(
                    finding.id,
                    f"the pipeline at {pipeline.location}, read by "
                    f"{consumer_words(pipeline.consumer, False, pipeline.read_at, pipeline.read_via)}: "
                    + _left_as_written(pipeline, facts.tfdata.host_memory_available_bytes),
                )
            )
    return out, why


def _pipelines_of(finding: Finding, pipelines: Sequence[PipelineFacts]) -> list[PipelineFacts]:
    """The pipeline the finding names (its evidence's ``pipeline``), where it names one
    the run read; else every pipeline, the one that delivered the most elements first (a
    preview's take(1) of the training dataset shares its stages, and the training's is
    the one to name)."""
    names = pipelines_named(finding)
    named = [p for p in pipelines if pipeline_name(p) in names]
    return named or sorted(pipelines, key=lambda p: -(p.elements or 0))


def _cache_where_found(
    finding: Finding, pipeline: PipelineFacts, files: SourceFiles
) -> tuple[Edit, str] | None:
    """``.cache()`` after the stage the finding names (``CACHES_AFTER``): input.no-cache's
    ``cache_after`` (the last stage whose output is the same every pass, before the
    shuffle that is not), where the whole pipeline cannot be cached; compression.cpu-codec's
    decoding map where its printed fix is that cache (``pipeline_code.caches_decode``).
    That stage's call as written, at its line."""
    if pipeline_name(pipeline) not in pipelines_named(finding):
        return None
    label = finding.evidence.get(CACHES_AFTER[finding.id])
    after = next((s for s in pipeline.stages if stage_label(s) == label), None)
    if (
        after is not None
        and finding.id == "compression.cpu-codec"
        and not pipeline_code.caches_decode(after, pipeline)
    ):
        return None  # its fix is the decode's own (a reader's, a vectorised decode)
    place = location_parts(after.location) if after is not None else None
    if after is None or after.by_library or not after.written_as or place is None:
        return None
    read = files.read(place[0])
    if read is None:
        return None
    _, lines, tree = read
    calls = calls_at(tree, place[1], after.written_as[0])
    if len(calls) != 1:
        return None
    end = node_span(calls[0], lines)
    edit = Edit(place[0], end.end_line, end.end_col, end.end_line, end.end_col, ".cache()")
    return (
        edit,
        f"cache after {after.written_as[0]} at line {end.end_line} (before the stages that change every pass)",
    )


def _changed_at(edits: list[Edit]) -> str | None:
    """file:line of the first edit that changes the pipeline (an import added is not)."""
    changes = [e for e in edits if not e.text.startswith("import ")]
    return f"{changes[0].path}:{changes[0].line}" if changes else None


def _python_maps(pipeline: PipelineFacts, files: SourceFiles) -> list[Edit]:
    """``num_parallel_calls`` on the sequential maps that run a Python function."""
    edits: list[Edit] = []
    for stage in pipeline.stages:
        if stage.python and runs_sequentially(stage, pipeline.autotune):
            edits += [e for e in _parallel(stage, files) if e not in edits]
    return edits


def _generators_sliced(pipeline: PipelineFacts, files: SourceFiles) -> list[Edit]:
    """Each ``from_generator`` call whose generator only yields slices of the program's
    arrays, replaced by the ``from_tensor_slices`` call that yields the same elements
    (``PipelineStage.as_slices``, read from the generator's source by the collector)."""
    edits: list[Edit] = []
    for stage in pipeline.stages:
        place = location_parts(stage.location)
        if not stage.as_slices or stage.by_library or place is None:
            continue
        read = files.read(place[0])
        if read is None:
            continue
        _, lines, tree = read
        calls = calls_at(tree, place[1], "from_generator")
        if len(calls) != 1:
            continue
        s = node_span(calls[0], lines)
        edits.append(Edit(place[0], s.line, s.col, s.end_line, s.end_col, stage.as_slices))
    return edits


def _parallel(stage: PipelineStage, files: SourceFiles) -> list[Edit]:
    """``num_parallel_calls=AUTOTUNE`` on the ``.map(...)`` the stage was written as (and
    the TensorFlow import its file needs for it); nothing where it cannot be found."""
    place = location_parts(stage.location)
    read = files.read(place[0]) if place else None
    if place is None or read is None:
        return []
    source, lines, tree = read
    calls = calls_at(tree, place[1], "map")
    if not calls:
        return []
    tf, imports = import_tensorflow(tree, place[0])
    keyword = set_keywords(
        source, lines, place[0], calls[0], num_parallel_calls=f"{tf}.data.AUTOTUNE"
    )
    return [*imports, *keyword]


def _cacheable(pipeline: PipelineFacts, memory: int | None) -> bool:
    """Every stage written gives the same elements each pass (no random op, no shuffle,
    no stateful or Python function: ``repeats``), the pipeline is finite, read more than
    once, and its output (derived/pipeline_stages.element_size) fits in a quarter of the
    memory the host has free."""
    if pipeline.cache_written or pipeline.iterators < 2 or pipeline.cardinality is None:
        return False
    # the stages TF added (a prefetch it injected) are not judged: they change no element
    written = [s for s in pipeline.stages if s.written_as]
    if not written or not all(s.repeats is True for s in written):
        return False
    size, _ = element_size(pipeline)
    if size is None or memory is None:
        return False
    return pipeline.cardinality * size <= CACHE_SHARE * memory


def _order_dependent(stage: PipelineStage) -> bool:
    """Parallel calls of the stage's function could change what an element gets (a
    random draw, a write of state); a lookup table's read (TextVectorization's) cannot,
    though it keeps TF from parallelising the map itself. A record from before the
    collector told them apart: every stateful op counts."""
    return stage.stateful if stage.order_dependent is None else stage.order_dependent


def _left_as_written(pipeline: PipelineFacts, memory: int | None) -> str:
    """Why nothing of the pipeline was changed: its maps, its prefetch, its cache."""
    maps = []
    for stage in pipeline.stages:
        if not runs_sequentially(stage, pipeline.autotune) or "map" not in stage.written_as:
            continue
        if stage.by_library:
            maps.append(f"{stage_label(stage)} is the library's")
        elif stage.python:
            maps.append(
                f"{stage_label(stage)} calls Python, one element at a time: in parallel it "
                "gains only where the Python releases the GIL (input.python-function's fix)"
            )
        elif _order_dependent(stage):
            maps.append(
                f"{stage_label(stage)} runs one element at a time for its stateful ops (random "
                "draws): in parallel they would go to other elements (its finding's fix: "
                "stateless random ops, a seed per element)"
                if stage.random
                else f"{stage_label(stage)} runs one element at a time for its stateful ops "
                "(state it writes): in parallel another element could read it first"
            )
    if not maps:
        maps.append("no map of it runs one element at a time")
    prefetch = (
        "it prefetches"
        if pipeline.prefetch_written or pipeline.prefetch_run
        else "the call that ends it could not be found to add a prefetch"
    )
    return f"{'; '.join(maps)}; {prefetch}; and {_not_cached_why(pipeline, memory)}"


def _not_cached_why(pipeline: PipelineFacts, memory: int | None) -> str:
    """Why the pipeline is not cached at its end, in its own terms."""
    if _cacheable(pipeline, memory):
        return "the call that ends it could not be found in the program's source to cache it"
    if pipeline.cache_written:
        return "it is cached already"
    repeat = next((s for s in pipeline.stages if s.kind == "repeat"), None)
    if repeat is not None:
        # ds.repeat().take(n): one iterator reads every pass; a cache at the end would
        # follow the repeat and keep the whole run
        return (
            f"a cache at its end would follow {stage_label(repeat)}: input.no-cache's fix, "
            "where found, places one before it"
        )
    if pipeline.iterators < 2:
        return "it is read once: a cache would not be read again"
    python = [s for s in pipeline.stages if s.python]
    if python:
        names = ", ".join(stage_label(s) for s in python)
        return (
            f"{names} {'runs' if len(python) == 1 else 'run'} Python, which may give other "
            "elements each pass: cached only "
            "where you say it keeps no state (gpuwhy fix --input --assume-pure measures it)"
        )
    changing = [s for s in pipeline.stages if s.repeats is False]
    if changing:
        names = ", ".join(stage_label(s) for s in changing)
        return f"its elements change between passes ({names})"
    unknown = [s for s in pipeline.stages if s.repeats is None and s.written_as]
    if unknown:
        names = ", ".join(stage_label(s) for s in unknown)
        return f"whether {names} give the same elements each pass was not read"
    if pipeline.cardinality is None:
        return (
            "TF does not know its length (a file reader's, a repeat()'s, a generator's): "
            "no cache at its end here (input.no-cache's fix, where found, places one from "
            "the passes it read)"
        )
    size, _ = element_size(pipeline)
    if size is None or memory is None:
        return "the size of its elements or the host's free memory was not measured"
    return (
        f"its output (~{byte_size(int(pipeline.cardinality * size))}) would take "
        f"more than a quarter of the host's free memory ({byte_size(memory)})"
    )


def _pipeline_edits(
    pipeline: PipelineFacts, files: SourceFiles, memory: int | None = None
) -> tuple[list[Edit], list[str]]:
    edits: list[Edit] = []
    what: list[str] = []
    for stage in pipeline.stages:
        if not runs_sequentially(stage, pipeline.autotune) or stage.by_library:
            continue
        if stage.python or _order_dependent(stage) or "map" not in stage.written_as:
            continue
        parallel = _parallel(stage, files)
        if parallel:
            edits += [e for e in parallel if e not in edits]
            line = (location_parts(stage.location) or ("", 0))[1]
            what.append(f"map({stage.function or ''}) at line {line} in parallel")
    if _cacheable(pipeline, memory):
        end = _final_call(pipeline, files)
        if end is not None:
            path, node, _ = end
            read = files.read(path)
            assert read is not None
            # before a final .prefetch(...): the prefetch stays last
            inner = (
                node.func.value
                if isinstance(node.func, ast.Attribute) and node.func.attr == "prefetch"
                else node
            )
            s = node_span(inner, read[1])
            edits.append(Edit(path, s.end_line, s.end_col, s.end_line, s.end_col, ".cache()"))
            lines = (
                f"line {s.end_line}"
                if inner.lineno == s.end_line
                else f"the dataset built at lines {inner.lineno}–{s.end_line}"
            )
            what.append(f"cache {lines} (its elements repeat every pass)")
    if not pipeline.prefetch_written and not pipeline.prefetch_run:
        end = _final_call(pipeline, files)
        if end is not None:
            path, node, tree = end
            read = files.read(path)
            assert read is not None
            tf, imports = import_tensorflow(tree, path)
            edits += [e for e in imports if e not in edits]
            s = node_span(node, read[1])
            edits.append(
                Edit(
                    path,
                    s.end_line,
                    s.end_col,
                    s.end_line,
                    s.end_col,
                    f".prefetch({tf}.data.AUTOTUNE)",
                )
            )
            what.append(f"prefetch at line {s.end_line}")
    return joined_insertions(edits), what  # .cache() then .prefetch(): one place


def _final_call(
    pipeline: PipelineFacts, files: SourceFiles
) -> tuple[str, ast.Call, ast.Module] | None:
    """The outermost dataset call at the line that built the final dataset."""
    written = [s for s in pipeline.stages if s.location and not s.by_library]
    place = location_parts(
        pipeline.helper_location or pipeline.location or (written[-1].location if written else None)
    )
    read = files.read(place[0]) if place else None
    if place is None or read is None:
        return None
    tree = read[2]
    chains = [
        n
        for n in walk_at(tree, place[1])
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in DATASET_METHODS
    ]
    if not chains:
        chains = _helper_calls(pipeline, tree, place[1])
    if not chains:
        return None
    outer = max(chains, key=lambda n: ((n.end_lineno or 0) - n.lineno, n.end_col_offset or 0))
    return place[0], outer, tree


def _helper_calls(pipeline: PipelineFacts, tree: ast.Module, line: int) -> list[ast.Call]:
    """The program's call into a library that built the pipeline (``helper_call``:
    ``keras.utils.timeseries_dataset_from_array(...)``), as written at ``line`` (however
    it is laid out): the dataset it returns ends the pipeline the program reads."""
    if pipeline.helper_call is None:
        return []
    try:
        wanted = ast.dump(ast.parse(pipeline.helper_call, mode="eval").body)
    except SyntaxError:
        return []
    return [n for n in walk_at(tree, line) if isinstance(n, ast.Call) and ast.dump(n) == wanted]
