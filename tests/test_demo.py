"""python -m ampy.demo: the data ships in the package, the helpers work, and a
short run trains (float32 and AMP), prints the table and writes the PNG."""
import io
import os

import numpy as np
import pytest

import ampy
from ampy import demo


def test_digits_ship_inside_the_package():
    assert os.path.getsize(demo.DATA) < 1 << 20
    assert os.path.exists(os.path.join(os.path.dirname(demo.DATA), "DIGITS_LICENSE.txt"))
    x_tr, y_tr, x_te, y_te = demo.load_digits()
    assert x_tr.shape == (1437, 64) and x_te.shape == (360, 64) and x_tr.dtype == np.float32
    assert 0.0 <= x_tr.min() and x_tr.max() <= 1.0
    assert sorted(set(y_tr.tolist())) == list(range(10)) and len(y_tr) + len(y_te) == 1797


def test_progress_bar_and_table():
    buf = io.StringIO()
    bar = demo.Progress(3, "run", width=6, file=buf)
    for _ in range(3):
        bar.update(loss=0.5)
    assert "[######] 3/3 loss 0.5" in buf.getvalue()
    row = {"accuracy": 0.9, "epoch_time": 0.5, "skipped": [False, True], "final_scale": 1024.0,
           "amp": True}
    t = demo.table([("AMP", row)])
    assert "0.900" in t and "1024" in t and "skipped" in t


def _has_training_stack():
    nn, optim = getattr(ampy, "nn", None), getattr(ampy, "optim", None)
    return (nn is not None and optim is not None and hasattr(nn, "Sequential")
            and hasattr(optim, "SGD") and hasattr(ampy, "no_grad")
            and hasattr(ampy.Tensor, "backward") and hasattr(ampy.Tensor, "argmax"))


@pytest.mark.skipif(not _has_training_stack(),
                    reason="needs ampy.nn (Sequential, Linear, ReLU, functional.cross_entropy), "
                           "ampy.optim.SGD, ampy.no_grad, Tensor.backward/argmax")
@pytest.mark.filterwarnings("ignore:GradScaler. no float16 is involved")
def test_demo_runs(tmp_path, capsys):
    out = tmp_path / "demo.png"
    rows = demo.main(["--epochs", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert out.exists() and out.stat().st_size > 10000 and f"wrote {out}" in text
    assert "float32" in text and "AMP float16+scaler" in text
    (_, f32), (_, amp) = rows
    assert f32["accuracy"] > 0.8 and amp["accuracy"] > 0.8
    assert abs(f32["accuracy"] - amp["accuracy"]) < 0.05
    assert len(amp["scales"]) == 2 * 23 and amp["final_scale"] >= 2.0**16
