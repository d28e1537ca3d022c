"""launch.retracing: the Python values that change from call to call passed as tensors,
or the function told to generalise the shapes that change.

A Python value is a new trace each time it changes; a tensor of one dtype is one trace.
Which dtype matters: the function may hand the value to an op that takes only one
(``tf.summary.scalar(step=...)`` takes int64, a learning rate mixes with float32
variables), so each dtype that fits the value's Python type is tried and the trial says
which one ran. A ``bool`` is left alone: it usually picks a branch of Python code
(``training=True``), where a tensor would change what is traced.
"""

from __future__ import annotations

import ast
import itertools

from gpuwhy.facts import Facts, TracedFunction
from gpuwhy.finding import Finding
from gpuwhy.fixes.python_arguments import python_kinds
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import (
    Edit,
    calls_at,
    function_at,
    import_tensorflow,
    node_span,
    segment,
    set_keywords,
    wrap_node,
)

# an int: int64 (tf.summary's step), int32, or float32 where the function does float
# math with it (``0.1 / (1 + epoch)`` takes no integer tensor)
DTYPES = {"float": ("float32",), "int": ("int64", "int32", "float32")}
MAX_CHOICES = 4  # of dtypes for several arguments at once (two ints: four)
# what a program prints of its traces ("traces: 256", "train_step traced 3 times",
# ``experimental_get_tracing_count()``): what every fix here changes by design
TRACE_COUNTS = r"\b(?:re)?trac(?:e|es|ed|ing|ings)\b|tracing_count"


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if facts.tracing is None:
        return [], []
    out: list[FixCandidate] = []
    why: list[NotTried] = []
    for fn in facts.tracing.functions:
        if not _named_by(finding, fn):
            continue
        if fn.library or fn.traces < 2:
            continue
        kinds = python_kinds(fn)
        edits_by_arg: dict[str, list[tuple[str, FixCandidate]]] = {}
        for arg, kind in kinds.items():
            if kind not in DTYPES:
                why.append(
                    NotTried(finding.id, f"{fn.name}'s {arg} is a Python {kind}: left alone")
                )
                continue
            for dtype in DTYPES[kind]:
                c = _as_tensor(finding, fn, arg, dtype, files)
                if isinstance(c, NotTried):
                    why.append(c)
                    edits_by_arg.pop(arg, None)
                    break
                edits_by_arg.setdefault(arg, []).append((dtype, c))
        out += _all_at_once(finding, fn, edits_by_arg)
        if set(fn.changed_args) - set(kinds):
            c2 = _reduce_retracing(finding, fn, files)
            if isinstance(c2, NotTried):
                why.append(c2)
            else:
                out.append(c2)
    return out, why


def _all_at_once(
    finding: Finding, fn: TracedFunction, by_arg: dict[str, list[tuple[str, FixCandidate]]]
) -> list[FixCandidate]:
    """One candidate per choice of dtypes, each passing every changing Python scalar as a
    tensor: while one of them stays a Python value that changes, each call still traces
    (two arguments that changed every step, each fixed alone: 0.67x-0.95x; both: 3.4x)."""
    if not by_arg:
        return []
    out = []
    for choice in itertools.islice(itertools.product(*by_arg.values()), MAX_CHOICES):
        if len(choice) == 1:
            out.append(choice[0][1])
            continue
        edits: list[Edit] = []
        for _, candidate in choice:
            edits += [e for e in candidate.edits if e not in edits]
        named = " and ".join(f"{arg} ({dtype})" for arg, (dtype, _) in zip(by_arg, choice))
        out.append(
            FixCandidate(
                finding=finding.id,
                fix=f"{named} passed to {fn.name} as tensors",
                edits=tuple(edits),
                location=choice[0][1].location,
                not_results=TRACE_COUNTS,
            )
        )
    return out


def _named_by(finding: Finding, fn: TracedFunction) -> bool:
    """The finding is about ``fn``: its location is the def's or a caller's, or its title
    names it."""
    places = {fn.location, *(s.caller for s in fn.signatures)}
    return finding.location in places or f"{fn.name}" in finding.title


def _argument(call: ast.Call, arg: str, params: list[str]) -> ast.expr | None:
    kw = next((k for k in call.keywords if k.arg == arg), None)
    if kw is not None:
        return kw.value
    if arg in params:
        index = params.index(arg)
        if index < len(call.args) and not any(
            isinstance(a, ast.Starred) for a in call.args[: index + 1]
        ):
            return call.args[index]
    return None


def _as_tensor(
    finding: Finding, fn: TracedFunction, arg: str, dtype: str, files: SourceFiles
) -> FixCandidate | NotTried:
    where = location_parts(fn.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return NotTried(finding.id, f"{fn.name} is not defined in the program's files")
    definition = function_at(read[2], where[1])
    if definition is None:
        return NotTried(finding.id, f"no def of {fn.name} at {fn.location}")
    params = [a.arg for a in (*definition.args.posonlyargs, *definition.args.args)]
    if params and params[0] == "self":
        params = params[1:]
    callers = sorted({s.caller for s in fn.signatures if s.caller})
    if not callers:
        return NotTried(finding.id, f"the run did not see where {fn.name} is called from")
    edits: list[Edit] = []
    for caller in callers:
        place = location_parts(caller)
        got = files.read(place[0]) if place else None
        if place is None or got is None:
            return NotTried(finding.id, f"{caller} is not a file of the program's")
        source, lines, tree = got
        calls = calls_at(tree, place[1], fn.name)
        node = _argument(calls[0], arg, params) if calls else None
        if node is None:
            return NotTried(finding.id, f"no argument {arg} in the call of {fn.name} at {caller}")
        tf, imports = import_tensorflow(tree, place[0])
        edits += [e for e in imports if e not in edits]
        edits += wrap_node(place[0], lines, node, f"{tf}.constant(", f", {tf}.{dtype})")
        del source
    return FixCandidate(
        finding=finding.id,
        fix=f"{arg} passed to {fn.name} as {'an' if dtype.startswith('int') else 'a'} {dtype} tensor",
        edits=tuple(edits),
        location=callers[0],
        not_results=TRACE_COUNTS,
    )


def _reduce_retracing(
    finding: Finding, fn: TracedFunction, files: SourceFiles
) -> FixCandidate | NotTried:
    """``@tf.function`` -> ``@tf.function(reduce_retracing=True)`` on its def."""
    where = location_parts(fn.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return NotTried(finding.id, f"{fn.name} is not defined in the program's files")
    source, lines, tree = read
    definition = function_at(tree, where[1])
    decorator = None
    if definition is not None:
        decorator = next(
            (d for d in definition.decorator_list if "function" in segment(source, d)), None
        )
    if decorator is None:
        return NotTried(finding.id, f"{fn.name} has no @tf.function decorator to change")
    if isinstance(decorator, ast.Call):
        edits = set_keywords(source, lines, where[0], decorator, reduce_retracing="True")
    else:
        s = node_span(decorator, lines)
        edits = [
            Edit(where[0], s.end_line, s.end_col, s.end_line, s.end_col, "(reduce_retracing=True)")
        ]
    return FixCandidate(
        finding=finding.id,
        fix=f"{fn.name} with reduce_retracing=True (the shapes that change generalised)",
        edits=tuple(edits),
        location=fn.location,
        not_results=TRACE_COUNTS,
    )
