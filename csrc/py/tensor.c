/* tensor.c — ampy._C.TensorBase and ampy._C.Storage.
 *
 * A tensor is (data pointer, shape, element strides, dtype, device) plus a
 * reference to the object that owns the memory. Views share the owner; the
 * Python subclass ampy.Tensor adds the user-facing methods. Storage memory
 * comes from ampy_alloc (the caching allocator) and is reported to
 * tracemalloc in its own domain so leaks show up in Python-level tests.
 */
#include "pyampy.h"

#include <string.h>

#include "ampy/alloc.h"


/* ------------------------------------------------------------ Storage -- */
static void storage_dealloc(AmpyStorage *s)
{
    if (s->owner) {
        Py_CLEAR(s->owner);
    } else if (s->ptr) {
        if (s->free_fn)
            s->free_fn(s->ptr, s->nbytes, s->device);
        else {
            PyTraceMalloc_Untrack(AMPY_TRACEMALLOC_DOMAIN, (uintptr_t)s->ptr);
            ampy_free(s->ptr, s->nbytes);
        }
    }
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *storage_nbytes(AmpyStorage *s, PyObject *unused)
{
    return PyLong_FromSize_t(s->nbytes);
}

static PyMethodDef storage_methods[] = {
    {"nbytes", (PyCFunction)storage_nbytes, METH_NOARGS, "nbytes()\n--\n\nSize in bytes."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject AmpyStorage_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ampy._C.Storage",
    .tp_basicsize = sizeof(AmpyStorage),
    .tp_dealloc = (destructor)storage_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory owned by one or more tensors.",
    .tp_methods = storage_methods,
};

/* New host storage of nbytes, or NULL with MemoryError. */
static AmpyStorage *storage_new_host(size_t nbytes)
{
    void *p = ampy_alloc(nbytes);
    if (!p) {
        PyErr_Format(PyExc_MemoryError, "ampy: cannot allocate %zu bytes", nbytes);
        return NULL;
    }
    AmpyStorage *s = PyObject_New(AmpyStorage, &AmpyStorage_Type);
    if (!s) {
        ampy_free(p, nbytes);
        return NULL;
    }
    s->ptr = (char *)p;
    s->nbytes = nbytes;
    s->device = AMPY_DEV_CPU;
    s->version = 0;
    s->owner = NULL;
    s->free_fn = NULL;
    s->flags = 0;
    PyTraceMalloc_Track(AMPY_TRACEMALLOC_DOMAIN, (uintptr_t)p, nbytes);
    return s;
}

AmpyStorage *ampy_py_storage_borrow(char *ptr, size_t nbytes, int device, PyObject *owner)
{
    AmpyStorage *s = PyObject_New(AmpyStorage, &AmpyStorage_Type);
    if (!s)
        return NULL;
    s->ptr = ptr;
    s->nbytes = nbytes;
    s->device = device;
    s->version = 0;
    Py_INCREF(owner);
    s->owner = owner;
    s->free_fn = NULL;
    s->flags = 0;
    return s;
}

/* ------------------------------------------------------------- Tensor -- */
static PyTypeObject *tensor_type(void)
{
    return ampy_py.tensor_type ? ampy_py.tensor_type : &AmpyTensorBase_Type;
}

AmpyTensor *ampy_py_tensor_alloc(void)
{
    PyTypeObject *tp = tensor_type();
    AmpyTensor *t = (AmpyTensor *)tp->tp_alloc(tp, 0);
    if (!t)
        return NULL;
    t->base = NULL;
    t->data = NULL;
    t->ndim = 0;
    t->numel = 1;
    t->device = AMPY_DEV_CPU;
    t->requires_grad = 0;
    Py_INCREF(Py_None);
    t->grad = Py_None;
    Py_INCREF(Py_None);
    t->grad_fn = Py_None;
    return t;
}

AmpyTensor *ampy_py_empty(int dtype, int ndim, const int64_t *shape, int device)
{
    if (!ampy_dtype_valid(dtype)) {
        PyErr_Format(PyExc_TypeError, "ampy: invalid dtype code %d", dtype);
        return NULL;
    }
    if (ndim < 0 || ndim > AMPY_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "ampy: tensors have at most %d dims, got %d", AMPY_MAX_DIMS,
                     ndim);
        return NULL;
    }
    const size_t isz = ampy_dtype_size(dtype);
    int64_t numel = 1, nbytes;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "ampy: negative dimension %lld", (long long)shape[d]);
            return NULL;
        }
    }
    ampy_status ss = ampy_shape_nbytes(ndim, shape, (int64_t)isz, &nbytes);
    if (ss != AMPY_OK)
        return (AmpyTensor *)ampy_py_raise(ss);
    numel = nbytes / (int64_t)isz;
    /* CUDA: device storage from ampy._C_cuda's caching allocator (device_py.c) */
    AmpyStorage *s = device == AMPY_DEV_CPU ? storage_new_host((size_t)numel * isz)
                                            : ampy_py_storage_new_device((size_t)numel * isz, device);
    if (!s)
        return NULL;
    AmpyTensor *t = ampy_py_tensor_alloc();
    if (!t) {
        Py_DECREF(s);
        return NULL;
    }
    t->base = (PyObject *)s;
    t->data = s->ptr;
    t->device = device;
    t->dtype = dtype;
    t->ndim = ndim;
    t->numel = numel;
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->strides[d] = st;
        st *= shape[d] > 1 ? shape[d] : 1;
    }
    return t;
}

