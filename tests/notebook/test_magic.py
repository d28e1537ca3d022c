"""``%%gpuwhy`` and ``%gpuwhy`` in an in-process IPython shell (IPython's own test shell,
as pyinstrument tests its magic), the display output captured: real TensorFlow, real
tf.data, the cells of cells.py. The same shell runs every test in turn, as one notebook
would: TensorFlow imported and datasets made in earlier cells."""

from __future__ import annotations

import _thread
import html
import json
import re
import subprocess
import sys
import threading

import pytest

from tests.notebook import cells
from tests.notebook.hooks import NONE, installed_hooks

pytest.importorskip("IPython")
pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def shell():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "gpuwhy")
    assert ip.run_cell(cells.PIPELINE).success
    assert ip.run_cell(cells.EAGER_SETUP).success
    return ip


def run(ip, cell: str):
    """The cell's result and what it wrote and displayed."""
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = ip.run_cell(cell)
    return result, captured


def report_bundle(captured) -> dict:
    (bundle,) = [o.data for o in captured.outputs if "text/plain" in o.data]
    return bundle


def test_a_watched_cell_shows_its_report_and_keeps_its_output_and_value(shell):
    result, captured = run(shell, cells.WATCHED_PIPELINE)
    assert result.success and result.result == cells.TOTAL  # the cell's Out, unchanged
    assert f"total {cells.TOTAL}" in captured.stdout
    bundle = report_bundle(captured)
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/html"].startswith("<iframe srcdoc=")
    page = html.unescape(bundle["text/html"])
    assert page.count("<html") == 1 and "new Plotly" in page or "Plotly." in page
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=[\"']?(https?:)?//", page)
    text = bundle["text/plain"]
    assert "input.bound" in text and "input.python-function" in text
    record = shell.user_ns["rec"]
    assert record.facts.steps.count == 20 and record.facts.steps.source == "tf-data"
    # the loop's line as the notebook numbers it (%%gpuwhy is line 1), and in the shown
    # report the cell is named as IPython's tracebacks name it
    assert record.facts.steps.marker.endswith(":3")
    assert " at <ipython-input-" in record.facts.steps.marker
    assert "next() on a tf.data iterator at In[" in text
    ids = {f.id for f in record.findings}
    assert {"input.bound", "input.python-function"} <= ids
    # the stage is named at the line of the cell that defined the dataset
    bound = next(f for f in record.findings if f.id == "input.bound")
    assert bound.location.startswith("<ipython-input-") and bound.location.endswith(":8")
    assert installed_hooks() == NONE

    # the same cell again: a second watched run, a new record
    again, captured = run(shell, cells.WATCHED_PIPELINE)
    assert again.success and again.result == cells.TOTAL
    assert shell.user_ns["rec"] is not record
    assert shell.user_ns["rec"].facts.steps.count == 20
    assert "input.bound" in report_bundle(captured)["text/plain"]
    assert installed_hooks() == NONE


def test_an_eager_gradient_tape_loop_is_found(shell):
    result, captured = run(shell, cells.WATCHED_EAGER)
    assert result.success, result.error_in_exec
    bundle = report_bundle(captured)
    assert set(bundle) == {"text/plain"}  # --text
    assert "launch.eager-ops" in bundle["text/plain"]
    assert shell.user_ns["eager_rec"].facts.steps.count == 24


def test_an_interrupted_cell_shows_its_report_and_the_interrupt_propagates(shell):
    result, captured = run(shell, cells.INTERRUPTED)
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    text = report_bundle(captured)["text/plain"]
    assert text.startswith("✗ Interrupted") and "input.python-function" in text
    record = shell.user_ns["stopped"]
    assert record.facts.program.ended == "interrupted"
    assert shell.user_ns["seen"] == 10
    assert installed_hooks() == NONE


