/* index_py.c — binding of advanced indexing (index.h) on both devices. Every
 * argument is checked here, then the call branches once on the indexed
 * tensor's device: libampy for the CPU (large gathers, scatters and nonzero
 * scans with the GIL released; the index list is copied to a tuple first so
 * the index tensors stay alive meanwhile), the CUDA twins (cuda/index.cu,
 * index_cuda.h) through the ampy_cuda_api table for a GPU. Index arrays and
 * values given on the CPU for a CUDA tensor are copied to its device first,
 * as torch does; CUDA index arrays or values for a CPU tensor are an error.
 */
#include "pyampy.h"

#include <string.h>

#include "ampy/cuda.h"
#include "ampy/index.h"

/* The spec of one call, with the storage its arrays point into. */
typedef struct {
    ampy_index_spec s;
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS], rstrides[AMPY_MAX_DIMS];
    const int64_t *ptrs[AMPY_MAX_DIMS];
    PyObject *keep; /* a tuple of the index tensors (device copies included) */
} index_call;

static void index_call_free(index_call *c)
{
    Py_CLEAR(c->keep);
}

/* A copy of the CPU tensor x on CUDA device `device`, or NULL. */
static AmpyTensor *to_device(AmpyTensor *x, int device)
{
    AmpyTensor *d = ampy_py_empty(x->dtype, x->ndim, x->shape, device);
    if (!d)
        return NULL;
    PyObject *r = ampy_py_device_cast(x, x->strides, d);
    if (!r) {
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(r);
    return d;
}

/* x for tensor t of the call: on t's device (a new reference), copied there
 * when x is on the CPU and t on a GPU. */
static AmpyTensor *on_device_of(const AmpyTensor *t, AmpyTensor *x, const char *fn,
                                const char *arg)
{
    if (x->device == t->device) {
        Py_INCREF(x);
        return x;
    }
    if (x->device == AMPY_DEV_CPU)
        return to_device(x, t->device);
    if (t->device == AMPY_DEV_CPU && strcmp(arg, "values") == 0)
        PyErr_Format(PyExc_RuntimeError, "%s: values are on cuda:%d but the indexed tensor is on "
                     "the cpu", fn, x->device);
    else if (t->device == AMPY_DEV_CPU)
        PyErr_SetString(PyExc_RuntimeError, "indices should be either on cpu or on the same "
                        "device as the indexed tensor (cpu)");
    else
        PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, but "
                     "found at least two devices, cuda:%d and cuda:%d!", fn, t->device, x->device);
    return NULL;
}

static int index_array(index_call *c, const AmpyTensor *t, PyObject *o, int j, int64_t *P,
                       const char *fn)
{
    AmpyTensor *ix = ampy_py_tensor_arg(o, fn, "indices");
    if (!ix)
        return -1;
    if (ix->dtype != AMPY_INT64 || !ampy_py_is_contiguous(ix) || (*P >= 0 && ix->numel != *P)) {
        PyErr_Format(PyExc_ValueError, "%s: index arrays must be contiguous int64 of one size", fn);
        return -1;
    }
    if (!(ix = on_device_of(t, ix, fn, "indices")))
        return -1;
    PyTuple_SET_ITEM(c->keep, j, (PyObject *)ix); /* steals */
    *P = ix->numel;
    c->sizes[j] = t->shape[j];
    c->strides[j] = t->strides[j] * (int64_t)ampy_dtype_size(t->dtype);
    c->ptrs[j] = (const int64_t *)ix->data;
    return 0;
}

/* Fill c from (t, k, idx_list); idx arrays must be int64, contiguous and of
 * equal numel. */
static int make_spec(index_call *c, AmpyTensor *t, PyObject *kobj, PyObject *lst, const char *fn)
{
    c->keep = NULL;
    long k = PyLong_AsLong(kobj);
    if (k == -1 && PyErr_Occurred())
        return -1;
    if (!PyList_Check(lst) || PyList_GET_SIZE(lst) != k || k < 1 || k > t->ndim) {
        PyErr_Format(PyExc_ValueError, "%s: bad index list", fn);
        return -1;
    }
    if (!(c->keep = PyTuple_New(k)))
        return -1;
    int64_t P = -1;
    for (long j = 0; j < k; j++)
        if (index_array(c, t, PyList_GET_ITEM(lst, j), (int)j, &P, fn) < 0)
            return -1;
    for (int d = (int)k; d < t->ndim; d++)
        c->rstrides[d - k] = t->strides[d] * (int64_t)ampy_dtype_size(t->dtype);
    ampy_index_spec *s = &c->s;
    s->k = (int)k;
    s->sizes = c->sizes;
    s->strides = c->strides;
    s->idx = c->ptrs;
    s->P = P;
    s->rest_ndim = t->ndim - (int)k;
    s->rest_shape = t->shape + k;
    s->rest_strides = c->rstrides;
    s->itemsize = ampy_dtype_size(t->dtype);
    return 0;
}

