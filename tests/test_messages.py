"""The first messages a new user meets: no GPU, and importing from a source tree.

- device="cuda" on a machine without a usable GPU: every entry point (creation
  functions, Tensor.to/.cuda, Module.to/.cuda, module constructors, ampy.cuda
  queries) raises a RuntimeError that says plainly that no NVIDIA GPU or
  driver was found and how to check (ampy.cuda.is_available()), raised from a
  shallow frame: at most 3 frames inside ampy (4 for a module constructor),
  no chained exception. The state is untouched (the RNG has not advanced).
  autocast("cuda") and GradScaler("cuda") warn and disable themselves, as
  torch's do.
- `import ampy` from the root of a source checkout whose ./ampy has no built
  extension (an install elsewhere is shadowed) says what is happening and what
  to do, instead of Python's "partially initialized module" message.
"""
import os
import shutil
import subprocess
import sys
import traceback
import warnings

import numpy as np
import pytest
import torch

import ampy

from _helpers import without_cuda

ENTRY_POINTS = {
    "zeros": lambda: ampy.zeros(2, device="cuda"),
    "ones": lambda: ampy.ones(2, 3, device="cuda:0"),
    "empty": lambda: ampy.empty(2, device=ampy.device("cuda")),
    "full": lambda: ampy.full((2,), 1.5, device="cuda"),
    "tensor": lambda: ampy.tensor([1.0, 2.0], device="cuda"),
    "as_tensor_array": lambda: ampy.as_tensor(np.ones(2, np.float32), device="cuda"),
    "as_tensor_tensor": lambda: ampy.as_tensor(ampy.ones(2), device="cuda"),
    "arange": lambda: ampy.arange(4, device="cuda"),
    "linspace": lambda: ampy.linspace(0, 1, 5, device="cuda"),
    "eye": lambda: ampy.eye(3, device="cuda"),
    "rand": lambda: ampy.rand(2, device="cuda"),
    "randn": lambda: ampy.randn(2, device="cuda"),
    "randint": lambda: ampy.randint(0, 5, (2,), device="cuda"),
    "zeros_like": lambda: ampy.zeros_like(ampy.ones(2), device="cuda"),
    "ones_like": lambda: ampy.ones_like(ampy.ones(2), device="cuda"),
    "empty_like": lambda: ampy.empty_like(ampy.ones(2), device="cuda"),
    "full_like": lambda: ampy.full_like(ampy.ones(2), 3.0, device="cuda"),
    "rand_like": lambda: ampy.rand_like(ampy.ones(2), device="cuda"),
    "randn_like": lambda: ampy.randn_like(ampy.ones(2), device="cuda"),
    "Tensor.to": lambda: ampy.ones(2).to("cuda"),
    "Tensor.to_device_obj": lambda: ampy.ones(2).to(ampy.device("cuda", 0)),
    "Tensor.to_kw": lambda: ampy.ones(2).to(device="cuda", dtype=ampy.float16),
    "Tensor.cuda": lambda: ampy.ones(2).cuda(),
    "Tensor.cuda_index": lambda: ampy.ones(2).cuda(0),
    "Module.cuda": lambda m: m.cuda(),
    "Module.to": lambda m: m.to("cuda"),
    "Module.to_dtype_device": lambda m: m.to("cuda", ampy.float16),
    "cuda.current_device": lambda: ampy.cuda.current_device(),
    "cuda.get_device_name": lambda: ampy.cuda.get_device_name(),
    "cuda.synchronize": lambda: ampy.cuda.synchronize(),
    "cuda.set_device": lambda: ampy.cuda.set_device(0),
    "cuda.memory_allocated": lambda: ampy.cuda.memory_allocated(),
}
CONSTRUCTORS = {
    "Linear": lambda: ampy.nn.Linear(2, 2, device="cuda"),
    "LayerNorm": lambda: ampy.nn.LayerNorm(4, device="cuda"),
    "Embedding": lambda: ampy.nn.Embedding(5, 2, device="cuda"),
}


def ampy_frames(exc):
    pkg = os.path.dirname(ampy.__file__) + os.sep
    return [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(pkg)]


def check_plain(exc, limit):
    msg = str(exc)
    assert "no NVIDIA GPU or driver was found" in msg, msg
    assert "ampy.cuda.is_available()" in msg and "device='cpu'" in msg, msg
    assert "insufficient" not in msg and "cudaError" not in msg, msg
    assert exc.__cause__ is None and exc.__suppress_context__, "chained noise"
    frames = ampy_frames(exc)
    assert len(frames) <= limit, [f"{f.name} ({os.path.basename(f.filename)})" for f in frames]


@without_cuda
@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_cuda_entry_points_say_no_gpu_plainly(name):
    args = ()
    if name.startswith("Module."):
        args = (ampy.nn.Sequential(ampy.nn.Linear(2, 2), ampy.nn.Linear(2, 2)),)
    state = ampy.get_rng_state()
    with pytest.raises(RuntimeError) as info:
        ENTRY_POINTS[name](*args)
    check_plain(info.value, 3)
    assert np.array_equal(ampy.get_rng_state().numpy(), state.numpy())  # nothing drawn


@without_cuda
@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_module_constructors_with_cuda_device(name):
    with pytest.raises(RuntimeError) as info:
        CONSTRUCTORS[name]()
    check_plain(info.value, 4)