@pytest.mark.parametrize("delay_s", [0.005, 0.01, 0.02, 0.04, 0.08, 0.3])
def test_ctrl_c_at_any_moment_leaves_no_hook(shell, delay_s):
    """A real interrupt (as the kernel's SIGINT raises it), landing wherever it lands:
    as the hooks go in, in the cell, as they come out. The report is shown when the
    cell ran; the interrupt always reaches the user; no hook stays."""
    from IPython.utils.capture import capture_output

    cell = "%%gpuwhy --text\nfor batch in dataset.repeat():\n    pass"
    timer = threading.Timer(delay_s, _thread.interrupt_main)
    try:
        with capture_output() as captured:
            timer.start()
            result = shell.run_cell(cell)
        assert isinstance(result.error_in_exec, KeyboardInterrupt)
    except KeyboardInterrupt:
        pass  # it landed here, before or after the cell: nothing of the cell to check
    finally:
        timer.join()
    assert installed_hooks() == NONE
    if delay_s >= 0.3:
        assert report_bundle(captured)["text/plain"].startswith("✗ Interrupted")


def test_a_failing_cell_shows_its_report_and_its_exception(shell):
    result, captured = run(shell, "%%gpuwhy --text --no-audit\nprint('before')\n1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert captured.stdout.startswith("before\n")
    text = report_bundle(captured)["text/plain"]
    assert "ZeroDivisionError: division by zero" in text
    # the traceback is the cell's: its line as the notebook numbers it, no gpuwhy frame
    assert "----> 3 1 / 0" in captured.stdout and "gpuwhy/notebook" not in captured.stdout
    assert installed_hooks() == NONE


def test_help_lists_the_options_and_runs_nothing(shell):
    result, captured = run(shell, "%%gpuwhy -h\nran = True")
    assert result.success and "ran" not in shell.user_ns
    assert captured.stdout.startswith("usage: %%gpuwhy")
    assert "--eager-duty" in captured.stdout and "--target" in captured.stdout


def test_a_cell_after_the_magic_runs_untouched(shell):
    # inside a watched cell the hooks are there (so the check below can see them) ...
    inside = "from tests.notebook.hooks import installed_hooks\ninside = installed_hooks()"
    result, _ = run(shell, f"%%gpuwhy --eager-duty 1 --text\n{inside}")
    assert result.success
    hooks = shell.user_ns["inside"]
    assert hooks["op callbacks"] and hooks["patches in place"] and hooks["threads"]
    # ... and after it, none
    assert installed_hooks() == NONE
    result, captured = run(shell, "print(sum(int(b.numpy().sum()) for b in dataset))\n7 * 6")
    assert result.success and result.result == 42
    assert captured.stdout.strip().splitlines()[0] == str(cells.TOTAL)
    assert not [o for o in captured.outputs if "text/html" in o.data]  # no report


def test_keras_fit_after_compile_in_an_earlier_cell(shell):
    setup = (
        "import keras\n"
        "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n"
        "model.compile(optimizer='sgd', loss='mse')\n"
        "xy = tf.data.Dataset.from_tensor_slices((tf.ones((64, 4)), tf.ones((64, 1)))).batch(8)\n"
    )
    assert shell.run_cell(setup).success
    result, captured = run(shell, "%%gpuwhy -r fit_rec --text\nmodel.fit(xy, epochs=2, verbose=0);")
    assert result.success and result.result is None  # `;` hides the History, as in IPython
    steps = shell.user_ns["fit_rec"].facts.steps
    assert steps.source == "keras-fit" and steps.count == 16
    assert installed_hooks() == NONE


def test_check_and_report_inline(shell, tmp_path):
    saved = tmp_path / "run.json"
    result, _ = run(shell, f"%%gpuwhy -r kept --text --json {saved}\nsum(1 for _ in dataset)")
    assert result.success and json.loads(saved.read_text())["schema"] == 1
    for given in (saved, "kept"):  # the saved file, and the record a variable holds
        result, captured = run(shell, f"%gpuwhy report {given}")
        assert result.success
        bundle = report_bundle(captured)
        assert set(bundle) == {"text/plain", "text/html"}
        assert "input.bound" in bundle["text/plain"]
    # --text: the terminal report alone (no 5 MB page saved in the notebook)
    result, captured = run(shell, f"%gpuwhy report {saved} --text")
    assert result.success and set(report_bundle(captured)) == {"text/plain"}
    # an interpreter that cannot import TensorFlow: the doctor's answer, in seconds
    result, captured = run(shell, "%gpuwhy check --python /bin/false --timeout 30")
    assert result.success
    assert report_bundle(captured)["text/plain"].startswith("✗")


@pytest.mark.parametrize(
    "line, says",
    [
        ("%gpuwhy report missing.json", "missing.json"),
        ("%gpuwhy frobnicate", "unknown subcommand 'frobnicate'"),
        ("%gpuwhy", "usage: %gpuwhy check"),
        ("%%gpuwhy --bogus\n1", "unrecognized arguments: --bogus"),
        ("%%gpuwhy -r 1x\n1", "-r needs a variable name"),
        ("%%gpuwhy --hz 0\n1", "--hz"),
        ("%%gpuwhy -f json\n1", "-f json is the format of -o PATH"),
    ],
)
def test_bad_input_is_one_usage_line_without_a_traceback(shell, line, says):
    from IPython.core.error import UsageError

    result, captured = run(shell, line)
    assert isinstance(result.error_in_exec, UsageError)
    assert says in str(result.error_in_exec)
    assert "Traceback" not in captured.stdout + captured.stderr
    if line.startswith("%%gpuwhy --bogus"):
        assert str(result.error_in_exec).splitlines()[1].startswith("usage: %%gpuwhy")
    else:
        assert len(str(result.error_in_exec).splitlines()) == 1


def test_unload_and_load_again(shell):
    shell.run_line_magic("unload_ext", "gpuwhy")
    assert "gpuwhy" not in shell.magics_manager.magics["cell"]
    shell.run_line_magic("load_ext", "gpuwhy")
    assert "gpuwhy" in shell.magics_manager.magics["cell"]
    assert "gpuwhy" in shell.magics_manager.magics["line"]


def test_import_gpuwhy_never_needs_ipython():
    code = (
        "import sys; sys.modules['IPython'] = None\n"
        "import gpuwhy\n"
        "assert callable(gpuwhy.load_ipython_extension)\n"
        "assert 'gpuwhy.notebook' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_watched_cell_is_named_by_its_own_number_as_the_notebook_shows_it(shell):
    # a kernel stores each cell in its history: IPython 9 counts the cell before it runs,
    # 7 and 8 after, and the report must name the cell the notebook shows either way
    number = shell.execution_count
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(
            "%%gpuwhy --text --no-audit\nx = sum(range(10))\nx", store_history=True
        )
    assert result.success and result.execution_count == number
    text = report_bundle(captured)["text/plain"]
    assert f"In[{number}]" in text and f"In[{number + 1}]" not in text


def test_a_cell_run_again_audits_its_functions_from_their_earlier_traces(shell):
    """The second run sees no trace (the first run made them): the functions' earlier
    traces are audited, so the placement and what reads it are not lost."""
    assert shell.run_cell("@tf.function\ndef doubled(x):\n    return x * 2\n").success
    cell = "%%gpuwhy -r fn_rec --text\nfor _ in range(5):\n    doubled(tf.constant(1.0))"
    assert run(shell, cell)[0].success
    first = shell.user_ns["fn_rec"]
    assert first.facts.placement is not None  # traced while watched: audited
    assert run(shell, cell)[0].success
    again = shell.user_ns["fn_rec"]
    assert again.facts.placement is not None
    names = [[f.name for f in r.facts.placement.functions] for r in (first, again)]
    assert names[0] == names[1]
    assert not any("ran already traced" in note for note in again.facts.program.notes)
