"""torch.nn.functional's misc layers (ampy/nn/_functional_misc.py) and their
modules (ampy/nn/modules/misc_more.py) against torch 2.13: forward values,
backward grads, non-contiguous inputs, reprs, state_dicts, bad arguments."""
import numpy as np
import pytest
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import ampy
import ampy.nn as nn
import ampy.nn.functional as F

TD = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}
AD = {"float32": ampy.float32, "float64": ampy.float64, "bfloat16": ampy.bfloat16}
TOL = {"float32": 2e-5, "float64": 1e-10, "bfloat16": 3e-2}


def to_a(t, grad=False):
    if t.dtype in (torch.float32, torch.float64, torch.int64, torch.bool):
        a = ampy.tensor(t.detach().numpy())
    else:
        a = ampy.tensor(t.detach().float().numpy()).to(ampy.bfloat16)
    return a.requires_grad_() if grad else a


def to_np(a):
    if a.dtype is ampy.bfloat16:
        a = a.float()
    return a.detach().numpy()


def close(a, t, name, tol):
    assert tuple(a.shape) == tuple(t.shape), (name, a.shape, t.shape)
    tn = t.detach().float().numpy() if t.dtype == torch.bfloat16 else t.detach().numpy()
    an = to_np(a)
    scale = max(1.0, float(np.abs(tn).max())) if tn.size else 1.0
    np.testing.assert_allclose(an, tn, atol=tol * scale, rtol=tol, err_msg=name)


def run(name, afn, tfn, inputs, dtype, grads=None, tol=None):
    """inputs: torch tensors; float ones get grads (unless grads lists which)."""
    tol = TOL[dtype] if tol is None else tol
    ts, as_ = [], []
    for i, t in enumerate(inputs):
        g = t.is_floating_point() and (grads is None or i in grads)
        tt = t.detach().clone().to(TD[dtype]) if t.is_floating_point() else t
        ts.append(tt.requires_grad_() if g else tt)
        as_.append(to_a(tt, g))
    try:
        ty = tfn(*ts)
    except (RuntimeError, NotImplementedError):
        if dtype != "bfloat16":
            raise
        # torch has no bfloat16 kernel: its float32 result on the bfloat16-rounded inputs
        ts = [t.detach().float().requires_grad_(t.requires_grad) if t.is_floating_point()
              else t for t in ts]
        ty = tfn(*ts)
    ay = afn(*as_)
    close(ay, ty, name, tol)
    if not ty.requires_grad:
        return
    go = torch.randn(ty.shape, dtype=torch.float64).to(ty.dtype)
    ty.backward(go)
    ay.backward(to_a(go))
    for i, (t, a) in enumerate(zip(ts, as_)):
        if t.requires_grad:
            close(a.grad, t.grad, f"{name} grad {i}", tol * 4)


DTYPES = ["float32", "float64", "bfloat16"]
torch.manual_seed(0)


def nc(*shape):
    """A non-contiguous tensor of `shape` (the transpose of a contiguous one)."""
    return torch.randn(*shape[:-2], shape[-1], shape[-2]).transpose(-1, -2)


