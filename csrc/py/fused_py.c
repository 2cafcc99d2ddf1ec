/* fused_py.c — ampy._C.fused_* : bindings of fused.h for ampy/nn and
 * ampy/autograd. Internal API: callers pick these only for the cases they
 * take (contiguous CPU tensors, float32 for mse) and use the general kernels
 * otherwise; anything else raises ValueError/TypeError naming the argument. */
#include "pyampy.h"

#include "ampy/fused.h"

static AmpyTensor *cpu_contig(PyObject *o, const char *fn, const char *arg, int f32)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (!t)
        return NULL;
    if (t->device != AMPY_DEV_CPU || !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a contiguous CPU tensor", fn,
                     arg);
        return NULL;
    }
    if (f32 && t->dtype != AMPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a float32 tensor", fn, arg);
        return NULL;
    }
    return t;
}

#define RUN(n, call)                                                                             \
    do {                                                                                         \
        if ((n) >= AMPY_PY_GIL_RELEASE_MIN) {                                                    \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)

/* fused_zeros(shape, dtype) -> a new contiguous CPU tensor of zero bits. */
static PyObject *f_zeros(PyObject *self, PyObject *args)
{
    PyObject *oshape, *odt;
    int ndim, dt;
    int64_t shape[AMPY_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OO:fused_zeros", &oshape, &odt) ||
        ampy_py_parse_shape(oshape, &ndim, shape, "fused_zeros", "size") < 0 ||
        ampy_py_parse_dtype(odt, AMPY_FLOAT32, &dt, "fused_zeros", "dtype") < 0)
        return NULL;
    AmpyTensor *t = ampy_py_empty(dt, ndim, shape, AMPY_DEV_CPU);
    if (!t)
        return NULL;
    int64_t nbytes = t->numel * (int64_t)ampy_dtype_size((ampy_dtype)dt);
    ampy_status s;
    RUN(t->numel, ampy_fused_zero(t->data, nbytes));
    if (s != AMPY_OK) {
        Py_DECREF(t);
        return ampy_py_raise(s);
    }
    return (PyObject *)t;
}

static int mse_pair(PyObject *ox, PyObject *oy, AmpyTensor **x, AmpyTensor **y, const char *fn)
{
    if (!(*x = cpu_contig(ox, fn, "input", 1)) || !(*y = cpu_contig(oy, fn, "target", 1)))
        return -1;
    if ((*x)->numel != (*y)->numel) {
        PyErr_Format(PyExc_ValueError, "%s: input and target must have the same number of "
                     "elements", fn);
        return -1;
    }
    return 0;
}

/* fused_mse_fwd(x, y, reduction) -> loss (x's shape for reduction 0, else 0-d) */
static PyObject *f_mse_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *oy;
    int red;
    AmpyTensor *x, *y;
    if (!PyArg_ParseTuple(args, "OOi:fused_mse_fwd", &ox, &oy, &red) ||
        mse_pair(ox, oy, &x, &y, "fused_mse_fwd") < 0)
        return NULL;
    AmpyTensor *out = red == 0 ? ampy_py_empty(AMPY_FLOAT32, x->ndim, x->shape, AMPY_DEV_CPU)
                               : ampy_py_empty(AMPY_FLOAT32, 0, NULL, AMPY_DEV_CPU);
    if (!out)
        return NULL;
    ampy_status s;
    RUN(x->numel, ampy_fused_mse_fwd_f32(x->numel, (const float *)x->data,
                                         (const float *)y->data, red, (float *)out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(s);
    }
    return (PyObject *)out;
}

/* fused_mse_bwd(x, y, reduction, dout, need_dx, need_dy) -> (dx | None, dy | None) */
static PyObject *f_mse_bwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *oy, *od;
    int red, ndx, ndy;
    AmpyTensor *x, *y, *d;
    const char *fn = "fused_mse_bwd";
    if (!PyArg_ParseTuple(args, "OOiOpp:fused_mse_bwd", &ox, &oy, &red, &od, &ndx, &ndy) ||
        mse_pair(ox, oy, &x, &y, fn) < 0 || !(d = cpu_contig(od, fn, "grad_output", 1)))
        return NULL;
    if (d->numel != (red == 0 ? x->numel : 1)) {
        PyErr_Format(PyExc_ValueError, "%s: argument 'grad_output' has %lld elements, expected "
                     "%lld", fn, (long long)d->numel, (long long)(red == 0 ? x->numel : 1));
        return NULL;
    }
    AmpyTensor *dx = ndx ? ampy_py_empty(AMPY_FLOAT32, x->ndim, x->shape, AMPY_DEV_CPU) : NULL;
    AmpyTensor *dy = ndy ? ampy_py_empty(AMPY_FLOAT32, x->ndim, x->shape, AMPY_DEV_CPU) : NULL;
    if ((ndx && !dx) || (ndy && !dy)) {
        Py_XDECREF(dx), Py_XDECREF(dy);
        return NULL;
    }
    ampy_status s;
    RUN(x->numel, ampy_fused_mse_bwd_f32(x->numel, (const float *)x->data,
                                         (const float *)y->data, red, (const float *)d->data,
                                         dx ? (float *)dx->data : NULL,
                                         dy ? (float *)dy->data : NULL));
    if (s != AMPY_OK) {
        Py_XDECREF(dx), Py_XDECREF(dy);
        return ampy_py_raise(s);
    }
    if (!dx) {
        Py_INCREF(Py_None);
        dx = (AmpyTensor *)Py_None;
    }
    if (!dy) {
        Py_INCREF(Py_None);
        dy = (AmpyTensor *)Py_None;
    }
    return Py_BuildValue("NN", (PyObject *)dx, (PyObject *)dy);
}

