"""launch.eager-ops: the step the eager ops come from, traced as one graph.

Where the ops come from a ``def`` (``EagerFacts.step_code``), the fix is the decorator
above it, plain and with XLA. Where they come from a loop's body in no function, the
body becomes one: defined (decorated) just before the outermost loop around it, over the
loop's variables, and the loop's body becomes its call. Where the whole body cannot move
as written (a loss summed into a Python float that the code after the loop reads), the
statements that issue the ops do (``StepCode.moved``, source_step.py): the names they
take from the loop are the function's parameters, those read after them its returns,
and they become ``loss = train_step(xb, yb)``. Where neither can move (a ``break`` among
them, too long), the fix is refused with why.

Either way, a Keras metric the step updates but the program creates anew in a loop (an
``epoch_loss_avg = tf.keras.metrics.Mean()`` each epoch) would stay the first object in
the traced step: it is created once, before that loop, and ``reset_state()`` where it was
created. Other objects created anew in a loop are not rewritten: the fix is tried as it
is and the trial's comparison of the losses says what it did.
"""

from __future__ import annotations

import ast

from gpuwhy.facts import Facts, StepCode
from gpuwhy.finding import Finding
from gpuwhy.source_step import free_name, used_names
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles, location_parts
from gpuwhy.trial.source_edits import (
    Edit,
    add_decorator,
    function_at,
    import_tensorflow,
    indent_of,
    joined_insertions,
    node_span,
    segment,
    statement_at,
)

XLA_TOLERANCE = 0.05
XLA_WHY = (
    "each quantity's mean over the run: XLA fuses and reorders the float math, so its "
    "rounding differs and a long training drifts apart point by point"
)