CASES = {
    "normalize": (lambda f: lambda x: f.normalize(x, p=3.0, dim=1), [nc(2, 5, 4)]),
    "normalize_p1": (lambda f: lambda x: f.normalize(x, 1, -1), [torch.randn(3, 6)]),
    "cosine_similarity": (lambda f: lambda a, b: f.cosine_similarity(a, b, dim=-1),
                          [nc(3, 4, 5), torch.randn(1, 5)]),
    "pairwise_distance": (lambda f: lambda a, b: f.pairwise_distance(a, b, 3.0, 1e-6, True),
                          [torch.randn(4, 6), torch.randn(4, 6)]),
    "pairwise_distance_1d": (lambda f: lambda a, b: f.pairwise_distance(a, b),
                             [torch.randn(6), torch.randn(6)]),
    "pdist": (lambda f: lambda x: f.pdist(x), [torch.randn(5, 3)]),
    "pdist_p1": (lambda f: lambda x: f.pdist(x, 1.5), [nc(4, 3)]),
    "pixel_shuffle": (lambda f: lambda x: f.pixel_shuffle(x, 2), [nc(2, 8, 3, 5)]),
    "pixel_unshuffle": (lambda f: lambda x: f.pixel_unshuffle(x, 2), [nc(3, 4, 6)]),
    "channel_shuffle": (lambda f: lambda x: f.channel_shuffle(x, 3), [nc(2, 6, 3, 4)]),
    "native_channel_shuffle": (lambda f: lambda x: f.native_channel_shuffle(x, 2),
                               [torch.randn(2, 4, 5)]),
    "unfold": (lambda f: lambda x: f.unfold(x, (2, 3), dilation=(1, 2), padding=1,
                                            stride=(2, 1)), [nc(2, 3, 6, 7)]),
    "unfold_3d": (lambda f: lambda x: f.unfold(x, 2), [torch.randn(3, 4, 5)]),
    "fold": (lambda f: lambda x: f.fold(x, (5, 6), (2, 3), padding=1, stride=(2, 1)),
             [torch.randn(2, 12, 3 * 6)]),
    "fold_2d": (lambda f: lambda x: f.fold(x, 4, 2, dilation=2), [torch.randn(8, 4)]),
    "bilinear": (lambda f: lambda a, b, w, c: f.bilinear(a, b, w, c),
                 [torch.randn(2, 3, 4), nc(2, 3, 5), torch.randn(6, 4, 5), torch.randn(6)]),
    "bilinear_nobias": (lambda f: lambda a, b, w: f.bilinear(a, b, w),
                        [torch.randn(3, 4), torch.randn(3, 2), torch.randn(2, 4, 2)]),
    "local_response_norm": (lambda f: lambda x: f.local_response_norm(x, 3, 1e-2, 0.6, 2.0),
                            [nc(2, 5, 4, 3)]),
    "local_response_norm_3d": (lambda f: lambda x: f.local_response_norm(x, 2),
                               [torch.randn(2, 4, 5)]),
    "local_response_norm_5d": (lambda f: lambda x: f.local_response_norm(x, 4),
                               [torch.randn(2, 5, 2, 3, 2)]),
    "lp_pool1d": (lambda f: lambda x: f.lp_pool1d(x, 2.0, 3, 2), [nc(2, 3, 7)]),
    "lp_pool2d": (lambda f: lambda x: f.lp_pool2d(x.abs() + 0.1, 3, (2, 3), ceil_mode=True),
                  [torch.randn(2, 3, 5, 7)]),
    "lp_pool3d": (lambda f: lambda x: f.lp_pool3d(x, 2, 2), [torch.randn(1, 2, 4, 4, 5)]),
    "adaptive_max_pool3d": (lambda f: lambda x: f.adaptive_max_pool3d(x, (2, None, 3)),
                            [torch.randn(2, 3, 5, 4, 7)]),
    "adaptive_max_pool3d_4d": (lambda f: lambda x: f.adaptive_max_pool3d(x, 3),
                               [torch.randn(3, 4, 5, 6).transpose(1, 2)]),
    "upsample": (lambda f: lambda x: f.upsample(x, scale_factor=2, mode="bilinear",
                                                align_corners=False), [torch.randn(1, 2, 3, 4)]),
    "upsample_nearest": (lambda f: lambda x: f.upsample_nearest(x, size=(5, 7)),
                         [torch.randn(1, 2, 3, 4)]),
    "upsample_bilinear": (lambda f: lambda x: f.upsample_bilinear(x, scale_factor=2),
                          [nc(1, 2, 3, 4)]),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_forward_backward(name, dtype):
    mk, inputs = CASES[name]
    # torch has no derivative for native_channel_shuffle
    grads = [] if name == "native_channel_shuffle" else None
    if name == "lp_pool3d" and dtype == "bfloat16":
        # torch's CPU avg_pool3d has no bfloat16 kernel; ampy raises the same way
        x = inputs[0].to(torch.bfloat16)
        with pytest.raises(NotImplementedError, match="BFloat16"):
            mk(TF)(x)
        with pytest.raises(NotImplementedError, match="BFloat16"):
            mk(F)(to_a(x))
        return
    run(name, mk(F), mk(TF), inputs, dtype, grads)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode, dtype):
    w = torch.randn(10, 3)
    i = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7])
    o = torch.tensor([0, 4, 4, 6])
    run("eb1", lambda a, b, c: F.embedding_bag(a, b, c, mode=mode, padding_idx=2),
        lambda a, b, c: TF.embedding_bag(a, b, c, mode=mode, padding_idx=2), [i, w, o], dtype)
    last = torch.tensor([0, 4, 4, 9])  # the documented form: offsets[-1] == len(input)
    run("eb_last", lambda a, b, c: F.embedding_bag(a, b, c, mode=mode, include_last_offset=True),
        lambda a, b, c: TF.embedding_bag(a, b, c, mode=mode, include_last_offset=True),
        [i, w, last], dtype)
    i2 = torch.randint(0, 10, (4, 3))
    run("eb2d", lambda a, b: F.embedding_bag(a, b, mode=mode),
        lambda a, b: TF.embedding_bag(a, b, mode=mode), [i2, w], dtype)


