/* cnn_pool_py.c — binding of the cnn plane kernels (cnn.h: max/avg/adaptive
 * pools, padding, interpolation) as ampy._C.cnn_* functions.
 *
 * Internal API for ampy/nn/_ops_cnn.py, which checks the user's arguments
 * (torch's messages), computes the output sizes and passes contiguous
 * tensors of one device whose last two dims (the last k for padding) are
 * the plane. CUDA tensors run cuda/cnn_pool.cu's and cuda/cnn_resample.cu's
 * kernels through the ampy_cuda_api table (PL_CALL), CPU tensors libampy's.
 */
#include "pyampy.h"

#include "ampy/cnn.h"
#include "ampy/cuda.h"

/* The device of the current call: that of its first tensor argument
 * (ptensor() checks the others against it). Thread-local: RUN releases the
 * GIL. */
static _Thread_local int pl_dev = AMPY_DEV_CPU;
#define PL_CALL(name, ...)                                                                       \
    (pl_dev >= 0 ? ampy_py_cuda_api()->name(pl_dev, __VA_ARGS__) : ampy_##name(__VA_ARGS__))

#define RUN(n, call)                                                                             \
    do {                                                                                         \
        if ((n) >= AMPY_PY_GIL_RELEASE_MIN) {                                                    \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)

/* A contiguous tensor of at least min_dims dims; the first of a call
 * (first) sets the call's device, the others must be on it. */
static AmpyTensor *ptensor(PyObject *o, const char *fn, const char *arg, int min_dims, int first)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (t && (!ampy_py_is_contiguous(t) || t->ndim < min_dims)) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a contiguous tensor of at "
                     "least %d dims", fn, arg, min_dims);
        return NULL;
    }
    if (t && first) {
        if (t->device >= 0 && !ampy_py_cuda_api())
            return NULL;
        pl_dev = t->device;
    } else if (t && t->device != pl_dev) {
        PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, "
                     "but argument '%s' is on %s", fn, arg,
                     t->device < 0 ? "the CPU" : "a CUDA device");
        return NULL;
    }
    return t;
}

/* New tensor shaped like t with its last k dims replaced by last[0..k). */
static AmpyTensor *new_tail(const AmpyTensor *t, int dtype, int k, const int64_t *last)
{
    int64_t shape[AMPY_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++)
        shape[i] = i < t->ndim - k ? t->shape[i] : last[i - (t->ndim - k)];
    return ampy_py_empty(dtype, t->ndim, shape, t->device);
}

static int64_t blocks(const AmpyTensor *t, int k)
{
    int64_t p = 1;
    for (int i = 0; i < t->ndim - k; i++)
        p *= t->shape[i];
    return p;
}

static PyObject *done(ampy_status s, AmpyTensor *y)
{
    if (s != AMPY_OK) {
        Py_DECREF(y);
        return pl_dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    }
    return (PyObject *)y;
}

#define H_OF(t) ((t)->shape[(t)->ndim - 2])
#define W_OF(t) ((t)->shape[(t)->ndim - 1])
#define WIN_FMT "(LLLLLLLL)"
#define WIN_ARGS(w) &(w).kh, &(w).kw, &(w).sh, &(w).sw, &(w).ph, &(w).pw, &(w).dh, &(w).dw

/* cnn_max_pool2d_fwd(x, window, OH, OW) -> (y, indices) */
static PyObject *f_max_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox;
    ampy_cnn_window w;
    long long OH, OW;
    if (!PyArg_ParseTuple(args, "O" WIN_FMT "LL:cnn_max_pool2d_fwd", &ox, WIN_ARGS(w), &OH, &OW))
        return NULL;
    AmpyTensor *x = ptensor(ox, "max_pool2d", "input", 2, 1);
    if (!x)
        return NULL;
    int64_t o[2] = {OH, OW};
    AmpyTensor *y = new_tail(x, x->dtype, 2, o), *idx = y ? new_tail(x, AMPY_INT64, 2, o) : NULL;
    if (!idx) {
        Py_XDECREF(y);
        return NULL;
    }
    ampy_status s;
    RUN(x->numel, PL_CALL(cnn_max_pool2d_fwd, blocks(x, 2), H_OF(x), W_OF(x), OH, OW, &w, x->data,
                                          x->dtype, y->data, (int64_t *)idx->data));
    if (s != AMPY_OK) {
        Py_DECREF(y), Py_DECREF(idx);
        return pl_dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    }
    return Py_BuildValue("NN", y, idx);
}

