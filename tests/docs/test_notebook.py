"""The example notebook runs top to bottom in a fresh kernel, as a reader would run it, and is committed clean."""

import nbformat
import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "docs" / "examples").glob("*.ipynb"))


def test_there_is_an_example_notebook():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path):
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # The notebook's working folder is a temporary one, so anything it writes stays out of the tree.
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]
    mimetypes = {key for c in code for o in c.outputs for key in o.get("data", {})}
    assert "application/vnd.plotly.v1+json" in mimetypes  # a plotly figure was drawn
    assert "text/html" in mimetypes  # a pandas table was shown
