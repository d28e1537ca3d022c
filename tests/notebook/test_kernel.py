"""``%%gpuwhy`` in a real Jupyter kernel: ipykernel started by nbclient, executing a real
``.ipynb`` as Jupyter, Colab and Kaggle do (outputs as the notebook stores them). The
example notebook runs top to bottom; then the cells of cells.py: the same cell twice, an
interrupted cell (a KeyboardInterrupt raised, and the kernel's own interrupt), and cells
after the magic that find no hook left."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.notebook import cells

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("tensorflow")

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "notebook.ipynb"
KERNEL = "gpuwhy-test"


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A kernelspec of this interpreter with this checkout first on its path (the
    worktree's gpuwhy and tests, never an installed copy), and a working directory."""
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path.rstrip(os.pathsep))
    work = tmp_path / "work"
    work.mkdir()
    return work


ENDLESS = "%%gpuwhy --text\nfor batch in dataset.repeat():\n    pass"


def _timeout(cell) -> int:
    """ENDLESS runs until Jupyter interrupts the kernel (SIGINT) after 5 s, as a user's
    stop button does; the other cells have 4 minutes."""
    return 5 if cell.source == ENDLESS else 240


def execute(notebook, cwd: Path, allow_errors: bool = False):
    client = nbclient.NotebookClient(
        notebook,
        kernel_name=KERNEL,
        timeout_func=_timeout,
        interrupt_on_timeout=True,
        allow_errors=allow_errors,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute()
    return notebook


def reports(cell) -> list[dict]:
    """The report bundles a cell displayed."""
    return [o["data"] for o in cell.outputs if o.output_type == "display_data"]


def stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.get("name") == "stdout")


def test_the_example_notebook_runs_top_to_bottom(kernel):
    notebook = execute(nbformat.read(EXAMPLE, as_version=4), kernel)
    code = {c.source.splitlines()[0]: c for c in notebook.cells if c.cell_type == "code"}
    errors = [o for c in code.values() for o in c.outputs if o.output_type == "error"]
    assert errors == []
    (check,) = reports(code["%gpuwhy check"])
    assert set(check) == {"text/plain", "text/html"}
    assert check["text/plain"][0] in "✓✗"  # the doctor's answer
    (watched,) = reports(code["%%gpuwhy -r rec"])
    assert set(watched) == {"text/plain", "text/html"}
    assert watched["text/html"].startswith("<iframe srcdoc=")
    assert "input.bound" in watched["text/plain"]
    assert "input.python-function" in watched["text/plain"]
    assert " at In[" in watched["text/plain"]  # the stage named by its cell, as IPython does
    findings = code["[(f.id, f.severity) for f in rec.findings]"].outputs[0]["data"]
    assert "('input.bound', 'high')" in findings["text/plain"]
    (fixed,) = reports(code["%%gpuwhy -r fixed --text"])
    assert set(fixed) == {"text/plain"}
    assert "faster per step" in stdout(code["import gpuwhy"])


def test_the_magic_in_a_kernel_twice_interrupted_and_then_gone(kernel):
    hooks = (
        "from tests.notebook.hooks import NONE, installed_hooks\n"
        "print('hooks left:', installed_hooks() if installed_hooks() != NONE else 'none')"
    )
    sources = [
        "%load_ext gpuwhy",
        cells.PIPELINE,
        cells.WATCHED_PIPELINE,
        cells.WATCHED_PIPELINE,  # the same cell run again
        hooks,
        cells.EAGER_SETUP,
        cells.WATCHED_EAGER,
        cells.INTERRUPTED,
        hooks,
        "print(sum(int(b.numpy().sum()) for b in dataset))",
        ENDLESS,  # stopped by the kernel's interrupt, as the stop button does
        hooks,
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    notebook = execute(notebook, kernel, allow_errors=True)
    ran = notebook.cells
    for watched in ran[2:4]:
        assert f"total {cells.TOTAL}" in stdout(watched)  # the cell's own output ...
        (result,) = [o for o in watched.outputs if o.output_type == "execute_result"]
        assert result["data"]["text/plain"] == str(cells.TOTAL)  # ... and value
        (report,) = reports(watched)
        assert set(report) == {"text/plain", "text/html"} and "input.bound" in report["text/plain"]
    assert stdout(ran[4]) == "hooks left: none\n"
    assert "launch.eager-ops" in reports(ran[6])[0]["text/plain"]
    # interrupted: its report, then the KeyboardInterrupt, in that order
    kinds = [o.output_type for o in ran[7].outputs]
    assert kinds[-2:] == ["display_data", "error"]
    assert ran[7].outputs[-1]["ename"] == "KeyboardInterrupt"
    assert reports(ran[7])[0]["text/plain"].startswith("✗ Interrupted")
    assert stdout(ran[8]) == "hooks left: none\n"
    assert stdout(ran[9]) == f"{cells.TOTAL}\n" and not reports(ran[9])
    assert [o.output_type for o in ran[10].outputs][-2:] == ["display_data", "error"]
    assert ran[10].outputs[-1]["ename"] == "KeyboardInterrupt"
    assert reports(ran[10])[0]["text/plain"].startswith("✗ Interrupted")
    assert stdout(ran[11]) == "hooks left: none\n"
