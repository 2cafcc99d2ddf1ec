/* cast_py.c — copies and dtype conversions between tensors. */
#include "pyampy.h"

#include "ampy/cast.h"

/* Memory span [lo, hi) touched by t. */
static void span(const AmpyTensor *t, char **lo, char **hi)
{
    int64_t isz = (int64_t)ampy_dtype_size(t->dtype), a = 0, b = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *lo = *hi = t->data;
            return;
        }
        int64_t ext = (t->shape[d] - 1) * t->strides[d];
        if (ext < 0)
            a += ext;
        else
            b += ext;
    }
    *lo = t->data + a * isz;
    *hi = t->data + (b + 1) * isz;
}

static int same_layout(const AmpyTensor *a, const AmpyTensor *b)
{
    if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->strides[d] != b->strides[d]))
            return 0;
    return 1;
}

/* Broadcast src's strides onto dst's shape; -1 + ValueError if impossible. */
static int broadcast_strides(const AmpyTensor *src, const AmpyTensor *dst, int64_t *out,
                             const char *fn)
{
    if (src->ndim > dst->ndim)
        goto fail;
    for (int d = 0; d < dst->ndim; d++) {
        int sd = d - (dst->ndim - src->ndim);
        if (sd < 0) {
            out[d] = 0;
        } else if (src->shape[sd] == dst->shape[d]) {
            out[d] = src->shape[sd] == 1 ? 0 : src->strides[sd];
        } else if (src->shape[sd] == 1) {
            out[d] = 0;
        } else {
            goto fail;
        }
    }
    return 0;
fail:;
    PyObject *ss = NULL, *ds = NULL;
    PyObject *st = PyTuple_New(src->ndim), *dt = PyTuple_New(dst->ndim);
    for (int d = 0; st && d < src->ndim; d++)
        PyTuple_SET_ITEM(st, d, PyLong_FromLongLong(src->shape[d]));
    for (int d = 0; dt && d < dst->ndim; d++)
        PyTuple_SET_ITEM(dt, d, PyLong_FromLongLong(dst->shape[d]));
    if (st && dt) {
        ss = PyObject_Repr(st);
        ds = PyObject_Repr(dt);
    }
    PyErr_Format(PyExc_RuntimeError, "%s: source of shape %U cannot be broadcast to %U", fn,
                 ss ? ss : Py_None, ds ? ds : Py_None);
    Py_XDECREF(ss);
    Py_XDECREF(ds);
    Py_XDECREF(st);
    Py_XDECREF(dt);
    return -1;
}

static PyObject *run_cast(const AmpyTensor *src, const int64_t *src_strides, AmpyTensor *dst)
{
    ampy_status s;
    if (src->device != AMPY_DEV_CPU || dst->device != AMPY_DEV_CPU) /* CUDA: device_py.c */
        return ampy_py_device_cast(src, src_strides, dst);
    if (dst->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_cast(dst->ndim, dst->shape, src->data, src_strides, src->dtype, dst->data,
                      dst->strides, dst->dtype);
        Py_END_ALLOW_THREADS
    } else {
        s = ampy_cast(dst->ndim, dst->shape, src->data, src_strides, src->dtype, dst->data,
                      dst->strides, dst->dtype);
    }
    if (s != AMPY_OK)
        return ampy_py_raise(s);
    Py_RETURN_NONE;
}

/* copy_(dst, src, overlap_check=True): dst[...] = src, broadcasting src and
 * converting dtypes. A source that partially overlaps dst is first copied to
 * a temporary. dst must be writable and, unless overlap_check is False (fill_,
 * whose single value makes overlapping elements harmless, as in torch), free
 * of elements sharing one memory location. */
static PyObject *f_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "copy_(dst, src, overlap_check=True)");
        return NULL;
    }
    AmpyTensor *dst = ampy_py_tensor_arg(args[0], "copy_", "self");
    AmpyTensor *src = dst ? ampy_py_tensor_arg(args[1], "copy_", "src") : NULL;
    if (!src)
        return NULL;
    int overlap = nargs == 2 ? 1 : PyObject_IsTrue(args[2]);
    if (overlap < 0)
        return NULL;
    int64_t sstr[AMPY_MAX_DIMS];
    if (broadcast_strides(src, dst, sstr, "copy_") < 0 ||
        ampy_py_check_write(dst, "copy_", "self", overlap ? AMPY_PY_WRITE_OVERLAP : 0) < 0)
        return NULL;
    if (dst->numel == 0)
        Py_RETURN_NONE;
    PyObject *tmp = NULL;
    char *slo, *shi, *dlo, *dhi;
    span(src, &slo, &shi);
    span(dst, &dlo, &dhi);
    if (src->device == dst->device && slo < dhi && dlo < shi && !same_layout(src, dst)) {
        AmpyTensor *c = ampy_py_empty(src->dtype, src->ndim, src->shape, src->device);
        if (!c)
            return NULL;
        PyObject *r = run_cast(src, src->strides, c);
        if (!r) {
            Py_DECREF(c);
            return NULL;
        }
        Py_DECREF(r);
        tmp = (PyObject *)c;
        src = c;
        broadcast_strides(src, dst, sstr, "copy_");
    }
    PyObject *r = run_cast(src, sstr, dst);
    Py_XDECREF(tmp);
    if (r)
        ampy_py_bump_version(dst);
    return r;
}

/* cast(src, dtype): a new contiguous tensor holding src converted to dtype. */
static PyObject *f_cast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "cast(src, dtype)");
        return NULL;
    }
    AmpyTensor *src = ampy_py_tensor_arg(args[0], "to", "self");
    int dt;
    if (!src || ampy_py_parse_dtype(args[1], src->dtype, &dt, "to", "dtype") < 0)
        return NULL;
    AmpyTensor *out = ampy_py_empty(dt, src->ndim, src->shape, src->device);
    if (!out)
        return NULL;
    PyObject *r = run_cast(src, src->strides, out);
    if (!r) {
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(r);
    return (PyObject *)out;
}

PyMethodDef ampy_py_cast_methods[] = {
    {"copy_", (PyCFunction)(void (*)(void))f_copy, METH_FASTCALL,
     "copy_(dst, src, overlap_check=True)\n--\n\nCopy src into dst (broadcasting, converting "
     "dtypes)."},
    {"cast", (PyCFunction)(void (*)(void))f_cast, METH_FASTCALL,
     "cast(src, dtype)\n--\n\nA new contiguous tensor holding src converted to dtype."},
    {NULL, NULL, 0, NULL},
};
