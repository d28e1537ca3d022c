"""The call a line of the user's program makes, read from its source as written.

A fix is only pasteable when it starts from what the user wrote: the dataset variable,
the function, the batch size and the keywords already there. The collectors know where
each transformation was called (file and line, from the creating frame); this module
reads that line's source with :mod:`ast` and gives the call back in a canonical,
one-line form that the rules can rewrite (``ds.map(parse, num_parallel_calls=4)``).

Python 3.11+ reports a method call's line as the line of the method's name, so
``.map(`` on its own line of a chain is found at that line. A call whose receiver is a
longer expression (a chain) is given from the dot (``.map(parse)``): the fix replaces
that part of the chain only.
"""

from __future__ import annotations

import ast
import functools
import os
import tokenize

# Larger sources are not parsed: a generated file is no place to paste a fix.
MAX_SOURCE_BYTES = 2_000_000


def _tree(filename: str) -> ast.Module | None:
    """The file's syntax tree, parsed once per version of the file."""
    try:
        status = os.stat(filename)
    except OSError:
        return None
    return _parsed(filename, status.st_mtime_ns, status.st_size)


@functools.lru_cache(maxsize=64)
def _parsed(filename: str, mtime_ns: int, size: int) -> ast.Module | None:
    try:
        with tokenize.open(filename) as handle:
            source = handle.read(MAX_SOURCE_BYTES + 1)
        if len(source) > MAX_SOURCE_BYTES:
            return None
        return ast.parse(source, filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def _names_only(node: ast.expr) -> bool:
    """``ds``, ``self.train_ds``, ``tf.data``: a receiver a fix can name as written."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _called_at(call: ast.Call, api: str, line: int) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr == api and func.end_lineno == line
    return isinstance(func, ast.Name) and func.id == api and func.lineno == line


def _runs(call: ast.Call, function: str) -> bool:
    """The call's function argument is ``function`` ("parse", "<lambda>", "Model.f")."""
    argument = call.args[0] if call.args else None
    for keyword in call.keywords:
        if keyword.arg in ("map_func", "predicate", "generator"):
            argument = keyword.value
    if argument is None:
        return False
    if isinstance(argument, ast.Lambda):
        return function == "<lambda>"
    return ast.unparse(argument).split(".")[-1] == function.split(".")[-1]


def call_text(call: ast.Call) -> str:
    """The call on one line; from the dot when its receiver is an expression."""
    func = call.func
    if isinstance(func, ast.Attribute) and not _names_only(func.value):
        bare = ast.Call(func=ast.Name(id=func.attr), args=call.args, keywords=call.keywords)
        return "." + ast.unparse(bare)
    return ast.unparse(call)


def written_call(filename: str, line: int, api: str, function: str | None = None) -> str | None:
    """The call of ``api`` (``map``, ``batch``, ``TFRecordDataset`` ...) at ``line`` of
    ``filename``, or None where it cannot be told: no source, no such call there, or
    several different ones the function name does not tell apart."""
    tree = _tree(filename)
    if tree is None or line <= 0:
        return None
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called_at(node, api, line)
    ]
    if function and len(found) > 1:
        found = [call for call in found if _runs(call, function)] or found
    texts = {call_text(call) for call in found}
    return texts.pop() if len(texts) == 1 else None


def library_call(filename: str, line: int) -> str | None:
    """The call at ``line`` into a library that built a dataset for the program
    (``keras.utils.image_dataset_from_directory(...)``: a callee whose name says
    "dataset"), or None: no source, no such call, or several different ones."""
    tree = _tree(filename)
    if tree is None or line <= 0:
        return None
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _callee(node) and _callee_line(node) == line
    ]
    # a dataset helper (keras.utils.*_dataset_from_*), not Model.fit making one from arrays
    texts = {call_text(call) for call in found if "dataset" in _callee(call).lower()}
    return texts.pop() if len(texts) == 1 else None


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _callee_line(call: ast.Call) -> int | None:
    """The line Python reports for the call: its method name's, or its function's."""
    func = call.func
    return func.end_lineno if isinstance(func, ast.Attribute) else func.lineno


def scaled_by(filename: str, line: int, api: str, attribute: str) -> bool | None:
    """Whether the size the call of ``api`` at ``line`` passes (its first argument, or
    ``batch_size=``) names ``attribute`` (``num_replicas_in_sync``), directly or through
    the names it is computed from anywhere in the file (``GLOBAL = PER_REPLICA *
    strategy.num_replicas_in_sync``). None where the source does not tell: no such call,
    or a size from elsewhere (an argument, a config object, another module)."""
    tree = _tree(filename)
    if tree is None or line <= 0:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _called_at(n, api, line)]
    if len(calls) != 1:
        return None
    size = batch_size_argument(calls[0])
    if size is None:
        # Model.fit without batch_size batches by Keras' default: not scaled
        return False if api == "fit" else None
    return _names_attribute(size, attribute, _assignments(tree), set())


def batch_size_argument(call: ast.Call) -> ast.expr | None:
    """The batch size a call passes: ``batch_size=`` or its place among the positional
    arguments (first for ``ds.batch(n)``, third for ``model.fit(x, y, n)``)."""
    for keyword in call.keywords:
        if keyword.arg == "batch_size":
            return keyword.value
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    index = 2 if name == "fit" else 0
    return call.args[index] if len(call.args) > index else None


def _assignments(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """Every value assigned to each plain name in the file, any scope."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
    return found


def _names_attribute(
    node: ast.expr, attribute: str, assigned: dict[str, list[ast.expr]], seen: set[str]
) -> bool | None:
    """True: ``attribute`` is in the expression or in what its names are computed from;
    False: every name resolves to literals and arithmetic without it; None: a name or
    call whose value the file does not show."""
    unknown = False
    for part in ast.walk(node):
        if isinstance(part, ast.Attribute) and part.attr == attribute:
            return True
        if isinstance(part, ast.Name) and isinstance(part.ctx, ast.Load):
            if part.id in seen:
                continue
            values = assigned.get(part.id)
            if not values:
                unknown = True
                continue
            seen.add(part.id)
            verdicts = [_names_attribute(v, attribute, assigned, seen) for v in values]
            if any(v is True for v in verdicts):
                return True
            unknown = unknown or any(v is None for v in verdicts)
        elif isinstance(part, ast.Call):
            unknown = True  # int(os.environ[...]), config.get(...): not read
    return None if unknown else False