def candidates(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    code = facts.eager.step_code if facts.eager is not None else None
    if code is None:
        return [], [NotTried(finding.id, "the run did not find the code the eager ops come from")]
    return traced(finding, code, files)


def traced(
    finding: Finding, code: StepCode, files: SourceFiles, xla: bool = True
) -> tuple[list[FixCandidate], list[NotTried]]:
    """``code`` (a def, or a loop's body moved into one) traced with ``tf.function``, and
    with XLA where ``xla``."""
    where = location_parts(code.location)
    read = files.read(where[0]) if where else None
    if where is None or read is None:
        return [], [NotTried(finding.id, f"{code.location} is not a file of the program's")]
    source, lines, tree = read
    tf, imports = import_tensorflow(tree, where[0])
    metrics = _metrics_made_once(code, files)
    if code.function is None:
        made = _loop_as_function(code, where, source, lines, tree)
        if isinstance(made, str):
            return [], [NotTried(finding.id, made)]
        name, insert_at, header, body, call_edit = made

        # blank lines around the def: two at a module's top level, one inside (PEP 8)
        around = 1 if insert_at[1] else 2
        blank = 0  # blank lines written just before it
        while blank < insert_at[0] - 1 and not lines[insert_at[0] - 2 - blank].strip():
            blank += 1

        def variant(decorator: str) -> tuple[Edit, ...]:
            text = "".join(
                [
                    # after the metrics made before the loop, or a line of code
                    "\n"
                    * (around if metrics else max(0, around - blank) if insert_at[0] > 1 else 0),
                    f"{insert_at[1]}@{decorator}\n",
                    f"{insert_at[1]}{header}\n",
                    *(f"{insert_at[1]}    {line}\n" if line else "\n" for line in body),
                    "\n" * around,
                ]
            )
            definition = Edit(where[0], insert_at[0], 0, insert_at[0], 0, text)
            return tuple(joined_insertions([*imports, *metrics, definition, call_edit]))

        what = f"the loop's body at {_short(code.location)} as {name}()"
        if code.moved is not None and code.part:
            first, last = code.moved
            what = (
                f"the statements issuing the ops (lines {first}-{last}) of the loop at "
                f"{_short(code.location)} as {name}()"
            )
    else:
        fn = function_at(tree, where[1])
        if fn is None:
            return [], [NotTried(finding.id, f"no def at {code.location}")]
        written = [segment(source, d) for d in fn.decorator_list]
        if any("function" in d for d in written):
            return [], [NotTried(finding.id, f"{fn.name} is already a tf.function")]

        def variant(decorator: str) -> tuple[Edit, ...]:
            decorated = add_decorator(where[0], lines, fn, decorator)
            return tuple(joined_insertions([*imports, *metrics, decorated]))

        what = fn.name
    made_once = ", its metrics made once and reset each pass" if metrics else ""
    plain = FixCandidate(
        finding=finding.id,
        fix=f"{what} traced: @{tf}.function{made_once}",
        edits=variant(f"{tf}.function"),
        location=code.location,
    )
    compiled = FixCandidate(
        finding=finding.id,
        fix=f"{what} traced and XLA-compiled{made_once}",
        edits=variant(f"{tf}.function(jit_compile=True)"),
        location=code.location,
        tolerance=XLA_TOLERANCE,
        tolerance_why=XLA_WHY,
        by_mean=True,
    )
    return ([plain, compiled] if xla else [plain]), []


def _short(location: str) -> str:
    path, _, line = location.rpartition(":")
    return f"{path.rsplit('/', 1)[-1]}:{line}"


def _loop_as_function(code: StepCode, where, source: str, lines: list[str], tree: ast.Module):
    """(name, (line, indent) to define it at, its header, its body, the edit that makes
    the loop's body its call), or why not."""
    if not code.body or not code.signature or not code.before:
        return (
            f"the ops come from a loop's body at {code.location} that cannot move into a "
            "function as written, whole or the statements issuing them (long, or they "
            "break, continue or return): put them in a def, then run gpuwhy fix again"
        )
    loop = statement_at(tree, where[1], (ast.For, ast.AsyncFor, ast.While))
    assert loop is None or isinstance(loop, ast.For | ast.AsyncFor | ast.While)
    before = location_parts(code.before)
    outer = statement_at(tree, before[1], (ast.For, ast.AsyncFor, ast.While)) if before else None
    if loop is None or outer is None or before is None or before[0] != where[0]:
        return f"no loop at {code.location} to move"
    # the name the fix gives it (one the program does not use: source_step.free_name),
    # checked again against the program as it is now
    given, _, rest = code.signature.removeprefix("def ").partition("(")
    params = rest.removesuffix("):")
    name = given if given not in used_names(tree) else free_name(tree)
    header = f"def {name}({params}):"
    first = loop.body[0].lineno
    last = loop.body[-1].end_lineno or loop.body[-1].lineno
    called = f"{name}({params})"
    if code.moved is not None and code.call is not None:  # the statements issuing the ops
        first, last = code.moved
        called = code.call.replace(f"{given}(", f"{name}(", 1)
    indent = indent_of(lines[first - 1])
    body = list(code.body)
    call = Edit(where[0], first, 0, last + 1, 0, f"{indent}{called}\n")
    return name, (outer.lineno, indent_of(lines[outer.lineno - 1])), header, body, call


def _metrics_made_once(code: StepCode, files: SourceFiles) -> list[Edit]:
    """For each Keras metric the step reads and a loop creates anew: its creation moved
    before that loop, and ``reset_state()`` in its place."""
    edits: list[Edit] = []
    for r in code.rebound:
        if not r.metric:
            continue
        at, loop_at = location_parts(r.location), location_parts(r.loop)
        read = files.read(at[0]) if at else None
        if at is None or loop_at is None or read is None or loop_at[0] != at[0]:
            continue
        source, lines, tree = read
        made = statement_at(tree, at[1], (ast.Assign,))
        loop = statement_at(tree, loop_at[1], (ast.For, ast.AsyncFor, ast.While))
        if made is None or loop is None or made.lineno != (made.end_lineno or made.lineno):
            continue
        text = segment(source, made)
        indent = indent_of(lines[loop.lineno - 1])
        edits.append(Edit(at[0], loop.lineno, 0, loop.lineno, 0, f"{indent}{text}\n"))
        span = node_span(made, lines)  # the statement alone: `; n = 0` after it stays
        edits.append(
            Edit(at[0], span.line, span.col, span.end_line, span.end_col, f"{r.name}.reset_state()")
        )
    return edits
