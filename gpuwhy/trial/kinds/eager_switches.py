"""launch.eager-ops where the program itself turned graphs off: the switches set back.

Two lines left from debugging make every step run op by op: Keras'
``model.compile(..., run_eagerly=True)`` (fit's train step is then a Python function)
and ``tf.config.run_functions_eagerly(True)`` (every ``tf.function`` runs as plain
Python). Their fix is the switch set to ``False``, the default; nothing else changes,
and the trial's runs show whether the program relied on it (a ``.numpy()`` in a
``train_step`` that only runs eagerly crashes, and is reported so).
"""

from __future__ import annotations

import ast

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.kinds.float64 import program_sources
from gpuwhy.trial.source_edits import Edit, calls_named, node_span


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    edits: list[Edit] = []
    what: list[str] = []
    for path, _, lines, tree in program_sources(facts, files):
        for call in calls_named(tree, "run_functions_eagerly"):
            if call.args and _true(call.args[0]):
                edits.append(_to_false(path, lines, call.args[0]))
                what.append(f"run_functions_eagerly(False) at {_short(path)}:{call.lineno}")
        for call in calls_named(tree, "compile"):
            for kw in call.keywords:
                if kw.arg == "run_eagerly" and _true(kw.value):
                    edits.append(_to_false(path, lines, kw.value))
                    what.append(f"compile(run_eagerly=False) at {_short(path)}:{call.lineno}")
    if not edits:
        return [], []
    return [
        FixCandidate(
            finding.id,
            " and ".join(what),
            tuple(edits),
            location=f"{edits[0].path}:{edits[0].line}",
        )
    ], []


def _true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _to_false(path: str, lines: list[str], node: ast.expr) -> Edit:
    s = node_span(node, lines)
    return Edit(path, s.line, s.col, s.end_line, s.end_col, "False")


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
