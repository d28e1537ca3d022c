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
import dataclasses
import functools
import os
import textwrap
import tokenize
import weakref
from collections.abc import Callable, Sequence
from typing import TypeVar

from gpuwhy.facts import ReboundName, StepCode
from gpuwhy.source_step import (
    LiftedStep,
    free_name,
    lifted_step,
    mutates_outside,
    reads_before_assigned,
    reads_values,
    rebound_around,
)

# Larger sources are not parsed: a generated file is no place to paste a fix.
MAX_SOURCE_BYTES = 2_000_000

_Read = TypeVar("_Read")


def once_per_version(
    maxsize: int,
) -> Callable[[Callable[[str], _Read | None]], Callable[[str], _Read | None]]:
    """Decorates ``read(filename)`` so that it runs once per version of the file (its
    modification time and size) rather than once per call: the facts that read the
    user's source are built again at each live-metrics update, and a fix reads many
    lines of one file; a file edited since is read again. A file that cannot be
    stat'ed gives None without a read."""

    def decorate(read: Callable[[str], _Read | None]) -> Callable[[str], _Read | None]:
        @functools.lru_cache(maxsize=maxsize)
        def cached(filename: str, _mtime_ns: int, _size: int) -> _Read | None:
            return read(filename)

        @functools.wraps(read)
        def current(filename: str) -> _Read | None:
            try:
                status = os.stat(filename)
            except OSError:
                return None
            return cached(filename, status.st_mtime_ns, status.st_size)

        return current

    return decorate


@once_per_version(maxsize=64)
def _tree(filename: str) -> ast.Module | None:
    """The file's syntax tree (None: unreadable, too large or not Python)."""
    try:
        with tokenize.open(filename) as handle:
            source = handle.read(MAX_SOURCE_BYTES + 1)
        if len(source) > MAX_SOURCE_BYTES:
            return None
        return ast.parse(source, filename)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def syntax_tree(filename: str) -> ast.Module | None:
    """The file's syntax tree, parsed once per version of the file (None: unreadable,
    too large or not Python). Shared: not to be changed."""
    return _tree(filename)


def source_lines(filename: str) -> tuple[str, ...] | None:
    """The file's lines as ``ast`` numbers them, read once per version of the file
    (None: unreadable or too large)."""
    return _lines(filename)


@once_per_version(maxsize=16)
def _lines(filename: str) -> tuple[str, ...] | None:
    """The file's lines as ``ast`` numbers them (None: unreadable or too large)."""
    try:
        with tokenize.open(filename) as handle:  # universal newlines: "\n" ends each
            source = handle.read(MAX_SOURCE_BYTES + 1)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    return None if len(source) > MAX_SOURCE_BYTES else tuple(source.split("\n"))


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
    found = _calls(filename, line, lambda node: _called_at(node, api, line))
    if function and len(found) > 1:
        found = [call for call in found if _runs(call, function)] or found
    return _only_text(found)


def library_call(filename: str, line: int) -> str | None:
    """The call at ``line`` into a library that built a dataset for the program
    (``keras.utils.image_dataset_from_directory(...)``: a callee whose name says
    "dataset"), or None: no source, no such call, or several different ones."""
    # a dataset helper (keras.utils.*_dataset_from_*), not Model.fit making one from arrays
    return _only_text(
        _calls(
            filename,
            line,
            lambda node: "dataset" in _callee(node).lower() and _callee_line(node) == line,
        )
    )


def _calls(filename: str, line: int, keep: Callable[[ast.Call], bool]) -> list[ast.Call]:
    """The calls of ``filename`` that ``keep`` takes (none without a source or a line)."""
    tree = _tree(filename)
    if tree is None or line <= 0:
        return []
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and keep(node)]


def calls_at(filename: str, line: int) -> list[ast.Call]:
    """The calls of ``filename`` whose callee ends at ``line`` (none without a source)."""
    return _calls(filename, line, lambda node: _callee_line(node) == line)


def call_as_written(filename: str, call: ast.Call) -> str:
    """The call's text as the file writes it, where it sits on one line of plain
    characters (``ast``'s offsets are bytes); else as ``ast`` writes it back."""
    lines = _lines(filename)
    if lines is not None and call.end_lineno == call.lineno and 0 < call.lineno <= len(lines):
        line = lines[call.lineno - 1]
        if line.isascii():
            return line[call.col_offset : call.end_col_offset]
    return ast.unparse(call)


def _only_text(calls: list[ast.Call]) -> str | None:
    """The calls' text where they all read the same, else None (none, or several)."""
    texts = {call_text(call) for call in calls}
    return texts.pop() if len(texts) == 1 else None