/* cnn_max_pool2d_bwd(dy, indices, H, W) -> dx */
static PyObject *f_max_bwd(PyObject *self, PyObject *args)
{
    PyObject *ody, *oi;
    long long H, W;
    if (!PyArg_ParseTuple(args, "OOLL:cnn_max_pool2d_bwd", &ody, &oi, &H, &W))
        return NULL;
    AmpyTensor *dy = ptensor(ody, "max_pool2d_backward", "grad_output", 2, 1), *idx = NULL;
    if (!dy || !(idx = ptensor(oi, "max_pool2d_backward", "indices", 2, 0)))
        return NULL;
    if (idx->dtype != AMPY_INT64 || idx->numel != dy->numel) {
        PyErr_SetString(PyExc_ValueError, "max_pool2d_backward: indices must be int64 and "
                                          "shaped like grad_output");
        return NULL;
    }
    int64_t in[2] = {H, W};
    AmpyTensor *dx = new_tail(dy, dy->dtype, 2, in);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(dy->numel, PL_CALL(cnn_max_pool2d_bwd, blocks(dy, 2), H, W, H_OF(dy), W_OF(dy),
                                           (const int64_t *)idx->data, dy->data, dy->dtype,
                                           dx->data));
    return done(s, dx);
}

/* cnn_avg_pool2d_fwd(x, window, OH, OW, count_include_pad, divisor_override) -> y */
static PyObject *f_avg_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox;
    ampy_cnn_window w;
    long long OH, OW, div;
    int inc;
    if (!PyArg_ParseTuple(args, "O" WIN_FMT "LLpL:cnn_avg_pool2d_fwd", &ox, WIN_ARGS(w), &OH,
                          &OW, &inc, &div))
        return NULL;
    AmpyTensor *x = ptensor(ox, "avg_pool2d", "input", 2, 1);
    if (!x)
        return NULL;
    int64_t o[2] = {OH, OW};
    AmpyTensor *y = new_tail(x, x->dtype, 2, o);
    if (!y)
        return NULL;
    ampy_status s;
    RUN(x->numel, PL_CALL(cnn_avg_pool2d_fwd, blocks(x, 2), H_OF(x), W_OF(x), OH, OW, &w, inc, div,
                                          x->data, x->dtype, y->data));
    return done(s, y);
}

/* cnn_avg_pool2d_bwd(dy, window, H, W, count_include_pad, divisor_override) -> dx */
static PyObject *f_avg_bwd(PyObject *self, PyObject *args)
{
    PyObject *ody;
    ampy_cnn_window w;
    long long H, W, div;
    int inc;
    if (!PyArg_ParseTuple(args, "O" WIN_FMT "LLpL:cnn_avg_pool2d_bwd", &ody, WIN_ARGS(w), &H, &W,
                          &inc, &div))
        return NULL;
    AmpyTensor *dy = ptensor(ody, "avg_pool2d_backward", "grad_output", 2, 1);
    if (!dy)
        return NULL;
    int64_t in[2] = {H, W};
    AmpyTensor *dx = new_tail(dy, dy->dtype, 2, in);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(dy->numel, PL_CALL(cnn_avg_pool2d_bwd, blocks(dy, 2), H, W, H_OF(dy), W_OF(dy), &w, inc,
                           div, dy->data, dy->dtype, dx->data));
    return done(s, dx);
}

/* cnn_adaptive_avg_pool2d_fwd(x, OH, OW) -> y ; cnn_adaptive_avg_pool2d_bwd(dy, H, W) -> dx */
static PyObject *f_adaptive(PyObject *args, int backward)
{
    PyObject *ot;
    long long A, B;
    if (!PyArg_ParseTuple(args, backward ? "OLL:cnn_adaptive_avg_pool2d_bwd"
                                         : "OLL:cnn_adaptive_avg_pool2d_fwd", &ot, &A, &B))
        return NULL;
    AmpyTensor *t = ptensor(ot, "adaptive_avg_pool2d", backward ? "grad_output" : "input", 2, 1);
    if (!t)
        return NULL;
    int64_t ab[2] = {A, B};
    AmpyTensor *r = new_tail(t, t->dtype, 2, ab);
    if (!r)
        return NULL;
    ampy_status s;
    if (backward)
        RUN(t->numel, PL_CALL(cnn_adaptive_avg_pool2d_bwd, blocks(t, 2), A, B, H_OF(t), W_OF(t),
                                                       t->data, t->dtype, r->data));
    else
        RUN(t->numel, PL_CALL(cnn_adaptive_avg_pool2d_fwd, blocks(t, 2), H_OF(t), W_OF(t), A, B,
                                                       t->data, t->dtype, r->data));
    return done(s, r);
}

