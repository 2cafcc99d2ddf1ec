/* nn_py.c — binding of the fused nn kernels (nn.h) as ampy._C.nn_* functions.
 *
 * Internal API for ampy/nn/functional.py, which shapes the arguments (2-d
 * row views, int64 targets, contiguous copies); here every tensor must already
 * be a contiguous CPU tensor. Each function allocates its outputs, releases
 * the GIL for large inputs and maps an ampy_status to an exception.
 */
#include "pyampy.h"

#include "ampy/cuda.h"
#include "ampy/nn.h"

/* The device of the current call's tensors: each function starts with
 * NN_BEGIN(cuda_ok); ctensor() records the first tensor's device and checks
 * the others against it. With CUDA tensors (only where cuda_ok) outputs are
 * allocated on that device and NN_CALL runs the kernel of cuda/nn.cu through
 * ampy._C_cuda's table. Thread-local: RUN releases the GIL, so another
 * thread may start its own call meanwhile. */
#define NN_UNSET (-2)
static _Thread_local int nn_dev = AMPY_DEV_CPU, nn_cuda_ok;
#define NN_BEGIN(ok) (nn_dev = NN_UNSET, nn_cuda_ok = (ok))
#define NN_DEVICE (nn_dev >= 0 ? nn_dev : AMPY_DEV_CPU)
#define NN_CALL(name, ...)                                                                       \
    (nn_dev >= 0 ? ampy_py_cuda_api()->nn_##name(nn_dev, __VA_ARGS__) : ampy_nn_##name(__VA_ARGS__))

static PyObject *nn_raise(ampy_status s)
{
    return nn_dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
}

/* A contiguous tensor on the call's device (CPU, or CUDA where allowed), or
 * NULL with an exception naming fn/arg. None is returned as NULL without an
 * exception only when `opt` is set. */
static AmpyTensor *ctensor(PyObject *o, const char *fn, const char *arg, int opt)
{
    if (opt && o == Py_None)
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (!t)
        return NULL;
    if ((t->device != AMPY_DEV_CPU && !nn_cuda_ok) || !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a contiguous CPU tensor", fn,
                     arg);
        return NULL;
    }
    if (nn_dev == NN_UNSET) {
        if (t->device != AMPY_DEV_CPU && !ampy_py_cuda_api())
            return NULL;
        nn_dev = t->device;
    } else if (t->device != nn_dev) {
        PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, "
                     "but argument '%s' is on %s", fn, arg,
                     t->device < 0 ? "the CPU" : "a CUDA device");
        return NULL;
    }
    return t;
}