@dataclasses.dataclass(frozen=True)
class MadeWith:
    """A call of a class (or function) as written: where, the call on one line, and one
    keyword's value as written (None: not passed), with that value where it is a literal
    int."""

    location: str  # file:line
    call: str
    value: str | None
    number: int | None
    mapping: bool = False  # it passes a ** mapping, which may hold the keyword


def calls_with(filenames: Sequence[str], callee: str, keyword: str) -> list[MadeWith]:
    """Each call of ``callee`` (``DataGenerator(...)``, ``x.DataGenerator(...)``) in
    ``filenames``, with what it passes as ``keyword``, in file and line order: where the
    program makes what a fix would change (a PyDataset made with ``workers=1``, or
    without)."""
    found = []
    for filename in dict.fromkeys(filenames):  # each file once, in the order given
        tree = _tree(filename)
        if tree is None:
            continue
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _callee(n) == callee]
        for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
            given = next((k.value for k in node.keywords if k.arg == keyword), None)
            number = given.value if isinstance(given, ast.Constant) else None
            found.append(
                MadeWith(
                    location=f"{filename}:{_callee_line(node)}",
                    call=call_text(node),
                    value=None if given is None else ast.unparse(given),
                    number=number if type(number) is int else None,
                    mapping=any(k.arg is None for k in node.keywords),
                )
            )
    return found


