/* dlpack_py.c — DLPack export and import (zero copy), CPU and CUDA tensors.
 *
 * Follows dmlc/dlpack include/dlpack/dlpack.h v1.0 (the structs below are
 * that ABI, declared here so the build needs no extra header) and the Python
 * array API's __dlpack__ protocol:
 *   _C._to_dlpack(t, versioned) -> a PyCapsule "dltensor_versioned" (v1.x,
 *       DLManagedTensorVersioned) or "dltensor" (legacy DLManagedTensor); the
 *       capsule keeps `t` (and with it the memory) alive until the consumer
 *       calls the deleter, or until the capsule dies unconsumed.
 *   _C._from_dlpack(capsule) -> a tensor viewing the producer's memory; the
 *       capsule is renamed "used_dltensor[_versioned]" as the protocol says,
 *       and the producer's deleter runs when the last view goes away.
 * Stream handling is the Python layer's (ampy/_dlpack.py).
 */
#include "pyampy.h"

#include <string.h>

/* ---- DLPack v1.0 ABI ------------------------------------------------------------ */
typedef enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 } DLDeviceType;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL: compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

/* ---- dtype mapping ------------------------------------------------------------------ */
static const DLDataType dl_types[AMPY_NUM_DTYPES] = {
    [AMPY_FLOAT32] = {kDLFloat, 32, 1}, [AMPY_FLOAT16] = {kDLFloat, 16, 1},
    [AMPY_BFLOAT16] = {kDLBfloat, 16, 1}, [AMPY_FLOAT64] = {kDLFloat, 64, 1},
    [AMPY_INT64] = {kDLInt, 64, 1}, [AMPY_INT32] = {kDLInt, 32, 1},
    [AMPY_UINT8] = {kDLUInt, 8, 1}, [AMPY_BOOL] = {kDLBool, 8, 1},
};

static int from_dl_type(DLDataType t)
{
    if (t.lanes != 1)
        return -1;
    for (int i = 0; i < AMPY_NUM_DTYPES; i++)
        if (dl_types[i].code == t.code && dl_types[i].bits == t.bits)
            return i;
    return -1;
}

/* ---- export ------------------------------------------------------------------------- */
/* One allocation holds the managed struct (either kind), shape and strides. */
typedef struct {
    DLManagedTensorVersioned v;
    DLManagedTensor m;
    PyObject *tensor; /* strong reference */
    int64_t shape[AMPY_MAX_DIMS];
    int64_t strides[AMPY_MAX_DIMS];
} export_ctx;

/* Deleters and destructors may run while an exception is set (a consumer
 * that failed, a capsule freed during unwinding): they keep the error
 * indicator as they found it, whatever the code they call does with it. */
static void release_ctx(export_ctx *c)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    Py_XDECREF(c->tensor);
    PyMem_RawFree(c);
    PyErr_Restore(et, ev, tb);
    PyGILState_Release(g);
}

static void deleter_versioned(DLManagedTensorVersioned *self)
{
    release_ctx((export_ctx *)self->manager_ctx);
}

static void deleter_legacy(DLManagedTensor *self) { release_ctx((export_ctx *)self->manager_ctx); }

static void capsule_destructor(PyObject *cap)
{
    /* an unconsumed capsule still owns the tensor; PyCapsule_IsValid sets
     * no error, so the caller's exception (if any) survives untouched */
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m && m->deleter)
            m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    }
    PyErr_Restore(et, ev, tb);
}

static PyObject *f_to_dlpack(PyObject *self, PyObject *args)
{
    PyObject *obj;
    int versioned;
    if (!PyArg_ParseTuple(args, "Op:_to_dlpack", &obj, &versioned))
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(obj, "__dlpack__", "self");
    if (!t)
        return NULL;
    const int readonly = ((AmpyStorage *)t->base)->flags != 0;
    if (readonly && !versioned) {
        PyErr_SetString(PyExc_BufferError,
                        "Cannot export a read-only tensor as a legacy DLPack capsule, which "
                        "cannot signal read-only memory (pass max_version=(1, 0) to "
                        "__dlpack__, or clone() the tensor first).");
        return NULL;
    }
    export_ctx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c)
        return PyErr_NoMemory();
    Py_INCREF(obj);
    c->tensor = obj;
    DLTensor dl;
    memset(&dl, 0, sizeof dl);
    dl.data = t->data;
    dl.device.device_type = t->device >= 0 ? kDLCUDA : kDLCPU;
    dl.device.device_id = t->device >= 0 ? t->device : 0;
    dl.ndim = t->ndim;
    dl.dtype = dl_types[t->dtype];
    for (int d = 0; d < t->ndim; d++) {
        c->shape[d] = t->shape[d];
        c->strides[d] = t->strides[d];
    }
    dl.shape = c->shape;
    dl.strides = c->strides;
    dl.byte_offset = 0;
    PyObject *cap;
    if (versioned) {
        c->v.version.major = 1;
        c->v.version.minor = 0;
        c->v.manager_ctx = c;
        c->v.deleter = deleter_versioned;
        c->v.flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        c->v.dl_tensor = dl;
        cap = PyCapsule_New(&c->v, "dltensor_versioned", capsule_destructor);
    } else {
        c->m.dl_tensor = dl;
        c->m.manager_ctx = c;
        c->m.deleter = deleter_legacy;
        cap = PyCapsule_New(&c->m, "dltensor", capsule_destructor);
    }
    if (!cap) {
        Py_DECREF(obj);
        PyMem_RawFree(c);
    }
    return cap;
}

