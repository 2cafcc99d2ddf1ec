"""The family examples run as a user runs them (`python examples/<name>.py`) in a
short mode, and learn: the loss they print falls below its first value."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RUNS = {
    "gpt": ["--steps", "50"],
    "gpt-fp16": ["--steps", "50", "--dtype", "float16"],
    "lstm_lm": ["--steps", "50"],
    "cnn": ["--epochs", "1"],
    "cnn-fp16": ["--epochs", "1", "--fp16"],
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs_and_learns(name):
    script = os.path.join(ROOT, "examples", name.split("-")[0] + ".py")
    out = subprocess.run([sys.executable, script] + RUNS[name], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    if name.startswith("cnn"):
        acc = [float(a) for a in re.findall(r"test accuracy ([0-9.]+)", out.stdout)]
        assert acc and acc[-1] > 0.5, out.stdout  # ten classes: chance is 0.1
    else:
        losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", out.stdout)]
        assert len(losses) >= 2 and losses[-1] < losses[0], out.stdout
