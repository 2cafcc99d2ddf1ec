/* index_py.c — binding of advanced indexing on the device (cuda/index.cu).
 * ampy/cuda/_advindex.py brings the key to index.h's form (ampy/_indexing.py's
 * _basic / _prepare_advanced), moves index arrays to the device and
 * allocates outputs; these functions check tensors and devices and queue
 * the kernels on the device's stream.
 */
#include "cuda_py.h"

#include "index_cuda.h"

static int is_contig(const AmpyTensor *t)
{
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return 0;
        expect *= t->shape[d];
    }
    return 1;
}

static int same_device(const AmpyTensor *a, const AmpyTensor *b, const char *fn)
{
    if (a->device == b->device)
        return 0;
    PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, but found "
                 "at least two devices, cuda:%d and cuda:%d!", fn, a->device, b->device);
    return -1;
}

/* spec from (t, list of k index tensors); element strides */
static int make_spec(AmpyTensor *t, PyObject *lst, ampy_index_cuda_spec *s, int64_t *sizes,
                     int64_t *strides, const int64_t **ptrs, const char *fn)
{
    if (!PyList_Check(lst) || PyList_GET_SIZE(lst) < 1 || PyList_GET_SIZE(lst) > t->ndim) {
        PyErr_Format(PyExc_ValueError, "%s: bad index list", fn);
        return -1;
    }
    const int k = (int)PyList_GET_SIZE(lst);
    int64_t P = -1;
    for (int j = 0; j < k; j++) {
        AmpyTensor *ix = ampy_cuda_py_tensor(PyList_GET_ITEM(lst, j), fn, "indices");
        if (!ix || same_device(t, ix, fn) < 0)
            return -1;
        if (ix->dtype != AMPY_INT64 || !is_contig(ix) || (P >= 0 && ix->numel != P)) {
            PyErr_Format(PyExc_ValueError, "%s: index arrays must be contiguous int64 of one size",
                         fn);
            return -1;
        }
        P = ix->numel;
        sizes[j] = t->shape[j];
        strides[j] = t->strides[j];
        ptrs[j] = (const int64_t *)ix->data;
    }
    s->k = k;
    s->sizes = sizes;
    s->strides = strides;
    s->idx = ptrs;
    s->P = P;
    s->rest_ndim = t->ndim - k;
    s->rest_shape = t->shape + k;
    s->rest_strides = t->strides + k;
    s->itemsize = (int)ampy_dtype_size(t->dtype);
    return 0;
}

/* _index_gather(src, indices, out): out = src[indices...] as [P, rest...] */
static PyObject *f_index_gather(PyObject *self, PyObject *args)
{
    PyObject *so, *lst, *oo;
    if (!PyArg_ParseTuple(args, "OOO", &so, &lst, &oo))
        return NULL;
    AmpyTensor *t = ampy_cuda_py_tensor(so, "index", "self");
    AmpyTensor *out = t ? ampy_cuda_py_tensor(oo, "index", "out") : NULL;
    if (!out || same_device(t, out, "index") < 0)
        return NULL;
    ampy_index_cuda_spec s;
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    const int64_t *ptrs[AMPY_MAX_DIMS];
    if (make_spec(t, lst, &s, sizes, strides, ptrs, "index") < 0)
        return NULL;
    int ok = out->dtype == t->dtype && is_contig(out) && out->ndim == 1 + s.rest_ndim &&
             out->shape[0] == s.P;
    for (int d = 0; ok && d < s.rest_ndim; d++)
        ok = out->shape[1 + d] == s.rest_shape[d];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "index: out must be contiguous [P, rest...] of src's dtype");
        return NULL;
    }
    ampy_status st = ampy_index_gather_cuda(t->device, &s, t->data, out->data);
    if (st != AMPY_OK)
        return ampy_cuda_py_raise(st);
    ((AmpyStorage *)out->base)->version++;
    Py_RETURN_NONE;
}

/* _index_scatter(dst, indices, values, accumulate, order) */
static PyObject *f_index_scatter(PyObject *self, PyObject *args)
{
    PyObject *to, *lst, *vo;
    int accumulate, order;
    if (!PyArg_ParseTuple(args, "OOOpi", &to, &lst, &vo, &accumulate, &order))
        return NULL;
    AmpyTensor *t = ampy_cuda_py_tensor(to, "index_put_", "self");
    AmpyTensor *v = t ? ampy_cuda_py_tensor(vo, "index_put_", "values") : NULL;
    if (!v || same_device(t, v, "index_put_") < 0)
        return NULL;
    if (((AmpyStorage *)t->base)->flags) {
        ampy_py_raise_readonly(t, "index_put_", "self");
        return NULL;
    }
    if (order != 1 && order != -1) {
        PyErr_SetString(PyExc_ValueError, "index_put_: order must be 1 or -1");
        return NULL;
    }
    ampy_index_cuda_spec s;
    int64_t sizes[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    const int64_t *ptrs[AMPY_MAX_DIMS];
    if (make_spec(t, lst, &s, sizes, strides, ptrs, "index_put_") < 0)
        return NULL;
    int ok = v->dtype == t->dtype && v->ndim == 1 + s.rest_ndim && v->shape[0] == s.P;
    for (int d = 0; ok && d < s.rest_ndim; d++)
        ok = v->shape[1 + d] == s.rest_shape[d];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "index_put_: values must be [P, rest...] of dst's dtype");
        return NULL;
    }
    ampy_status st = ampy_index_scatter_cuda(t->device, &s, t->data, v->data, v->strides,
                                             t->dtype, accumulate, order);
    if (st != AMPY_OK)
        return ampy_cuda_py_raise(st);
    ((AmpyStorage *)t->base)->version++;
    Py_RETURN_NONE;
}

