/* reduce_py.c — binding of the reduction concern (ampy/reduce.h).
 *
 *   _C.reduce(op, x, dims, keepdim, out_dtype, correction, with_indices)
 *       op: a name from _C.reduce_ops(); dims: None (all), an int or a
 *       sequence of ints (negative dims wrap; IndexError out of range;
 *       RuntimeError for a repeated dim). out_dtype None picks torch's
 *       default (int64 for integer sum/prod, int64 for argmax, bool for
 *       all/any, else x's dtype). with_indices (max/min): returns
 *       (values, indices).
 *   _C.softmax(x, dim, log) -> Tensor of x's dtype
 *   _C.scan(op, x, dim, out_dtype) -> Tensor (op 0 cumsum, 1 cumprod)
 */
#include "pyampy.h"

#include "ampy/cuda.h"
#include "ampy/reduce.h"

/* ewise_py.c: the current default float dtype code. */
int ampy_py_default_float(void);

static int wrap_dim(long long d, int ndim, int *out, const char *fn)
{
    int n = ndim > 0 ? ndim : 1;
    if (d < -n || d >= n) {
        PyErr_Format(PyExc_IndexError, "%s: Dimension out of range (expected to be in range of "
                     "[%d, %d], but got %lld)", fn, -n, n - 1, d);
        return -1;
    }
    *out = (int)(d < 0 ? d + n : d);
    return 0;
}

/* A dim read from Python: an int beyond long long is out of range too
 * (IndexError, as any other bad dim), not an OverflowError. */
static int read_dim(PyObject *o, long long *d, const char *fn)
{
    *d = PyLong_AsLongLong(o);
    if (*d == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_IndexError, "%s: Dimension out of range (got %R)", fn, o);
        }
        return -1;
    }
    return 0;
}

/* A CPU or (with cuda = 1) CUDA tensor argument. */
static int cpu_tensor_dev(PyObject *o, AmpyTensor **t, const char *fn, int cuda)
{
    *t = ampy_py_tensor_arg(o, fn, "input");
    if (!*t)
        return -1;
    if ((*t)->device != AMPY_DEV_CPU && !cuda) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected a CPU tensor (use the CUDA module)", fn);
        return -1;
    }
    return 0;
}

/* dims -> bit mask over x's dims (all dims for None or an empty sequence). */
static int parse_dims(PyObject *o, const AmpyTensor *x, uint32_t *mask, const char *fn)
{
    const uint32_t all = x->ndim >= 32 ? 0xFFFFFFFFu : ((1u << x->ndim) - 1u);
    *mask = 0;
    if (o == Py_None) {
        *mask = all;
        return 0;
    }
    PyObject *seq = PyLong_Check(o) ? PyTuple_Pack(1, o)
                    : (PyUnicode_Check(o) || PyBytes_Check(o)) ? NULL
                                                               : PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: argument 'dim' must be an int or a tuple of ints, "
                     "not %s", fn, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    uint32_t seen = 0; /* dims named so far (a 0-d tensor has dim 0 / -1) */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        if (PyBool_Check(it) || !PyIndex_Check(it)) {
            PyErr_Format(PyExc_TypeError, "%s: argument 'dim' must contain ints, not %s", fn,
                         Py_TYPE(it)->tp_name);
            goto fail;
        }
        long long v;
        int d;
        if (read_dim(it, &v, fn) < 0 || wrap_dim(v, x->ndim, &d, fn) < 0)
            goto fail;
        if (seen >> d & 1u) {
            PyErr_Format(PyExc_RuntimeError, "%s: dim %d appears multiple times in the list of "
                         "dims", fn, d);
            goto fail;
        }
        seen |= 1u << d;
        if (x->ndim > 0)
            *mask |= 1u << d;
    }
    Py_DECREF(seq);
    if (n == 0)
        *mask = all;
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

static int default_out_dtype(int op, int in)
{
    switch (op) {
    case AMPY_RED_SUM:
    case AMPY_RED_PROD: return ampy_dtype_is_float(in) ? in : AMPY_INT64;
    case AMPY_RED_ARGMAX:
    case AMPY_RED_ARGMIN: return AMPY_INT64;
    case AMPY_RED_ALL:
    case AMPY_RED_ANY: return AMPY_BOOL;
    default: return in;
    }
}

static int parse_op(PyObject *o, int nops, const char *(*name_fn)(int))
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    for (int i = 0; s && i < nops; i++)
        if (strcmp(s, name_fn(i)) == 0)
            return i;
    if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "unknown reduction %R", o);
    return -1;
}

