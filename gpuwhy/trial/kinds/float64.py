"""placement.float64: the program's float64 made float32 where the program chose it.

Two places are tried, each on its own: Keras' global float type
(``keras.config.set_floatx("float64")`` / ``tf.keras.backend.set_floatx``), which makes
every layer's variables and math double; and every float64 dtype the program names
(``tf.float64``, ``np.float64``, ``"float64"``, ``dtype=float``). NumPy arrays made
float64 by default need no edit where the model is float32: Keras casts its inputs to
the layers' dtype. Results change in the last digits (float32 rounds sooner): the trial
compares them within its stated tolerance.
"""

from __future__ import annotations

import ast
import os

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.source_edits import Edit, calls_named, node_span, segment

PRECISION_TOLERANCE = 0.1
PRECISION_WHY = (
    "each quantity's mean over the run: float32 draws other initial weights than float64 "
    "from the same seed and rounds sooner, so the curves match, not each point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    floatx: list[Edit] = []
    dtypes: list[Edit] = []
    for path in program_files(facts, files):
        read = files.read(path)
        if read is None:
            continue
        source, lines, tree = read
        for call in calls_named(tree, "set_floatx"):
            if call.args and _is_float64(call.args[0], source):
                floatx.append(_to_float32(path, lines, call.args[0], source))
        calls = {id(a) for c in calls_named(tree, "set_floatx") for a in c.args}
        for node in ast.walk(tree):
            if id(node) in calls:
                continue
            if _is_float64(node, source) and not isinstance(node, ast.Name):
                dtypes.append(_to_float32(path, lines, node, source))
            elif (
                isinstance(node, ast.keyword) and node.arg == "dtype" and _python_float(node.value)
            ):
                dtypes.append(_to_float32(path, lines, node.value, source))
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
    if dtypes:
        out.append(
            FixCandidate(
                finding.id,
                f"float32 for the {len(dtypes)} float64 dtype(s) the program names",
                tuple(dtypes),
                location=f"{dtypes[0].path}:{dtypes[0].line}",
                tolerance=PRECISION_TOLERANCE,
                tolerance_why=PRECISION_WHY,
                by_mean=True,
            )
        )
    if not out:
        return [], [
            NotTried(
                finding.id,
                "the program names no float64 (it comes from NumPy arrays fed as they are: "
                "cast them with .astype('float32') where they are made)",
            )
        ]
    return out, []


def program_files(facts: Facts, files: SourceFiles) -> list[str]:
    """The script and the program's own modules it ran (the files its locations name)."""
    paths: list[str] = []
    for path in [files.script, *_located_files(facts)]:
        if path and path not in paths and files.read(path) is not None:
            paths.append(path)
    return paths


def _located_files(facts: Facts) -> list[str]:
    found = []
    if facts.placement is not None:
        found += [f.location for f in facts.placement.functions if f.location]
    if facts.tracing is not None:
        found += [f.location for f in facts.tracing.functions if f.location]
    return [os.path.abspath(loc.rpartition(":")[0]) for loc in found]


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