def test_embedding_bag_per_sample_weights():
    w, psw = torch.randn(10, 3), torch.randn(9)
    i = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 7])
    o = torch.tensor([0, 4, 4, 6])
    run("psw", lambda a, b, c, d: F.embedding_bag(a, b, c, mode="sum", per_sample_weights=d),
        lambda a, b, c, d: TF.embedding_bag(a, b, c, mode="sum", per_sample_weights=d),
        [i, w, o, psw], "float32")


@pytest.mark.parametrize("k", [1, 2, 3])
def test_max_unpool(k):
    x = torch.randn(*(2, 3) + (6,) * k)
    pool = [TF.max_pool1d, TF.max_pool2d, TF.max_pool3d][k - 1]
    y, idx = pool(x, 2, return_indices=True)
    tf = [TF.max_unpool1d, TF.max_unpool2d, TF.max_unpool3d][k - 1]
    af = [F.max_unpool1d, F.max_unpool2d, F.max_unpool3d][k - 1]
    run("unpool", lambda a, b: af(a, b, 2), lambda a, b: tf(a, b, 2), [y, idx], "float32")
    size = (7,) * k
    run("unpool_size", lambda a, b: af(a, b, 2, output_size=size),
        lambda a, b: tf(a, b, 2, output_size=size), [y, idx], "float64")


def test_with_indices_names():
    x = torch.randn(2, 3, 6, 7)
    for name, args in [("max_pool1d_with_indices", (x[0], 2)), ("max_pool2d_with_indices", (x, 2)),
                       ("max_pool3d_with_indices", (x.unsqueeze(0), 2)),
                       ("adaptive_max_pool1d_with_indices", (x[0], 3)),
                       ("adaptive_max_pool2d_with_indices", (x, 3)),
                       ("adaptive_max_pool3d_with_indices", (x, 2))]:
        ty, ti = getattr(TF, name)(*args)
        ay, ai = getattr(F, name)(to_a(args[0]), *args[1:])
        close(ay, ty, name, 0)
        assert np.array_equal(ai.numpy(), ti.numpy()), name


def test_adaptive_max_pool3d_indices_and_bf16():
    x = torch.randn(2, 3, 5, 4, 7).to(torch.bfloat16)
    ty, ti = TF.adaptive_max_pool3d(x, (2, 3, 3), return_indices=True)
    ay, ai = F.adaptive_max_pool3d(to_a(x), (2, 3, 3), return_indices=True)
    close(ay, ty, "amp3 bf16", 0)
    assert np.array_equal(ai.numpy(), ti.numpy())
    assert ay.dtype is ampy.bfloat16


def test_affine_grid_align():
    th = torch.randn(2, 2, 3)
    for ac in (True, False):
        run("affine_grid", lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=ac),
            lambda t: TF.affine_grid(t, (2, 3, 4, 5), align_corners=ac), [th], "float32")