AmpyTensor *ampy_py_view(AmpyTensor *src, int ndim, const int64_t *shape, const int64_t *strides,
                         int64_t offset)
{
    AmpyTensor *t = ampy_py_tensor_alloc();
    if (!t)
        return NULL;
    Py_INCREF(src->base);
    t->base = src->base;
    t->dtype = src->dtype;
    t->device = src->device;
    t->data = src->data + offset * (int64_t)ampy_dtype_size(src->dtype);
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
        t->numel *= shape[d];
    }
    return t;
}

int ampy_py_is_contiguous(const AmpyTensor *t)
{
    if (t->numel == 0)
        return 1; /* torch: an empty tensor is contiguous whatever its strides */
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return 0;
        expect *= t->shape[d];
    }
    return 1;
}

void ampy_py_byte_strides(const AmpyTensor *t, int64_t *out)
{
    const int64_t isz = (int64_t)ampy_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++)
        out[d] = t->strides[d] * isz;
}

static int tensor_traverse(AmpyTensor *t, visitproc visit, void *arg)
{
    /* the type itself is visited by subtype_traverse for Python subclasses */
    Py_VISIT(t->base);
    Py_VISIT(t->grad);
    Py_VISIT(t->grad_fn);
    Py_VISIT(t->dict);
    return 0;
}

static int tensor_clear(AmpyTensor *t)
{
    Py_CLEAR(t->grad);
    Py_CLEAR(t->grad_fn);
    Py_CLEAR(t->dict);
    return 0;
}

static void tensor_dealloc(AmpyTensor *t)
{
    /* For Python subclasses subtype_dealloc calls this and then drops the
     * reference to the heap type itself. */
    PyObject_GC_UnTrack(t);
    if (t->weakreflist)
        PyObject_ClearWeakRefs((PyObject *)t);
    tensor_clear(t);
    Py_CLEAR(t->base);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyObject *tensor_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    PyErr_SetString(PyExc_TypeError,
                    "ampy.Tensor cannot be constructed directly; use ampy.tensor, ampy.empty, ...");
    return NULL;
}

/* ------------------------------------------------------ attributes -- */
static PyObject *shape_tuple(const AmpyTensor *t)
{
    PyObject *tup = PyTuple_New(t->ndim);
    if (!tup)
        return NULL;
    for (int d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(t->shape[d]);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, d, v);
    }
    return tup;
}

