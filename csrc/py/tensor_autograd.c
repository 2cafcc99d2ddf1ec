/* tensor_autograd.c — TensorBase._ag_inputs: the input side of autograd's
 * recording in C (its Python twin is ampy/autograd/_recording.py `_inputs`).
 * Registered in tensor.c's method table.
 */
#include "pyampy.h"

/* TensorBase._ag_inputs(args, save, Meta, accumulator): the input side of
 * autograd's recording (ampy/autograd/_recording.py) for the common case, in
 * one call. For each argument: a tensor gets an edge (grad_fn, output_nr),
 * (accumulator(t), 0) for a leaf that requires grad, or (None, 0), and is
 * kept as itself (non-floating, or its index is in `save`, or save is None;
 * then (t, version) joins `saved` — for a non-floating tensor only when its
 * index is in `save`, as torch checks the indices and targets it saves) or
 * as a Meta(shape, dtype, _device_index);
 * other arguments are kept as they are. Returns (args, edges, needs_input_grad,
 * saved), or None when an argument is a list/tuple holding a tensor (the
 * Python loop handles those). */
static PyObject *ag_str_output_nr, *ag_str_grad_acc, *ag_str_shape, *ag_str_dtype,
    *ag_str_device_index, *ag_no_edge, *ag_zero;

static int ag_init_statics(void)
{
    if (ag_no_edge)
        return 0;
    ag_str_output_nr = PyUnicode_InternFromString("_output_nr");
    ag_str_grad_acc = PyUnicode_InternFromString("_grad_accumulator");
    ag_str_shape = PyUnicode_InternFromString("shape");
    ag_str_dtype = PyUnicode_InternFromString("dtype");
    ag_str_device_index = PyUnicode_InternFromString("_device_index");
    ag_zero = PyLong_FromLong(0);
    if (!ag_str_output_nr || !ag_str_grad_acc || !ag_str_shape || !ag_str_dtype ||
        !ag_str_device_index || !ag_zero)
        return -1;
    ag_no_edge = PyTuple_Pack(2, Py_None, ag_zero);
    return ag_no_edge ? 0 : -1;
}

static int ag_is_tensor(PyObject *x) { return PyObject_TypeCheck(x, &AmpyTensorBase_Type); }

/* A new reference to the edge of tensor x, or NULL with an exception. */
static PyObject *ag_edge(PyObject *x, PyObject *accumulator, int *need)
{
    AmpyTensor *t = (AmpyTensor *)x;
    if (t->grad_fn != Py_None) {
        PyObject *nr = PyObject_GetAttr(x, ag_str_output_nr);
        if (!nr)
            return NULL;
        PyObject *e = PyTuple_Pack(2, t->grad_fn, nr);
        Py_DECREF(nr);
        *need = 1;
        return e;
    }
    if (!t->requires_grad) {
        *need = 0;
        Py_INCREF(ag_no_edge);
        return ag_no_edge;
    }
    *need = 1;
    PyObject *acc = NULL;
    PyObject *ref = PyObject_GetAttr(x, ag_str_grad_acc); /* None or a weakref */
    if (!ref)
        return NULL;
    if (PyWeakref_Check(ref)) {
        PyObject *o = PyWeakref_GetObject(ref); /* borrowed */
        if (o && o != Py_None) {
            acc = o;
            Py_INCREF(acc);
        }
    }
    Py_DECREF(ref);
    if (!acc && !(acc = PyObject_CallOneArg(accumulator, x)))
        return NULL;
    PyObject *e = PyTuple_Pack(2, acc, ag_zero);
    Py_DECREF(acc);
    return e;
}