# ------------------------------------------------------------------ autocast
def _ac_cases():
    x, g = torch.randn(2, 4, 6, 6), torch.rand(2, 3, 3, 2) * 2 - 1
    y, idx = TF.max_pool2d(x, 2, return_indices=True)
    y1, i1 = TF.max_pool1d(x[0], 2, return_indices=True)
    x5 = torch.randn(1, 2, 4, 4, 4)
    y5, i5 = TF.max_pool3d(x5, 2, return_indices=True)
    return {
        "grid_sample": (lambda f, a, b: f.grid_sample(a, b, align_corners=False), [x, g]),
        "affine_grid": (lambda f, a: f.affine_grid(a, (2, 3, 4, 4), align_corners=False),
                        [torch.randn(2, 2, 3)]),
        "max_unpool1d": (lambda f, a, i: f.max_unpool1d(a, i, 2), [y1, i1]),
        "max_unpool2d": (lambda f, a, i: f.max_unpool2d(a, i, 2), [y, idx]),
        "max_unpool3d": (lambda f, a, i: f.max_unpool3d(a, i, 2), [y5, i5]),
        "bilinear": (lambda f, a, b, w: f.bilinear(a, b, w),
                     [x[0, 0], x[0, 1], torch.randn(3, 6, 6)]),
        "cosine_similarity": (lambda f, a, b: f.cosine_similarity(a, b), [x, x]),
        "pairwise_distance": (lambda f, a, b: f.pairwise_distance(a, b), [x, x]),
        "normalize": (lambda f, a: f.normalize(a), [x]),
        "unfold": (lambda f, a: f.unfold(a, 2), [x]),
        "fold": (lambda f, a: f.fold(a, 3, 2), [torch.randn(1, 8, 4)]),
        "lrn3": (lambda f, a: f.local_response_norm(a, 2), [x[0]]),
        "lrn4": (lambda f, a: f.local_response_norm(a, 2), [x]),
        "lrn5": (lambda f, a: f.local_response_norm(a, 2), [x5]),
        "lp_pool1d": (lambda f, a: f.lp_pool1d(a, 2, 2), [x[0]]),
        "lp_pool2d": (lambda f, a: f.lp_pool2d(a, 2, 2), [x]),
        "lp_pool3d": (lambda f, a: f.lp_pool3d(a, 2, 2), [x5]),
        "adaptive_max_pool3d": (lambda f, a: f.adaptive_max_pool3d(a, 2), [x5]),
        "pixel_shuffle": (lambda f, a: f.pixel_shuffle(a, 2), [x]),
    }


AC = _ac_cases()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(AC))
def test_autocast_dtypes(name, dtype):
    """Under CPU autocast (bfloat16) the output dtype is torch's."""
    fn, ins = AC[name]
    ti = [t.to(TD[dtype]) if t.is_floating_point() else t for t in ins]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        td = fn(TF, *ti).dtype
    with ampy.autocast("cpu", dtype=ampy.bfloat16):
        ad = fn(F, *[to_a(t) for t in ti]).dtype
    assert str(ad).split(".")[-1] == str(td).split(".")[-1]


# ------------------------------------------------------------------- modules
MODS = [
    ("PixelShuffle", (2,)), ("PixelUnshuffle", (2,)), ("ChannelShuffle", (2,)),
    ("Unfold", (2,)), ("Fold", (3, 2)), ("CosineSimilarity", ()), ("PairwiseDistance", ()),
    ("LocalResponseNorm", (3,)), ("LPPool1d", (2, 3)), ("LPPool2d", (2, 3)),
    ("LPPool3d", (2, 3, 2)), ("AdaptiveMaxPool3d", (2,)), ("MaxUnpool1d", (2,)),
    ("MaxUnpool2d", (2,)), ("MaxUnpool3d", (2, 1)), ("Unflatten", (1, (2, 3))),
    ("ZeroPad1d", (1,)), ("ZeroPad3d", ((1, 2, 0, 1, 2, 0),)), ("ConstantPad3d", (1, 2.0)),
    ("ReflectionPad3d", (1,)), ("ReplicationPad3d", (1,)), ("CircularPad1d", (1,)),
    ("CircularPad2d", ((1, 0, 2, 1),)), ("CircularPad3d", (1,)),
    ("Bilinear", (2, 3, 4)), ("EmbeddingBag", (5, 3)),
]