#define OPT(t) ((t) ? (const void *)(t)->data : NULL)
#define BIG(n) ((n) >= AMPY_PY_GIL_RELEASE_MIN)
#define RUN(n, call)                                                                             \
    do {                                                                                         \
        if (BIG(n)) {                                                                            \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)

static AmpyTensor *new1d(int dtype, int64_t n)
{
    return ampy_py_empty(dtype, 1, &n, NN_DEVICE);
}

static AmpyTensor *new_like(const AmpyTensor *t, int dtype)
{
    return ampy_py_empty(dtype, t->ndim, t->shape, NN_DEVICE);
}

static PyObject *opt_obj(AmpyTensor *t)
{
    if (t)
        return (PyObject *)t;
    Py_RETURN_NONE;
}

static int check_targets_arg(AmpyTensor *x, AmpyTensor *t, const char *fn)
{
    if (x->ndim != 2 || t->dtype != AMPY_INT64 || t->numel != x->shape[0]) {
        PyErr_Format(PyExc_ValueError, "%s: expects input (M, C) and int64 target of M elements",
                     fn);
        return -1;
    }
    return 0;
}

static int check_weight(AmpyTensor *w, AmpyTensor *x, int64_t n, const char *fn)
{
    if (w && (w->numel != n || w->dtype != x->dtype)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: weight must hold %lld elements of the input's dtype", fn, (long long)n);
        return -1;
    }
    return 0;
}

/* layer_norm_fwd(x, N, weight, bias, eps, save) -> (y, mean | None, rstd | None) */
static PyObject *f_ln_fwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ow, *ob;
    long long N;
    double eps;
    int save;
    if (!PyArg_ParseTuple(args, "OLOOdp:layer_norm_fwd", &ox, &N, &ow, &ob, &eps, &save))
        return NULL;
    AmpyTensor *x = ctensor(ox, "layer_norm", "input", 0), *w = NULL, *b = NULL;
    if (!x || (!(w = ctensor(ow, "layer_norm", "weight", 1)) && PyErr_Occurred()) ||
        (!(b = ctensor(ob, "layer_norm", "bias", 1)) && PyErr_Occurred()))
        return NULL;
    if (N <= 0 ? x->numel != 0 : x->numel % N != 0) {
        PyErr_SetString(PyExc_ValueError, "layer_norm: input does not end in normalized_shape");
        return NULL;
    }
    if ((w && w->numel != N) || (b && b->numel != N) || (w && b && w->dtype != b->dtype)) {
        PyErr_SetString(PyExc_ValueError, "layer_norm: weight and bias must match "
                                          "normalized_shape and each other's dtype");
        return NULL;
    }
    int64_t M = N > 0 ? x->numel / N : 0;
    AmpyTensor *y = new_like(x, x->dtype), *mean = NULL, *rstd = NULL;
    if (!y)
        return NULL;
    if (save && (!(mean = new1d(AMPY_FLOAT64, M)) || !(rstd = new1d(AMPY_FLOAT64, M))))
        goto error;
    ampy_status s;
    RUN(x->numel, NN_CALL(layer_norm_fwd, M, N, x->data, x->dtype, OPT(w), OPT(b),
                                         w ? w->dtype : (b ? b->dtype : x->dtype), eps, y->data,
                                         mean ? (double *)mean->data : NULL,
                                         rstd ? (double *)rstd->data : NULL));
    if (s != AMPY_OK) {
        nn_raise(s);
        goto error;
    }
    return Py_BuildValue("NNN", y, opt_obj(mean), opt_obj(rstd));
error:
    Py_XDECREF(y), Py_XDECREF(mean), Py_XDECREF(rstd);
    return NULL;
}

/* layer_norm_bwd(x, N, weight, dy, mean, rstd, eps, need_dx, need_dw, need_db)
 *   -> (dx | None, dweight | None, dbias | None) */
static PyObject *f_ln_bwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ow, *ody, *om, *orr;
    long long N;
    double eps;
    int ndx, ndw, ndb;
    if (!PyArg_ParseTuple(args, "OLOOOOdppp:layer_norm_bwd", &ox, &N, &ow, &ody, &om, &orr, &eps,
                          &ndx, &ndw, &ndb))
        return NULL;
    const char *fn = "layer_norm_backward";
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *dy = ctensor(ody, fn, "grad_output", 0);
    AmpyTensor *w = NULL, *m = NULL, *r = NULL;
    if (!x || !dy || (!(w = ctensor(ow, fn, "weight", 1)) && PyErr_Occurred()) ||
        (!(m = ctensor(om, fn, "mean", 1)) && PyErr_Occurred()) ||
        (!(r = ctensor(orr, fn, "rstd", 1)) && PyErr_Occurred()))
        return NULL;
    int64_t M = N > 0 ? x->numel / N : 0;
    if (dy->numel != x->numel || dy->dtype != x->dtype || (w && w->numel != N) ||
        (m && (m->dtype != AMPY_FLOAT64 || m->numel != M)) ||
        (r && (r->dtype != AMPY_FLOAT64 || r->numel != M))) {
        PyErr_SetString(PyExc_ValueError, "layer_norm_backward: inconsistent arguments");
        return NULL;
    }
    int wdt = w ? w->dtype : x->dtype;
    AmpyTensor *dx = ndx ? new_like(x, x->dtype) : NULL;
    AmpyTensor *dw = ndw ? new1d(wdt, N) : NULL, *db = ndb ? new1d(wdt, N) : NULL;
    if ((ndx && !dx) || (ndw && !dw) || (ndb && !db))
        goto error;
    ampy_status s;
    RUN(x->numel, NN_CALL(layer_norm_bwd, M, N, x->data, x->dtype, OPT(w), wdt, dy->data,
                                         m ? (const double *)m->data : NULL,
                                         r ? (const double *)r->data : NULL, eps,
                                         dx ? dx->data : NULL, dw ? dw->data : NULL,
                                         db ? db->data : NULL));
    if (s != AMPY_OK) {
        nn_raise(s);
        goto error;
    }
    return Py_BuildValue("NNN", opt_obj(dx), opt_obj(dw), opt_obj(db));
