"""An epochs' loop around a loop over a dataset, read from the source as written: what
making one tf.data iterator for the run, in place of one per epoch, changes there.

``for x, y in train_ds:`` inside ``for epoch in range(12):`` makes a new iterator at
each epoch's start and frees it at its end. Each start fills the pipeline's buffers
again; each end stops its threads, and TF's autotune thread can sleep out the rest of
its period there (docs/speed.md: up to a minute). One iterator over the dataset
repeated, made once before the epochs' loop, and each epoch taking its batches from it
(``itertools.islice(train_ds_batches, 128)``, 128 the batches of one pass) reads the
same elements in the same order: ``repeat()`` makes each pass as a new iterator of the
dataset would, a shuffle's reshuffling included, inside the one iterator.

Where that would not read the same, no rewrite is given (:class:`NotRewritten` says
why): a loop that can leave a pass early (``break``: the next epoch would go on where it
stopped), a dataset built again in the epochs' loop (its names assigned
there), a loop with no epochs' loop around it in its own function (unless that function
loops over a parameter and is called once, in an epochs' loop: ``train_one_epoch(train_ds)``
then gives it each epoch's batches), an expression that is no dataset by its form
(``zip(a, b)``, a function's call).
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from gpuwhy.source_calls import char_col, statement_holding, syntax_tree
from gpuwhy.source_step import used_names

BATCHES_SUFFIX = "_batches"


@dataclass(frozen=True)
class EpochLoop:
    """The loop over a dataset at a line and the epochs' loop around it."""

    loop: ast.For  # the loop over the dataset
    dataset: ast.expr  # what it reads, inside ``enumerate(...)``/``tqdm(...)`` where written
    dataset_text: str  # as written (one line): "train_ds", "ds.take(40)"
    targets: str  # "x, y", "step, (x, y)"
    epochs: ast.For | ast.While  # the epochs' loop (the nearest around it)
    batches: str  # a name free in the module for the one iterator: "train_ds_batches"
    # what the one iterator is made of where it is not the dataset's .repeat(): a
    # strategy's distributed dataset has no repeat, the dataset it distributes does
    # ("strategy.experimental_distribute_dataset(train_ds.repeat())")
    repeated: str | None = None
    # where the loop runs in a function of the dataset it is given, once an epoch: the
    # call that gives it (``dataset`` is then its argument, what the epoch reads in place)
    call: ast.Call | None = None
    statement: ast.stmt | None = None  # the statement that makes the call

    def iterator_line(self) -> str:
        """The statement made once before the epochs' loop."""
        return f"{self.batches} = iter({self.repeated or self.dataset_text + '.repeat()'})"

    def call_text(self, per_pass: int | str | None = None) -> str:
        """The call that gives the loop its dataset, on one line: as written, or with
        ``per_pass`` batches of the one iterator in its place."""
        assert self.call is not None
        if per_pass is None:
            return ast.unparse(self.call)
        return _replaced(self.call, self.dataset, self.epoch_read(per_pass))

    def statement_lines(self, lines: tuple[str, ...], per_pass: int | str) -> list[str]:
        """The statement holding the call, as written (its assignment, the expression
        around the call, its indentation), with ``per_pass`` batches of the one iterator
        in place of the dataset: the lines to paste over it. A compound statement (an
        ``if`` whose test makes the call) gives its lines up to the dataset's end."""
        assert self.call is not None and self.statement is not None
        node = self.dataset
        first, end = node.lineno, node.end_lineno or node.lineno
        simple = not hasattr(self.statement, "body")
        last = (self.statement.end_lineno or end) if simple else end
        text = list(lines[self.statement.lineno - 1 : last])
        start_col = char_col(lines[first - 1], node.col_offset)
        end_col = char_col(lines[end - 1], node.end_col_offset or 0)
        head = lines[first - 1][:start_col]
        tail = lines[end - 1][end_col:]
        at = first - self.statement.lineno
        text[at : end - self.statement.lineno + 1] = [head + self.epoch_read(per_pass) + tail]
        return text

    def epoch_read(self, per_pass: int | str) -> str:
        """What an epoch reads in place of the dataset: ``per_pass`` batches of the one
        iterator."""
        return f"itertools.islice({self.batches}, {per_pass})"

    def reads(self, per_pass: int | None = None) -> str:
        """The loop's iterable on one line: as written (``enumerate(train_ds, 1)``), or
        with ``per_pass`` batches of the one iterator in place of the dataset."""
        if per_pass is None:
            return ast.unparse(self.loop.iter)
        if self.call is not None:  # the loop as written: the call gives it the batches
            return ast.unparse(self.loop.iter)
        return _replaced(self.loop.iter, self.dataset, self.epoch_read(per_pass))


