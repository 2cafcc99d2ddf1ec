"""examples/amp_tour.ipynb executes from top to bottom (so it never rots)."""
import os

import pytest

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (test extra)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (test extra)")
pytest.importorskip("ipykernel", reason="ipykernel is not installed (test extra)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "examples", "amp_tour.ipynb")


def test_notebook_executes(monkeypatch):
    # the kernel imports this checkout's ampy, not whichever one is installed
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    client.execute()
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", ()))
    assert "zero in float16 without scaling" in outputs and "test accuracy" in outputs
    images = sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", ()))
    assert images >= 3


def test_notebook_is_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