/* The CUDA form of c's spec (element strides) for tensor t. */
static void cuda_spec(const index_call *c, const AmpyTensor *t, ampy_index_cuda_spec *cs)
{
    cs->k = c->s.k;
    cs->sizes = c->sizes;
    cs->strides = t->strides;
    cs->idx = c->ptrs;
    cs->P = c->s.P;
    cs->rest_ndim = c->s.rest_ndim;
    cs->rest_shape = c->s.rest_shape;
    cs->rest_strides = t->strides + c->s.k;
    cs->itemsize = (int)c->s.itemsize;
}

static ampy_status run_gather(const index_call *c, const AmpyTensor *t, AmpyTensor *out)
{
    if (t->device >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        ampy_index_cuda_spec cs;
        cuda_spec(c, t, &cs);
        return api ? api->index_gather(t->device, &cs, t->data, out->data) : AMPY_ERR_RUNTIME;
    }
    ampy_status st;
    if (out->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_index_gather(&c->s, t->data, out->data);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_index_gather(&c->s, t->data, out->data);
    }
    return st;
}

/* The exception for a failed kernel of a tensor on `device`; returns NULL. */
static PyObject *raise_on(int device, ampy_status st)
{
    if (PyErr_Occurred())
        return NULL;
    return device >= 0 ? ampy_py_raise_cuda(st) : ampy_py_raise(st);
}

static PyObject *f_index_gather(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "index_gather(src, k, indices)");
        return NULL;
    }
    AmpyTensor *t = ampy_py_tensor_arg(args[0], "index", "self");
    if (!t)
        return NULL;
    index_call c;
    if (make_spec(&c, t, args[1], args[2], "index") < 0) {
        index_call_free(&c);
        return NULL;
    }
    int64_t shape[AMPY_MAX_DIMS];
    shape[0] = c.s.P;
    for (int d = 0; d < c.s.rest_ndim; d++)
        shape[1 + d] = c.s.rest_shape[d];
    AmpyTensor *out = ampy_py_empty(t->dtype, 1 + c.s.rest_ndim, shape, t->device);
    ampy_status st = out ? run_gather(&c, t, out) : AMPY_ERR_NOMEM;
    index_call_free(&c);
    if (st != AMPY_OK) {
        Py_XDECREF(out);
        return raise_on(t->device, st);
    }
    return (PyObject *)out;
}

static ampy_status run_scatter(const index_call *c, AmpyTensor *t, const AmpyTensor *v,
                               int accumulate)
{
    if (t->device >= 0) { /* accumulate: repeats added in increasing position, as the CPU */
        const ampy_cuda_api *api = ampy_py_cuda_api();
        ampy_index_cuda_spec cs;
        cuda_spec(c, t, &cs);
        return api ? api->index_scatter(t->device, &cs, t->data, v->data, v->strides, t->dtype,
                                        accumulate, 1)
                   : AMPY_ERR_RUNTIME;
    }
    int64_t vstr[AMPY_MAX_DIMS];
    ampy_py_byte_strides(v, vstr);
    ampy_status st;
    if (v->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = accumulate ? ampy_index_put_accumulate(&c->s, t->data, (ampy_dtype)t->dtype, v->data,
                                                    vstr)
                        : ampy_index_scatter(&c->s, t->data, v->data, vstr);
        Py_END_ALLOW_THREADS
    } else {
        st = accumulate
                 ? ampy_index_put_accumulate(&c->s, t->data, (ampy_dtype)t->dtype, v->data, vstr)
                 : ampy_index_scatter(&c->s, t->data, v->data, vstr);
    }
    return st;
}

/* The checks on dst and values shared by both devices; values on dst's
 * device in *vd (a new reference). */
static int scatter_checks(const index_call *c, AmpyTensor *t, AmpyTensor *v, int accumulate,
                          AmpyTensor **vd)
{
    if (ampy_py_check_write(t, "index_put_", "self", 0) < 0)
        return -1;
    if (accumulate && !ampy_dtype_is_float(t->dtype)) { /* index.h's contract, both devices */
        PyErr_Format(PyExc_TypeError, "index_put_ with accumulate=True: expected a float32, "
                     "float64, float16 or bfloat16 tensor, got %s", ampy_dtype_name(t->dtype));
        return -1;
    }
    int overlap = ampy_py_internal_overlap(t);
    if (overlap < 0 ||
        (overlap && PyErr_WarnEx(PyExc_UserWarning, /* torch warns, then writes */
                                 "Use of index_put_ on expanded tensors is deprecated. Please "
                                 "clone() the tensor before performing this operation. This also "
                                 "applies to advanced indexing e.g. tensor[indices] = tensor", 1) < 0))
        return -1;
    int ok = v->dtype == t->dtype && v->ndim == 1 + c->s.rest_ndim && v->shape[0] == c->s.P;
    for (int d = 0; ok && d < c->s.rest_ndim; d++)
        ok = v->shape[1 + d] == c->s.rest_shape[d];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "index_put_: values must be [P, rest...] of dst's dtype");
        return -1;
    }
    return (*vd = on_device_of(t, v, "index_put_", "values")) ? 0 : -1;
}