/* Two contiguous CPU tensors of one shape and one dtype (float32/16, bfloat16). */
static int same_pair(PyObject *oa, PyObject *og, AmpyTensor **a, AmpyTensor **g, const char *fn,
                     const char *aname)
{
    if (!(*a = cpu_contig(oa, fn, aname, 0)) || !(*g = cpu_contig(og, fn, "grad_output", 0)))
        return -1;
    int dt = (*a)->dtype;
    if (dt != AMPY_FLOAT32 && dt != AMPY_FLOAT16 && dt != AMPY_BFLOAT16) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be float32, float16 or bfloat16",
                     fn, aname);
        return -1;
    }
    if ((*g)->dtype != dt) {
        PyErr_Format(PyExc_TypeError, "%s: argument 'grad_output' must have %s's dtype", fn,
                     aname);
        return -1;
    }
    int same = (*a)->ndim == (*g)->ndim;
    for (int d = 0; same && d < (*a)->ndim; d++)
        same = (*a)->shape[d] == (*g)->shape[d];
    if (!same) {
        PyErr_Format(PyExc_ValueError, "%s: argument 'grad_output' must have %s's shape", fn,
                     aname);
        return -1;
    }
    return 0;
}

typedef ampy_status (*ew_bwd_fn)(int64_t, const void *, const void *, int, void *);

static PyObject *ew_bwd(PyObject *args, const char *fn, const char *aname, ew_bwd_fn kernel)
{
    PyObject *oa, *og;
    AmpyTensor *a, *g;
    if (!PyArg_UnpackTuple(args, fn, 2, 2, &oa, &og) || same_pair(oa, og, &a, &g, fn, aname) < 0)
        return NULL;
    AmpyTensor *dx = ampy_py_empty(a->dtype, a->ndim, a->shape, AMPY_DEV_CPU);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(a->numel, kernel(a->numel, a->data, g->data, a->dtype, dx->data));
    if (s != AMPY_OK) {
        Py_DECREF(dx);
        return ampy_py_raise(s);
    }
    return (PyObject *)dx;
}