error:
    Py_XDECREF(dx), Py_XDECREF(dw), Py_XDECREF(db);
    return NULL;
}

/* cross_entropy_fwd(x, target, weight, ignore_index, label_smoothing, reduction, save)
 *   -> (loss, lse | None) */
static PyObject *f_ce_fwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ot, *ow;
    long long ignore;
    double ls;
    int red, save;
    if (!PyArg_ParseTuple(args, "OOOLdip:cross_entropy_fwd", &ox, &ot, &ow, &ignore, &ls, &red,
                          &save))
        return NULL;
    AmpyTensor *x = ctensor(ox, "cross_entropy", "input", 0), *t = ctensor(ot, "cross_entropy",
                                                                     "target", 0);
    AmpyTensor *w = NULL;
    if (!x || !t || (!(w = ctensor(ow, "cross_entropy", "weight", 1)) && PyErr_Occurred()) ||
        check_targets_arg(x, t, "cross_entropy") < 0 ||
        check_weight(w, x, x->shape[1], "cross_entropy") < 0)
        return NULL;
    int64_t M = x->shape[0], C = x->shape[1];
    AmpyTensor *out = red == 0 ? new1d(x->dtype, M) : ampy_py_empty(x->dtype, 0, NULL, NN_DEVICE);
    AmpyTensor *lse = NULL;
    if (!out || (save && !(lse = new1d(AMPY_FLOAT64, M))))
        goto error;
    ampy_status s;
    RUN(x->numel, NN_CALL(cross_entropy_fwd, M, C, x->data, x->dtype, (const int64_t *)t->data,
                                            OPT(w), ignore, ls, red, out->data,
                                            lse ? (double *)lse->data : NULL));
    if (s != AMPY_OK) {
        nn_raise(s);
        goto error;
    }
    return Py_BuildValue("NN", out, opt_obj(lse));
error:
    Py_XDECREF(out), Py_XDECREF(lse);
    return NULL;
}

/* cross_entropy_bwd(x, target, weight, ignore_index, ls, reduction, dout, lse) -> dx */
static PyObject *f_ce_bwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ot, *ow, *od, *ol;
    long long ignore;
    double ls;
    int red;
    if (!PyArg_ParseTuple(args, "OOOLdiOO:cross_entropy_bwd", &ox, &ot, &ow, &ignore, &ls, &red,
                          &od, &ol))
        return NULL;
    const char *fn = "cross_entropy_backward";
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *t = ctensor(ot, fn, "target", 0);
    AmpyTensor *d = ctensor(od, fn, "grad_output", 0), *w = NULL, *l = NULL;
    if (!x || !t || !d || (!(w = ctensor(ow, fn, "weight", 1)) && PyErr_Occurred()) ||
        (!(l = ctensor(ol, fn, "lse", 1)) && PyErr_Occurred()) ||
        check_targets_arg(x, t, fn) < 0 || check_weight(w, x, x->shape[1], fn) < 0)
        return NULL;
    if (d->dtype != x->dtype || d->numel != (red == 0 ? x->shape[0] : 1) ||
        (l && (l->dtype != AMPY_FLOAT64 || l->numel != x->shape[0]))) {
        PyErr_SetString(PyExc_ValueError, "cross_entropy_backward: bad grad_output or lse");
        return NULL;
    }
    AmpyTensor *dx = new_like(x, x->dtype);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(x->numel, NN_CALL(cross_entropy_bwd, x->shape[0], x->shape[1], x->data, x->dtype,
                                            (const int64_t *)t->data, OPT(w), ignore, ls, red,
                                            d->data, l ? (const double *)l->data : NULL,
                                            dx->data));
    if (s != AMPY_OK) {
        Py_DECREF(dx);
        return nn_raise(s);
    }
    return (PyObject *)dx;
}