/* Output shape + full-rank byte strides (0 on reduced dims). */
static AmpyTensor *make_out(const AmpyTensor *x, uint32_t mask, int keep, int dt, int64_t *bstr)
{
    int64_t shape[AMPY_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (!(mask >> d & 1u))
            shape[nd++] = x->shape[d];
        else if (keep)
            shape[nd++] = 1;
    }
    AmpyTensor *o = ampy_py_empty(dt, nd, shape, x->device);
    if (!o)
        return NULL;
    const int64_t isz = (int64_t)ampy_dtype_size(dt);
    for (int d = 0, k = 0; d < x->ndim; d++) {
        int red = mask >> d & 1u;
        bstr[d] = red ? 0 : o->strides[k] * isz;
        if (!red || keep)
            k++;
    }
    return o;
}

static PyObject *f_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "reduce(op, x, dims, keepdim, out_dtype, correction, with_indices)");
        return NULL;
    }
    int op = parse_op(args[0], AMPY_RED_NUM_OPS, ampy_reduce_op_name);
    if (op < 0)
        return NULL;
    const char *fn = ampy_reduce_op_name(op);
    AmpyTensor *x;
    uint32_t mask;
    /* keepdim: a bool (NumPy's too), as torch; not any truthy object */
    const char *ktn = Py_TYPE(args[3])->tp_name;
    if (!PyBool_Check(args[3]) && strcmp(ktn, "numpy.bool") != 0 &&
        strcmp(ktn, "numpy.bool_") != 0) {
        PyErr_Format(PyExc_TypeError, "%s(): argument 'keepdim' must be bool, not %s", fn,
                     ktn);
        return NULL;
    }
    int keep = PyObject_IsTrue(args[3]), with_idx = PyObject_IsTrue(args[6]), odt;
    double corr = PyFloat_AsDouble(args[5]);
    if (keep < 0 || with_idx < 0 || (corr == -1.0 && PyErr_Occurred()) ||
        cpu_tensor_dev(args[1], &x, fn, 1) < 0 || parse_dims(args[2], x, &mask, fn) < 0 ||
        ampy_py_parse_dtype(args[4], default_out_dtype(op, x->dtype), &odt, fn, "dtype") < 0)
        return NULL;
    with_idx = with_idx && (op == AMPY_RED_MAX || op == AMPY_RED_MIN);
    int64_t ostr[AMPY_MAX_DIMS], istr[AMPY_MAX_DIMS], xstr[AMPY_MAX_DIMS];
    AmpyTensor *out = make_out(x, mask, keep, odt, ostr), *idx = NULL;
    if (!out)
        return NULL;
    if (with_idx && !(idx = make_out(x, mask, keep, AMPY_INT64, istr))) {
        Py_DECREF(out);
        return NULL;
    }
    ampy_py_byte_strides(x, xstr);
    ampy_status s;
    if (x->device != AMPY_DEV_CPU) { /* CUDA: cuda/reduce.cu */
        const ampy_cuda_api *api = ampy_py_cuda_api();
        s = !api ? AMPY_ERR_RUNTIME
                 : api->reduce(x->device, op, x->ndim, x->shape, x->data, xstr,
                               (ampy_dtype)x->dtype, mask, out->data, ostr, (ampy_dtype)odt,
                               idx ? (int64_t *)idx->data : NULL, istr, corr);
        if (s != AMPY_OK) {
            Py_DECREF(out);
            Py_XDECREF(idx);
            return api ? ampy_py_raise_cuda(s) : NULL;
        }
        goto finish;
    }
    Py_BEGIN_ALLOW_THREADS
    s = ampy_reduce((ampy_reduce_op)op, x->ndim, x->shape, x->data, xstr, (ampy_dtype)x->dtype,
                    mask, out->data, ostr, (ampy_dtype)odt, idx ? (int64_t *)idx->data : NULL,
                    istr, corr);
    Py_END_ALLOW_THREADS
    if (s != AMPY_OK) {
        Py_DECREF(out);
        Py_XDECREF(idx);
        return ampy_py_raise(s);
    }
finish:
    if (!idx)
        return (PyObject *)out;
    PyObject *r = PyTuple_Pack(2, out, idx);
    Py_DECREF(out);
    Py_DECREF(idx);
    return r;
}

