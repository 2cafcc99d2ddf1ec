/* promote_py.c — torch's dtype promotion table as _C.promote_types and
 * _C.can_cast (csrc/ewise.c's ampy_promote_types / ampy_can_cast, the rules
 * _C.ewise applies), so that Python and C cannot mean different things.
 * _C.result_type, which also reads Python numbers, stays with the element-wise
 * binding's operand parsing (ewise_py.c). */
#include "pyampy.h"

#include "ampy/ewise.h"

/* The two dtype arguments of promote_types / can_cast (fn names the caller). */
static int parse_two_dtypes(PyObject *const *args, Py_ssize_t nargs, const char *fn,
                            const char *a0, const char *a1, int *a, int *b)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s: expected 2 dtypes, got %zd arguments", fn, nargs);
        return -1;
    }
    if (args[0] == Py_None || args[1] == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s: arguments must be ampy dtypes, not None", fn);
        return -1;
    }
    if (ampy_py_parse_dtype(args[0], 0, a, fn, a0) < 0 ||
        ampy_py_parse_dtype(args[1], 0, b, fn, a1) < 0)
        return -1;
    return 0;
}

static PyObject *f_promote_types(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int a, b;
    if (parse_two_dtypes(args, nargs, "promote_types", "type1", "type2", &a, &b) < 0)
        return NULL;
    return ampy_py_dtype_obj(ampy_promote_types((ampy_dtype)a, (ampy_dtype)b));
}

static PyObject *f_can_cast(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int a, b;
    if (parse_two_dtypes(args, nargs, "can_cast", "from_", "to", &a, &b) < 0)
        return NULL;
    return PyBool_FromLong(ampy_can_cast((ampy_dtype)a, (ampy_dtype)b));
}

PyMethodDef ampy_py_promote_methods[] = {
    {"promote_types", (PyCFunction)(void (*)(void))f_promote_types, METH_FASTCALL,
     "promote_types(type1, type2)\n--\n\ntorch.promote_types of two dtypes."},
    {"can_cast", (PyCFunction)(void (*)(void))f_can_cast, METH_FASTCALL,
     "can_cast(from_, to)\n--\n\ntorch.can_cast: whether `from_` casts to `to` in place."},
    {NULL, NULL, 0, NULL},
};