def init_takes(filename: str, cls: str, keyword: str) -> bool | None:
    """Whether class ``cls`` of ``filename`` can be made with ``keyword=``: its
    ``__init__`` names it or takes ``**kwargs``; a class without its own ``__init__``
    takes what its base does (a PyDataset's: workers). None: no such class there."""
    tree = _tree(filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    arguments = item.args
                    named = [a.arg for a in (*arguments.args, *arguments.kwonlyargs)]
                    return keyword in named or arguments.kwarg is not None
            return True
    return None


def super_init(filename: str, cls: str) -> tuple[int, str | None] | None:
    """Where class ``cls`` of ``filename`` calls ``super().__init__(...)`` in its own
    ``__init__``: (its line, the call as written); (the ``def``'s line, None) where its
    ``__init__`` makes no such call. None: no such class, no ``__init__`` of its own, or
    the file cannot be read."""
    tree = _tree(filename)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        init = next(
            (i for i in node.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"),
            None,
        )
        if init is None:
            return None
        for call in ast.walk(init):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "__init__"
                and isinstance(call.func.value, ast.Call)
                and isinstance(call.func.value.func, ast.Name)
                and call.func.value.func.id == "super"
            ):
                return call.lineno, call_as_written(filename, call)
        return init.lineno, None
    return None


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


# -- the code a step's eager ops come from ---------------------------------------------


def _spans(node: ast.stmt, line: int) -> bool:
    end = getattr(node, "end_lineno", None)
    return node.lineno <= line <= (end if end is not None else node.lineno)


# The statements of each tree (a parsed file, kept by _tree), in ast.walk's order: a
# step's code looks up the statement around each of its lines, and walking every
# expression node of the file again for each was most of that lookup.
_STATEMENTS: weakref.WeakKeyDictionary[ast.AST, list[ast.stmt]] = weakref.WeakKeyDictionary()


def _statements(tree: ast.AST) -> list[ast.stmt]:
    statements = _STATEMENTS.get(tree)
    if statements is None:
        statements = [node for node in ast.walk(tree) if isinstance(node, ast.stmt)]
        _STATEMENTS[tree] = statements
    return statements


def char_col(line: str, byte_col: int) -> int:
    """``ast``'s column (UTF-8 bytes) as the line's character index."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))


def statement_holding(tree: ast.AST, node: ast.AST) -> ast.stmt | None:
    """The innermost statement of ``tree`` that holds ``node`` (of those spanning as many
    lines, a simple one before the compound one whose body it is)."""
    line = getattr(node, "lineno", None)
    if line is None:
        return None
    holding = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.stmt)
        and n.lineno <= line <= (n.end_lineno or n.lineno)
        and any(c is node for c in ast.walk(n))
    ]
    return min(
        holding,
        key=lambda n: ((n.end_lineno or n.lineno) - n.lineno, hasattr(n, "body")),
        default=None,
    )


def _innermost(tree: ast.Module, line: int, kinds: tuple[type, ...]) -> ast.stmt | None:
    """The statement of ``kinds`` spanning ``line`` that starts last (of those starting
    on one line, the last in ``ast.walk``'s order)."""
    found = None
    for node in _statements(tree):
        if isinstance(node, kinds) and _spans(node, line):
            if found is None or node.lineno >= found.lineno:
                found = node
    return found


def statement_at(site: str) -> str | None:
    """The simple statement (an assignment, a call) spanning ``file:line``, as written on
    one line: ``fig = plt.figure(figsize=(4, 4))``; None where there is none or the file
    cannot be read."""
    filename, _, line = site.rpartition(":")
    tree = _tree(filename) if filename and line.isdigit() else None
    if tree is None:
        return None
    kinds = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)
    statement = _innermost(tree, int(line), kinds)
    return ast.unparse(statement) if statement is not None else None


def assigned_names(filename: str, line: int) -> tuple[str, ...]:
    """The plain names the assignment spanning ``line`` binds, in order (``train_ds,
    val_ds = helper(...)`` gives both); empty where the line is in no assignment of
    names alone (an attribute, a subscript, several targets)."""
    tree = _tree(filename)
    statement = _innermost(tree, line, (ast.Assign,)) if tree is not None else None
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return ()
    target = statement.targets[0]
    names = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
    if not all(isinstance(n, ast.Name) for n in names):
        return ()
    return tuple(n.id for n in names if isinstance(n, ast.Name))


def step_code(
    filename: str,
    shown: str,
    lines: dict[int, int],
    loop_lines: Sequence[int] = (),
    function_names: Sequence[str] | None = None,
) -> StepCode | None:
    """The code the most counted ``lines`` (line -> count) of ``filename`` belong to: the
    innermost function around them, or the innermost loop where they are in no function
    or where that function runs the training loop itself (a loop of the function's that
    holds one of ``loop_lines``, the steps' loop sites: ``main()`` looping over the
    dataset is not the step), with the names that code reads and the program re-creates
    in a loop (a metric made anew each epoch): a ``tf.function`` traced over that code
    would keep the first object for good. None where the source cannot be read.
    ``function_names``: the names a new function takes the first free one of (a
    training step's by default)."""
    tree = _tree(filename)
    if tree is None or not lines:
        return None
    weight: dict[ast.stmt, int] = {}
    for line, count in lines.items():
        scope = _innermost(tree, line, (ast.FunctionDef, ast.AsyncFunctionDef))
        if scope is not None:
            scope = _steps_loop(scope, line, loop_lines) or scope
        else:
            scope = _innermost(tree, line, (ast.For, ast.While, ast.AsyncFor))
        if scope is not None:
            weight[scope] = weight.get(scope, 0) + count
    if not weight:
        return None
    body = max(weight, key=lambda node: (weight[node], -node.lineno))
    if isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        outer = _running(tree, body.name)
        rebound = _rebound(tree, body, shown)
        if outer is not None:  # a replica step: the distributed step is what to trace
            seen = {r.name for r in rebound}
            rebound += tuple(r for r in _rebound(tree, outer, shown) if r.name not in seen)
            body = outer
        header = ast.unparse(body).splitlines()[len(body.decorator_list)]
        return StepCode(body.name, f"{shown}:{body.lineno}", header, rebound)
    names = []
    if isinstance(body, (ast.For, ast.AsyncFor)):
        names = [n.id for n in ast.walk(body.target) if isinstance(n, ast.Name)]
    rebound = _rebound(tree, body, shown)  # made once instead (the fix says so)
    if isinstance(body, (ast.For, ast.AsyncFor, ast.While)):
        # what an outer loop binds anew on each pass (its batch) and the body reads: an
        # argument, since a tf.function reads a name it closes over once, at the trace
        holder = _innermost(tree, body.lineno, (ast.FunctionDef, ast.AsyncFunctionDef))
        around = rebound_around(holder or tree, body) - {r.name for r in rebound}
        taken, _ = reads_before_assigned(body.body)
        names += [n for n in taken if n in around and n not in names]
    # never one of the program's own names: it would replace it
    function = free_name(tree, function_names)
    header = f"def {function}({', '.join(names)}):"
    code = StepCode(
        None,
        f"{shown}:{body.lineno}",
        header,
        rebound,
        _movable_body(filename, tree, body),
        f"{shown}:{_outermost_loop(tree, body).lineno}",
    )
    if not isinstance(body, (ast.For, ast.AsyncFor, ast.While)):
        return code
    if code.body and isinstance(body, (ast.For, ast.AsyncFor)):  # the whole body, as it is
        last = body.body[-1].end_lineno or body.body[-1].lineno
        return dataclasses.replace(
            code, moved=(body.body[0].lineno, last), call=f"{function}({', '.join(names)})"
        )
    lifted = _lifted(filename, tree, body, lines, function_names)
    if lifted is None:
        return code
    return dataclasses.replace(
        code,
        signature=lifted.signature,
        body=lifted.body,
        moved=(lifted.first, lifted.last),
        call=lifted.call,
        part=True,
    )


# names for a loop beside the training one (a validation pass), the first the program
# does not use already
SIDE_LOOP_NAMES = ("eval_step", "val_step", "side_step", "loop_step")


def loop_code(filename: str, shown: str, line: int) -> StepCode | None:
    """The body of the ``for`` loop whose header is at ``line`` as a function of its own
    (a loop over a dataset beside the training, a validation pass): its statements
    that read no tensor's value into Python, as :func:`step_code` lifts them. None where
    no such loop is there or the source cannot be read."""
    tree = _tree(filename)
    if tree is None:
        return None
    loop = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, (ast.For, ast.AsyncFor)) and node.lineno == line
        ),
        None,
    )
    if loop is None or not loop.body or _calls_value_readers(tree, loop.body):
        return None
    lines = {statement.lineno: 1 for statement in loop.body}
    return step_code(filename, shown, lines, (line,), SIDE_LOOP_NAMES)


