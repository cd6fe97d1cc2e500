"""The notebook of threshold experiments runs, cell by cell, in a fresh kernel (issue 29: it
is executed in the tests so it cannot rot; the site renders it as committed).

It needs the ``docs`` extra (nbclient, ipykernel), like the site's tests.
"""

from __future__ import annotations

import pytest

from .mdrun import DOCS

#: The notebooks of the site.
NOTEBOOKS = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.ipynb"))
#: A notebook cell that runs longer than this fails (a hung kernel).
CELL_TIMEOUT_S = 300


def test_the_notebooks_are_found():
    assert "tutorials/threshold-experiments.ipynb" in NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_the_notebook_runs(notebook, tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(DOCS / notebook, as_version=4)
    assert any(c.cell_type == "code" for c in nb.cells), f"{notebook} has no code"
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.get("output_type") != "error", output