@dataclass(frozen=True)
class NotRewritten:
    """Why the loop at the line is given no rewrite, in words for the fix."""

    why: str


def epoch_loop_in(filename: str, line: int) -> EpochLoop | NotRewritten:
    """:func:`epoch_loop` of a file (read once per version of it)."""
    tree = syntax_tree(filename)
    if tree is None:
        return NotRewritten(f"{filename} cannot be read as Python")
    return epoch_loop(tree, line)


def epoch_loop(tree: ast.Module, line: int, source: str | None = None) -> EpochLoop | NotRewritten:
    """The loop over a dataset that starts at ``line`` and its epochs' loop, or why it
    is not rewritten (``source``: the text, for the dataset as written)."""
    loop = _for_at(tree, line)
    if loop is None:
        return NotRewritten(f"no for loop starts at line {line}")
    dataset = _unwrapped(loop.iter)
    if not _dataset_form(dataset):
        return NotRewritten(
            f"it reads {ast.unparse(loop.iter)}: no dataset by its form (a name, an "
            "attribute or a method's call on one)"
        )
    traced = _traced(tree, _function_of(tree, loop))
    if traced is not None:
        return NotRewritten(traced)
    leaves = _leaves_early(loop)
    if leaves is not None:
        word, at = leaves
        return NotRewritten(
            f"its {word} at line {at} can end an epoch early: the next would go on where it stopped"
        )
    epochs = _epochs_loop(tree, loop)
    call = statement = None
    if epochs is None:
        through = _through_caller(tree, loop, dataset)
        if isinstance(through, NotRewritten):
            return through
        call, dataset, epochs = through
        statement = statement_holding(epochs, call)
    rebuilt = _names(dataset) & _assigned_in(epochs)
    if rebuilt:
        name = sorted(rebuilt)[0]
        return NotRewritten(
            f"{name} is assigned in the epochs' loop at line {epochs.lineno}: the dataset "
            "is built again each epoch"
        )
    again = _read_again(epochs, dataset)
    if again is not None:
        return NotRewritten(
            f"{ast.unparse(_base(dataset))} is read again at line {again} in the epochs' loop: "
            "a seeded shuffle's order follows the iterators made over the dataset, and "
            "one iterator for this loop would change the other's"
        )
    text = (ast.get_source_segment(source, dataset) if source else None) or ast.unparse(dataset)
    if "\n" in text:
        text = ast.unparse(dataset)
    target = loop.target
    names = target.elts if isinstance(target, ast.Tuple) else [target]  # x, y: not (x, y)
    distributed = _distributed(tree, dataset)
    if isinstance(distributed, NotRewritten):
        return distributed
    return EpochLoop(
        loop=loop,
        dataset=dataset,
        dataset_text=text,
        targets=", ".join(ast.unparse(n) for n in names),
        epochs=epochs,
        batches=_free(tree, _last_name(dataset) + BATCHES_SUFFIX),
        repeated=distributed,
        call=call,
        statement=statement,
    )


NO_EPOCHS = (
    "no epochs' loop around it in its own function (it runs once per call: the one "
    "iterator is the caller's to make)"
)


def _through_caller(
    tree: ast.Module, loop: ast.For, dataset: ast.expr
) -> tuple[ast.Call, ast.expr, ast.For | ast.While] | NotRewritten:
    """A loop over its function's parameter (``def train_one_epoch(ds): for x, y in
    ds:``), that function called once in the file, inside an epochs' loop, with a
    dataset (``train_one_epoch(train_ds)``): the call, its argument and that loop. The
    parameter is used nowhere else in the function (a ``ds.take(n)`` or ``len(ds)``
    there needs the dataset, not an iterator's batches)."""
    function = _function_of(tree, loop)
    if function is None or not isinstance(dataset, ast.Name):
        return NotRewritten(NO_EPOCHS)
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    traced = _traced(tree, function)
    if traced is not None:
        return NotRewritten(traced)
    keyword_only = [a.arg for a in function.args.kwonlyargs]
    name = dataset.id
    if name not in params and name not in keyword_only:
        return NotRewritten(NO_EPOCHS)
    uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == name]
    if len(uses) != 1:
        return NotRewritten(
            f"{name}, {function.name}'s parameter, is used elsewhere in it: the one "
            "iterator's batches would not stand for the dataset there"
        )
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == function.name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == function.name)
        )
    ]
    if len(calls) != 1:
        where = "nowhere in its file" if not calls else f"at {len(calls)} places"
        return NotRewritten(f"{function.name} is called {where}: the one iterator is the caller's")
    call = calls[0]
    argument = _argument(call, params, name)
    if argument is None:
        return NotRewritten(f"{function.name}'s call at line {call.lineno} passes {name} unnamed")
    if not _dataset_form(argument):
        return NotRewritten(
            f"{function.name}'s call at line {call.lineno} passes {ast.unparse(argument)}: no "
            "dataset by its form (a name, an attribute or a method's call on one)"
        )
    epochs = _epochs_loop(tree, call)
    if epochs is None:
        return NotRewritten(
            f"no epochs' loop around {function.name}'s call at line {call.lineno} in its own "
            "function"
        )
    return call, argument, epochs


