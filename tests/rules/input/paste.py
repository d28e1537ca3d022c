"""Paste an input fix into a program, as its reader would, and run both versions.

A fix (rules/input/fixes.py) says ``# file:line: in place of: OLD`` and gives the new
call on the next line; other code lines are statements to add before the changed one,
``# or: `` lines are alternatives (``#  and: `` their next lines), ``# and leave out the X after it`` drops a call. Here
the program's source is edited at exactly those places (found with :mod:`ast`, as the
user's eye would find them), placeholders are filled from the test's own values, and
the original and each pasted version are executed: a fix that breaks the pipeline, or
changes what it yields, fails its test.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpuwhy.fixes.pipeline_code import ALTERNATIVE, ALTERNATIVE_THEN, IN_PLACE_OF, THEN_AFTER
from gpuwhy.source_calls import call_text

_MARKER = re.compile(
    r"^# (?:(?P<file>[^:]+):(?P<line>\d+): )?" + re.escape(IN_PLACE_OF) + "(?P<old>.*)$"
)
_LEAVE_OUT = re.compile(
    r"^# and leave out the (?P<old>.+?) after it(?: \((?P<file>[^:]+):(?P<line>\d+)\))?$"
)
_PLACEHOLDER = re.compile(r"<[A-Za-z][A-Za-z0-9 _.,'-]*>")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]* = ")


@dataclass
class Fix:
    """A fix's code, taken apart."""

    statements: list[str] = field(default_factory=list)
    replacements: list[tuple[int | None, str, str]] = field(default_factory=list)
    leave_out: list[tuple[int | None, str]] = field(default_factory=list)
    alternatives: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)  # below THEN_AFTER


def parse(fix: str) -> Fix:
    parsed = Fix()
    lines = fix.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        marker = _MARKER.match(line)
        leave = _LEAVE_OUT.match(line)
        if marker:
            at = int(marker["line"]) if marker["line"] else None
            parsed.replacements.append((at, marker["old"], lines[index + 1]))
            index += 2
            continue
        if line == THEN_AFTER:
            parsed.after = [x for x in lines[index + 1 :] if x.strip() and not x.startswith("#")]
            break
        if leave:
            parsed.leave_out.append((int(leave["line"]) if leave["line"] else None, leave["old"]))
        elif line.startswith(ALTERNATIVE):
            parsed.alternatives.append(line[len(ALTERNATIVE) :])
        elif line.startswith(ALTERNATIVE_THEN):  # the alternative's next line
            parsed.alternatives.append(line[len(ALTERNATIVE_THEN) :])
        elif line.strip() and not line.startswith("#"):
            parsed.statements.append(line)
        index += 1
    return parsed


def fill(text: str, placeholders: dict[str, str]) -> str:
    """``text`` with the test's values for its placeholders; none may be left."""
    for hole, value in placeholders.items():
        text = text.replace(hole, value)
    left = _PLACEHOLDER.search(text)
    assert left is None, f"placeholder {left.group(0)} left in {text!r}"
    return text


def _offsets(source: str) -> list[int]:
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _find(source: str, old: str, line: int | None) -> ast.Call:
    tree = ast.parse(source)
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and call_text(node) == old
        and (line is None or line in (node.func.lineno, node.func.end_lineno))
    ]
    assert len(found) == 1, f"{old!r} at line {line}: {len(found)} calls in\n{source}"
    return found[0]


def _span(source: str, call: ast.Call, fragment: bool) -> tuple[int, int]:
    starts = _offsets(source)
    end = starts[call.end_lineno - 1] + call.end_col_offset  # type: ignore[operator]
    if fragment:
        value = call.func.value  # type: ignore[attr-defined]
        start = starts[value.end_lineno - 1] + value.end_col_offset
    else:
        start = starts[call.lineno - 1] + call.col_offset
    return start, end


def _insert_after(source: str, statements: list[str], line: int) -> str:
    """``statements`` after the simple statement holding ``line``, at its indentation."""
    holder = _holder(source, line)
    at = _offsets(source)[holder.end_lineno or holder.lineno]
    indent = " " * holder.col_offset
    return source[:at] + "".join(indent + s + "\n" for s in statements) + source[at:]