/* nll_loss_fwd(x, target, weight, ignore_index, reduction) -> loss */
static PyObject *f_nll_fwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ot, *ow;
    long long ignore;
    int red;
    if (!PyArg_ParseTuple(args, "OOOLi:nll_loss_fwd", &ox, &ot, &ow, &ignore, &red))
        return NULL;
    AmpyTensor *x = ctensor(ox, "nll_loss", "input", 0), *t = ctensor(ot, "nll_loss", "target", 0);
    AmpyTensor *w = NULL;
    if (!x || !t || (!(w = ctensor(ow, "nll_loss", "weight", 1)) && PyErr_Occurred()) ||
        check_targets_arg(x, t, "nll_loss") < 0 || check_weight(w, x, x->shape[1], "nll_loss") < 0)
        return NULL;
    AmpyTensor *out = red == 0 ? new1d(x->dtype, x->shape[0])
                               : ampy_py_empty(x->dtype, 0, NULL, NN_DEVICE);
    if (!out)
        return NULL;
    ampy_status s = NN_CALL(nll_loss_fwd, x->shape[0], x->shape[1], x->data, x->dtype,
                                         (const int64_t *)t->data, OPT(w), ignore, red, out->data);
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return nn_raise(s);
    }
    return (PyObject *)out;
}

/* nll_loss_bwd(x, target, weight, ignore_index, reduction, dout) -> dx */
static PyObject *f_nll_bwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *ot, *ow, *od;
    long long ignore;
    int red;
    if (!PyArg_ParseTuple(args, "OOOLiO:nll_loss_bwd", &ox, &ot, &ow, &ignore, &red, &od))
        return NULL;
    const char *fn = "nll_loss_backward";
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *t = ctensor(ot, fn, "target", 0);
    AmpyTensor *d = ctensor(od, fn, "grad_output", 0), *w = NULL;
    if (!x || !t || !d || (!(w = ctensor(ow, fn, "weight", 1)) && PyErr_Occurred()) ||
        check_targets_arg(x, t, fn) < 0 || check_weight(w, x, x->shape[1], fn) < 0)
        return NULL;
    if (d->dtype != x->dtype || d->numel != (red == 0 ? x->shape[0] : 1)) {
        PyErr_SetString(PyExc_ValueError, "nll_loss_backward: bad grad_output");
        return NULL;
    }
    AmpyTensor *dx = new_like(x, x->dtype);
    if (!dx)
        return NULL;
    ampy_status s = NN_CALL(nll_loss_bwd, x->shape[0], x->shape[1], x->dtype,
                                         (const int64_t *)t->data, OPT(w), ignore, red, d->data,
                                         dx->data);
    if (s != AMPY_OK) {
        Py_DECREF(dx);
        return nn_raise(s);
    }
    return (PyObject *)dx;
}

/* embedding_fwd(indices, weight) -> out of shape indices.shape + (D,) */
static PyObject *f_emb_fwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *oi, *ow;
    if (!PyArg_ParseTuple(args, "OO:embedding_fwd", &oi, &ow))
        return NULL;
    AmpyTensor *i = ctensor(oi, "embedding", "indices", 0), *w = ctensor(ow, "embedding", "weight", 0);
    if (!i || !w)
        return NULL;
    if (i->dtype != AMPY_INT64 || w->ndim != 2 || i->ndim + 1 > AMPY_MAX_DIMS) {
        PyErr_SetString(PyExc_ValueError,
                        "embedding: expects int64 indices and a 2-D weight");
        return NULL;
    }
    int64_t shape[AMPY_MAX_DIMS];
    for (int d = 0; d < i->ndim; d++)
        shape[d] = i->shape[d];
    shape[i->ndim] = w->shape[1];
    AmpyTensor *out = ampy_py_empty(w->dtype, i->ndim + 1, shape, NN_DEVICE);
    if (!out)
        return NULL;
    ampy_status s;
    RUN(out->numel, NN_CALL(embedding_fwd, i->numel, (const int64_t *)i->data, w->shape[0],
                                          w->shape[1], w->data, w->dtype, out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return nn_raise(s);
    }
    return (PyObject *)out;
}

