/* conv_py.c — binding of the convolution kernels (conv.h) as ampy._C.conv_*.
 *
 * Internal API for ampy/nn/_ops_conv.py, which checks the user's arguments
 * (torch's messages), computes the output size and passes the geometry as
 * one tuple (sh, sw, pt, pl, dh, dw, groups). Here the tensors are checked
 * once more for what the kernels rely on (4-d, one dtype, one device,
 * contiguous weight/bias/grad, sizes that agree), then the kernel runs with
 * the GIL released: libampy's for CPU tensors, cuda/conv.cu's through the
 * ampy_cuda_api table for CUDA tensors.
 */
#include "pyampy.h"

#include "ampy/conv.h"
#include "ampy/conv_math.h"
#include "ampy/cuda.h"

static PyObject *conv_raise(int dev, ampy_status s)
{
    return dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
}

/* A tensor of `ndim` dims (0: any) and dtype/device of `like` (NULL: the
 * first one), contiguous when `contig`; None gives NULL without an
 * exception when `opt`. */
static AmpyTensor *targ(PyObject *o, const char *arg, int ndim, const AmpyTensor *like,
                        int contig, int opt)
{
    if (opt && o == Py_None)
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(o, "conv2d", arg);
    if (!t)
        return NULL;
    if (ndim && t->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "conv2d: argument '%s' must be %d-d, got %d-d", arg, ndim,
                     t->ndim);
        return NULL;
    }
    if (like && (t->dtype != like->dtype || t->device != like->device)) {
        PyErr_Format(PyExc_RuntimeError, "conv2d: argument '%s' must have the dtype and device "
                     "of the input", arg);
        return NULL;
    }
    if (contig && !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "conv2d: argument '%s' must be contiguous", arg);
        return NULL;
    }
    if (t->device >= 0 && !ampy_py_cuda_api())
        return NULL;
    return t;
}

static int parse_geom(PyObject *og, ampy_conv2d_geom *g)
{
    long long v[7];
    if (!PyArg_ParseTuple(og, "LLLLLLL;conv2d: geometry must be 7 ints", &v[0], &v[1], &v[2],
                          &v[3], &v[4], &v[5], &v[6]))
        return -1;
    g->sh = v[0], g->sw = v[1], g->pt = v[2], g->pl = v[3], g->dh = v[4], g->dw = v[5];
    g->groups = v[6];
    return 0;
}

static int set_io(ampy_conv2d_geom *g, const int64_t *in, const int64_t *wsh, const int64_t *out)
{
    g->N = in[0], g->C = in[1], g->H = in[2], g->W = in[3];
    g->O = wsh[0], g->KH = wsh[2], g->KW = wsh[3], g->OH = out[2], g->OW = out[3];
    ampy_status s = ampy_conv2d_check(g);
    if (s != AMPY_OK)
        return ampy_py_raise_int(s);
    if (out[0] != in[0] || out[1] != wsh[0] || wsh[1] * g->groups != in[1]) {
        PyErr_SetString(PyExc_ValueError, "conv2d: input, weight and output sizes disagree");
        return -1;
    }
    return 0;
}

#define RUN_BIG(n, call)                                                                         \
    do {                                                                                         \
        if ((n) >= AMPY_PY_GIL_RELEASE_MIN) {                                                    \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)

/* conv2d_fwd(x, w, bias | None, (OH, OW), geom) -> y */
static PyObject *f_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *ow, *ob, *og;
    long long OH, OW;
    if (!PyArg_ParseTuple(args, "OOO(LL)O:conv2d_fwd", &ox, &ow, &ob, &OH, &OW, &og))
        return NULL;
    AmpyTensor *x = targ(ox, "input", 4, NULL, 0, 0), *w = NULL, *b = NULL;
    if (!x || !(w = targ(ow, "weight", 4, x, 1, 0)) ||
        (!(b = targ(ob, "bias", 1, x, 1, 1)) && PyErr_Occurred()))
        return NULL;
    ampy_conv2d_geom g;
    int64_t out[4] = {x->shape[0], w->shape[0], OH, OW};
    if (parse_geom(og, &g) < 0 || set_io(&g, x->shape, w->shape, out) < 0)
        return NULL;
    if (b && b->numel != w->shape[0]) {
        PyErr_SetString(PyExc_ValueError, "conv2d: bias must have out_channels elements");
        return NULL;
    }
    AmpyTensor *y = ampy_py_empty(x->dtype, 4, out, x->device);
    if (!y)
        return NULL;
    ampy_status s;
    const void *bp = b ? b->data : NULL;
    if (x->device >= 0)
        RUN_BIG(y->numel, ampy_py_cuda_api()->conv2d_forward(x->device, &g, x->dtype, x->data,
                                                             x->strides, w->data, bp, y->data));
    else
        RUN_BIG(y->numel, ampy_conv2d_forward(&g, x->dtype, x->data, x->strides, w->data, bp,
                                              y->data));
    if (s != AMPY_OK) {
        Py_DECREF(y);
        return conv_raise(x->device, s);
    }
    return (PyObject *)y;
}