# calls around a dataset that iterate it as it is (a progress bar, a count): the one
# iterator's batches go in its place, the call kept as written
_WRAPPERS = ("enumerate", "tqdm")


def _unwrapped(node: ast.expr) -> ast.expr:
    """The dataset inside ``enumerate(...)``, ``tqdm(...)``, ``tqdm.tqdm(...)`` (or
    several of them), else the node itself."""
    while isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else None
        if isinstance(func, ast.Attribute):
            name = func.attr if func.attr == "tqdm" else None
        if name not in _WRAPPERS:
            break
        node = node.args[0]
    return node


def _replaced(node: ast.expr, part: ast.expr, text: str) -> str:
    """``node`` on one line with ``text`` in place of ``part`` (a node inside it)."""
    return ast.unparse(copy.deepcopy(node, {id(part): ast.Name(id=text, ctx=ast.Load())}))


def _traced(
    tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef | None
) -> str | None:
    """Why not, where ``function`` is a tf.function (decorated, or wrapped by a
    ``tf.function(...)`` call of its name): a Python iterator given to it is a Python
    value there, each batch's step traced into the graph and the function traced again
    at each call; a loop inside it over a dataset is a graph loop, no iterator to end."""
    if function is None:
        return None
    for decorator in function.decorator_list:
        if _last_attr(decorator.func if isinstance(decorator, ast.Call) else decorator) == (
            "function"
        ):
            return (
                f"{function.name} is a tf.function (line {decorator.lineno}): an iterator "
                "given to it is a Python value there, traced again at each call"
            )
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _last_attr(node.func) == "function"
            and node.args
            and _last_attr(node.args[0]) == function.name
        ):
            return (
                f"{function.name} is made a tf.function at line {node.lineno}: an iterator "
                "given to it is a Python value there, traced again at each call"
            )
    return None


def _last_attr(node: ast.expr) -> str | None:
    """``function`` of ``tf.function``, ``function``; None for other forms."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


# what a dataset is asked without an iterator being made over it
_NO_ITERATOR = ("cardinality", "element_spec", "options")


def _base(node: ast.expr) -> ast.expr:
    """The dataset the expression is made of: ``ds`` of ``ds.take(40)``, ``self.ds`` of
    ``self.ds.shuffle(8)``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    return node


def _read_again(epochs: ast.For | ast.While, dataset: ast.expr) -> int | None:
    """The line where the epochs' loop reads the loop's dataset again, elsewhere than the
    loop (another loop, a comprehension, a ``take``): each such read makes an iterator
    of its own, and a seeded shuffle draws each iterator's order in turn, so moving this
    loop's to one for the run would change the orders the others read. ``len(ds)`` and
    ``ds.cardinality()`` make none. None where there is no such read."""
    base = _base(dataset)
    wanted = ast.dump(base)
    inside = {id(n) for n in ast.walk(dataset)}
    parents: dict[int, ast.AST] = {}
    for node in ast.walk(epochs):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
    for node in ast.walk(epochs):
        if id(node) in inside or not isinstance(node, type(base)) or ast.dump(node) != wanted:
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr in _NO_ITERATOR:
            continue
        if (
            isinstance(parent, ast.Call)
            and isinstance(parent.func, ast.Name)
            and parent.func.id == "len"
        ):
            continue
        if isinstance(getattr(node, "ctx", None), ast.Store):
            continue  # assigned: the rebuilt check names it
        return getattr(node, "lineno", epochs.lineno)
    return None