/* Shared by softmax and scan: (x, dim) -> wrapped dim and a fresh output. */
static AmpyTensor *line_setup(PyObject *xo, PyObject *dimo, int odt_or_neg, const char *fn,
                              AmpyTensor **x, int *dim, int cuda)
{
    long long d;
    if (read_dim(dimo, &d, fn) < 0)
        return NULL;
    if (cpu_tensor_dev(xo, x, fn, cuda) < 0 || wrap_dim(d, (*x)->ndim, dim, fn) < 0)
        return NULL;
    return ampy_py_empty(odt_or_neg >= 0 ? odt_or_neg : (*x)->dtype, (*x)->ndim, (*x)->shape,
                         (*x)->device);
}

static PyObject *finish_line_op(ampy_status s, AmpyTensor *out)
{
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(s);
    }
    return (PyObject *)out;
}

static PyObject *f_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "softmax(x, dim, log)");
        return NULL;
    }
    int log = PyObject_IsTrue(args[2]), dim;
    const char *fn = log ? "log_softmax" : "softmax";
    AmpyTensor *x, *out;
    if (log < 0 || !(out = line_setup(args[0], args[1], -1, fn, &x, &dim, 1)))
        return NULL;
    int64_t xs[AMPY_MAX_DIMS], os[AMPY_MAX_DIMS];
    ampy_py_byte_strides(x, xs);
    ampy_py_byte_strides(out, os);
    ampy_status s;
    if (x->device != AMPY_DEV_CPU) { /* CUDA: cuda/reduce.cu */
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api) {
            Py_DECREF(out);
            return NULL;
        }
        s = api->softmax(x->device, x->ndim, x->shape, x->data, xs, (ampy_dtype)x->dtype, dim,
                         out->data, os, (ampy_dtype)out->dtype, log);
        if (s != AMPY_OK) {
            Py_DECREF(out);
            return ampy_py_raise_cuda(s);
        }
        return (PyObject *)out;
    }
    Py_BEGIN_ALLOW_THREADS
    s = ampy_softmax(x->ndim, x->shape, x->data, xs, (ampy_dtype)x->dtype, dim, out->data, os,
                     (ampy_dtype)out->dtype, log);
    Py_END_ALLOW_THREADS
    return finish_line_op(s, out);
}

static PyObject *f_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "scan(op, x, dim, out_dtype)");
        return NULL;
    }
    long op = PyLong_AsLong(args[0]);
    const char *fn = op == AMPY_SCAN_CUMPROD ? "cumprod" : "cumsum";
    AmpyTensor *x = ampy_py_tensor_arg(args[1], fn, "input"), *out;
    int odt, dim;
    if (!x || ampy_py_parse_dtype(args[3], ampy_dtype_is_float(x->dtype) ? x->dtype : AMPY_INT64,
                                  &odt, fn, "dtype") < 0 ||
        !(out = line_setup(args[1], args[2], odt, fn, &x, &dim, 1)))
        return NULL;
    int64_t xs[AMPY_MAX_DIMS], os[AMPY_MAX_DIMS];
    ampy_py_byte_strides(x, xs);
    ampy_py_byte_strides(out, os);
    ampy_status s;
    if (x->device != AMPY_DEV_CPU) { /* CUDA: cuda/reduce.cu */
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api) {
            Py_DECREF(out);
            return NULL;
        }
        s = api->scan(x->device, (int)op, x->ndim, x->shape, x->data, xs, (ampy_dtype)x->dtype,
                      dim, out->data, os, (ampy_dtype)odt);
        if (s != AMPY_OK) {
            Py_DECREF(out);
            return ampy_py_raise_cuda(s);
        }
        return (PyObject *)out;
    }
    Py_BEGIN_ALLOW_THREADS
    s = ampy_scan((int)op, x->ndim, x->shape, x->data, xs, (ampy_dtype)x->dtype, dim, out->data,
                  os, (ampy_dtype)odt);
    Py_END_ALLOW_THREADS
    return finish_line_op(s, out);
}

PyMethodDef ampy_py_reduce_methods[] = {
    {"reduce", (PyCFunction)(void (*)(void))f_reduce, METH_FASTCALL,
     "reduce(op, x, dims, keepdim, out_dtype, correction, with_indices)\n--\n\n"
     "Reduce x over dims (None: all)."},
    {"softmax", (PyCFunction)(void (*)(void))f_softmax, METH_FASTCALL,
     "softmax(x, dim, log)\n--\n\nsoftmax (log=False) or log_softmax along dim."},
    {"scan", (PyCFunction)(void (*)(void))f_scan, METH_FASTCALL,
     "scan(op, x, dim, out_dtype)\n--\n\ncumsum (op 0) or cumprod (op 1) along dim."},
    {NULL, NULL, 0, NULL},
};