/* conv2d_bwd_input(dy, w, bias | None, input_shape, geom) -> dx */
static PyObject *f_bwd_input(PyObject *self, PyObject *args)
{
    PyObject *ody, *ow, *ob, *og;
    int64_t in[4];
    long long v[4];
    if (!PyArg_ParseTuple(args, "OOO(LLLL)O:conv2d_bwd_input", &ody, &ow, &ob, &v[0], &v[1],
                          &v[2], &v[3], &og))
        return NULL;
    AmpyTensor *dy = targ(ody, "grad_output", 4, NULL, 1, 0), *w = NULL, *b = NULL;
    if (!dy || !(w = targ(ow, "weight", 4, dy, 1, 0)) ||
        (!(b = targ(ob, "bias", 1, dy, 1, 1)) && PyErr_Occurred()))
        return NULL;
    for (int i = 0; i < 4; i++)
        in[i] = v[i];
    ampy_conv2d_geom g;
    if (parse_geom(og, &g) < 0 || set_io(&g, in, w->shape, dy->shape) < 0)
        return NULL;
    if (b && b->numel != in[1]) {
        PyErr_SetString(PyExc_ValueError, "conv2d: bias must have one element per channel");
        return NULL;
    }
    AmpyTensor *dx = ampy_py_empty(dy->dtype, 4, in, dy->device);
    if (!dx)
        return NULL;
    ampy_status s;
    const void *bp = b ? b->data : NULL;
    if (dy->device >= 0)
        RUN_BIG(dx->numel, ampy_py_cuda_api()->conv2d_backward_input(dy->device, &g, dy->dtype,
                                                                     dy->data, w->data, bp,
                                                                     dx->data));
    else
        RUN_BIG(dx->numel, ampy_conv2d_backward_input(&g, dy->dtype, dy->data, w->data, bp,
                                                      dx->data));
    if (s != AMPY_OK) {
        Py_DECREF(dx);
        return conv_raise(dy->device, s);
    }
    return (PyObject *)dx;
}

/* The arguments (x, dy, weight_shape, geom) of the weight gradient; 0 or
 * -1 with an exception. */
static int wgrad_args(PyObject *args, const char *fmt, AmpyTensor **x, AmpyTensor **dy,
                      int64_t *wsh, ampy_conv2d_geom *g)
{
    PyObject *ox, *ody, *og;
    long long v[4];
    if (!PyArg_ParseTuple(args, fmt, &ox, &ody, &v[0], &v[1], &v[2], &v[3], &og))
        return -1;
    *x = targ(ox, "input", 4, NULL, 0, 0);
    if (!*x || !(*dy = targ(ody, "grad_output", 4, *x, 1, 0)))
        return -1;
    for (int i = 0; i < 4; i++)
        wsh[i] = v[i];
    if (parse_geom(og, g) < 0 || set_io(g, (*x)->shape, wsh, (*dy)->shape) < 0)
        return -1;
    return 0;
}

/* conv2d_bwd_weight(x, dy, weight_shape, geom) -> dw */
static PyObject *f_bwd_weight(PyObject *self, PyObject *args)
{
    AmpyTensor *x, *dy;
    int64_t wsh[4];
    ampy_conv2d_geom g;
    if (wgrad_args(args, "OO(LLLL)O:conv2d_bwd_weight", &x, &dy, wsh, &g) < 0)
        return NULL;
    AmpyTensor *dw = ampy_py_empty(x->dtype, 4, wsh, x->device);
    if (!dw)
        return NULL;
    ampy_status s;
    if (x->device >= 0)
        RUN_BIG(dy->numel, ampy_py_cuda_api()->conv2d_backward_weight(x->device, &g, x->dtype,
                                                                      x->data, x->strides,
                                                                      dy->data, dw->data));
    else
        RUN_BIG(dy->numel, ampy_conv2d_backward_weight(&g, x->dtype, x->data, x->strides,
                                                       dy->data, dw->data));
    if (s != AMPY_OK) {
        Py_DECREF(dw);
        return conv_raise(x->device, s);
    }
    return (PyObject *)dw;
}

/* conv_wgrad_path(x, dy, weight_shape, geom) -> "im2col" or "shifted" */
static PyObject *f_wgrad_path(PyObject *self, PyObject *args)
{
    AmpyTensor *x, *dy;
    int64_t wsh[4];
    ampy_conv2d_geom g;
    if (wgrad_args(args, "OO(LLLL)O:conv_wgrad_path", &x, &dy, wsh, &g) < 0)
        return NULL;
    return PyUnicode_FromString(x->device >= 0 ? "cuda" : ampy_conv_wgrad_path(&g, x->dtype));
}

