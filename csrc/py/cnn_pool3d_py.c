/* cnn_pool3d_py.c — binding of the volume pools (ampy/cnn_pool3d.h:
 * max_pool3d, avg_pool3d, adaptive_avg_pool3d, adaptive_max_pool3d) as
 * ampy._C.cnn_*3d_* functions.
 *
 * Internal API for ampy/nn/_ops_pool3d.py, which checks the user's
 * arguments (torch's messages), computes the output sizes and passes a
 * contiguous CPU tensor whose last three dims are the volume (the ops are
 * declared CPU-only: ampy/cuda/_fallback.py brings CUDA tensors to the
 * host). Windows arrive as four (depth, height, width) triples: kernel,
 * stride, padding, dilation.
 */
#include "pyampy.h"

#include "ampy/cnn_pool3d.h"

#define RUN(n, call)                                                                             \
    do {                                                                                         \
        if ((n) >= AMPY_PY_GIL_RELEASE_MIN) {                                                    \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)

#define T3 "(LLL)"
#define A3(a) &(a)[0], &(a)[1], &(a)[2]

/* A contiguous CPU tensor of at least 3 dims. */
static AmpyTensor *vtensor(PyObject *o, const char *fn, const char *arg)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (t && (!ampy_py_is_contiguous(t) || t->ndim < 3 || t->device >= 0)) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a contiguous CPU tensor of "
                     "at least 3 dims", fn, arg);
        return NULL;
    }
    return t;
}

/* The call's sizes from t's volume dims (in, or out when t is a gradient)
 * and the other side's; a new tensor shaped like t with its last three dims
 * replaced by other[0..3). */
static AmpyTensor *sized(const AmpyTensor *t, int dtype, const long long other[3], int t_is_out,
                         ampy_cnn_vol *v)
{
    int64_t shape[AMPY_MAX_DIMS];
    v->P = 1;
    for (int i = 0; i < t->ndim; i++) {
        int j = i - (t->ndim - 3);
        shape[i] = j < 0 ? t->shape[i] : other[j];
        if (j < 0)
            v->P *= t->shape[i];
        else if (t_is_out)
            v->out[j] = t->shape[i], v->in[j] = other[j];
        else
            v->in[j] = t->shape[i], v->out[j] = other[j];
    }
    for (int j = 0; j < 3; j++)
        if (other[j] < 0) {
            PyErr_SetString(PyExc_ValueError, "pool3d: negative size");
            return NULL;
        }
    return ampy_py_empty(dtype, t->ndim, shape, t->device);
}

static void to_window(const long long k[3], const long long s[3], const long long p[3],
                      const long long d[3], ampy_cnn_window3 *w)
{
    for (int j = 0; j < 3; j++)
        w->k[j] = k[j], w->s[j] = s[j], w->p[j] = p[j], w->d[j] = d[j];
}

static PyObject *done(ampy_status s, AmpyTensor *y, AmpyTensor *idx)
{
    if (s != AMPY_OK) {
        Py_DECREF(y);
        Py_XDECREF(idx);
        return ampy_py_raise(s);
    }
    return idx ? Py_BuildValue("NN", y, idx) : (PyObject *)y;
}

/* cnn_max_pool3d_fwd(x, k, s, p, d, out) -> (y, indices);
 * cnn_adaptive_max_pool3d_fwd(x, out) -> (y, indices) */
static PyObject *f_max(PyObject *args, int adaptive)
{
    PyObject *ox;
    long long k[3] = {1, 1, 1}, st[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1}, o[3];
    int ok = adaptive ? PyArg_ParseTuple(args, "O" T3 ":cnn_adaptive_max_pool3d_fwd", &ox, A3(o))
                      : PyArg_ParseTuple(args, "O" T3 T3 T3 T3 T3 ":cnn_max_pool3d_fwd", &ox,
                                         A3(k), A3(st), A3(p), A3(d), A3(o));
    if (!ok)
        return NULL;
    AmpyTensor *x = vtensor(ox, adaptive ? "adaptive_max_pool3d" : "max_pool3d", "input");
    if (!x)
        return NULL;
    ampy_cnn_vol v;
    ampy_cnn_window3 w;
    to_window(k, st, p, d, &w);
    AmpyTensor *y = sized(x, x->dtype, o, 0, &v), *idx = y ? sized(x, AMPY_INT64, o, 0, &v) : NULL;
    if (!idx) {
        Py_XDECREF(y);
        return NULL;
    }
    ampy_status s;
    if (adaptive)
        RUN(x->numel, ampy_cnn_adaptive_max_pool3d_fwd(&v, x->data, x->dtype, y->data,
                                                       (int64_t *)idx->data));
    else
        RUN(x->numel, ampy_cnn_max_pool3d_fwd(&v, &w, x->data, x->dtype, y->data,
                                              (int64_t *)idx->data));
    return done(s, y, idx);
}