PyObject *ampy_py_shape_obj(AmpyTensor *t, void *c)
{
    PyTypeObject *st = (PyTypeObject *)ampy_py.size_type;
    if (!st)
        return shape_tuple(t);
    /* ampy.Size is a tuple subclass without fields of its own (__slots__ = ()):
     * build it in place instead of calling the class on a tuple, which costs
     * several times more on this hot attribute. */
    PyObject *r = PyType_Check(st) && PyType_IsSubtype(st, &PyTuple_Type)
                      ? st->tp_alloc(st, t->ndim)
                      : NULL;
    if (!r) {
        if (PyErr_Occurred())
            return NULL;
        PyObject *tup = shape_tuple(t);
        if (!tup)
            return NULL;
        r = PyObject_CallOneArg((PyObject *)st, tup);
        Py_DECREF(tup);
        return r;
    }
    for (int d = 0; d < t->ndim; d++) {
        PyObject *v = PyLong_FromLongLong(t->shape[d]);
        if (!v) {
            Py_DECREF(r);
            return NULL;
        }
        PyTuple_SET_ITEM(r, d, v);
    }
    return r;
}

static PyObject *get_dtype(AmpyTensor *t, void *c) { return ampy_py_dtype_obj(t->dtype); }
static PyObject *get_ndim(AmpyTensor *t, void *c) { return PyLong_FromLong(t->ndim); }
static PyObject *get_device_index(AmpyTensor *t, void *c) { return PyLong_FromLong(t->device); }
static PyObject *get_dtype_code(AmpyTensor *t, void *c) { return PyLong_FromLong(t->dtype); }
static PyObject *get_base_obj(AmpyTensor *t, void *c)
{
    Py_INCREF(t->base);
    return t->base;
}

static PyObject *get_version(AmpyTensor *t, void *c)
{
    return PyLong_FromLongLong(((AmpyStorage *)t->base)->version);
}

static PyObject *get_readonly(AmpyTensor *t, void *c)
{
    return PyBool_FromLong(((AmpyStorage *)t->base)->flags != 0);
}