static PyObject *f_index_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int accumulate = 0;
    if ((nargs != 4 && nargs != 5) || (nargs == 5 && (accumulate = PyObject_IsTrue(args[4])) < 0)) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "index_scatter(dst, k, indices, values, accumulate=False)");
        return NULL;
    }
    AmpyTensor *t = ampy_py_tensor_arg(args[0], "index_put_", "self");
    AmpyTensor *v = t ? ampy_py_tensor_arg(args[3], "index_put_", "values") : NULL;
    if (!v)
        return NULL;
    index_call c;
    AmpyTensor *vd = NULL;
    if (make_spec(&c, t, args[1], args[2], "index_put_") < 0 ||
        scatter_checks(&c, t, v, accumulate, &vd) < 0) {
        index_call_free(&c);
        return NULL;
    }
    ampy_status st = run_scatter(&c, t, vd, accumulate);
    index_call_free(&c);
    Py_DECREF(vd);
    if (st != AMPY_OK)
        return raise_on(t->device, st);
    ampy_py_bump_version(t);
    Py_RETURN_NONE;
}

/* nonzero of a CUDA mask: a count (one synchronisation), then the indices. */
static PyObject *nonzero_cuda(const AmpyTensor *m)
{
    const ampy_cuda_api *api = ampy_py_cuda_api();
    if (!api)
        return NULL;
    int64_t n = 2 * m->numel + 1, count = 0;
    AmpyTensor *scratch = ampy_py_empty(AMPY_INT64, 1, &n, m->device);
    if (!scratch)
        return NULL;
    ampy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = api->nonzero_count(m->device, m->ndim, m->shape, m->strides, (const uint8_t *)m->data,
                            (int64_t *)scratch->data, &count);
    Py_END_ALLOW_THREADS
    int64_t shape[2] = {count, m->ndim};
    AmpyTensor *out = st == AMPY_OK ? ampy_py_empty(AMPY_INT64, 2, shape, m->device) : NULL;
    if (out && count)
        st = api->nonzero_fill(m->device, m->ndim, m->shape, m->strides, (const uint8_t *)m->data,
                               (const int64_t *)scratch->data, (int64_t *)out->data);
    Py_DECREF(scratch);
    if (st != AMPY_OK || !out) {
        Py_XDECREF(out);
        return raise_on(m->device, st);
    }
    return (PyObject *)out;
}

static PyObject *f_nonzero(PyObject *self, PyObject *arg)
{
    AmpyTensor *m = ampy_py_tensor_arg(arg, "nonzero", "self");
    if (!m)
        return NULL;
    if (m->dtype != AMPY_BOOL && m->dtype != AMPY_UINT8) {
        PyErr_SetString(PyExc_TypeError, "nonzero: expects a bool tensor");
        return NULL;
    }
    if (m->device >= 0)
        return nonzero_cuda(m);
    const int big = m->numel >= AMPY_PY_GIL_RELEASE_MIN;
    int64_t count;
    if (big) {
        Py_BEGIN_ALLOW_THREADS
        count = ampy_nonzero_count(m->ndim, m->shape, m->strides, (const uint8_t *)m->data);
        Py_END_ALLOW_THREADS
    } else {
        count = ampy_nonzero_count(m->ndim, m->shape, m->strides, (const uint8_t *)m->data);
    }
    int64_t shape[2] = {count, m->ndim};
    AmpyTensor *out = ampy_py_empty(AMPY_INT64, 2, shape, AMPY_DEV_CPU);
    if (!out)
        return NULL;
    if (big) {
        Py_BEGIN_ALLOW_THREADS
        ampy_nonzero_fill(m->ndim, m->shape, m->strides, (const uint8_t *)m->data,
                          (int64_t *)out->data);
        Py_END_ALLOW_THREADS
    } else {
        ampy_nonzero_fill(m->ndim, m->shape, m->strides, (const uint8_t *)m->data,
                          (int64_t *)out->data);
    }
    return (PyObject *)out;
}

PyMethodDef ampy_py_index_methods[] = {
    {"index_gather", (PyCFunction)(void (*)(void))f_index_gather, METH_FASTCALL,
     "index_gather(src, k, indices)\n--\n\nInternal: gather by k int64 index arrays (CPU or "
     "CUDA src)."},
    {"index_scatter", (PyCFunction)(void (*)(void))f_index_scatter, METH_FASTCALL,
     "index_scatter(dst, k, indices, values, accumulate=False)\n--\n\n"
     "Internal: scatter by k index arrays (CPU or CUDA dst; accumulate: += with repeats summed\n"
     "in index order)."},
    {"nonzero", (PyCFunction)f_nonzero, METH_O,
     "nonzero(mask)\n--\n\nInternal: indices of non-zero elements of a bool tensor (a CUDA mask:\n"
     "one synchronisation for the count)."},
    {NULL, NULL, 0, NULL},
};