# modules whose calls draw (a figure cannot be drawn from inside a graph)
_PLOTTING = frozenset({"plt", "pyplot", "matplotlib", "display", "IPython"})


def _calls_value_readers(tree: ast.Module, body: list[ast.stmt]) -> bool:
    """Whether ``body`` draws, or calls a function of the file's own that reads a
    tensor's value into Python or draws (``generate_and_save_images``: ``.numpy()``,
    ``plt.imshow``): in a traced function it would fail, or run once, at the trace."""
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    called = {
        node.func.id
        for statement in body
        for node in ast.walk(statement)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    if any(_draws(statement) for statement in body):
        return True
    return any(
        reads_values(statement) or _draws(statement)
        for name in called & set(functions)
        for statement in functions[name].body
    )


def _draws(statement: ast.stmt) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in _PLOTTING
        for node in ast.walk(statement)
    )


def _lifted(
    filename: str,
    tree: ast.Module,
    loop: ast.For | ast.AsyncFor | ast.While,
    lines: dict[int, int],
    names: Sequence[str] | None = None,
) -> LiftedStep | None:
    """The statements of the loop's body that issue the ops, as a function
    (source_step.py), where the whole body cannot move."""
    if loop.orelse:
        return None
    scope = _innermost(tree, loop.lineno, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree
    try:
        with tokenize.open(filename) as handle:
            source = handle.read().splitlines()
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    return lifted_step(source, scope, loop, lines, names)


def _steps_loop(function: ast.AST, line: int, loop_lines: Sequence[int]) -> ast.stmt | None:
    """The innermost ``for`` loop of ``function``'s own that holds ``line`` and one of
    the steps' loop sites (its header's ``next()``, or its ``apply_gradients``): the
    training loop, written inside a function."""
    found = None
    for node in _same_scope(function):
        if (
            isinstance(node, (ast.For, ast.AsyncFor, ast.While))
            and _spans(node, line)
            and any(_spans(node, site) for site in loop_lines)
            and (found is None or node.lineno > found.lineno)
        ):
            found = node
    return found


def _outermost_loop(tree: ast.Module, loop: ast.stmt) -> ast.stmt:
    """The outermost loop around ``loop`` in its own scope (the epoch loop around the loop
    over batches): a function made from the inner body is defined once, before it."""
    scope = _innermost(tree, loop.lineno, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree
    around = [
        node
        for node in _same_scope(scope)
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)) and _spans(node, loop.lineno)
    ]
    return min(around, key=lambda node: node.lineno, default=loop)


MAX_BODY_LINES = 15


def _same_scope(scope: ast.AST):
    """The nodes of ``scope`` outside the functions, lambdas and classes it defines (their
    names are their own)."""
    nested = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, nested):
            todo.extend(ast.iter_child_nodes(node))


def _movable_body(filename: str, tree: ast.Module, loop: ast.stmt) -> tuple[str, ...]:
    """The loop's body as written, dedented, where it can move into a function as it is:
    short, no ``break``/``continue``/``return``/``yield``/``global``, an ``else``-less
    ``for``; no name it assigns used after it (a value the code after the loop reads would
    have to be returned; "after" includes the rest of an enclosing loop, which runs again),
    and none read in the body before the body assigns it (a value carried from one pass to
    the next); no statement that reads a tensor's value into Python (``loss.numpy()``,
    ``float(x)``: the statements issuing the ops move instead, source_step.py). A name the
    code before the loop also uses is fine: the tutorials' one-step demonstration before
    their loop (``loss_value, grads = grad(...)``) does not depend on it. Else ``()``.
    """
    if not isinstance(loop, (ast.For, ast.AsyncFor)) or loop.orelse or not loop.body:
        return ()
    first, last = loop.body[0].lineno, loop.body[-1].end_lineno or loop.body[-1].lineno
    if last - first + 1 > MAX_BODY_LINES:
        return ()
    stored, inside = set(), set()
    jumps = (
        ast.Break,
        ast.Continue,
        ast.Return,
        ast.Yield,
        ast.YieldFrom,
        ast.Global,
        ast.Nonlocal,
    )
    for statement in loop.body:
        for node in ast.walk(statement):
            inside.add(id(node))
            if isinstance(node, jumps):
                return ()
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stored.add(node.id)
    if _carried(loop.body, stored) or any(reads_values(s) for s in loop.body):
        return ()  # a value carried between passes, or Python reading a tensor's value
    if mutates_outside(loop.body):
        return ()  # a Python list or object changed: in a graph, once, at the trace
    scope = _innermost(tree, loop.lineno, (ast.FunctionDef, ast.AsyncFunctionDef)) or tree
    before = _outermost_loop_start(scope, loop)
    for node in _same_scope(scope):
        if (
            isinstance(node, ast.Name)
            and node.id in stored
            and id(node) not in inside
            and node.lineno >= before
        ):
            return ()
    try:
        with tokenize.open(filename) as handle:
            lines = handle.read().splitlines()[first - 1 : last]
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ()
    return tuple(textwrap.dedent("\n".join(lines)).splitlines())