static PyObject *f_adaptive_fwd(PyObject *self, PyObject *args) { return f_adaptive(args, 0); }
static PyObject *f_adaptive_bwd(PyObject *self, PyObject *args) { return f_adaptive(args, 1); }

/* torch's pad list (last dim first: lo, hi, lo of the dim before, ...) ->
 * k and lo/hi outermost first */
static int parse_pads(PyObject *o, int *k, int64_t *lo, int64_t *hi)
{
    PyObject *seq = PySequence_Fast(o, "pad: pads must be a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 2 || n > 6 || n % 2) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "pad: 2, 4 or 6 pads expected");
        return -1;
    }
    *k = (int)(n / 2);
    for (int j = 0; j < *k; j++) {
        Py_ssize_t at = 2 * (*k - 1 - j);
        lo[j] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, at));
        hi[j] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, at + 1));
    }
    Py_DECREF(seq);
    return PyErr_Occurred() ? -1 : 0;
}

/* cnn_pad_fwd(x, pads, mode, value) -> y */
static PyObject *f_pad_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *op;
    int mode, k;
    double value;
    int64_t lo[3], hi[3], in[3], out[3];
    if (!PyArg_ParseTuple(args, "OOid:cnn_pad_fwd", &ox, &op, &mode, &value) ||
        parse_pads(op, &k, lo, hi) < 0)
        return NULL;
    AmpyTensor *x = ptensor(ox, "pad", "input", k, 1);
    if (!x)
        return NULL;
    for (int j = 0; j < k; j++) {
        in[j] = x->shape[x->ndim - k + j];
        out[j] = in[j] + lo[j] + hi[j];
        if (out[j] < 0) {
            PyErr_SetString(PyExc_ValueError, "pad: negative output size");
            return NULL;
        }
    }
    AmpyTensor *y = new_tail(x, x->dtype, k, out);
    if (!y)
        return NULL;
    ampy_status s;
    RUN(x->numel, PL_CALL(cnn_pad_fwd, blocks(x, k), k, in, lo, hi, mode, value, x->data, x->dtype,
                                   y->data));
    return done(s, y);
}

/* cnn_pad_bwd(dy, in_sizes, pads, mode) -> dx */
static PyObject *f_pad_bwd(PyObject *self, PyObject *args)
{
    PyObject *ody, *osz, *op;
    int mode, k, nd;
    int64_t lo[3], hi[3], in[AMPY_MAX_DIMS];
    if (!PyArg_ParseTuple(args, "OOOi:cnn_pad_bwd", &ody, &osz, &op, &mode) ||
        parse_pads(op, &k, lo, hi) < 0 ||
        ampy_py_parse_shape(osz, &nd, in, "pad_backward", "in_sizes") < 0)
        return NULL;
    AmpyTensor *dy = ptensor(ody, "pad_backward", "grad_output", k, 1);
    if (!dy)
        return NULL;
    if (nd != k) {
        PyErr_SetString(PyExc_ValueError, "pad_backward: in_sizes must hold one size per pair");
        return NULL;
    }
    for (int j = 0; j < k; j++)
        if (in[j] + lo[j] + hi[j] != dy->shape[dy->ndim - k + j]) {
            PyErr_SetString(PyExc_ValueError, "pad_backward: grad_output does not match");
            return NULL;
        }
    AmpyTensor *dx = new_tail(dy, dy->dtype, k, in);
    if (!dx)
        return NULL;
    ampy_status s;
    RUN(dy->numel, PL_CALL(cnn_pad_bwd, blocks(dy, k), k, in, lo, hi, mode, dy->data, dy->dtype,
                                    dx->data));
    return done(s, dx);
}