@without_cuda
def test_load_onto_cuda_says_no_gpu_and_what_to_pass():
    import io
    buf = io.BytesIO()
    ampy.save({"a": {"b": [ampy.ones(2)]}}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError) as info:
        ampy.load(buf, map_location="cuda")
    msg = str(info.value)
    assert msg.startswith("ampy.load: map_location='cuda': CUDA is not available: no NVIDIA GPU")
    assert "map_location='cpu'" in msg and "ampy.cuda.is_available()" in msg
    assert len(ampy_frames(info.value)) <= 2 and info.value.__suppress_context__


@without_cuda
def test_module_left_untouched_after_the_raise():
    m = ampy.nn.Linear(2, 2)
    w = m.weight
    before = w.detach().numpy().copy()
    with pytest.raises(RuntimeError, match="no NVIDIA GPU"):
        m.cuda()
    assert m.weight is w and not w.is_cuda and np.array_equal(w.detach().numpy(), before)


@without_cuda
def test_whole_traceback_in_a_fresh_process_is_short():
    code = "import ampy\nampy.nn.Linear(2, 2).cuda()\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.dirname(ampy.__file__)), timeout=120)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[-1].startswith("RuntimeError: ampy: CUDA is not available: no NVIDIA GPU")
    assert sum(line.lstrip().startswith("File ") for line in lines) <= 2, r.stderr
    assert "During handling" not in r.stderr and "direct cause" not in r.stderr


@without_cuda
def test_autocast_cuda_warns_and_disables_like_torch():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        a = ampy.autocast("cuda")
        t = torch.autocast("cuda")
    assert [w.category for w in got] == [UserWarning, UserWarning]
    assert "CUDA is not available" in str(got[0].message)
    assert a._enabled is t._enabled is False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ampy.autocast("cuda"):
            assert ampy.is_autocast_enabled("cuda") is False
            x = ampy.ones(2, 2)
            assert (x @ x).dtype is ampy.float32


@without_cuda
def test_grad_scaler_cuda_warns_and_disables_like_torch():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        s = ampy.amp.GradScaler("cuda")
        t = torch.amp.GradScaler("cuda")
    assert [w.category for w in got] == [UserWarning, UserWarning]
    assert "CUDA is not available" in str(got[0].message)
    assert s.is_enabled() is t.is_enabled() is False
    loss = ampy.ones(1)
    assert s.scale(loss) is loss  # disabled: scale() passes the loss through


def test_cpu_device_still_fine():
    assert ampy.zeros(2, device="cpu").tolist() == [0.0, 0.0]
    assert ampy.ones(2).to("cpu").device.type == "cpu"
    assert ampy.nn.Linear(2, 2).to("cpu").weight.device.type == "cpu"


# ------------------------------------------------- import from a source tree
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(ampy.__file__)))


def _copy_package(dst, with_extensions):
    def skip(d, names):
        return [n for n in names if n == "__pycache__" or
                (not with_extensions and n.endswith((".so", ".pyd")))]
    shutil.copytree(os.path.join(ROOT, "ampy"), os.path.join(dst, "ampy"), ignore=skip)


def _run_import(cwd, path):
    """`python -c "import ampy"` in cwd with only `path` + numpy's directory on
    sys.path after the script's own directory (-S: no .pth, so no editable
    install of some other checkout can answer)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path + [os.path.dirname(os.path.dirname(np.__file__))])
    code = "import ampy; print(ampy.__file__)"
    return subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


@pytest.fixture(scope="module")
def checkout_and_install(tmp_path_factory):
    """A source checkout (setup.py, csrc/, ampy/*.py, no built .so) and a
    "site-packages" holding an installed, built copy."""
    base = tmp_path_factory.mktemp("srctree")
    checkout, site = base / "checkout", base / "site"
    checkout.mkdir()
    site.mkdir()
    shutil.copy(os.path.join(ROOT, "setup.py"), checkout / "setup.py")
    shutil.copytree(os.path.join(ROOT, "csrc"), checkout / "csrc",
                    ignore=shutil.ignore_patterns("*.o", "*.so"))
    _copy_package(str(checkout), with_extensions=False)
    _copy_package(str(site), with_extensions=True)
    return str(checkout), str(site), str(base)


def test_import_from_unbuilt_source_tree_says_what_to_do(checkout_and_install):
    checkout, site, _ = checkout_and_install
    r = _run_import(checkout, [site])
    assert r.returncode == 1
    err = r.stderr
    last = err.strip().splitlines()[-1]
    assert last.startswith("ImportError: ampy is being imported from its source tree"), err
    assert checkout in last and "build_ext --inplace" in last and "make build" in last
    assert "another directory" in last
    assert "partially initialized" not in err and "circular import" not in err
    assert sum(line.lstrip().startswith("File ") for line in err.splitlines()) <= 2, err


def test_source_tree_with_an_extension_for_another_python(checkout_and_install, tmp_path):
    checkout, site, _ = checkout_and_install
    tree = tmp_path / "checkout"
    shutil.copytree(checkout, tree)
    (tree / "ampy" / "_C.cpython-39-x86_64-linux-gnu.so").write_bytes(b"\x7fELF stale")
    r = _run_import(str(tree), [site])
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "source tree" in last, r.stderr
    assert "_C.cpython-39-x86_64-linux-gnu.so, built for another Python" in last


def test_same_install_imports_from_another_directory(checkout_and_install):
    checkout, site, base = checkout_and_install
    r = _run_import(base, [site])
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(site, "ampy", "__init__.py")


def test_installed_copy_without_extension_says_reinstall(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    _copy_package(str(site), with_extensions=False)
    r = _run_import(str(tmp_path), [str(site)])
    assert r.returncode == 1
    last = r.stderr.strip().splitlines()[-1]
    assert "ampy's C extension (ampy._C) is missing" in last and "reinstall" in last, r.stderr