def _outermost_loop_start(scope: ast.AST, loop: ast.stmt) -> int:
    """The first line of the outermost loop of ``scope`` around ``loop`` (``loop``'s own
    where none encloses it): code before it runs once, before every pass."""
    start = loop.lineno
    for node in _same_scope(scope):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node is not loop:
            end = node.end_lineno or node.lineno
            if node.lineno < loop.lineno and end >= (loop.end_lineno or loop.lineno):
                start = min(start, node.lineno)
    return start


def _carried(body: list[ast.stmt], stored: set[str]) -> bool:
    """Whether a name the body assigns is read in it before it is assigned (in the order
    the statements run: a statement's reads before its own assignment)."""
    assigned: set[str] = set()

    def names(node: ast.AST, kind: type) -> set[str]:
        return {
            n.id
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, kind) and n.id in stored
        }

    def visit(statements: list[ast.stmt]) -> bool:
        for statement in statements:
            blocks = [
                getattr(statement, field)
                for field in ("body", "orelse", "handlers", "finalbody")
                if isinstance(getattr(statement, field, None), list)
            ]
            if blocks:  # a compound statement: its header, then its blocks in order
                header = [
                    child
                    for name, child in ast.iter_fields(statement)
                    if name not in ("body", "orelse", "handlers", "finalbody")
                    and isinstance(child, (ast.AST, list))
                ]
                for part in header:
                    for node in part if isinstance(part, list) else [part]:
                        if isinstance(node, ast.AST):
                            if names(node, ast.Load) - assigned:
                                return True
                            assigned.update(names(node, ast.Store))
                for block in blocks:
                    inner = [b for b in block if isinstance(b, ast.stmt)]
                    handlers = [h for h in block if isinstance(h, ast.ExceptHandler)]
                    if visit(inner) or any(visit(h.body) for h in handlers):
                        return True
                continue
            reads = names(statement, ast.Load)
            if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                reads.add(statement.target.id)
            if reads & stored - assigned:
                return True
            assigned.update(names(statement, ast.Store))
        return False

    return visit(body)


def _running(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function that gives ``name`` to ``strategy.run(name, ...)``, where one does: TF's
    distributed training guide puts the ``tf.function`` on it, around ``strategy.run``."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name == name:
            continue
        for call in ast.walk(node):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "run"
                and call.args
                and isinstance(call.args[0], ast.Name)
                and call.args[0].id == name
            ):
                return node
    return None


def _rebound(tree: ast.Module, body: ast.stmt, shown: str) -> tuple[ReboundName, ...]:
    """Names ``body`` reads (not its own arguments or assignments) that an assignment of a
    call creates inside a loop of the scope those names live in (the module, or the
    function around ``body``): another function's loop assigns its own locals."""
    own: set[str] = set()
    if isinstance(body, (ast.FunctionDef, ast.AsyncFunctionDef)):
        own = {a.arg for a in body.args.args + body.args.kwonlyargs + body.args.posonlyargs}
    inner = set()
    for node in ast.walk(body):
        inner.add(id(node))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
    read = {
        node.id
        for node in ast.walk(body)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own
    }
    scope = list(_same_scope(_owner(tree, body)))
    loops = [n for n in scope if isinstance(n, (ast.For, ast.While, ast.AsyncFor))]
    found: dict[str, ReboundName] = {}
    for node in scope:
        if id(node) in inner or not isinstance(node, ast.Assign):
            continue
        if not isinstance(node.value, ast.Call):
            continue
        around = [loop for loop in loops if id(loop) not in inner and _spans(loop, node.lineno)]
        if not around:
            continue
        loop = max(around, key=lambda n: n.lineno)  # the loop that runs it again each pass
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id in read:
                found.setdefault(
                    target.id,
                    ReboundName(
                        target.id,
                        f"{shown}:{node.lineno}",
                        f"{shown}:{loop.lineno}",
                        _is_metric(tree, target.id),
                    ),
                )
    return tuple(sorted(found.values(), key=lambda r: int(r.location.rsplit(":", 1)[1])))