/* embedding_bwd(indices, grad_output, num_weights, padding_idx) -> dweight (V, D) */
static PyObject *f_emb_bwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *oi, *od;
    long long V, pad;
    if (!PyArg_ParseTuple(args, "OOLL:embedding_bwd", &oi, &od, &V, &pad))
        return NULL;
    AmpyTensor *i = ctensor(oi, "embedding_backward", "indices", 0);
    AmpyTensor *d = ctensor(od, "embedding_backward", "grad_output", 0);
    if (!i || !d)
        return NULL;
    int64_t D = d->ndim ? d->shape[d->ndim - 1] : 0;
    if (i->dtype != AMPY_INT64 || V < 0 || d->numel != i->numel * D) {
        PyErr_SetString(PyExc_ValueError, "embedding_backward: inconsistent arguments");
        return NULL;
    }
    int64_t shape[2] = {V, D};
    AmpyTensor *dw = ampy_py_empty(d->dtype, 2, shape, NN_DEVICE);
    if (!dw)
        return NULL;
    ampy_status s;
    RUN(d->numel + V * D, NN_CALL(embedding_bwd, i->numel, (const int64_t *)i->data, V, D,
                                                d->data, d->dtype, pad, dw->data));
    if (s != AMPY_OK) {
        Py_DECREF(dw);
        return nn_raise(s);
    }
    return (PyObject *)dw;
}

/* mask_scale(x, mask, scale) -> x * mask * scale (dropout forward and backward) */
static PyObject *f_mask_scale(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *om;
    double scale;
    if (!PyArg_ParseTuple(args, "OOd:mask_scale", &ox, &om, &scale))
        return NULL;
    AmpyTensor *x = ctensor(ox, "dropout", "input", 0), *m = ctensor(om, "dropout", "mask", 0);
    if (!x || !m)
        return NULL;
    if (m->numel != x->numel || (m->dtype != AMPY_UINT8 && m->dtype != AMPY_BOOL)) {
        PyErr_SetString(PyExc_ValueError, "dropout: mask must be uint8/bool shaped like input");
        return NULL;
    }
    AmpyTensor *out = new_like(x, x->dtype);
    if (!out)
        return NULL;
    ampy_status s;
    RUN(x->numel, NN_CALL(mask_scale, x->numel, x->data, x->dtype, (const uint8_t *)m->data, scale,
                                     out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return nn_raise(s);
    }
    return (PyObject *)out;
}

static int mse_args(PyObject *ox, PyObject *oy, AmpyTensor **x, AmpyTensor **y, const char *fn)
{
    if (!(*x = ctensor(ox, fn, "input", 0)) || !(*y = ctensor(oy, fn, "target", 0)))
        return -1;
    if ((*x)->numel != (*y)->numel || (*x)->dtype != (*y)->dtype) {
        PyErr_Format(PyExc_ValueError, "%s: input and target must have one shape and dtype", fn);
        return -1;
    }
    return 0;
}

/* mse_fwd(x, y, reduction) -> loss */
static PyObject *f_mse_fwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *oy;
    int red;
    AmpyTensor *x, *y;
    if (!PyArg_ParseTuple(args, "OOi:mse_fwd", &ox, &oy, &red) ||
        mse_args(ox, oy, &x, &y, "mse_loss") < 0)
        return NULL;
    AmpyTensor *out = red == 0 ? new_like(x, x->dtype)
                               : ampy_py_empty(x->dtype, 0, NULL, NN_DEVICE);
    if (!out)
        return NULL;
    ampy_status s;
    RUN(x->numel, NN_CALL(mse_fwd, x->numel, x->data, y->data, x->dtype, red, out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return nn_raise(s);
    }
    return (PyObject *)out;
}

/* mse_bwd(x, y, reduction, dout, need_dx, need_dy) -> (dx | None, dy | None) */
static PyObject *f_mse_bwd(PyObject *self, PyObject *args)
{
    NN_BEGIN(1);
    PyObject *ox, *oy, *od;
    int red, ndx, ndy;
    AmpyTensor *x, *y, *d;
    if (!PyArg_ParseTuple(args, "OOiOpp:mse_bwd", &ox, &oy, &red, &od, &ndx, &ndy) ||
        mse_args(ox, oy, &x, &y, "mse_loss_backward") < 0 ||
        !(d = ctensor(od, "mse_loss_backward", "grad_output", 0)))
        return NULL;
    if (d->dtype != x->dtype || d->numel != (red == 0 ? x->numel : 1)) {
        PyErr_SetString(PyExc_ValueError, "mse_loss_backward: bad grad_output");
        return NULL;
    }
    AmpyTensor *dx = ndx ? new_like(x, x->dtype) : NULL, *dy = ndy ? new_like(x, x->dtype) : NULL;
    if ((ndx && !dx) || (ndy && !dy)) {
        Py_XDECREF(dx), Py_XDECREF(dy);
        return NULL;
    }
    ampy_status s;
    RUN(x->numel, NN_CALL(mse_bwd, x->numel, x->data, y->data, x->dtype, red, d->data,
                                  dx ? dx->data : NULL, dy ? dy->data : NULL));
    if (s != AMPY_OK) {
        Py_XDECREF(dx), Py_XDECREF(dy);
        return nn_raise(s);
    }
    return Py_BuildValue("NN", opt_obj(dx), opt_obj(dy));
}

/* set_data_(dst, src): dst becomes a view of src's memory with src's shape,
 * strides, dtype and device, keeping its identity, grad and requires_grad
 * (torch's `param.data = new`, used by Module.to/half/float so optimizers
 * holding the Parameter objects keep working). dst must be a leaf. */
static PyObject *f_set_data(PyObject *self, PyObject *args)
{
    NN_BEGIN(0);
    PyObject *od, *os;
    if (!PyArg_ParseTuple(args, "OO:set_data_", &od, &os))
        return NULL;
    AmpyTensor *d = ampy_py_tensor_arg(od, "set_data_", "dst");
    AmpyTensor *s = ampy_py_tensor_arg(os, "set_data_", "src");
    if (!d || !s)
        return NULL;
    if (d->grad_fn != Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "set_data_: dst must be a leaf tensor");
        return NULL;
    }
    if (d == s)
        Py_RETURN_NONE;
    Py_INCREF(s->base);
    Py_SETREF(d->base, s->base);
    d->data = s->data;
    d->ndim = s->ndim;
    d->dtype = s->dtype;
    d->device = s->device;
    d->numel = s->numel;
    for (int i = 0; i < s->ndim; i++) {
        d->shape[i] = s->shape[i];
        d->strides[i] = s->strides[i];
    }
    Py_RETURN_NONE;
}