@pytest.mark.parametrize("name,args", MODS, ids=[m[0] for m in MODS])
def test_module_repr_state(name, args):
    t, a = getattr(tnn, name)(*args), getattr(nn, name)(*args)
    assert repr(a) == repr(t)
    assert list(a.state_dict()) == list(t.state_dict())


def test_module_forward():
    x = torch.randn(2, 3, 4, 5, 6)
    for name, args in [("ZeroPad3d", ((1, 2, 0, 1, 2, 0),)), ("ConstantPad3d", (1, 2.0)),
                       ("ReflectionPad3d", (1,)), ("ReplicationPad3d", (2,)),
                       ("CircularPad3d", (1,)), ("AdaptiveMaxPool3d", (2,)),
                       ("LPPool3d", (2, 2))]:
        run(name, getattr(nn, name)(*args), getattr(tnn, name)(*args), [x], "float32")
    x4 = torch.randn(2, 3, 5, 6)
    for name, args in [("ZeroPad1d", ((2, 1),)), ("CircularPad1d", (2,))]:
        run(name, getattr(nn, name)(*args), getattr(tnn, name)(*args), [nc(2, 3, 5)], "float32")
    for name, args in [("CircularPad2d", ((1, 0, 2, 1),)), ("UpsamplingNearest2d", (None, 2)),
                       ("UpsamplingBilinear2d", ((7, 9),)), ("LocalResponseNorm", (2,)),
                       ("PixelUnshuffle", (1,)), ("Unflatten", (1, (3, 1)))]:
        run(name, getattr(nn, name)(*args), getattr(tnn, name)(*args), [x4], "float32")


def test_bilinear_module_loads_torch_state():
    t = tnn.Bilinear(3, 4, 5)
    a = nn.Bilinear(3, 4, 5)
    a.load_state_dict({k: to_a(v) for k, v in t.state_dict().items()})
    x1, x2 = torch.randn(2, 3), torch.randn(2, 4)
    close(a(to_a(x1), to_a(x2)), t(x1, x2), "Bilinear", 2e-5)
    bound = 1 / np.sqrt(3)
    w = nn.Bilinear(3, 400, 5).weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert nn.Bilinear(3, 4, 5, bias=False).bias is None


def test_embedding_bag_module():
    t = tnn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
    a = nn.EmbeddingBag(10, 3, mode="max", padding_idx=0)
    assert np.all(a.weight.detach().numpy()[0] == 0)
    a.load_state_dict({k: to_a(v) for k, v in t.state_dict().items()})
    i, o = torch.tensor([0, 2, 4, 5, 4, 3]), torch.tensor([0, 2])
    close(a(to_a(i), to_a(o)), t(i, o), "EmbeddingBag", 0)
    w = torch.randn(4, 2)
    tp = tnn.EmbeddingBag.from_pretrained(w, mode="sum")
    ap = nn.EmbeddingBag.from_pretrained(to_a(w), mode="sum")
    assert repr(ap) == repr(tp) and ap.weight.requires_grad == tp.weight.requires_grad
    i2 = torch.tensor([[0, 1], [2, 3]])
    close(ap(to_a(i2)), tp(i2), "from_pretrained", 1e-6)