def _owner(tree: ast.Module, body: ast.stmt) -> ast.AST:
    """The scope the names ``body`` reads from live in: the function around it, or the
    module."""
    around = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node is not body
        and _spans(node, body.lineno)
    ]
    return max(around, key=lambda node: node.lineno, default=tree)


_METRIC_METHODS = ("update_state", "reset_state", "reset_states", "result")


def _is_metric(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, ast.Attribute)
        and node.attr in _METRIC_METHODS
        and isinstance(node.value, ast.Name)
        and node.value.id == name
        for node in ast.walk(tree)
    )


# -- keras.Input calls -----------------------------------------------------------------

_FLOAT_DTYPES = ("float16", "float32", "float64", "bfloat16", "half", "float", "double")


def float_input_calls(filename: str) -> list[tuple[str | None, int, str]]:
    """(assigned name, line, call as written) of each ``Input(...)`` call of the file
    whose dtype is a float (Keras' default when none is given)."""
    tree = _tree(filename)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        calls = [value] if isinstance(value, ast.Call) else []
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            calls = [node.value]
        for call in calls:
            if not _is_input(call) or not _float_dtype(call):
                continue
            target = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            elif isinstance(node, ast.AnnAssign):
                target = node.target
            name = target.id if isinstance(target, ast.Name) else None
            found.append((name, call.lineno, call_text(call)))
    # calls nested in other expressions (a list given to Sequential) are not assigned
    nested = {line for _, line, _ in found}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _is_input(node) and _float_dtype(node):
            if node.lineno not in nested:
                found.append((None, node.lineno, call_text(node)))
    return sorted(found, key=lambda item: item[1])


def _is_input(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "Input"


def _float_dtype(call: ast.Call) -> bool:
    for keyword in call.keywords:
        if keyword.arg == "dtype":
            text = ast.unparse(keyword.value).strip("'\"").split(".")[-1]
            return text in _FLOAT_DTYPES
    return True  # Keras' default: float32


# -- NumPy's float64 arrays ---------------------------------------------------------

# NumPy calls that make a float64 array unless given a dtype
NUMPY_FLOAT_MAKERS = frozenset(
    {"normal", "uniform", "rand", "randn", "random", "standard_normal", "random_sample",
     "beta", "gamma", "exponential", "lognormal", "laplace", "logistic", "linspace",
     "logspace", "zeros", "ones", "empty", "eye", "identity"}
)  # fmt: skip
GENERATORS = ("default_rng", "RandomState", "Generator")
# Library calls that return a float64 NumPy array and take no dtype: Keras 3's one-hot
# labels (``keras.utils.to_categorical(y, 10)``, the labels of most Keras examples)
FLOAT64_RETURNING = frozenset({"to_categorical"})


def numpy_float64_makers(tree: ast.Module) -> list[ast.Call]:
    """Each call of ``tree`` that makes a float64 NumPy array (``rng.normal(size=...)``,
    ``np.random.rand(...)``, ``np.zeros(...)``, ``np.empty(...)``) with no dtype of its
    own and no ``.astype`` after it, or that returns one (``to_categorical(y, 10)``):
    where a program's float64 comes from, data, labels and initial weights alike (a
    float32 array times a Python float stays float32)."""
    numpy = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
        if a.name == "numpy"
    }
    generators = {
        target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Call)
        and _callee(n.value) in GENERATORS
        for target in n.targets
        if isinstance(target, ast.Name)
    }
    cast = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "astype"
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or id(node) in cast:
            continue
        if _callee(node) in FLOAT64_RETURNING:
            found.append(node)
            continue
        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in NUMPY_FLOAT_MAKERS:
            continue
        if any(k.arg == "dtype" for k in node.keywords) or _draws_a_scalar(node):
            continue
        root = func.value
        while isinstance(root, ast.Attribute):
            root = root.value
        made = isinstance(root, ast.Call) and _callee(root) in GENERATORS
        if made or isinstance(root, ast.Name) and (root.id in numpy or root.id in generators):
            found.append(node)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


# Where a random draw takes its shape (``size``) among its positional arguments: one
# given fewer makes a single number (a Python float: ``.astype`` on it raises)
SIZE_POSITION = {
    "random": 0, "random_sample": 0, "standard_normal": 0, "exponential": 1, "normal": 2,
    "uniform": 2, "beta": 2, "gamma": 2, "lognormal": 2, "laplace": 2, "logistic": 2,
}  # fmt: skip


