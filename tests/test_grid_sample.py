"""F.affine_grid and F.grid_sample (ampy/nn/_functional_misc.py) against
torch 2.13: every mode x padding_mode x align_corners, grads w.r.t. input
and grid, float32/float64/bfloat16, non-contiguous inputs, bad arguments."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import ampy
import ampy.nn.functional as F

TD = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
TOL = {"float32": 3e-5, "float64": 1e-10, "bfloat16": 5e-2}


def to_a(t, grad=False):
    if t.dtype == torch.bfloat16:
        a = ampy.tensor(t.detach().float().numpy()).to(ampy.bfloat16)
    else:
        a = ampy.tensor(t.detach().numpy())
    return a.requires_grad_() if grad else a


def to_np(x):
    if isinstance(x, torch.Tensor):
        return x.detach().float().numpy() if x.dtype == torch.bfloat16 else x.detach().numpy()
    return (x.float() if x.dtype is ampy.bfloat16 else x).detach().numpy()


def close(a, t, tol, msg):
    assert tuple(a.shape) == tuple(t.shape), msg
    tn = to_np(t)
    np.testing.assert_allclose(to_np(a), tn, atol=tol * max(1.0, np.abs(tn).max()), rtol=tol,
                               err_msg=msg)


def make(dtype, contiguous=True):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 5, 6, generator=g, dtype=torch.float64)
    # points well inside, outside and on the border; kept away from the
    # cell edges so the bilinear weights' kinks and nearest's ties are not hit
    grid = (torch.rand(2, 4, 7, 2, generator=g, dtype=torch.float64) * 3.2 - 1.6)
    if not contiguous:
        x = x.transpose(2, 3).contiguous().transpose(2, 3)
        grid = grid.transpose(1, 2).contiguous().transpose(1, 2)
    return x.to(TD[dtype]), grid.to(TD[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample(mode, padding_mode, align_corners, dtype):
    x, grid = make(dtype, contiguous=(mode == "bilinear"))
    tx, tg = x.clone().requires_grad_(), grid.clone().requires_grad_()
    ax, ag = to_a(x, True), to_a(grid, True)
    ty = TF.grid_sample(tx, tg, mode, padding_mode, align_corners)
    ay = F.grid_sample(ax, ag, mode, padding_mode, align_corners)
    close(ay, ty, TOL[dtype], "forward")
    go = torch.randn(ty.shape, dtype=torch.float64).to(ty.dtype)
    ty.backward(go)
    ay.backward(to_a(go))
    close(ax.grad, tx.grad, TOL[dtype] * 4, "grad input")
    if mode == "bilinear":
        close(ag.grad, tg.grad, TOL[dtype] * 8, "grad grid")
    else:
        # nearest: the output does not depend on the grid (torch: zeros)
        assert ag.grad is None or not np.any(to_np(ag.grad))
        assert not torch.any(tg.grad)


@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_then_sample(align_corners):
    g = torch.Generator().manual_seed(3)
    theta = (torch.eye(2, 3).expand(2, 2, 3) + 0.3 * torch.randn(2, 2, 3, generator=g))
    x = torch.randn(2, 3, 6, 5, generator=g)
    tt, tx = theta.clone().requires_grad_(), x.clone().requires_grad_()
    at, ax = to_a(theta, True), to_a(x, True)
    ty = TF.grid_sample(tx, TF.affine_grid(tt, (2, 3, 4, 7), align_corners), "bilinear",
                        "zeros", align_corners)
    ay = F.grid_sample(ax, F.affine_grid(at, (2, 3, 4, 7), align_corners), "bilinear",
                       "zeros", align_corners)
    close(ay, ty, 3e-5, "forward")
    ty.sum().backward()
    ay.sum().backward()
    close(ax.grad, tx.grad, 1e-4, "grad input")
    close(at.grad, tt.grad, 1e-4, "grad theta")


def test_affine_grid_default_and_one_pixel():
    theta = torch.randn(1, 2, 3)
    with pytest.warns(UserWarning):
        t = TF.affine_grid(theta, (1, 1, 1, 3))
    close(F.affine_grid(to_a(theta), (1, 1, 1, 3)), t, 1e-6, "1-row grid")


BAD = [
    (dict(mode="bicubix"), ValueError, "mode"),
    (dict(padding_mode="wrap"), ValueError, "padding_mode"),
]


@pytest.mark.parametrize("kw,exc,match", BAD)
def test_bad_modes(kw, exc, match):
    x, grid = make("float32")
    ax, ag = to_a(x), to_a(grid)
    bx, bg = to_np(ax).copy(), to_np(ag).copy()
    with pytest.raises(exc, match=match):
        TF.grid_sample(x, grid, align_corners=False, **kw)
    with pytest.raises(exc, match=match):
        F.grid_sample(ax, ag, align_corners=False, **kw)
    assert np.array_equal(to_np(ax), bx) and np.array_equal(to_np(ag), bg)


def test_bad_shapes():
    x, grid = make("float32")
    for tx, tg, match in [(x, grid[..., :1], "grid"), (x[:1], grid, "batch size"),
                          (x, grid.double(), "scalar type")]:
        with pytest.raises(RuntimeError, match=match):
            TF.grid_sample(tx, tg, align_corners=False)
        with pytest.raises(RuntimeError, match=match):
            F.grid_sample(to_a(tx), to_a(tg), align_corners=False)
    theta = torch.randn(2, 3, 3)
    with pytest.raises(ValueError, match="2D affine matrices"):
        TF.affine_grid(theta, (2, 1, 3, 3), align_corners=False)
    with pytest.raises(ValueError, match="2D affine matrices"):
        F.affine_grid(to_a(theta), (2, 1, 3, 3), align_corners=False)