/* fused_gelu_bwd(x, grad_output) -> dx ; fused_relu_bwd(y, grad_output) -> dx */
static PyObject *f_gelu_bwd(PyObject *self, PyObject *args)
{
    return ew_bwd(args, "fused_gelu_bwd", "input", ampy_fused_gelu_bwd);
}

static PyObject *f_relu_bwd(PyObject *self, PyObject *args)
{
    return ew_bwd(args, "fused_relu_bwd", "output", ampy_fused_relu_bwd);
}

/* fused_softmax_bwd(y, grad_output) -> dx, softmax over the last dim */
static PyObject *f_softmax_bwd(PyObject *self, PyObject *args)
{
    PyObject *oy, *og;
    AmpyTensor *y, *g;
    const char *fn = "fused_softmax_bwd";
    if (!PyArg_UnpackTuple(args, fn, 2, 2, &oy, &og) || same_pair(oy, og, &y, &g, fn, "output") < 0)
        return NULL;
    int64_t N = y->ndim ? y->shape[y->ndim - 1] : 1;
    int64_t M = N ? y->numel / N : 0;
    AmpyTensor *dx = ampy_py_empty(y->dtype, y->ndim, y->shape, AMPY_DEV_CPU);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(y->numel, ampy_fused_softmax_bwd(M, N, y->data, g->data, y->dtype, dx->data));
    if (s != AMPY_OK) {
        Py_DECREF(dx);
        return ampy_py_raise(s);
    }
    return (PyObject *)dx;
}

/* fused_colsum(x) -> x.sum(0) for a contiguous 2-d float32/float16/bfloat16 x */
static PyObject *f_colsum(PyObject *self, PyObject *args)
{
    PyObject *ox;
    if (!PyArg_UnpackTuple(args, "fused_colsum", 1, 1, &ox))
        return NULL;
    AmpyTensor *x = ampy_py_tensor_arg(ox, "fused_colsum", "input");
    if (!x)
        return NULL;
    if (x->ndim != 2 || x->device != AMPY_DEV_CPU || !ampy_py_is_contiguous(x)) {
        PyErr_SetString(PyExc_ValueError,
                        "fused_colsum: argument 'input' must be a contiguous 2-d CPU tensor");
        return NULL;
    }
    AmpyTensor *out = ampy_py_empty(x->dtype, 1, x->shape + 1, AMPY_DEV_CPU);
    if (!out)
        return NULL;
    ampy_status s;
    RUN(x->numel, ampy_fused_colsum(x->shape[0], x->shape[1], x->data, x->dtype, out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(s);
    }
    return (PyObject *)out;
}

PyMethodDef ampy_py_fused_methods[] = {
    {"fused_colsum", f_colsum, METH_VARARGS,
     "fused_colsum(x)\n--\n\nInternal: x.sum(0) of a contiguous 2-d tensor (bias gradients)."},
    {"fused_gelu_bwd", f_gelu_bwd, METH_VARARGS,
     "fused_gelu_bwd(x, grad_output)\n--\n\nInternal: exact-gelu backward in one pass."},
    {"fused_relu_bwd", f_relu_bwd, METH_VARARGS,
     "fused_relu_bwd(y, grad_output)\n--\n\nInternal: relu backward from its output."},
    {"fused_softmax_bwd", f_softmax_bwd, METH_VARARGS,
     "fused_softmax_bwd(y, grad_output)\n--\n\nInternal: softmax backward over the last dim."},
    {"fused_zeros", f_zeros, METH_VARARGS,
     "fused_zeros(size, dtype)\n--\n\nInternal: a new zero-filled CPU tensor (memset)."},
    {"fused_mse_fwd", f_mse_fwd, METH_VARARGS,
     "fused_mse_fwd(x, y, reduction)\n--\n\nInternal: nn_mse_fwd for contiguous float32."},
    {"fused_mse_bwd", f_mse_bwd, METH_VARARGS,
     "fused_mse_bwd(x, y, reduction, dout, need_dx, need_dy)\n--\n\nInternal: nn_mse_bwd for "
     "contiguous float32."},
    {NULL, NULL, 0, NULL},
};