def _draws_a_scalar(call: ast.Call) -> bool:
    """A draw that makes one number, not an array: ``rng.random()``, ``rng.normal(0,
    0.1)``, ``np.random.rand()``, with no shape given and numbers for its other
    arguments (an array there makes an array of its shape)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if name not in SIZE_POSITION and name not in ("rand", "randn"):
        return False
    if any(k.arg in ("size", None) for k in call.keywords):  # a size, or **kwargs
        return False
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if name in ("rand", "randn"):
        return not call.args  # rand(d0, d1, ...) makes an array of those dimensions
    if len(call.args) > SIZE_POSITION[name]:
        return False
    return all(_a_number(a) for a in call.args) and all(
        _a_number(k.value) for k in call.keywords if k.arg != "dtype"
    )


def _a_number(node: ast.expr) -> bool:
    """A literal number (``0.1``, ``-1``)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float)


def numpy_float64_calls(filename: str) -> list[tuple[int, str]]:
    """(line, call as written) of each of :func:`numpy_float64_makers` in ``filename``."""
    tree = _tree(filename)
    if tree is None:
        return []
    return [(call.lineno, call_text(call)) for call in numpy_float64_makers(tree)]


# -- set_floatx calls ---------------------------------------------------------------


def floatx_calls(filename: str, dtype: str) -> list[tuple[int, str]]:
    """(line, call as written) of each ``set_floatx(...)`` call of the file that sets
    ``dtype`` ("float64": ``set_floatx("float64")``, ``set_floatx(tf.float64)``)."""
    tree = _tree(filename)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or _callee(node) != "set_floatx" or not node.args:
            continue
        value = ast.unparse(node.args[0]).strip("'\"").split(".")[-1]
        if value == dtype:
            found.append((node.lineno, call_text(node)))
    return sorted(found)


# The methods by which a statement adds to a container it names.
GROWING_METHODS = frozenset(
    {"append", "appendleft", "extend", "extendleft", "insert", "add", "update", "setdefault"}
)


def growth_sites(
    filename: str, name: str, attribute: bool = False, lines: tuple[int, int] | None = None
) -> list[tuple[int, str]]:
    """Where ``filename`` adds to the container it calls ``name`` (``self.name`` with
    ``attribute``), first line first: ``name.append(x)`` (or extend, add, update ...),
    ``name += ...``, ``name[key] = ...``; each as (line, the statement as written, on one
    line). ``lines`` (first, last) keeps those of one function. Empty without a source."""
    tree = _tree(filename)
    if tree is None:
        return []

    def named(node: ast.expr) -> bool:
        if attribute:
            return isinstance(node, ast.Attribute) and node.attr == name
        return isinstance(node, ast.Name) and node.id == name

    found: dict[int, str] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        if lines is not None and not lines[0] <= node.lineno <= lines[1]:
            continue
        grows = False
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            grows = (
                isinstance(func, ast.Attribute)
                and func.attr in GROWING_METHODS
                and named(func.value)
            )
        elif isinstance(node, ast.AugAssign):
            grows = named(node.target)
        elif isinstance(node, ast.Assign):
            grows = any(
                isinstance(target, ast.Subscript) and named(target.value) for target in node.targets
            )
        if grows:
            found.setdefault(node.lineno, ast.unparse(node))
    return sorted(found.items())


def keras_spelling(tree: ast.Module) -> str | None:
    """How the module names Keras: ``keras`` (``import keras``, ``from tensorflow import
    keras``, or the alias either gave), else ``tf.keras`` through its TensorFlow import
    (``tensorflow.keras`` unaliased); None where it imports neither."""
    tensorflow = None
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "keras":
                    return alias.asname or "keras"
                if alias.name == "tensorflow" and tensorflow is None:
                    tensorflow = alias.asname or "tensorflow"
        if isinstance(node, ast.ImportFrom) and node.module == "tensorflow":
            for alias in node.names:
                if alias.name == "keras":
                    return alias.asname or "keras"
    return f"{tensorflow}.keras" if tensorflow else None


def keras_spelling_in(filename: str) -> str | None:
    """:func:`keras_spelling` of a file (None: unreadable)."""
    tree = _tree(filename)
    return keras_spelling(tree) if tree is not None else None


MODEL_CLASSES = frozenset({"Model", "Functional"})
# Layers that end a preprocessing or augmentation block (``keras.Sequential([RandomFlip,
# RandomRotation])`` called inside the model), never a model's output to the loss
PREPROCESSING_LAYERS = frozenset(
    {
        "Rescaling",
        "Resizing",
        "Normalization",
        "CenterCrop",
        "TextVectorization",
        "StringLookup",
        "IntegerLookup",
        "Hashing",
        "CategoryEncoding",
        "Discretization",
        "InputLayer",
        "Input",
    }
)


def _preprocessing(layer: ast.Call) -> bool:
    name = _callee(layer)
    return name.startswith("Random") or name in PREPROCESSING_LAYERS