def _function_of(tree: ast.Module, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function whose body holds ``node``."""
    found = None
    for candidate in ast.walk(tree):
        if isinstance(candidate, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            n is node for n in ast.walk(candidate)
        ):
            if found is None or candidate.lineno > found.lineno:
                found = candidate
    return found


def _argument(call: ast.Call, params: list[str], name: str) -> ast.expr | None:
    """What ``call`` passes for the parameter ``name`` (None where a ``*args`` or
    ``**kwargs`` may hold it). A method called on an object (``self.run_epoch(ds)``)
    binds its first parameter to the object."""
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        return None
    positional = (
        params[1:]
        if isinstance(call.func, ast.Attribute) and params[:1] in (["self"], ["cls"])
        else params
    )
    if name not in positional:
        return None
    index = positional.index(name)
    return call.args[index] if index < len(call.args) else None


DISTRIBUTE = "experimental_distribute_dataset"
FROM_FUNCTION = "distribute_datasets_from_function"


def _distributed(tree: ast.Module, dataset: ast.expr) -> str | NotRewritten | None:
    """Where the loop reads a name the module assigns a strategy's distributed dataset
    (``dist_ds = strategy.experimental_distribute_dataset(train_ds)``), which has no
    ``repeat()``: that call over the dataset repeated. None for any other dataset; why
    not, for a dataset the strategy makes from a function (the repeat is the function's
    to write) or a name assigned several ways."""
    if not isinstance(dataset, ast.Name):
        return None
    values = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == dataset.id for t in node.targets)
    ]
    calls = [
        v
        for v in values
        if isinstance(v, ast.Call)
        and isinstance(v.func, ast.Attribute)
        and v.func.attr in (DISTRIBUTE, FROM_FUNCTION)
    ]
    if not calls:
        return None
    if len(values) > 1:
        return NotRewritten(
            f"{dataset.id} is assigned {len(values)} times, a strategy's among them"
        )
    call = calls[0]
    assert isinstance(call.func, ast.Attribute)
    if call.func.attr == FROM_FUNCTION or not call.args:
        return NotRewritten(
            f"{dataset.id} is made by {ast.unparse(call.func)}: the dataset it distributes is "
            "the one to repeat, in the function that makes it"
        )
    repeated = copy.deepcopy(call)
    inner = repeated.args[0]
    repeated.args[0] = ast.Call(
        func=ast.Attribute(value=inner, attr="repeat", ctx=ast.Load()), args=[], keywords=[]
    )
    return ast.unparse(repeated)


def imports_itertools(tree: ast.Module) -> bool:
    """Whether the module imports ``itertools`` under its own name at its top."""
    return any(
        isinstance(node, ast.Import)
        and any(a.name == "itertools" and a.asname in (None, "itertools") for a in node.names)
        for node in tree.body
    )


def _for_at(tree: ast.Module, line: int) -> ast.For | None:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.For) and n.lineno == line]
    return found[-1] if found else None  # the innermost of two on one line


def _dataset_form(node: ast.expr) -> bool:
    """A name, an attribute, or a method's call on one of those (``ds.take(40)``,
    ``self.train_ds``): what can be a dataset and is evaluated once as well as each
    epoch. A function's call (``make_dataset()``) may make a new one each time."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _nested(node: ast.AST) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))