def _holder(source: str, line: int) -> ast.stmt:
    """The innermost simple statement holding ``line``."""
    holder = None
    for node in ast.walk(ast.parse(source)):
        compound = ast.FunctionDef | ast.ClassDef | ast.If | ast.For | ast.While | ast.With
        if isinstance(node, ast.stmt) and not isinstance(node, compound):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                holder = node
    assert holder is not None, f"no statement at line {line}"
    return holder


def _statement_start(source: str, line: int) -> tuple[int, str]:
    """Offset and indentation of the innermost simple statement holding ``line``."""
    holder = _holder(source, line)
    return _offsets(source)[holder.lineno - 1], " " * holder.col_offset


def _replace(source: str, old: str, new: str, line: int | None) -> str:
    call = _find(source, old, line)
    fragment = old.startswith(".")
    start, end = _span(source, call, fragment)
    if fragment:
        # the dot may sit on the next line of a chain: keep what is before it
        segment = source[start:end]
        start += segment.index(".")
    return source[:start] + new + source[end:]


def _insert(source: str, statements: list[str], line: int | None) -> str:
    assert line is not None, "statements to add, but no line to add them at"
    at, indent = _statement_start(source, line)
    return source[:at] + "".join(indent + s + "\n" for s in statements) + source[at:]


def pasted(source: str, fix: str, placeholders: dict[str, str]) -> list[str]:
    """The program with the fix pasted, then one version per alternative expression."""
    parsed = parse(fix)
    versions = []
    main = source
    statements = [fill(s, placeholders) for s in parsed.statements]
    # edits from the bottom up, so each line number still points where it did
    edits = [(line or 0, "replace", old, new) for line, old, new in parsed.replacements]
    edits += [(line or 0, "leave out", old, "") for line, old in parsed.leave_out]
    for line, kind, old, new in sorted(edits, key=lambda edit: -edit[0]):
        at = line or None
        if kind == "replace":
            main = _replace(main, fill(old, placeholders), fill(new, placeholders), at)
        else:
            main = _leave_out(main, old, at)
    if statements:
        main = _insert(main, statements, min(line or 0 for line, _, _ in parsed.replacements))
    if parsed.after:
        main = _insert_after(
            main, parsed.after, max(line or 0 for line, _, _ in parsed.replacements)
        )
    versions.append(main)
    if parsed.alternatives:
        assert parsed.replacements, "an alternative to nothing"
        setup = [fill(a, placeholders) for a in parsed.alternatives if _ASSIGNMENT.match(a)]
        for alternative in parsed.alternatives:
            if _ASSIGNMENT.match(alternative):
                continue
            new = fill(alternative, placeholders)
            line, old = _alternative_to(parsed, new, placeholders)
            version = _replace(source, old, new, line)
            if setup:
                version = _insert(version, setup, line)
            versions.append(version)
    return versions


def _method(call: str) -> str | None:
    """The outermost call's method or function name: ``shuffle`` of ``ds.shuffle(8)``."""
    text = "_" + call if call.startswith(".") else call
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _alternative_to(parsed: Fix, new: str, placeholders: dict[str, str]) -> tuple[int | None, str]:
    """The call an alternative stands in for: the changed or dropped call of the same
    method (``ds.shuffle(8)`` for ``ds.shuffle(2)``), else the last one changed."""
    candidates = [(line, old) for line, old, _ in parsed.replacements] + parsed.leave_out
    for line, old in candidates:
        if _method(fill(old, placeholders)) == _method(new):
            return line, fill(old, placeholders)
    line, old, _ = parsed.replacements[-1]
    return line, fill(old, placeholders)


def _leave_out(source: str, old: str, line: int | None) -> str:
    if old.startswith("<"):  # rebuilt: the program's own batch call is not known here
        raise AssertionError(f"cannot tell which call to leave out: {old}")
    call = _find(source, old, line)
    if old.startswith("."):
        start, end = _span(source, call, True)
        return source[:start] + source[end:]
    start, end = _span(source, call, False)
    receiver = ast.unparse(call.func.value)  # type: ignore[attr-defined]
    return source[:start] + receiver + source[end:]


def write(tmp: Path, name: str, source: str) -> Path:
    path = tmp / name
    path.write_text(source)
    return path