/* ---- import ---------------------------------------------------------------------------- */
/* The owner kept alive by the imported tensor's storage: calls the
 * producer's deleter when the last view dies. */
static void owner_destructor(PyObject *cap)
{
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    void *p = PyCapsule_GetPointer(cap, "ampy.dlpack_owner");
    void *ctx = PyCapsule_GetContext(cap);
    if (p && ctx == (void *)1) {
        DLManagedTensorVersioned *m = p;
        if (m->deleter)
            m->deleter(m);
    } else if (p) {
        DLManagedTensor *m = p;
        if (m->deleter)
            m->deleter(m);
    }
    PyErr_Restore(et, ev, tb);
}

/* dtype, device, shape, element strides and byte span of a DLTensor;
 * -1 + BufferError for what ampy cannot view. */
static int dl_layout(const DLTensor *dl, int *dt, int *device, int64_t *shape, int64_t *strides,
                     size_t *nbytes)
{
    if (dl->device.device_type == kDLCPU || dl->device.device_type == kDLCUDAHost)
        *device = AMPY_DEV_CPU;
    else if (dl->device.device_type == kDLCUDA || dl->device.device_type == kDLCUDAManaged)
        *device = dl->device.device_id;
    else {
        PyErr_Format(PyExc_BufferError, "from_dlpack: unsupported device type %d",
                     (int)dl->device.device_type);
        return -1;
    }
    if ((*dt = from_dl_type(dl->dtype)) < 0) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: unsupported dtype (code %u, bits %u, "
                     "lanes %u)", dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
        return -1;
    }
    if (dl->ndim < 0 || dl->ndim > AMPY_MAX_DIMS) {
        PyErr_Format(PyExc_BufferError, "from_dlpack: %d dims, at most %d supported", dl->ndim,
                     AMPY_MAX_DIMS);
        return -1;
    }
    int64_t numel = 1, span = 1;
    for (int d = dl->ndim - 1; d >= 0; d--) {
        shape[d] = dl->shape[d];
        strides[d] = dl->strides ? dl->strides[d] : (d == dl->ndim - 1 ? 1 : strides[d + 1] *
                                                                             shape[d + 1]);
        if (shape[d] < 0 || strides[d] < 0) {
            PyErr_SetString(PyExc_BufferError,
                            "from_dlpack: negative shapes or strides are not supported");
            return -1;
        }
        numel *= shape[d];
        span += shape[d] > 0 ? (shape[d] - 1) * strides[d] : 0;
    }
    *nbytes = numel ? (size_t)span * ampy_dtype_size(*dt) : 0;
    return 0;
}

/* A contiguous ampy-owned copy of a CPU tensor whose data address is not a
 * multiple of its element size: bytes moved with memcpy, element by element
 * (the kernels would load them as aligned values). */
static AmpyTensor *aligned_copy(const AmpyTensor *src)
{
    AmpyTensor *t = ampy_py_empty(src->dtype, src->ndim, src->shape, AMPY_DEV_CPU);
    if (!t || t->numel == 0)
        return t;
    const size_t isz = ampy_dtype_size(src->dtype);
    int64_t idx[AMPY_MAX_DIMS] = {0}, off = 0;
    for (int64_t i = 0; i < t->numel; i++) {
        memcpy(t->data + (size_t)i * isz, src->data + off * (int64_t)isz, isz);
        for (int d = src->ndim - 1; d >= 0; d--) { /* odometer, last dim fastest */
            if (++idx[d] < src->shape[d]) {
                off += src->strides[d];
                break;
            }
            off -= (src->shape[d] - 1) * src->strides[d];
            idx[d] = 0;
        }
    }
    return t;
}

