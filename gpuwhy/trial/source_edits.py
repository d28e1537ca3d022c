"""Edits of a user's source file, found through its syntax tree and written as text.

A fix gpuwhy tries is a handful of these: a decorator above a ``def``, a keyword added
to a call, an argument wrapped, a ``with`` block's body moved out of it. Each is a span
of the original text (line and column, as ``ast`` gives them) and what replaces it, so
that a fix leaves every other character of the file as the user wrote it: the patch
``gpuwhy fix --patch`` writes is those spans and nothing else.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from gpuwhy.source_calls import char_col


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, col) to (end_line, end_col) of ``path`` by ``text``.

    Lines count from 1, columns from 0 in characters of the line (``ast`` counts UTF-8
    bytes: :func:`node_span` converts)."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int
    text: str

    @property
    def span(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(start, end), each (line, col): an insertion's two are equal."""
        return (self.line, self.col), (self.end_line, self.end_col)

    def overlaps(self, other: Edit) -> bool:
        if self.path != other.path:
            return False
        a, b = self.span, other.span
        return a[0] < b[1] and b[0] < a[1] or a[0] == b[0]

    def stacks_with(self, other: Edit) -> bool:
        """Both insert whole lines before the same line: two fixes' statements that go
        before one loop (a traced validation step defined there, the one iterator of
        the run made there) are made one after the other, not refused as overlapping."""
        return (
            self.path == other.path
            and self.span == other.span
            and self.span[0] == self.span[1]
            and self.col == 0
            and self.text.endswith("\n")
            and other.text.endswith("\n")
        )

    def touches(self, other: Edit) -> bool:
        """One ends where the other starts and at least one replaces text: an insertion
        at the end of a span another fix rewrites (``.cache()`` after the call a
        batch-first fix turns into ``batch(16)``) lands after the new text, not the old.
        Two fixes that touch are not made together (patch.compatible)."""
        if self.path != other.path:
            return False
        a, b = self.span, other.span
        replaces = a[0] != a[1] or b[0] != b[1]
        return replaces and (a[1] == b[0] or b[1] == a[0])


class EditError(Exception):
    """The edits do not fit the file (overlapping, out of range)."""


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lines_of(text: str) -> list[str]:
    """The lines of ``text`` as Python's parser counts them (``\n``, ``\r\n`` or ``\r``
    ends one; a form feed or ``\u2028`` does not, as ``str.splitlines`` would have it),
    each with its own ending: ``ast``'s line numbers index this list."""
    return _LINE.findall(text)


def apply(source: str, edits: Iterable[Edit]) -> str:
    """``source`` with ``edits`` (all of one file) made; later spans first, so each edit's
    positions stay those of the original text."""
    lines = lines_of(source)
    ordered = sorted(edits, key=lambda e: (e.line, e.col), reverse=True)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if b.overlaps(a):
            raise EditError(f"two edits overlap at line {a.line}")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(line: int, col: int) -> int:
        if not 1 <= line <= len(lines) + 1:
            raise EditError(f"line {line} is outside the file ({len(lines)} lines)")
        return offsets[line - 1] + col

    text = source
    for e in ordered:
        start, end = offset(e.line, e.col), offset(e.end_line, e.end_col)
        text = text[:start] + e.text + text[end:]
    return text


def parse(source: str, path: str) -> ast.Module | None:
    try:
        return ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return None


@dataclass(frozen=True)
class Span:
    line: int
    col: int
    end_line: int
    end_col: int


def node_span(node: ast.AST, lines: list[str]) -> Span:
    """The node's span in character columns."""
    line, end_line = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    col = char_col(lines[line - 1], node.col_offset)  # type: ignore[attr-defined]
    end_col = char_col(lines[end_line - 1], node.end_col_offset or 0)  # type: ignore[attr-defined]
    return Span(line, col, end_line, end_col)


def segment(source: str, node: ast.AST) -> str:
    return ast.get_source_segment(source, node) or ""


def walk_at(tree: ast.AST, line: int) -> Iterator[ast.AST]:
    """Nodes whose span holds ``line``."""
    for node in ast.walk(tree):
        start = getattr(node, "lineno", None)
        end = getattr(node, "end_lineno", None)
        if start is not None and end is not None and start <= line <= end:
            yield node


def function_at(tree: ast.AST, line: int) -> ast.FunctionDef | None:
    """The ``def`` written at ``line`` (its ``def`` line or one of its decorators')."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first <= line <= node.lineno:
                return node  # type: ignore[return-value]
    return None


def function_named(tree: ast.AST, name: str) -> ast.FunctionDef | None:
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
    ]
    return found[0] if len(found) == 1 else None  # type: ignore[return-value]


def callee_name(call: ast.Call) -> str | None:
    """``train_step`` for ``train_step(...)`` and ``self.train_step(...)``."""
    return expr_name(call.func)


def expr_name(node: ast.expr) -> str | None:
    """The last name of ``node``: ``Sequence`` for ``tf.keras.utils.Sequence``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def calls_at(tree: ast.AST, line: int, name: str) -> list[ast.Call]:
    """Calls of ``name`` (a function or a method) whose span holds ``line``, innermost
    first."""
    found = [n for n in walk_at(tree, line) if isinstance(n, ast.Call) and callee_name(n) == name]
    return sorted(found, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)


def calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and callee_name(n) == name]