def output_layers(filename: str, keyword: str) -> tuple[tuple[int, str, str], ...]:
    """:func:`output_layer_calls` of a file written without a ``dtype``, as the lines to
    replace: each line's number, its text as written, and that text with ``keyword``
    (``dtype='float32'``) added after the call's last argument (before its closing
    parenthesis where it has none), in line order; empty where the file cannot be read.

    Whole lines, so that the reader finds the one named and pastes the other in its
    place: a call split over lines is changed on the line its last argument ends, the
    point :func:`gpuwhy.trial.source_edits.set_keywords` adds a keyword at, so the
    lines printed are the trial's edits."""
    tree, lines = _tree(filename), _lines(filename)
    if tree is None or lines is None:
        return ()
    inserts: dict[int, list[int]] = {}
    for call in output_layer_calls(tree):
        if any(k.arg == "dtype" for k in call.keywords):
            continue
        line, column = _keyword_point(call)
        inserts.setdefault(line, []).append(column)
    out = []
    for line, columns in sorted(inserts.items()):
        if line > len(lines):
            continue
        text = lines[line - 1].encode("utf-8")
        for column in sorted(columns, reverse=True):
            added = keyword if text[column - 1 : column] == b"(" else ", " + keyword
            text = text[:column] + added.encode("utf-8") + text[column:]
        written = lines[line - 1].strip()
        out.append((line, written, text.decode("utf-8").strip()))
    return tuple(out)


def _keyword_point(call: ast.Call) -> tuple[int, int]:
    """Where a keyword is added to ``call`` (line, UTF-8 byte column): after its last
    argument, or just inside its closing parenthesis where it has none."""
    arguments: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    if arguments:
        last = max(arguments, key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0))
        return last.end_lineno or last.lineno, last.end_col_offset or 0
    return call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1


def output_layer_calls(tree: ast.Module) -> list[ast.Call]:
    """The layer calls that make each Keras model's output in the module, in line order:
    the last layer of a ``Sequential([...])`` list, the last ``.add(layer)`` to a name in
    one function (or the module), and the layer a functional model's ``outputs`` comes
    from (``Model(inputs, outputs)`` with ``outputs = layers.Dense(10)(x)`` before it, or
    the call written in its place); not a preprocessing or augmentation block's last
    (``RandomRotation``, ``Rescaling``: called inside a model, not its output). What a
    mixed-precision fix keeps in float32, in the program's own words."""
    found: dict[tuple[int, int], ast.Call] = {}  # by where each starts
    scopes: list[ast.AST] = [tree]
    scopes += [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in scopes:
        added: dict[str, ast.Call] = {}
        assigned: dict[str, list[ast.Assign]] = {}
        for node in _own_nodes(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node)
            if not isinstance(node, ast.Call):
                continue
            callee = _callee(node)
            if callee == "Sequential" and node.args and isinstance(node.args[0], ast.List):
                layers = node.args[0].elts
                if layers and isinstance(layers[-1], ast.Call) and not _preprocessing(layers[-1]):
                    found[_start(layers[-1])] = layers[-1]
            elif callee == "add" and isinstance(node.func, ast.Attribute) and node.args:
                receiver, layer = node.func.value, node.args[0]
                if isinstance(receiver, ast.Name) and isinstance(layer, ast.Call):
                    before = added.get(receiver.id)
                    if before is None or layer.lineno >= before.lineno:
                        added[receiver.id] = layer
            elif callee in MODEL_CLASSES:
                output = _output_layer(node, assigned)
                if output is not None:
                    found[_start(output)] = output
        for layer in added.values():
            if not _preprocessing(layer):
                found[_start(layer)] = layer
    return [found[start] for start in sorted(found)]


def _start(node: ast.expr) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` outside the functions defined in it, in source order."""
    out: list[ast.AST] = []
    stack = list(reversed(list(ast.iter_child_nodes(scope))))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        out.append(node)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _output_layer(model: ast.Call, assigned: dict[str, list[ast.Assign]]) -> ast.Call | None:
    """The layer a functional ``Model(inputs, outputs)`` call's outputs come from: the
    name's last assignment before the call (``outputs = layers.Dense(10)(x)``), or the
    layer called in its place (``Model(tokens, layers.Dense(2)(x))``)."""
    outputs = next((k.value for k in model.keywords if k.arg == "outputs"), None)
    if outputs is None and len(model.args) >= 2:
        outputs = model.args[1]
    if isinstance(outputs, ast.Name):
        made = [a for a in assigned.get(outputs.id, []) if a.lineno <= model.lineno]
        outputs = made[-1].value if made else None
    if isinstance(outputs, ast.Call) and isinstance(outputs.func, ast.Call):
        return outputs.func
    return None