/* A new Meta (an instance of meta_type, a class with those three slots). */
static PyObject *ag_meta(AmpyTensor *t, PyTypeObject *meta_type)
{
    PyObject *m = meta_type->tp_alloc(meta_type, 0);
    if (!m)
        return NULL;
    PyObject *shape = ampy_py_shape_obj(t, NULL), *dtype = ampy_py_dtype_obj(t->dtype),
             *dev = PyLong_FromLong(t->device);
    int bad = !shape || !dtype || !dev || PyObject_SetAttr(m, ag_str_shape, shape) < 0 ||
              PyObject_SetAttr(m, ag_str_dtype, dtype) < 0 ||
              PyObject_SetAttr(m, ag_str_device_index, dev) < 0;
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(dev);
    if (bad) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

PyObject *ampy_py_ag_inputs(PyObject *unused, PyObject *const *a, Py_ssize_t n)
{
    if (n != 4 || !PyTuple_Check(a[0]) || !PyType_Check(a[2])) {
        PyErr_SetString(PyExc_TypeError, "_ag_inputs(args: tuple, save, Meta, accumulator)");
        return NULL;
    }
    if (ag_init_statics() < 0)
        return NULL;
    PyObject *args = a[0], *save = a[1], *accumulator = a[3];
    PyTypeObject *meta_type = (PyTypeObject *)a[2];
    const Py_ssize_t na = PyTuple_GET_SIZE(args);
    Py_ssize_t nt = 0;
    for (Py_ssize_t i = 0; i < na; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i);
        if (ag_is_tensor(x)) {
            nt++;
        } else if (PyList_CheckExact(x) || PyTuple_CheckExact(x)) {
            PyObject *fast = x; /* lists and tuples: PySequence_Fast_* read both */
            for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(fast); j++)
                if (ag_is_tensor(PySequence_Fast_GET_ITEM(fast, j)))
                    Py_RETURN_NONE;
        }
    }
    PyObject *sargs = PyTuple_New(na), *needs = PyTuple_New(na), *edges = PyTuple_New(nt),
             *saved = PyList_New(0), *res = NULL;
    if (!sargs || !needs || !edges || !saved)
        goto done;
    for (Py_ssize_t i = 0, k = 0; i < na; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i), *keep = x;
        int need = 0;
        if (ag_is_tensor(x)) {
            AmpyTensor *t = (AmpyTensor *)x;
            PyObject *e = ag_edge(x, accumulator, &need);
            if (!e)
                goto done;
            PyTuple_SET_ITEM(edges, k++, e);
            int is_float = ampy_dtype_is_float(t->dtype);
            if (is_float || save != Py_None) {
                int in_save = 1;
                if (save != Py_None) {
                    PyObject *idx = PyLong_FromSsize_t(i);
                    in_save = idx ? PySequence_Contains(save, idx) : -1;
                    Py_XDECREF(idx);
                    if (in_save < 0)
                        goto done;
                }
                if (in_save) {
                    PyObject *ver = PyLong_FromLongLong(((AmpyStorage *)t->base)->version);
                    PyObject *pair = ver ? PyTuple_Pack(2, x, ver) : NULL;
                    Py_XDECREF(ver);
                    int bad = !pair || PyList_Append(saved, pair) < 0;
                    Py_XDECREF(pair);
                    if (bad)
                        goto done;
                } else if (!is_float) {
                    /* kept as itself, not version-checked (the rule does not list it) */
                } else if (!(keep = ag_meta(t, meta_type))) {
                    goto done;
                } else {
                    PyTuple_SET_ITEM(sargs, i, keep); /* the new reference */
                    keep = NULL;
                }
            }
        }
        if (keep) {
            Py_INCREF(keep);
            PyTuple_SET_ITEM(sargs, i, keep);
        }
        PyObject *b = need ? Py_True : Py_False;
        Py_INCREF(b);
        PyTuple_SET_ITEM(needs, i, b);
    }
    PyObject *saved_t = PyList_AsTuple(saved);
    if (saved_t) {
        res = PyTuple_Pack(4, sargs, edges, needs, saved_t);
        Py_DECREF(saved_t);
    }
done:
    Py_XDECREF(sargs);
    Py_XDECREF(needs);
    Py_XDECREF(edges);
    Py_XDECREF(saved);
    return res;
}
