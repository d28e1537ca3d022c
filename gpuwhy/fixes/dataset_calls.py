"""Rewrite a transformation call as written: the code part of every input fix.

A stage's ``written_calls`` hold the user's calls in one-line form (``ds.map(parse)``,
``.batch(32)``, ``tf.data.TFRecordDataset(files)``; see gpuwhy/source_calls.py). A fix
is that call with keywords set or its method renamed, so it keeps the program's own
names and never repeats what is already written. Where the source could not be read,
the call is rebuilt from the facts with ``<placeholders>`` for what is not known
(``<dataset>.map(parse)``): a reader sees at once what to fill in, and a paste that
forgets one fails loudly instead of running with an undefined name.

Pure text in, text out: :mod:`ast` parses and prints the calls, so every result is
valid Python once its placeholders are filled.
"""

from __future__ import annotations

import ast
import re

from gpuwhy.facts import PipelineStage

AUTOTUNE = "tf.data.AUTOTUNE"
DATASET = "<dataset>"

_PLACEHOLDER = re.compile(r"<([A-Za-z][A-Za-z0-9 _.,'-]*)>")
_HOLE = "__gpuwhy_hole_{}__"
_HOLE_BACK = re.compile(r"__gpuwhy_hole_(\d+)__")
# a receiver stands in for the dot of a call written inside a chain
_CHAINED = "__gpuwhy_chain__"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def stage_call(stage: PipelineStage, api: str | None = None) -> str:
    """The call of ``api`` (default: the stage's first written transformation) as
    written, or rebuilt from the facts with placeholders."""
    api = api or (stage.written_as[0] if stage.written_as else None)
    if api is None:
        return f"{DATASET}.<transformation>(...)"
    for written_api, call in zip(stage.written_as, stage.written_calls, strict=False):
        if written_api == api and call and _is_call(call):
            return call
    return rebuilt_call(stage, api)


def _is_call(text: str) -> bool:
    """A call the rewrites can parse (a record from elsewhere may hold anything)."""
    try:
        _parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def rebuilt_call(stage: PipelineStage, api: str) -> str:
    """The call as the facts describe it, where its source could not be read."""
    function = stage.function or ""
    argument = function if _IDENTIFIER.fullmatch(function) else "<your function>"
    if api in ("map", "filter", "flat_map", "interleave"):
        return f"{DATASET}.{api}({argument})"
    if api == "batch":
        return f"{DATASET}.batch(<batch size>)"
    if api == "from_generator":
        return f"tf.data.Dataset.from_generator({argument}, output_signature=<signature>)"
    if api.endswith("Dataset"):
        return f"tf.data.{api}(<files>)"
    return f"{DATASET}.{api}()"


def keyword(call: str, name: str) -> str | None:
    """The value written for keyword ``name`` (as source text), or None."""
    node = _parse(call)[0]
    for item in node.keywords:
        if item.arg == name:
            return ast.unparse(item.value)
    return None


def argument(call: str, position: int, name: str) -> str | None:
    """The argument written at ``position`` or as keyword ``name`` (source text)."""
    node, holes = _parse(call)
    if len(node.args) > position and not isinstance(node.args[position], ast.Starred):
        return _unfill(ast.unparse(node.args[position]), holes)
    found = keyword(call, name)
    return None if found is None else found


def with_argument(call: str, position: int, name: str, value: str) -> str:
    """``call`` with its argument at ``position`` (or keyword ``name``) set to ``value``."""
    node, holes = _parse(call)
    if len(node.args) > position and not isinstance(node.args[position], ast.Starred):
        node.args[position] = ast.parse(_fill(value, holes), mode="eval").body
        return _print(node, holes)
    return with_keywords(call, **{name: value})


def with_keywords(call: str, **values: str) -> str:
    """``call`` with each keyword set to the given source text (replaced where it is
    already written, added at the end where not)."""
    node, holes = _parse(call)
    for name, value in values.items():
        expression = ast.parse(_fill(value, holes), mode="eval").body
        for item in node.keywords:
            if item.arg == name:
                item.value = expression
                break
        else:
            node.keywords.append(ast.keyword(arg=name, value=expression))
    return _print(node, holes)


def renamed(call: str, method: str) -> str:
    """``call`` calling ``method`` instead (``flat_map`` -> ``interleave``)."""
    node, holes = _parse(call)
    if isinstance(node.func, ast.Attribute):
        node.func.attr = method
    elif isinstance(node.func, ast.Name):
        node.func.id = method
    return _print(node, holes)


def chained(call: str, *more: str) -> str:
    """``call`` followed by more calls of its result: ``ds.map(f)`` + ``.cache()``."""
    return call + "".join(more)


def receiver(call: str) -> str | None:
    """What the call is made on, as written (``ds``), or None inside a chain."""
    node, holes = _parse(call)
    if isinstance(node.func, ast.Attribute):
        text = ast.unparse(node.func.value)
        return None if text == _CHAINED else _unfill(text, holes)
    return None


def method_part(call: str) -> str:
    """The call from its dot (``.batch(32)`` of ``ds.batch(32)``); a call of a
    function, not a method, as it is."""
    node, holes = _parse(call)
    if not isinstance(node.func, ast.Attribute):
        return call
    node.func.value = ast.Name(id=_CHAINED)
    return _print(node, holes)


def _fill(text: str, holes: list[str]) -> str:
    def hole(match: re.Match) -> str:
        if match.group(0) not in holes:
            holes.append(match.group(0))
        return _HOLE.format(holes.index(match.group(0)))

    return _PLACEHOLDER.sub(hole, text)


def _unfill(text: str, holes: list[str]) -> str:
    return _HOLE_BACK.sub(lambda match: holes[int(match.group(1))], text)


def _parse(call: str) -> tuple[ast.Call, list[str]]:
    holes: list[str] = []
    source = _fill(call, holes)
    if source.startswith("."):
        source = _CHAINED + source
    node = ast.parse(source, mode="eval").body
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a call: {call!r}")
    return node, holes


def _print(node: ast.Call, holes: list[str]) -> str:
    text = ast.unparse(node)
    if text.startswith(_CHAINED):
        text = text[len(_CHAINED) :]
    return _unfill(text, holes)