PyMethodDef ampy_py_nn_methods[] = {
    {"nn_set_data_", f_set_data, METH_VARARGS,
     "nn_set_data_(dst, src)\n--\n\nInternal: dst takes src's memory, shape and dtype."},
    {"nn_layer_norm_fwd", f_ln_fwd, METH_VARARGS,
     "nn_layer_norm_fwd(x, N, weight, bias, eps, save)\n--\n\nInternal: fused layer norm."},
    {"nn_layer_norm_bwd", f_ln_bwd, METH_VARARGS,
     "nn_layer_norm_bwd(x, N, weight, dy, mean, rstd, eps, need_dx, need_dw, need_db)\n--\n\n"
     "Internal: layer norm backward."},
    {"nn_cross_entropy_fwd", f_ce_fwd, METH_VARARGS,
     "nn_cross_entropy_fwd(x, target, weight, ignore_index, label_smoothing, reduction, save)"
     "\n--\n\nInternal: fused log_softmax + nll_loss."},
    {"nn_cross_entropy_bwd", f_ce_bwd, METH_VARARGS,
     "nn_cross_entropy_bwd(x, target, weight, ignore_index, label_smoothing, reduction, dout, "
     "lse)\n--\n\nInternal: cross entropy backward."},
    {"nn_nll_loss_fwd", f_nll_fwd, METH_VARARGS,
     "nn_nll_loss_fwd(x, target, weight, ignore_index, reduction)\n--\n\nInternal."},
    {"nn_nll_loss_bwd", f_nll_bwd, METH_VARARGS,
     "nn_nll_loss_bwd(x, target, weight, ignore_index, reduction, dout)\n--\n\nInternal."},
    {"nn_embedding_fwd", f_emb_fwd, METH_VARARGS,
     "nn_embedding_fwd(indices, weight)\n--\n\nInternal: row gather."},
    {"nn_embedding_bwd", f_emb_bwd, METH_VARARGS,
     "nn_embedding_bwd(indices, dy, num_weights, padding_idx)\n--\n\nInternal: scatter-add."},
    {"nn_mask_scale", f_mask_scale, METH_VARARGS,
     "nn_mask_scale(x, mask, scale)\n--\n\nInternal: dropout's x * mask * scale."},
    {"nn_mse_fwd", f_mse_fwd, METH_VARARGS, "nn_mse_fwd(x, y, reduction)\n--\n\nInternal."},
    {"nn_mse_bwd", f_mse_bwd, METH_VARARGS,
     "nn_mse_bwd(x, y, reduction, dout, need_dx, need_dy)\n--\n\nInternal."},
    {NULL, NULL, 0, NULL},
};