static PyGetSetDef tensor_getset[] = {
    {"shape", (getter)ampy_py_shape_obj, NULL, "The tensor's size, an ampy.Size.", NULL},
    {"dtype", (getter)get_dtype, NULL, "The element type.", NULL},
    {"ndim", (getter)get_ndim, NULL, "Number of dimensions.", NULL},
    {"_device_index", (getter)get_device_index, NULL, "-1 for CPU, else the CUDA index.", NULL},
    {"_dtype_code", (getter)get_dtype_code, NULL, "The ampy_dtype code.", NULL},
    {"_storage", (getter)get_base_obj, NULL, "The Storage holding the memory.", NULL},
    {"_version", (getter)get_version, NULL, "In-place writes seen by this memory.", NULL},
    {"_readonly", (getter)get_readonly, NULL,
     "True when no write may touch this memory (read-only or copied foreign memory).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef tensor_members[] = {
    {"_requires_grad", T_BOOL, offsetof(AmpyTensor, requires_grad), 0, NULL},
    {"_grad", T_OBJECT, offsetof(AmpyTensor, grad), 0, NULL},
    {"grad_fn", T_OBJECT, offsetof(AmpyTensor, grad_fn), 0, "The autograd node that made it."},
    {"__dictoffset__", T_PYSSIZET, offsetof(AmpyTensor, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(AmpyTensor, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

/* --------------------------------------------------------- methods -- */
static PyObject *m_numel(AmpyTensor *t, PyObject *u) { return PyLong_FromLongLong(t->numel); }
static PyObject *m_dim(AmpyTensor *t, PyObject *u) { return PyLong_FromLong(t->ndim); }

static PyObject *m_is_contiguous(AmpyTensor *t, PyObject *u)
{
    return PyBool_FromLong(ampy_py_is_contiguous(t));
}

static PyObject *m_element_size(AmpyTensor *t, PyObject *u)
{
    return PyLong_FromSize_t(ampy_dtype_size(t->dtype));
}

static PyObject *m_data_ptr(AmpyTensor *t, PyObject *u)
{
    return PyLong_FromVoidPtr(t->data);
}

static char *owner_ptr(const AmpyTensor *t) { return ((AmpyStorage *)t->base)->ptr; }

static PyObject *m_storage_offset(AmpyTensor *t, PyObject *u)
{
    return PyLong_FromLongLong((t->data - owner_ptr(t)) / (int64_t)ampy_dtype_size(t->dtype));
}

static int normalize_dim(const AmpyTensor *t, long long d, int *out)
{
    int nd = t->ndim ? t->ndim : 1;
    if (d < -nd || d >= nd) {
        PyErr_Format(PyExc_IndexError,
                     "Dimension out of range (expected to be in range of [%d, %d], but got %lld)",
                     -nd, nd - 1, d);
        return -1;
    }
    *out = (int)(d < 0 ? d + nd : d);
    return 0;
}

static PyObject *m_stride(AmpyTensor *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "stride() takes at most one argument (dim)");
        return NULL;
    }
    if (nargs == 0 || args[0] == Py_None) {
        PyObject *tup = PyTuple_New(t->ndim);
        if (!tup)
            return NULL;
        for (int d = 0; d < t->ndim; d++)
            PyTuple_SET_ITEM(tup, d, PyLong_FromLongLong(t->strides[d]));
        return tup;
    }
    long long d = PyLong_AsLongLong(args[0]);
    int dd;
    if ((d == -1 && PyErr_Occurred()) || normalize_dim(t, d, &dd) < 0)
        return NULL;
    return PyLong_FromLongLong(t->ndim ? t->strides[dd] : 1);
}

static PyObject *m_size(AmpyTensor *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "size() takes at most one argument (dim)");
        return NULL;
    }
    if (nargs == 0 || args[0] == Py_None)
        return ampy_py_shape_obj(t, NULL);
    long long d = PyLong_AsLongLong(args[0]);
    int dd;
    if ((d == -1 && PyErr_Occurred()) || normalize_dim(t, d, &dd) < 0)
        return NULL;
    return PyLong_FromLongLong(t->ndim ? t->shape[dd] : 1);
}

/* 1 + RuntimeError when a view (shape, strides, offset from t's first
 * element) of a non-empty shape would reach outside t's storage (as_strided
 * with bad arguments); the products are checked for int64 overflow. */
static int view_out_of_bounds(const AmpyTensor *t, int nd, const int64_t *shape,
                              const int64_t *strides, int64_t off)
{
    const AmpyStorage *s = (const AmpyStorage *)t->base;
    const int64_t isz = (int64_t)ampy_dtype_size(t->dtype);
    int64_t lo = (t->data - s->ptr) / isz, hi, ext;
    int bad = __builtin_add_overflow(lo, off, &lo);
    hi = lo;
    for (int d = 0; d < nd && !bad; d++) {
        if (shape[d] == 0)
            return 0;
        bad |= __builtin_mul_overflow(shape[d] - 1, strides[d], &ext);
        bad |= ext < 0 ? __builtin_add_overflow(lo, ext, &lo) : __builtin_add_overflow(hi, ext, &hi);
    }
    if (!bad && lo >= 0 && hi < (int64_t)(s->nbytes / (size_t)isz))
        return 0;
    PyErr_Format(PyExc_RuntimeError,
                 "setStorage: a view with storage offset %lld and this size/stride reaches "
                 "elements [%lld, %lld], outside the %lld elements of its storage",
                 (long long)((t->data - s->ptr) / isz + off), (long long)lo, (long long)hi,
                 (long long)(s->nbytes / (size_t)isz));
    return 1;
}

/* _view(shape, strides, offset): a new tensor sharing this one's memory. The
 * Python layer computes shapes and strides of views (transpose, slicing, ...)
 * and this checks that the view stays inside the viewed elements' span. */
static PyObject *m_view(AmpyTensor *t, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_view(shape, strides, offset)");
        return NULL;
    }
    int nd1, nd2;
    int64_t shape[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    if (ampy_py_parse_shape(args[0], &nd1, shape, "_view", "shape") < 0 ||
        ampy_py_parse_shape(args[1], &nd2, strides, "_view", "strides") < 0)
        return NULL;
    long long off = PyLong_AsLongLong(args[2]);
    if (off == -1 && PyErr_Occurred())
        return NULL;
    if (nd1 != nd2) {
        PyErr_SetString(PyExc_ValueError, "_view: shape and strides differ in length");
        return NULL;
    }
    for (int d = 0; d < nd1; d++)
        if (shape[d] < 0) {
            PyErr_Format(PyExc_ValueError, "_view: negative dimension %lld", (long long)shape[d]);
            return NULL;
        }
    int64_t numel;
    ampy_status ss = ampy_shape_numel(nd1, shape, &numel);
    if (ss != AMPY_OK)
        return ampy_py_raise(ss);
    if (view_out_of_bounds(t, nd1, shape, strides, off))
        return NULL;
    return (PyObject *)ampy_py_view(t, nd1, shape, strides, off);
}

/* _numpy(): an ndarray over the same memory (the tensor is its base). */
static PyObject *m_numpy(AmpyTensor *t, PyObject *u)
{
    if (t->device != AMPY_DEV_CPU) {
        PyErr_SetString(PyExc_TypeError,
                        "can't convert a CUDA tensor to numpy. Use Tensor.cpu() to copy the "
                        "tensor to host memory first.");
        return NULL;
    }
    PyObject *descr = ampy_py.np_dtypes[t->dtype];
    if (!descr) {
        PyErr_SetString(PyExc_RuntimeError, "ampy: numpy dtypes not registered");
        return NULL;
    }
    npy_intp dims[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    const int64_t isz = (int64_t)ampy_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        dims[d] = (npy_intp)t->shape[d];
        strides[d] = (npy_intp)(t->strides[d] * isz);
    }
    Py_INCREF(descr);
    /* memory no write path may touch exports read-only (writeable=False) */
    const int npflags = ((AmpyStorage *)t->base)->flags ? 0 : NPY_ARRAY_WRITEABLE;
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, (PyArray_Descr *)descr, t->ndim, dims,
                                         strides, t->data, npflags, NULL);
    if (!arr)
        return NULL;
    Py_INCREF(t);
    if (PyArray_SetBaseObject((PyArrayObject *)arr, (PyObject *)t) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

#include "ampy/elem.h"

/* item(): the only element as a Python float / int / bool. */
static PyObject *m_item(AmpyTensor *t, PyObject *u)
{
    if (t->numel != 1) {
        PyErr_Format(PyExc_RuntimeError,
                     "a Tensor with %lld elements cannot be converted to Scalar",
                     (long long)t->numel);
        return NULL;
    }
    if (t->device != AMPY_DEV_CPU) { /* one copy to the host, which synchronises (torch) */
        AmpyTensor *h = ampy_py_empty(t->dtype, t->ndim, t->shape, AMPY_DEV_CPU);
        PyObject *r = h ? ampy_py_device_cast(t, t->strides, h) : NULL;
        if (r) {
            Py_DECREF(r);
            r = m_item(h, NULL);
        }
        Py_XDECREF(h);
        return r;
    }
    const char *p = t->data;
    switch (t->dtype) {
    case AMPY_FLOAT32: return PyFloat_FromDouble(*(const float *)p);
    case AMPY_FLOAT16: return PyFloat_FromDouble(ampy_f16_to_f32(*(const uint16_t *)p));
    case AMPY_BFLOAT16: return PyFloat_FromDouble(ampy_bf16_to_f32(*(const uint16_t *)p));
    case AMPY_FLOAT64: return PyFloat_FromDouble(*(const double *)p);
    case AMPY_INT64: return PyLong_FromLongLong(*(const int64_t *)p);
    case AMPY_INT32: return PyLong_FromLong(*(const int32_t *)p);
    case AMPY_UINT8: return PyLong_FromLong(*(const uint8_t *)p);
    case AMPY_BOOL: return PyBool_FromLong(*(const uint8_t *)p != 0);
    default: PyErr_SetString(PyExc_TypeError, "item(): bad dtype"); return NULL;
    }
}

/* _alias(): a new tensor object on the same elements (same shape, strides
 * and offset), without autograd history: detach() without parsing a shape. */
static PyObject *m_alias(AmpyTensor *t, PyObject *u)
{
    return (PyObject *)ampy_py_view(t, t->ndim, t->shape, t->strides, 0);
}

static PyObject *m_bump_version(AmpyTensor *t, PyObject *u)
{
    ampy_py_bump_version(t);
    Py_RETURN_NONE;
}

static PyMethodDef tensor_methods[] = {
    {"numel", (PyCFunction)m_numel, METH_NOARGS, "numel()\n--\n\nNumber of elements."},
    {"dim", (PyCFunction)m_dim, METH_NOARGS, "dim()\n--\n\nNumber of dimensions."},
    {"is_contiguous", (PyCFunction)m_is_contiguous, METH_NOARGS,
     "is_contiguous()\n--\n\nTrue if the elements are laid out densely in row-major order."},
    {"element_size", (PyCFunction)m_element_size, METH_NOARGS,
     "element_size()\n--\n\nBytes per element."},
    {"data_ptr", (PyCFunction)m_data_ptr, METH_NOARGS,
     "data_ptr()\n--\n\nAddress of the first element."},
    {"storage_offset", (PyCFunction)m_storage_offset, METH_NOARGS,
     "storage_offset()\n--\n\nOffset of the first element in its storage, in elements."},
    {"stride", (PyCFunction)(void (*)(void))m_stride, METH_FASTCALL,
     "stride(dim=None)\n--\n\nElement strides (a tuple), or the stride of one dim."},
    {"size", (PyCFunction)(void (*)(void))m_size, METH_FASTCALL,
     "size(dim=None)\n--\n\nThe shape, or the size of one dim."},
    {"_view", (PyCFunction)(void (*)(void))m_view, METH_FASTCALL,
     "_view(shape, strides, offset)\n--\n\nInternal: a view of the same memory."},
    {"_numpy", (PyCFunction)m_numpy, METH_NOARGS,
     "_numpy()\n--\n\nInternal: an ndarray sharing the memory."},
    {"item", (PyCFunction)m_item, METH_NOARGS,
     "item()\n--\n\nThe value of a one-element tensor as a Python number."},
    {"_ag_inputs", (PyCFunction)(void (*)(void))ampy_py_ag_inputs, METH_FASTCALL | METH_STATIC,
     "_ag_inputs(args, save, Meta, accumulator)\n--\n\nInternal: autograd recording's "
     "edges and saved inputs (see tensor.c)."},
    {"_alias", (PyCFunction)m_alias, METH_NOARGS,
     "_alias()\n--\n\nInternal: a new tensor on the same elements, without history."},
    {"_bump_version", (PyCFunction)m_bump_version, METH_NOARGS,
     "_bump_version()\n--\n\nInternal: record an in-place write."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject AmpyTensorBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ampy._C.TensorBase",
    .tp_basicsize = sizeof(AmpyTensor),
    .tp_dealloc = (destructor)tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The C part of ampy.Tensor.",
    .tp_traverse = (traverseproc)tensor_traverse,
    .tp_clear = (inquiry)tensor_clear,
    .tp_weaklistoffset = offsetof(AmpyTensor, weakreflist),
    .tp_methods = tensor_methods,
    .tp_members = tensor_members,
    .tp_getset = tensor_getset,
    .tp_dictoffset = offsetof(AmpyTensor, dict),
    .tp_new = tensor_new,
};
