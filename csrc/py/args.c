/* args.c — argument parsing shared by every binding file: tensors, dtypes
 * and shapes, each failure a TypeError/ValueError naming the function and
 * the argument. */
#include "pyampy.h"

AmpyTensor *ampy_py_tensor_arg(PyObject *o, const char *fn, const char *arg)
{
    if (ampy_py_is_tensor(o))
        return (AmpyTensor *)o;
    PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a Tensor, not %s", fn, arg,
                 Py_TYPE(o)->tp_name);
    return NULL;
}

PyObject *ampy_py_dtype_obj(int dtype)
{
    if (ampy_dtype_valid(dtype) && ampy_py.dtypes[dtype]) {
        Py_INCREF(ampy_py.dtypes[dtype]);
        return ampy_py.dtypes[dtype];
    }
    return PyLong_FromLong(dtype);
}

int ampy_py_parse_dtype(PyObject *o, int dflt, int *out, const char *fn, const char *arg)
{
    if (o == NULL || o == Py_None) {
        *out = dflt;
        return 0;
    }
    for (int i = 0; i < AMPY_NUM_DTYPES; i++)
        if (o == ampy_py.dtypes[i]) {
            *out = i;
            return 0;
        }
    if (PyLong_Check(o)) {
        long v = PyLong_AsLong(o);
        if (v >= 0 && v < AMPY_NUM_DTYPES) {
            *out = (int)v;
            return 0;
        }
    }
    PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be an ampy dtype, not %R", fn, arg, o);
    return -1;
}

int ampy_py_parse_shape(PyObject *o, int *ndim, int64_t *shape, const char *fn, const char *arg)
{
    if (PyLong_Check(o)) {
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_RuntimeError,
                         "%s: argument '%s' has an entry that overflows int64 at pos 1", fn, arg);
            return -1;
        }
        *ndim = 1;
        shape[0] = v;
        return 0;
    }
    PyObject *seq = PySequence_Fast(o, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a sequence of ints, not %s", fn,
                     arg, Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > AMPY_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: %zd dims requested, at most %d supported", fn, n,
                     AMPY_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *idx = PyNumber_Index(it);
        if (!idx) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_TypeError, "%s: argument '%s' must contain ints, got %s", fn, arg,
                         Py_TYPE(it)->tp_name);
            return -1;
        }
        long long v = PyLong_AsLongLong(idx);
        Py_DECREF(idx);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyErr_Clear();
            PyErr_Format(PyExc_RuntimeError,
                         "%s: argument '%s' has an entry that overflows int64 at pos %zd", fn,
                         arg, i + 1);
            return -1;
        }
        shape[i] = v;
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

int ampy_py_int_in(PyObject *o, long long lo, long long hi, long long *out, const char *fn,
                   const char *arg)
{
    int over = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &over);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (over || v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be in [%lld, %lld], got %R", fn,
                     arg, lo, hi, o);
        return -1;
    }
    *out = v;
    return 0;
}