static PyObject *f_wgrad_set_path(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    ampy_status st = ampy_conv_wgrad_set_path(name);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    Py_RETURN_NONE;
}

/* conv_dgrad_path(dy, weight, input_shape, geom) -> the input-gradient path */
static PyObject *f_dgrad_path(PyObject *self, PyObject *args)
{
    PyObject *ody, *ow, *og;
    long long v[4];
    if (!PyArg_ParseTuple(args, "OO(LLLL)O:conv_dgrad_path", &ody, &ow, &v[0], &v[1], &v[2],
                          &v[3], &og))
        return NULL;
    AmpyTensor *dy = targ(ody, "grad_output", 4, NULL, 1, 0), *w;
    if (!dy || !(w = targ(ow, "weight", 4, dy, 1, 0)))
        return NULL;
    int64_t in[4] = {v[0], v[1], v[2], v[3]};
    ampy_conv2d_geom g;
    if (parse_geom(og, &g) < 0 || set_io(&g, in, w->shape, dy->shape) < 0)
        return NULL;
    return PyUnicode_FromString(dy->device >= 0 ? "cuda" : ampy_conv_dgrad_path(&g, dy->dtype));
}

static PyObject *f_dgrad_set_path(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    ampy_status st = ampy_conv_dgrad_set_path(name);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    Py_RETURN_NONE;
}

/* conv_bwd_bias(dy) -> db: dy (N, O, ...) contiguous, summed over all dims
 * but dim 1. */
static PyObject *f_bwd_bias(PyObject *self, PyObject *ody)
{
    AmpyTensor *dy = targ(ody, "grad_output", 0, NULL, 1, 0);
    if (!dy)
        return NULL;
    if (dy->ndim < 2) {
        PyErr_SetString(PyExc_ValueError, "conv_bwd_bias: grad_output must be at least 2-d");
        return NULL;
    }
    int64_t N = dy->shape[0], O = dy->shape[1], P = 1;
    for (int d = 2; d < dy->ndim; d++)
        P *= dy->shape[d];
    AmpyTensor *db = ampy_py_empty(dy->dtype, 1, &O, dy->device);
    if (!db)
        return NULL;
    ampy_status s;
    if (dy->device >= 0)
        RUN_BIG(dy->numel, ampy_py_cuda_api()->conv_backward_bias(dy->device, N, O, P,
                                                                      dy->dtype, dy->data,
                                                                      db->data));
    else
        RUN_BIG(dy->numel, ampy_conv_backward_bias(N, O, P, dy->dtype, dy->data, db->data));
    if (s != AMPY_OK) {
        Py_DECREF(db);
        return conv_raise(dy->device, s);
    }
    return (PyObject *)db;
}

PyMethodDef ampy_py_conv_methods[] = {
    {"conv2d_fwd", f_fwd, METH_VARARGS,
     "conv2d_fwd(x, w, bias, out_hw, geom)\n--\n\nInternal: y = conv2d(x, w) + bias."},
    {"conv2d_bwd_input", f_bwd_input, METH_VARARGS,
     "conv2d_bwd_input(dy, w, bias, input_shape, geom)\n--\n\nInternal: the input gradient "
     "(conv_transpose2d with bias)."},
    {"conv2d_bwd_weight", f_bwd_weight, METH_VARARGS,
     "conv2d_bwd_weight(x, dy, weight_shape, geom)\n--\n\nInternal: the weight gradient."},
    {"conv_wgrad_path", f_wgrad_path, METH_VARARGS,
     "conv_wgrad_path(x, dy, weight_shape, geom)\n--\n\nInternal: the weight-gradient path "
     "conv2d_bwd_weight takes ('im2col' or 'shifted'; 'cuda' for CUDA tensors)."},
    {"conv_wgrad_set_path", f_wgrad_set_path, METH_O,
     "conv_wgrad_set_path(name)\n--\n\nInternal: 'auto', 'im2col' or 'shifted' (tests, "
     "benchmarks)."},
    {"conv_dgrad_path", f_dgrad_path, METH_VARARGS,
     "conv_dgrad_path(dy, weight, input_shape, geom)\n--\n\nInternal: the input-gradient "
     "path conv2d_bwd_input takes ('pointwise', 'phase', 'as_conv', 'col2im'; 'cuda')."},
    {"conv_dgrad_set_path", f_dgrad_set_path, METH_O,
     "conv_dgrad_set_path(name)\n--\n\nInternal: 'auto', 'gemm' or 'phase' (tests, "
     "benchmarks)."},
    {"conv_bwd_bias", f_bwd_bias, METH_O,
     "conv_bwd_bias(dy)\n--\n\nInternal: dy summed over every dim but 1."},
    {NULL, NULL, 0, NULL},
};