/* The imported tensor: read-only when the producer says so (DLPack 1.0
 * flags); misaligned CPU data is copied (the copy refuses writes, which
 * could not reach the producer), misaligned device data refused. */
static PyObject *dl_finish(AmpyTensor *t, int readonly)
{
    AmpyStorage *st = (AmpyStorage *)t->base;
    st->flags = readonly ? AMPY_STORAGE_READONLY : 0;
    if (t->numel == 0 || (uintptr_t)t->data % ampy_dtype_size(t->dtype) == 0)
        return (PyObject *)t;
    AmpyTensor *c = NULL;
    if (t->device != AMPY_DEV_CPU)
        PyErr_Format(PyExc_BufferError, "from_dlpack: the data address of this cuda:%d tensor "
                     "is not a multiple of its %zu-byte element size", t->device,
                     ampy_dtype_size(t->dtype));
    else if ((c = aligned_copy(t)) != NULL)
        ((AmpyStorage *)c->base)->flags = readonly ? AMPY_STORAGE_READONLY
                                                   : AMPY_STORAGE_ALIGN_COPY;
    Py_DECREF(t); /* the producer's memory is released with it */
    return (PyObject *)c;
}

static PyObject *f_from_dlpack(PyObject *self, PyObject *cap)
{
    int versioned, readonly = 0;
    void *managed;
    DLTensor *dl;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        versioned = 1;
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->version.major > 1) {
            PyErr_Format(PyExc_BufferError, "from_dlpack: DLPack version %u.%u is not supported",
                         m->version.major, m->version.minor);
            return NULL;
        }
        managed = m;
        dl = &m->dl_tensor;
        readonly = (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        versioned = 0;
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        managed = m;
        dl = &m->dl_tensor;
    } else {
        PyErr_SetString(PyExc_TypeError, "from_dlpack: expected a DLPack capsule that was not "
                                         "consumed yet ('dltensor' or 'dltensor_versioned')");
        return NULL;
    }
    int dt, device;
    int64_t shape[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    size_t nbytes;
    if (dl_layout(dl, &dt, &device, shape, strides, &nbytes) < 0)
        return NULL;
    char *data = (char *)dl->data + dl->byte_offset;
    PyObject *owner = PyCapsule_New(managed, "ampy.dlpack_owner", owner_destructor);
    if (!owner)
        return NULL;
    if (PyCapsule_SetContext(owner, versioned ? (void *)1 : (void *)0) < 0 ||
        PyCapsule_SetName(cap, versioned ? "used_dltensor_versioned" : "used_dltensor") < 0) {
        PyCapsule_SetDestructor(owner, NULL);
        Py_DECREF(owner);
        return NULL;
    }
    AmpyStorage *st = ampy_py_storage_borrow(data, nbytes, device, owner);
    Py_DECREF(owner); /* the storage holds it now */
    if (!st)
        return NULL;
    AmpyTensor tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.base = (PyObject *)st;
    tmp.data = data;
    tmp.dtype = dt;
    tmp.device = device;
    AmpyTensor *t = ampy_py_view(&tmp, dl->ndim, shape, strides, 0);
    Py_DECREF(st);
    return t ? dl_finish(t, readonly) : NULL;
}

/* The DLPack device types above as _C.DLPACK_CPU, _CUDA, _CUDA_HOST, _CUDA_MANAGED. */
int ampy_py_dlpack_add_constants(PyObject *m)
{
    if (PyModule_AddIntConstant(m, "DLPACK_CPU", kDLCPU) < 0 ||
        PyModule_AddIntConstant(m, "DLPACK_CUDA", kDLCUDA) < 0 ||
        PyModule_AddIntConstant(m, "DLPACK_CUDA_HOST", kDLCUDAHost) < 0 ||
        PyModule_AddIntConstant(m, "DLPACK_CUDA_MANAGED", kDLCUDAManaged) < 0)
        return -1;
    return 0;
}

PyMethodDef ampy_py_dlpack_methods[] = {
    {"_to_dlpack", f_to_dlpack, METH_VARARGS,
     "_to_dlpack(tensor, versioned)\n--\n\nA DLPack capsule viewing the tensor (zero copy)."},
    {"_from_dlpack", f_from_dlpack, METH_O,
     "_from_dlpack(capsule)\n--\n\nA tensor viewing a DLPack capsule's memory (zero copy)."},
    {NULL, NULL, 0, NULL},
};