def tensorflow_alias(tree: ast.Module) -> str | None:
    """The name the module imports TensorFlow as (``tf``), or None."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "tensorflow":
                    return alias.asname or "tensorflow"
    return None


def import_tensorflow(tree: ast.Module, path: str) -> tuple[str, list[Edit]]:
    """The name TensorFlow goes by in this module, and the import to add where it has
    none (after the docstring and ``from __future__`` imports)."""
    alias = tensorflow_alias(tree)
    if alias is not None:
        return alias, []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            head = f.read(4096)
    except OSError:
        head = None
    line = top_line(tree, head)
    return "tf", [Edit(path, line, 0, line, 0, "import tensorflow as tf\n")]


def top_line(tree: ast.Module, source: str | None = None) -> int:
    """The line where a module's own code starts: after its docstring and ``from
    __future__`` imports, and after a ``#!`` or coding line where it has no docstring."""
    line = 1
    for node in tree.body:
        is_doc = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_doc or is_future:
            line = (node.end_lineno or node.lineno) + 1
            continue
        break
    if line == 1 and source is not None:
        for text in lines_of(source)[:2]:
            if text.startswith("#!") or ("coding" in text and text.startswith("#")):
                line += 1
            else:
                break
    return line


def indent_of(line_text: str) -> str:
    return line_text[: len(line_text) - len(line_text.lstrip())]


def add_decorator(path: str, lines: list[str], fn: ast.FunctionDef, decorator: str) -> Edit:
    """``@decorator`` as the outermost decorator of ``fn``, at its indent."""
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    indent = indent_of(lines[first - 1])
    return Edit(path, first, 0, first, 0, f"{indent}@{decorator}\n")


def set_keywords(
    source: str, lines: list[str], path: str, call: ast.Call, **values: str
) -> list[Edit]:
    """``call`` with each keyword of ``values`` set: replaced where written, else added
    after the last argument."""
    edits, added = [], []
    for name, value in values.items():
        kw = next((k for k in call.keywords if k.arg == name), None)
        if kw is not None:
            s = node_span(kw.value, lines)
            edits.append(Edit(path, s.line, s.col, s.end_line, s.end_col, value))
        else:
            added.append(f"{name}={value}")
    if added:
        args = [*call.args, *call.keywords]
        end = node_span(call, lines)
        if args:
            last = max(
                args, key=lambda a: (getattr(a, "end_lineno", 0), getattr(a, "end_col_offset", 0))
            )
            s = node_span(last, lines)
            edits.append(
                Edit(path, s.end_line, s.end_col, s.end_line, s.end_col, ", " + ", ".join(added))
            )
        else:  # f() -> f(name=value): just before the closing parenthesis
            edits.append(
                Edit(
                    path,
                    end.end_line,
                    end.end_col - 1,
                    end.end_line,
                    end.end_col - 1,
                    ", ".join(added),
                )
            )
    return edits


def wrap_node(path: str, lines: list[str], node: ast.AST, before: str, after: str) -> list[Edit]:
    """``before`` + the node's text + ``after`` (two insertions: the node's own text, and
    any comment inside it, stays)."""
    s = node_span(node, lines)
    return [
        Edit(path, s.line, s.col, s.line, s.col, before),
        Edit(path, s.end_line, s.end_col, s.end_line, s.end_col, after),
    ]


def unwrap_with(source: str, lines: list[str], path: str, node: ast.With, item: int) -> list[Edit]:
    """The ``with`` statement ``node`` without its ``item``-th context manager; where it
    was the only one, its body moved out of the block (dedented) in its place."""
    if len(node.items) > 1:
        others = [_item_text(source, i) for k, i in enumerate(node.items) if k != item]
        first, last = node.items[0], node.items[-1]
        s0 = node_span(first.context_expr, lines)
        last_end = last.optional_vars or last.context_expr
        s1 = node_span(last_end, lines)
        return [Edit(path, s0.line, s0.col, s1.end_line, s1.end_col, ", ".join(others))]
    start = node.lineno
    body_first = node.body[0].lineno
    if body_first == start:  # `with x: y()` on one line: nothing to dedent, left alone
        return []
    body_last = node.end_lineno or node.body[-1].lineno
    outer = indent_of(lines[start - 1])
    body = "".join(lines[body_first - 1 : body_last])
    dedented = textwrap.indent(textwrap.dedent(body), outer)
    return (
        [Edit(path, start, 0, body_last + 1, 0, dedented)]
        if body_last < len(lines)
        else [Edit(path, start, 0, body_last, len(lines[body_last - 1]), dedented)]
    )


def _item_text(source: str, item: ast.withitem) -> str:
    """``manager`` or ``manager as name``, as written (a withitem has no span of its own)."""
    text = segment(source, item.context_expr)
    if item.optional_vars is not None:
        text += " as " + segment(source, item.optional_vars)
    return text


def joined_insertions(edits: Iterable[Edit]) -> list[Edit]:
    """Insertions at one place (zero-width edits) joined into one, in the order given:
    two fixes' lines that go before the same statement."""
    out: list[Edit] = []
    for e in edits:
        zero = e.line == e.end_line and e.col == e.end_col
        same = next(
            (
                i
                for i, o in enumerate(out)
                if zero
                and (o.path, o.line, o.col, o.end_line, o.end_col)
                == (e.path, e.line, e.col, e.end_line, e.end_col)
            ),
            None,
        )
        if same is None:
            out.append(e)
        else:
            o = out[same]
            out[same] = Edit(o.path, o.line, o.col, o.end_line, o.end_col, o.text + e.text)
    return out


def statement_at(tree: ast.AST, line: int, kinds: tuple[type, ...]) -> ast.stmt | None:
    """The statement of one of ``kinds`` that starts at ``line``."""
    for node in ast.walk(tree):
        if isinstance(node, kinds) and getattr(node, "lineno", None) == line:
            return node  # type: ignore[return-value]
    return None