# ------------------------------------------------------------------ bad args
BAD = [
    (lambda f, x: f.pixel_shuffle(x, 3), RuntimeError, "upscale_factor"),
    (lambda f, x: f.pixel_unshuffle(x, 4), RuntimeError, "downscale_factor"),
    (lambda f, x: f.channel_shuffle(x, 0), RuntimeError, "groups"),
    (lambda f, x: f.channel_shuffle(x, 5), RuntimeError, "groups"),
    (lambda f, x: f.unfold(x, 0), RuntimeError, "kernel size"),
    (lambda f, x: f.unfold(x, 2, stride=0), RuntimeError, "stride"),
    (lambda f, x: f.unfold(x, 2, padding=-1), RuntimeError, "padding"),
    (lambda f, x: f.unfold(x, 2, dilation=0), RuntimeError, "dilation"),
    (lambda f, x: f.unfold(x, 9), RuntimeError, "kernel_size"),
    (lambda f, x: f.pdist(x), RuntimeError, "2D"),
    (lambda f, x: f.local_response_norm(x[0, 0], 2), ValueError, "3D"),
    (lambda f, x: f.adaptive_max_pool3d(x[0, 0], 2), RuntimeError, "4D or 5D"),
    (lambda f, x: f.adaptive_max_pool3d(x, (2, 2)), RuntimeError, "output_size"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_args(i):
    fn, exc, match = BAD[i]
    x = torch.randn(2, 4, 6, 6)
    with pytest.raises(exc, match=match):
        fn(TF, x)
    a = to_a(x)
    before = a.numpy().copy()
    with pytest.raises(exc, match=match):
        fn(F, a)
    assert np.array_equal(a.numpy(), before)


def test_bad_fold_and_bilinear():
    with pytest.raises(RuntimeError, match="sliding blocks"):
        TF.fold(torch.randn(1, 4, 5), 3, 2)
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.fold(ampy.randn(1, 4, 5), 3, 2)
    with pytest.raises(RuntimeError, match="kernel_size"):
        F.fold(ampy.randn(1, 5, 4), 3, 2)
    with pytest.raises(RuntimeError, match="input1 size"):
        F.bilinear(ampy.randn(2, 3), ampy.randn(2, 4), ampy.randn(5, 2, 4))
    with pytest.raises(RuntimeError, match="input1 size"):
        TF.bilinear(torch.randn(2, 3), torch.randn(2, 4), torch.randn(5, 2, 4))


def test_bad_embedding_bag():
    w, i = torch.randn(5, 2), torch.tensor([0, 1, 2])
    for kw, exc, match in [({"mode": "prod"}, ValueError, "mode"),
                           ({"offsets": torch.tensor([1])}, RuntimeError, "offsets"),
                           ({"per_sample_weights": torch.randn(3), "mode": "mean",
                             "offsets": torch.tensor([0])}, NotImplementedError,
                            "per_sample_weights")]:
        kw.setdefault("offsets", torch.tensor([0]))
        with pytest.raises(exc, match=match):
            TF.embedding_bag(i, w, **kw)
        akw = {k: to_a(v) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
        with pytest.raises(exc, match=match):
            F.embedding_bag(to_a(i), to_a(w), **akw)


def test_bad_max_unpool_and_broadcast():
    x = torch.randn(1, 2, 4, 4)
    y, i = TF.max_pool2d(x, 2, return_indices=True)
    cases = [(lambda M, a, b: M.max_unpool2d(a, b, 2, output_size=(9, 9)), ValueError,
              "output_size"),
             (lambda M, a, b: M.max_unpool2d(a, b[..., :1], 2), RuntimeError, "indices"),
             (lambda M, a, b: M.max_unpool2d(a, b * 10 + 3, 2), RuntimeError, "max index"),
             (lambda M, a, b: M.cosine_similarity(a, b[..., :1, :1].expand(1, 2, 2, 3)),
              RuntimeError, "size of tensor")]
    for fn, exc, match in cases:
        with pytest.raises(exc, match=match) as te:
            fn(TF, y, i)
        ay, ai = to_a(y), to_a(i)
        with pytest.raises(exc, match=match) as ae:
            fn(F, ay, ai)
        if match != "max index":  # (which invalid index torch names first is its loop order)
            assert str(ae.value) == str(te.value)
        assert np.array_equal(ay.numpy(), y.numpy()) and np.array_equal(ai.numpy(), i.numpy())