static PyObject *f_max_fwd(PyObject *self, PyObject *args) { return f_max(args, 0); }
static PyObject *f_amax_fwd(PyObject *self, PyObject *args) { return f_max(args, 1); }

/* cnn_avg_pool3d_fwd(x, k, s, p, out, count_include_pad, divisor_override) -> y
 * cnn_avg_pool3d_bwd(dy, k, s, p, in, count_include_pad, divisor_override) -> dx */
static PyObject *f_avg(PyObject *args, int backward)
{
    PyObject *ot;
    long long k[3], st[3], p[3], d[3] = {1, 1, 1}, o[3], div;
    int inc;
    if (!PyArg_ParseTuple(args, backward ? "O" T3 T3 T3 T3 "pL:cnn_avg_pool3d_bwd"
                                         : "O" T3 T3 T3 T3 "pL:cnn_avg_pool3d_fwd",
                          &ot, A3(k), A3(st), A3(p), A3(o), &inc, &div))
        return NULL;
    AmpyTensor *t = vtensor(ot, backward ? "avg_pool3d_backward" : "avg_pool3d",
                            backward ? "grad_output" : "input");
    if (!t)
        return NULL;
    ampy_cnn_vol v;
    ampy_cnn_window3 w;
    to_window(k, st, p, d, &w);
    AmpyTensor *r = sized(t, t->dtype, o, backward, &v);
    if (!r)
        return NULL;
    ampy_status s;
    if (backward)
        RUN(t->numel, ampy_cnn_avg_pool3d_bwd(&v, &w, inc, div, t->data, t->dtype, r->data));
    else
        RUN(t->numel, ampy_cnn_avg_pool3d_fwd(&v, &w, inc, div, t->data, t->dtype, r->data));
    return done(s, r, NULL);
}

static PyObject *f_avg_fwd(PyObject *self, PyObject *args) { return f_avg(args, 0); }
static PyObject *f_avg_bwd(PyObject *self, PyObject *args) { return f_avg(args, 1); }

/* cnn_adaptive_avg_pool3d_fwd(x, out) -> y ; cnn_adaptive_avg_pool3d_bwd(dy, in) -> dx */
static PyObject *f_aavg(PyObject *args, int backward)
{
    PyObject *ot;
    long long o[3];
    if (!PyArg_ParseTuple(args, backward ? "O" T3 ":cnn_adaptive_avg_pool3d_bwd"
                                         : "O" T3 ":cnn_adaptive_avg_pool3d_fwd", &ot, A3(o)))
        return NULL;
    AmpyTensor *t = vtensor(ot, "adaptive_avg_pool3d", backward ? "grad_output" : "input");
    if (!t)
        return NULL;
    ampy_cnn_vol v;
    AmpyTensor *r = sized(t, t->dtype, o, backward, &v);
    if (!r)
        return NULL;
    ampy_status s;
    if (backward)
        RUN(t->numel, ampy_cnn_adaptive_avg_pool3d_bwd(&v, t->data, t->dtype, r->data));
    else
        RUN(t->numel, ampy_cnn_adaptive_avg_pool3d_fwd(&v, t->data, t->dtype, r->data));
    return done(s, r, NULL);
}

static PyObject *f_aavg_fwd(PyObject *self, PyObject *args) { return f_aavg(args, 0); }
static PyObject *f_aavg_bwd(PyObject *self, PyObject *args) { return f_aavg(args, 1); }

PyMethodDef ampy_py_cnn_pool3d_methods[] = {
    {"cnn_max_pool3d_fwd", f_max_fwd, METH_VARARGS,
     "cnn_max_pool3d_fwd(x, kernel, stride, padding, dilation, out)\n--\n\n"
     "Internal: 3-d max pool with indices."},
    {"cnn_adaptive_max_pool3d_fwd", f_amax_fwd, METH_VARARGS,
     "cnn_adaptive_max_pool3d_fwd(x, out)\n--\n\nInternal: adaptive 3-d max pool with indices."},
    {"cnn_avg_pool3d_fwd", f_avg_fwd, METH_VARARGS,
     "cnn_avg_pool3d_fwd(x, kernel, stride, padding, out, count_include_pad, "
     "divisor_override)\n--\n\nInternal: 3-d average pool."},
    {"cnn_avg_pool3d_bwd", f_avg_bwd, METH_VARARGS,
     "cnn_avg_pool3d_bwd(dy, kernel, stride, padding, in, count_include_pad, "
     "divisor_override)\n--\n\nInternal: 3-d average pool backward."},
    {"cnn_adaptive_avg_pool3d_fwd", f_aavg_fwd, METH_VARARGS,
     "cnn_adaptive_avg_pool3d_fwd(x, out)\n--\n\nInternal: adaptive 3-d average pool."},
    {"cnn_adaptive_avg_pool3d_bwd", f_aavg_bwd, METH_VARARGS,
     "cnn_adaptive_avg_pool3d_bwd(dy, in)\n--\n\nInternal: adaptive 3-d average pool backward."},
    {NULL, NULL, 0, NULL},
};