def _own_nodes(loop: ast.For) -> list[ast.AST]:
    """The nodes of the loop's body, not inside the functions it defines nor inside the
    loops it holds (a ``break`` there ends that loop)."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = [*loop.body]
    while todo:
        node = todo.pop()
        found.append(node)
        if _nested(node):
            continue
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            todo.extend(node.orelse)  # its else runs in this loop
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def _leaves_early(loop: ast.For) -> tuple[str, int] | None:
    """The loop's own first ``break``, as (its word, its line): it ends an epoch before
    the pass does. (A ``return`` or a ``raise`` ends the epochs' loop too: no later
    epoch reads from the iterator.)"""
    breaks = [n for n in _own_nodes(loop) if isinstance(n, ast.Break)]
    first = min(breaks, key=lambda n: n.lineno, default=None)
    return None if first is None else ("break", first.lineno)


def _epochs_loop(tree: ast.Module, loop: ast.AST) -> ast.For | ast.While | None:
    """The nearest ``for`` or ``while`` whose body holds the loop (or a call), in its own
    scope."""
    stack: list[tuple[ast.AST, ast.For | ast.While | None]] = [(tree, None)]
    while stack:
        node, around = stack.pop()
        if node is loop:
            return around
        if _nested(node):
            around = None  # a function's body runs per call: no epochs' loop outside it
        elif isinstance(node, (ast.For, ast.While)):
            for child in node.body:
                stack.append((child, node))
            for child in node.orelse:
                stack.append((child, around))
            continue
        stack.extend((child, around) for child in ast.iter_child_nodes(node))
    return None


def _names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _assigned_in(loop: ast.For | ast.While) -> set[str]:
    """Names the epochs' loop binds (its target, its body's assignments) outside the
    functions it defines; an attribute assigned (``self.ds = ...``) binds its root's
    name."""
    bound: set[str] = set()
    nodes: list[ast.AST] = [loop.target] if isinstance(loop, ast.For) else []
    todo: list[ast.AST] = [*loop.body]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if not _nested(node):
            todo.extend(ast.iter_child_nodes(node))
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name):
                bound.add(root.id)
    return bound


def _last_name(node: ast.expr) -> str:
    """``train_ds`` of ``train_ds``, ``self.train_ds`` or ``train_ds.take(40)``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        node = node.func.value
    name = node.attr if isinstance(node, ast.Attribute) else None
    if isinstance(node, ast.Name):
        name = node.id
    # a class's constructor (tf.data.Dataset.zip(...)): no name of the program's
    return name if name and not name[0].isupper() else "dataset"


def _free(tree: ast.Module, name: str) -> str:
    used = used_names(tree)
    if name not in used:
        return name
    return next(f"{name}{i}" for i in range(2, 1000) if f"{name}{i}" not in used)


def fit_call_at(tree: ast.Module, line: int) -> ast.Call | NotRewritten:
    """The ``X.fit(...)`` call at ``line`` (its method's name there, as Python reports a
    call's line) that a dataset repeated and ``steps_per_epoch`` can be given to."""
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "fit"
        and line in (node.func.end_lineno, node.lineno)
    ]
    if len(calls) != 1:
        return NotRewritten(f"no one fit() call at line {line}")
    call = calls[0]
    if any(k.arg == "steps_per_epoch" for k in call.keywords):
        return NotRewritten("it passes steps_per_epoch already")
    x = fit_data(call)
    if x is None or not _dataset_form(x):
        shown = ast.unparse(x) if x is not None else "nothing"
        return NotRewritten(f"it trains on {shown}: no dataset by its form")
    return call


def fit_data(call: ast.Call) -> ast.expr | None:
    """fit's training data: its first argument or ``x=``."""
    if call.args and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "x"), None)


def fit_validation(call: ast.Call) -> ast.expr | None:
    """fit's ``validation_data=`` where it is a dataset by its form and no
    ``validation_steps`` is given: Keras then makes a new iterator over it at each
    epoch's validation, and keeps one for the run over it repeated with
    ``validation_steps``. None otherwise (arrays, a tuple, steps already given)."""
    if any(k.arg == "validation_steps" for k in call.keywords):
        return None
    value = next((k.value for k in call.keywords if k.arg == "validation_data"), None)
    return value if value is not None and _dataset_form(value) else None


def _repeat(node: ast.expr) -> ast.Call:
    return ast.Call(
        func=ast.Attribute(value=node, attr="repeat", ctx=ast.Load()), args=[], keywords=[]
    )


def fit_repeated(call: ast.Call, per_pass: int, validation_per_pass: int | None = None) -> str:
    """The fit call, on one line, over its dataset repeated with ``steps_per_epoch``; its
    validation dataset too, with ``validation_steps``, where ``validation_per_pass`` is
    given and :func:`fit_validation` finds one."""
    new = copy.deepcopy(call)
    x = fit_data(new)
    assert x is not None  # fit_call_at found it
    if new.args and new.args[0] is x:
        new.args[0] = _repeat(x)
    else:
        new.keywords = [
            ast.keyword(arg="x", value=_repeat(x)) if k.arg == "x" else k for k in new.keywords
        ]
    new.keywords.append(ast.keyword(arg="steps_per_epoch", value=ast.Constant(per_pass)))
    if validation_per_pass is not None and fit_validation(new) is not None:
        new.keywords = [
            ast.keyword(arg=k.arg, value=_repeat(k.value)) if k.arg == "validation_data" else k
            for k in new.keywords
        ]
        new.keywords.append(
            ast.keyword(arg="validation_steps", value=ast.Constant(validation_per_pass))
        )
    return ast.unparse(new)
