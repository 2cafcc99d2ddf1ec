/* index_py.c — binding of advanced indexing (index.h). Large gathers,
 * scatters and nonzero scans run with the GIL released; the index list is
 * copied to a tuple first so the index tensors stay alive meanwhile. */
#include "pyampy.h"

#include "ampy/index.h"

/* Fill spec from (t, k, idx_list); idx arrays must be int64, contiguous and
 * of equal numel. */
static int make_spec(AmpyTensor *t, PyObject *kobj, PyObject *lst, ampy_index_spec *s,
                     int64_t *sizes, int64_t *strides, const int64_t **ptrs, int64_t *rstrides,
                     const char *fn)
{
    long k = PyLong_AsLong(kobj);
    if (k == -1 && PyErr_Occurred())
        return -1;
    if (!PyList_Check(lst) || PyList_GET_SIZE(lst) != k || k < 1 || k > t->ndim) {
        PyErr_Format(PyExc_ValueError, "%s: bad index list", fn);
        return -1;
    }
    int64_t P = -1;
    for (long j = 0; j < k; j++) {
        AmpyTensor *ix = ampy_py_tensor_arg(PyList_GET_ITEM(lst, j), fn, "indices");
        if (!ix)
            return -1;
        if (ix->dtype != AMPY_INT64 || !ampy_py_is_contiguous(ix) || (P >= 0 && ix->numel != P)) {
            PyErr_Format(PyExc_ValueError, "%s: index arrays must be contiguous int64 of one size",
                         fn);
            return -1;
        }
        P = ix->numel;
        sizes[j] = t->shape[j];
        strides[j] = t->strides[j] * (int64_t)ampy_dtype_size(t->dtype);
        ptrs[j] = (const int64_t *)ix->data;
    }
    for (int d = (int)k; d < t->ndim; d++)
        rstrides[d - k] = t->strides[d] * (int64_t)ampy_dtype_size(t->dtype);
    s->k = (int)k;
    s->sizes = sizes;
    s->strides = strides;
    s->idx = ptrs;
    s->P = P;
    s->rest_ndim = t->ndim - (int)k;
    s->rest_shape = t->shape + k;
    s->rest_strides = rstrides;
    s->itemsize = ampy_dtype_size(t->dtype);
    return 0;
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
    ampy_index_spec s;
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS], rstr[AMPY_MAX_DIMS];
    const int64_t *ptrs[AMPY_MAX_DIMS];
    if (make_spec(t, args[1], args[2], &s, sizes, strides, ptrs, rstr, "index") < 0)
        return NULL;
    int64_t shape[AMPY_MAX_DIMS];
    shape[0] = s.P;
    for (int d = 0; d < s.rest_ndim; d++)
        shape[1 + d] = s.rest_shape[d];
    AmpyTensor *out = ampy_py_empty(t->dtype, 1 + s.rest_ndim, shape, t->device);
    if (!out)
        return NULL;
    ampy_status st;
    if (out->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        PyObject *keep = PySequence_Tuple(args[2]);
        if (!keep) {
            Py_DECREF(out);
            return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = ampy_index_gather(&s, t->data, out->data);
        Py_END_ALLOW_THREADS
        Py_DECREF(keep);
    } else {
        st = ampy_index_gather(&s, t->data, out->data);
    }
    if (st != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(st);
    }
    return (PyObject *)out;
}

static PyObject *f_index_scatter(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "index_scatter(dst, k, indices, values)");
        return NULL;
    }
    AmpyTensor *t = ampy_py_tensor_arg(args[0], "index_put_", "self");
    AmpyTensor *v = t ? ampy_py_tensor_arg(args[3], "index_put_", "values") : NULL;
    if (!v)
        return NULL;
    ampy_index_spec s;
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS], rstr[AMPY_MAX_DIMS];
    const int64_t *ptrs[AMPY_MAX_DIMS];
    if (make_spec(t, args[1], args[2], &s, sizes, strides, ptrs, rstr, "index_put_") < 0 ||
        ampy_py_check_write(t, "index_put_", "self", 0) < 0)
        return NULL;
    int overlap = ampy_py_internal_overlap(t);
    if (overlap < 0 ||
        (overlap && PyErr_WarnEx(PyExc_UserWarning, /* torch warns, then writes */
                                 "Use of index_put_ on expanded tensors is deprecated. Please "
                                 "clone() the tensor before performing this operation. This also "
                                 "applies to advanced indexing e.g. tensor[indices] = tensor", 1) < 0))
        return NULL;
    if (v->dtype != t->dtype || v->ndim != 1 + s.rest_ndim || v->shape[0] != s.P) {
        PyErr_SetString(PyExc_ValueError, "index_put_: values must be [P, rest...] of dst's dtype");
        return NULL;
    }
    int64_t vstr[AMPY_MAX_DIMS];
    ampy_py_byte_strides(v, vstr);
    ampy_status st;
    if (v->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        PyObject *keep = PySequence_Tuple(args[2]);
        if (!keep)
            return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = ampy_index_scatter(&s, t->data, v->data, vstr);
        Py_END_ALLOW_THREADS
        Py_DECREF(keep);
    } else {
        st = ampy_index_scatter(&s, t->data, v->data, vstr);
    }
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    ampy_py_bump_version(t);
    Py_RETURN_NONE;
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
     "index_gather(src, k, indices)\n--\n\nInternal: gather by k int64 index arrays."},
    {"index_scatter", (PyCFunction)(void (*)(void))f_index_scatter, METH_FASTCALL,
     "index_scatter(dst, k, indices, values)\n--\n\nInternal: scatter by k index arrays."},
    {"nonzero", (PyCFunction)f_nonzero, METH_O,
     "nonzero(mask)\n--\n\nInternal: indices of non-zero elements of a bool tensor."},
    {NULL, NULL, 0, NULL},
};