/* cnn_interp2d_fwd(x, OH, OW, mode, align_corners, scale_h, scale_w) -> y
 * cnn_interp2d_bwd(dy, H, W, mode, align_corners, scale_h, scale_w) -> dx */
static PyObject *f_interp(PyObject *args, int backward)
{
    PyObject *ot;
    long long A, B;
    int mode, align;
    double sh, sw;
    if (!PyArg_ParseTuple(args, backward ? "OLLipdd:cnn_interp2d_bwd" : "OLLipdd:cnn_interp2d_fwd",
                          &ot, &A, &B, &mode, &align, &sh, &sw))
        return NULL;
    AmpyTensor *t = ptensor(ot, "interpolate", backward ? "grad_output" : "input", 2, 1);
    if (!t)
        return NULL;
    int64_t ab[2] = {A, B};
    AmpyTensor *r = new_tail(t, t->dtype, 2, ab);
    if (!r)
        return NULL;
    ampy_status s;
    if (backward)
        RUN(t->numel, PL_CALL(cnn_interp2d_bwd, blocks(t, 2), A, B, H_OF(t), W_OF(t), mode,
                              align, sh, sw, t->data, t->dtype, r->data));
    else
        RUN(t->numel, PL_CALL(cnn_interp2d_fwd, blocks(t, 2), H_OF(t), W_OF(t), A, B,
                              AMPY_CNN_INTERP_WITH_CHANNELS(mode, t->ndim > 2
                                                                      ? t->shape[t->ndim - 3]
                                                                      : 1),
                              align, sh, sw, t->data, t->dtype, r->data));
    return done(s, r);
}

static PyObject *f_interp_fwd(PyObject *self, PyObject *args) { return f_interp(args, 0); }
static PyObject *f_interp_bwd(PyObject *self, PyObject *args) { return f_interp(args, 1); }

PyMethodDef ampy_py_cnn_pool_methods[] = {
    {"cnn_max_pool2d_fwd", f_max_fwd, METH_VARARGS,
     "cnn_max_pool2d_fwd(x, window, OH, OW)\n--\n\nInternal: max pool with indices."},
    {"cnn_max_pool2d_bwd", f_max_bwd, METH_VARARGS,
     "cnn_max_pool2d_bwd(dy, indices, H, W)\n--\n\nInternal: scatter to the argmax."},
    {"cnn_avg_pool2d_fwd", f_avg_fwd, METH_VARARGS,
     "cnn_avg_pool2d_fwd(x, window, OH, OW, count_include_pad, divisor_override)\n--\n\n"
     "Internal: average pool."},
    {"cnn_avg_pool2d_bwd", f_avg_bwd, METH_VARARGS,
     "cnn_avg_pool2d_bwd(dy, window, H, W, count_include_pad, divisor_override)\n--\n\n"
     "Internal: average pool backward."},
    {"cnn_adaptive_avg_pool2d_fwd", f_adaptive_fwd, METH_VARARGS,
     "cnn_adaptive_avg_pool2d_fwd(x, OH, OW)\n--\n\nInternal: adaptive average pool."},
    {"cnn_adaptive_avg_pool2d_bwd", f_adaptive_bwd, METH_VARARGS,
     "cnn_adaptive_avg_pool2d_bwd(dy, H, W)\n--\n\nInternal: adaptive average pool backward."},
    {"cnn_pad_fwd", f_pad_fwd, METH_VARARGS,
     "cnn_pad_fwd(x, pads, mode, value)\n--\n\nInternal: pad the last len(pads)/2 dims."},
    {"cnn_pad_bwd", f_pad_bwd, METH_VARARGS,
     "cnn_pad_bwd(dy, in_sizes, pads, mode)\n--\n\nInternal: pad backward."},
    {"cnn_interp2d_fwd", f_interp_fwd, METH_VARARGS,
     "cnn_interp2d_fwd(x, OH, OW, mode, align_corners, scale_h, scale_w)\n--\n\n"
     "Internal: nearest / bilinear interpolation."},
    {"cnn_interp2d_bwd", f_interp_bwd, METH_VARARGS,
     "cnn_interp2d_bwd(dy, H, W, mode, align_corners, scale_h, scale_w)\n--\n\n"
     "Internal: interpolation backward."},
    {NULL, NULL, 0, NULL},
};
