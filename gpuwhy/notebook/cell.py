"""A cell's code run as IPython runs a cell, inside ``%%gpuwhy``.

Why not ``shell.run_cell``: a nested run catches the cell's exception and prints it, so
the magic could neither show its report before the traceback nor let the exception
propagate once (a KeyboardInterrupt must still stop "Run All"). Instead, as ``%%time``
does, the cell is transformed (its ``%magics`` and ``!commands`` too), compiled under the
name IPython gives a cell (so gpuwhy's hooks see the user's frames and the traceback
shows its lines), run in the user's namespace, and the value of a last bare expression
is returned for IPython to show as the cell's ``Out``.
"""

from __future__ import annotations

import ast
from typing import Any


def run_cell_code(shell: Any, cell: str) -> Any:
    """Run ``cell`` in ``shell``'s user namespace; the value of its last expression, or
    None (also when the cell ends with ``;``, as IPython hides it). Exceptions propagate."""
    __tracebackhide__ = True  # IPython leaves this frame out of the user's traceback
    # one line first, where the notebook shows %%gpuwhy: the lines gpuwhy and the
    # traceback name are the lines the user sees
    source = "\n" + shell.transform_cell(cell)
    filename = shell.compile.cache(source, cell_number(shell, cell), raw_code="\n" + cell)
    tree = shell.transform_ast(shell.compile.ast_parse(source, filename=filename))
    last: ast.Expression | None = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    namespace = shell.user_ns
    exec(shell.compile(tree, filename, "exec"), shell.user_global_ns, namespace)
    if last is None:
        return None
    value = eval(shell.compile(last, filename, "eval"), shell.user_global_ns, namespace)
    return None if source.rstrip().endswith(";") else value


def cell_number(shell: Any, cell: str) -> int:
    """The number the notebook shows for the running cell (``In[N]``). IPython 9 counts
    the cell before running it (``execution_count`` is already the next cell's), IPython
    7 and 8 after: the history, which stores a cell before it runs, says which it is."""
    history = getattr(shell, "history_manager", None)
    raw = getattr(history, "input_hist_raw", None) or []
    parsed = getattr(history, "input_hist_parsed", None) or []
    if len(parsed) > 1 and raw and cell.strip() and cell.strip() in raw[-1]:
        return len(parsed) - 1
    return int(shell.execution_count)
