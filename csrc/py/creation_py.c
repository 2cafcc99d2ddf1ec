/* creation_py.c — module-level tensor constructors of ampy._C: empty(),
 * from_numpy() (zero copy through a borrowed Storage) and the tracemalloc
 * domain of tensor storage. The table keeps its historical name
 * ampy_py_tensor_methods (listed in module.c). */
#include "pyampy.h"

/* ----------------------------------------------- module functions -- */
static PyObject *f_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "empty(shape, dtype)");
        return NULL;
    }
    int nd, dt;
    int64_t shape[AMPY_MAX_DIMS];
    if (ampy_py_parse_shape(args[0], &nd, shape, "empty", "size") < 0 ||
        ampy_py_parse_dtype(args[1], AMPY_FLOAT32, &dt, "empty", "dtype") < 0)
        return NULL;
    return (PyObject *)ampy_py_empty(dt, nd, shape, AMPY_DEV_CPU);
}

/* The ampy dtype of an ndarray, or -1 + TypeError (torch's message). */
static int numpy_dtype(PyArrayObject *a)
{
    PyArray_Descr *descr = PyArray_DESCR(a);
    for (int i = 0; i < AMPY_NUM_DTYPES; i++)
        if (ampy_py.np_dtypes[i] && PyArray_EquivTypes(descr, (PyArray_Descr *)ampy_py.np_dtypes[i]))
            return i;
    PyObject *r = PyObject_Repr((PyObject *)descr);
    PyErr_Format(PyExc_TypeError,
                 "can't convert np.ndarray of type %U. The only supported types are: "
                 "float64, float32, float16, bfloat16, int64, int32, uint8, and bool.",
                 r ? r : Py_None);
    Py_XDECREF(r);
    return -1;
}

/* Shape and element strides of a into t (ndim, numel too); -1 + ValueError
 * for strides a tensor cannot have (torch's messages). */
static int numpy_layout(PyArrayObject *a, npy_intp isz, AmpyTensor *t)
{
    const int nd = PyArray_NDIM(a);
    t->ndim = nd;
    t->numel = 1;
    for (int d = 0; d < nd; d++) {
        npy_intp st = PyArray_STRIDE(a, d);
        if (st < 0) {
            PyErr_SetString(PyExc_ValueError,
                            "At least one stride in the given numpy array is negative, and "
                            "tensors with negative strides are not currently supported. (You can "
                            "probably work around this by making a copy of your array  with "
                            "array.copy().) ");
            return -1;
        }
        if (st % isz != 0) {
            PyErr_SetString(PyExc_ValueError,
                            "given numpy array strides not a multiple of the element byte size. "
                            "Copy the numpy array to reallocate the memory.");
            return -1;
        }
        t->shape[d] = PyArray_DIM(a, d);
        t->strides[d] = st / isz;
        t->numel *= t->shape[d];
    }
    return 0;
}

/* from_numpy(arr): a tensor sharing the array's memory (zero copy). A
 * non-writeable array gives a read-only tensor (every write raises; torch
 * only warns and writes). An array whose data address is not a multiple of
 * the element size (np.frombuffer(..., offset=1)) cannot reach the kernels,
 * which load elements aligned: it is copied (aligned, C order) and the
 * tensor refuses writes, which could not reach the array. */
static PyObject *f_from_numpy(PyObject *self, PyObject *arg)
{
    if (!PyArray_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "expected np.ndarray (got %s)", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    PyArrayObject *a = (PyArrayObject *)arg;
    int dt = numpy_dtype(a);
    if (dt < 0)
        return NULL;
    int nd = PyArray_NDIM(a);
    if (nd > AMPY_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "from_numpy: %d dims, at most %d supported", nd,
                     AMPY_MAX_DIMS);
        return NULL;
    }
    const npy_intp isz = (npy_intp)ampy_dtype_size(dt);
    AmpyTensor *t = ampy_py_tensor_alloc();
    if (!t)
        return NULL;
    t->dtype = dt;
    unsigned flags = PyArray_ISWRITEABLE(a) ? 0 : AMPY_STORAGE_READONLY;
    PyObject *owner = NULL;
    if (numpy_layout(a, isz, t) < 0)
        goto fail;
    if (t->numel > 0 && (uintptr_t)PyArray_DATA(a) % (uintptr_t)isz != 0) {
        owner = PyArray_NewCopy(a, NPY_CORDER);
        if (!owner || numpy_layout((PyArrayObject *)owner, isz, t) < 0)
            goto fail;
        a = (PyArrayObject *)owner;
        flags = flags ? flags : AMPY_STORAGE_ALIGN_COPY;
    }
    t->data = PyArray_DATA(a);
    /* the bytes the array spans (strided arrays span more than NBYTES) */
    size_t span = 0;
    if (t->numel > 0) {
        span = (size_t)isz;
        for (int d = 0; d < nd; d++)
            span += (size_t)(t->shape[d] - 1) * (size_t)(t->strides[d] * isz);
    }
    AmpyStorage *st = ampy_py_storage_borrow(t->data, span, AMPY_DEV_CPU, (PyObject *)a);
    if (!st)
        goto fail;
    st->flags = flags;
    t->base = (PyObject *)st;
    Py_XDECREF(owner);
    return (PyObject *)t;
fail:
    Py_XDECREF(owner);
    Py_DECREF(t);
    return NULL;
}

static PyObject *f_tracemalloc_domain(PyObject *self, PyObject *u)
{
    return PyLong_FromUnsignedLong(AMPY_TRACEMALLOC_DOMAIN);
}

PyMethodDef ampy_py_tensor_methods[] = {
    {"empty", (PyCFunction)(void (*)(void))f_empty, METH_FASTCALL,
     "empty(shape, dtype)\n--\n\nA new uninitialised contiguous CPU tensor."},
    {"from_numpy", (PyCFunction)f_from_numpy, METH_O,
     "from_numpy(arr)\n--\n\nA tensor sharing the ndarray's memory."},
    {"tracemalloc_domain", (PyCFunction)f_tracemalloc_domain, METH_NOARGS,
     "tracemalloc_domain()\n--\n\nThe tracemalloc domain of tensor storage."},
    {NULL, NULL, 0, NULL},
};
