"""placement.float64: the program's float64 made float32 where the program chose it.

Two places are tried, each on its own: Keras' global float type
(``keras.config.set_floatx("float64")`` / ``tf.keras.backend.set_floatx``), which makes
every layer's variables and math double; and every float64 dtype the program names
(``tf.float64``, ``np.float64``, ``"float64"``, ``dtype=float``) with, where a tf.data
pipeline starts from ``from_tensor_slices`` (NumPy arrays are float64 by default), a
cast of its float64 tensors right after it: float32 variables then meet float32 inputs.
Keras casts a model's inputs to its layers' dtype by itself. Results change in the last digits (float32 rounds sooner): the trial
compares them within its stated tolerance.
"""

from __future__ import annotations

import ast
import os

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.fixes.program_files import located_files
from gpuwhy.source_calls import numpy_float64_makers
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import (
    Edit,
    calls_at,
    calls_named,
    import_tensorflow,
    joined_insertions,
    node_span,
    segment,
    wrap_node,
)

PRECISION_TOLERANCE = 0.1
PRECISION_WHY = (
    "each quantity's mean over the run: float32 draws other initial weights than float64 "
    "from the same seed and rounds sooner, so the curves match, not each point"
)
ARRAYS_WHY = (
    "each quantity's mean over the run: the program's arrays are rounded to float32 "
    "where they are made, so the curves match, not each point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    floatx: list[Edit] = []
    dtypes: list[Edit] = []
    named = 0  # float64 dtypes the program names (a draw's is one, wrapped in two edits)
    arrays: list[Edit] = []
    for path, source, lines, tree in program_sources(facts, files):
        arrays += _numpy_floats(path, lines, tree)
        for call in calls_named(tree, "set_floatx"):
            if call.args and _is_float64(call.args[0], source):
                floatx.append(_to_float32(path, lines, call.args[0], source))
        calls = {id(a) for c in calls_named(tree, "set_floatx") for a in c.args}
        draws = _random_draws(tree, source)
        for node in ast.walk(tree):
            if id(node) in calls:
                continue
            if id(node) in draws:
                tf, imports = import_tensorflow(tree, path)
                dtypes += [e for e in imports if e not in dtypes]
                dtypes += wrap_node(path, lines, draws[id(node)], f"{tf}.cast(", f", {tf}.float32)")
                named += 1
            elif _is_float64(node, source) and not isinstance(node, ast.Name):
                dtypes.append(_to_float32(path, lines, node, source))
                named += 1
            elif (
                isinstance(node, ast.keyword) and node.arg == "dtype" and _python_float(node.value)
            ):
                dtypes.append(_to_float32(path, lines, node.value, source))
                named += 1
    inputs = _cast_inputs(facts, files)
    out = []
    if floatx:
        out.append(
            FixCandidate(
                finding.id,
                "Keras' float type float32 (set_floatx)",
                tuple(floatx),
                location=f"{floatx[0].path}:{floatx[0].line}",
                tolerance=PRECISION_TOLERANCE,
                tolerance_why=PRECISION_WHY,
                by_mean=True,
            )
        )
    if dtypes or inputs:
        # the float64 the program names meets the NumPy arrays it makes: both float32,
        # or float32 layers meet float64 inputs (a Sub of float32 and float64 fails)
        what = []
        if dtypes:
            what.append(f"float32 for the {named} float64 dtype(s) the program names")
        if inputs:
            what.append("its tf.data inputs cast to float32 where they are made")
        if arrays:
            what.append(f"the {len(arrays)} NumPy float array(s) it makes")
        edits = joined_insertions([*dtypes, *inputs, *arrays])
        out.append(
            FixCandidate(
                finding.id,
                ", and ".join(what),
                tuple(edits),
                location=f"{edits[0].path}:{edits[0].line}",
                tolerance=PRECISION_TOLERANCE,
                tolerance_why=PRECISION_WHY,
                by_mean=True,
            )
        )
    if not out:
        if arrays:
            out.append(
                FixCandidate(
                    finding.id,
                    f"float32 for the {len(arrays)} NumPy float array(s) the program makes",
                    tuple(arrays),
                    location=f"{arrays[0].path}:{arrays[0].line}",
                    tolerance=PRECISION_TOLERANCE,
                    tolerance_why=ARRAYS_WHY,
                    by_mean=True,
                )
            )
    if not out:
        return [], [
            NotTried(
                finding.id,
                "the program names no float64 and makes no NumPy float array gpuwhy can "
                "cast (its float64 comes from data read as it is: cast it with "
                ".astype('float32') where it is made)",
            )
        ]
    return out, []


# NumPy's calls that make float64 arrays unless told a dtype (a Generator's and the
# legacy np.random's draws, and the float constructors); integer makers (arange,
# integers, randint, choice) are left alone: their arrays are labels and indices, and so
# is np.full, whose dtype is its fill value's
def _numpy_floats(path: str, lines: list[str], tree: ast.Module) -> list[Edit]:
    """``.astype('float32')`` after each call of ``path`` that makes a float64 NumPy
    array with no dtype of its own (:func:`gpuwhy.source_calls.numpy_float64_makers`)."""
    edits: list[Edit] = []
    for node in numpy_float64_makers(tree):
        edits += wrap_node(path, lines, node, "", ".astype('float32')")
    return [e for e in edits if e.text]


SOURCES = ("from_tensor_slices", "from_tensors")


def _cast_inputs(facts: Facts, files: SourceFiles) -> list[Edit]:
    """A map right after each ``from_tensor_slices(...)`` of the program's pipelines that
    casts its float64 tensors to float32 (NumPy makes float64 by default: the step's
    float32 variables would meet float64 inputs), and the TF import it needs."""
    edits: list[Edit] = []
    for pipeline in facts.tfdata.pipelines if facts.tfdata is not None else ():
        source = pipeline.stages[0] if pipeline.stages else None
        if source is None or source.by_library or not set(source.written_as) & set(SOURCES):
            continue
        place = location_parts(source.location)
        read = files.read(place[0]) if place else None
        if place is None or read is None:
            continue
        text, lines, tree = read
        calls = [c for name in SOURCES for c in calls_at(tree, place[1], name)]
        if not calls:
            continue
        tf, imports = import_tensorflow(tree, place[0])
        end = node_span(calls[0], lines)
        cast = (
            f".map(lambda *e: {tf}.nest.map_structure(lambda t: {tf}.cast(t, {tf}.float32) "
            f"if t.dtype == {tf}.float64 else t, e if len(e) > 1 else e[0]))"
        )
        edits += [e for e in imports if e not in edits]
        edits.append(Edit(place[0], end.end_line, end.end_col, end.end_line, end.end_col, cast))
    return edits


RANDOM_DRAWS = frozenset(
    {"normal", "uniform", "truncated_normal", "gamma", "poisson", "stateless_normal",
     "stateless_uniform", "stateless_truncated_normal", "glorot_uniform", "random"}
)  # fmt: skip


def _random_draws(tree: ast.Module, source: str) -> dict[int, ast.Call]:
    """A float64 dtype given to a random draw (``tf.random.normal(..., dtype=tf.float64)``),
    by the id of that dtype's node, with its call. Such a draw is kept in float64 and cast
    to float32 after it: drawn in float32 it would give other numbers from the same seed,
    and the trial would compare two trainings from different initial weights."""
    out: dict[int, ast.Call] = {}
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        name = call.func.attr if isinstance(call.func, ast.Attribute) else None
        if name not in RANDOM_DRAWS:
            continue
        for kw in call.keywords:
            if kw.arg == "dtype" and _is_float64(kw.value, source):
                out[id(kw.value)] = call
    return out


def program_files(facts: Facts, files: SourceFiles) -> list[str]:
    """The script and the program's own modules it ran (the files its locations name)."""
    paths: list[str] = []
    for path in [files.script, *_located_files(facts)]:
        if path and path not in paths and files.read(path) is not None:
            paths.append(path)
    return paths


def program_sources(
    facts: Facts, files: SourceFiles
) -> list[tuple[str, str, list[str], ast.Module]]:
    """(path, source, lines, tree) of each of :func:`program_files`."""
    out = []
    for path in program_files(facts, files):
        read = files.read(path)
        if read is not None:
            out.append((path, *read))
    return out


def _located_files(facts: Facts) -> list[str]:
    return [os.path.abspath(path) for path in located_files(facts)]


def _is_float64(node: ast.AST, source: str) -> bool:
    if isinstance(node, ast.Constant) and node.value == "float64":
        return True
    if isinstance(node, ast.Attribute) and node.attr == "float64":
        return True
    return (
        isinstance(node, ast.Name) and node.id == "float64" and "float64" in segment(source, node)
    )


def _python_float(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "float"


def _to_float32(path: str, lines: list[str], node: ast.AST, source: str) -> Edit:
    s = node_span(node, lines)
    text = segment(source, node)
    if isinstance(node, ast.Name) and node.id == "float":
        new = '"float32"'
    else:
        new = text.replace("float64", "float32")
    return Edit(path, s.line, s.col, s.end_line, s.end_col, new)