static AmpyTensor *mask_arg(PyObject *o, const char *fn)
{
    AmpyTensor *m = ampy_cuda_py_tensor(o, fn, "self");
    if (m && m->dtype != AMPY_BOOL && m->dtype != AMPY_UINT8) {
        PyErr_Format(PyExc_TypeError, "%s: expects a bool tensor", fn);
        return NULL;
    }
    return m;
}

static AmpyTensor *scratch_arg(PyObject *o, const AmpyTensor *m, const char *fn)
{
    AmpyTensor *s = ampy_cuda_py_tensor(o, fn, "scratch");
    if (s && (s->dtype != AMPY_INT64 || !is_contig(s) || s->numel < 2 * m->numel + 1 ||
              s->device != m->device)) {
        PyErr_Format(PyExc_ValueError, "%s: scratch must be 2 * numel + 1 int64 on the mask's "
                     "device", fn);
        return NULL;
    }
    return s;
}

/* _nonzero_count(mask, scratch) -> int (synchronises) */
static PyObject *f_nonzero_count(PyObject *self, PyObject *args)
{
    PyObject *mo, *so;
    if (!PyArg_ParseTuple(args, "OO", &mo, &so))
        return NULL;
    AmpyTensor *m = mask_arg(mo, "nonzero");
    AmpyTensor *sc = m ? scratch_arg(so, m, "nonzero") : NULL;
    if (!sc)
        return NULL;
    int64_t count = 0;
    ampy_status st;
    Py_BEGIN_ALLOW_THREADS
    st = ampy_nonzero_cuda(m->device, m->ndim, m->shape, m->strides, (const uint8_t *)m->data,
                           (int64_t *)sc->data, &count);
    Py_END_ALLOW_THREADS
    if (st != AMPY_OK)
        return ampy_cuda_py_raise(st);
    return PyLong_FromLongLong((long long)count);
}

/* _nonzero_fill(mask, scratch, out): out [count, ndim] int64 (after _nonzero_count) */
static PyObject *f_nonzero_fill(PyObject *self, PyObject *args)
{
    PyObject *mo, *so, *oo;
    if (!PyArg_ParseTuple(args, "OOO", &mo, &so, &oo))
        return NULL;
    AmpyTensor *m = mask_arg(mo, "nonzero");
    AmpyTensor *sc = m ? scratch_arg(so, m, "nonzero") : NULL;
    AmpyTensor *out = sc ? ampy_cuda_py_tensor(oo, "nonzero", "out") : NULL;
    if (!out || same_device(m, out, "nonzero") < 0)
        return NULL;
    if (out->dtype != AMPY_INT64 || !is_contig(out) || out->ndim != 2 || out->shape[1] != m->ndim) {
        PyErr_SetString(PyExc_ValueError, "nonzero: out must be contiguous int64 [count, ndim]");
        return NULL;
    }
    ampy_status st = ampy_nonzero_fill_cuda(m->device, m->ndim, m->shape, m->strides,
                                            (const uint8_t *)m->data, (const int64_t *)sc->data,
                                            (int64_t *)out->data);
    if (st != AMPY_OK)
        return ampy_cuda_py_raise(st);
    ((AmpyStorage *)out->base)->version++;
    Py_RETURN_NONE;
}

/* set_sync_checks(on) / get_sync_checks(): device-side argument checks raise
 * at the op (a synchronisation each) instead of at the next sync point. */
static PyObject *f_set_sync_checks(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    ampy_cuda_set_sync_checks(on);
    Py_RETURN_NONE;
}

static PyObject *f_get_sync_checks(PyObject *self, PyObject *u)
{
    return PyBool_FromLong(ampy_cuda_get_sync_checks());
}

PyMethodDef ampy_cuda_py_index_methods[] = {
    {"_index_gather", f_index_gather, METH_VARARGS,
     "_index_gather(src, indices, out)\n--\n\nout[P, rest...] = src[indices...] on the device."},
    {"_index_scatter", f_index_scatter, METH_VARARGS,
     "_index_scatter(dst, indices, values, accumulate, order)\n--\n\n"
     "dst[indices...] = values (or += in the given order of repeats) on the device."},
    {"_nonzero_count", f_nonzero_count, METH_VARARGS,
     "_nonzero_count(mask, scratch)\n--\n\nNumber of non-zero elements (synchronises)."},
    {"_nonzero_fill", f_nonzero_fill, METH_VARARGS,
     "_nonzero_fill(mask, scratch, out)\n--\n\nIndices of the non-zero elements."},
    {"set_sync_checks", f_set_sync_checks, METH_O,
     "set_sync_checks(on)\n--\n\nRaise device-side argument errors at the op (syncs)."},
    {"get_sync_checks", f_get_sync_checks, METH_NOARGS, "get_sync_checks()\n--\n\n"},
    {NULL, NULL, 0, NULL},
};
