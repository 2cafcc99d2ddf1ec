/* device_py.c — CUDA tensors in ampy._C without linking CUDA.
 *
 * ampy._C_cuda hands over a table of C function pointers (ampy_cuda_api in
 * ampy/cuda.h) in a PyCapsule at import: `_C._register_cuda(capsule)`. With
 * it, this file
 *   - allocates device storage (AmpyStorage with free_fn returning the block
 *     to the caching allocator) for ampy_py_empty(..., device >= 0);
 *   - routes copies and casts that involve a CUDA tensor (cast_py.c's
 *     run_cast calls ampy_py_device_cast): same device -> the device cast
 *     kernel; host <-> device -> a contiguous staging buffer on the side that
 *     needs the conversion, one memcpy, and a cast on the other side;
 *   - wraps foreign device memory (`_C._device_tensor`, for DLPack and
 *     __cuda_array_interface__ imports).
 * Without a registered table every CUDA request fails with a RuntimeError.
 */
#include "pyampy.h"

#include <limits.h>

#include <string.h>

#include "ampy/cast.h"
#include "ampy/cuda.h"

static const ampy_cuda_api *cuda_api;

static int need_api(void)
{
    if (cuda_api)
        return 0;
    PyErr_SetString(PyExc_RuntimeError,
                    "ampy: CUDA is not available (ampy._C_cuda is not built or not loaded)");
    return -1;
}

static PyObject *raise_cuda(ampy_status s)
{
    const char *msg = cuda_api ? cuda_api->last_error() : "";
    PyErr_SetString(s == AMPY_ERR_NOMEM ? PyExc_MemoryError
                    : s == AMPY_ERR_DTYPE ? PyExc_TypeError
                    : s == AMPY_ERR_VALUE ? PyExc_ValueError
                    : s == AMPY_ERR_INDEX ? PyExc_IndexError /* as the CPU's ampy_py_raise */
                                          : PyExc_RuntimeError,
                    (msg && msg[0]) ? msg : "ampy: CUDA operation failed");
    return NULL;
}

AmpyStorage *ampy_py_storage_new_device(size_t nbytes, int device)
{
    if (need_api() < 0)
        return NULL;
    void *p = NULL;
    ampy_status s = cuda_api->alloc(device, nbytes, &p);
    if (s != AMPY_OK)
        return (AmpyStorage *)raise_cuda(s);
    AmpyStorage *st = PyObject_New(AmpyStorage, &AmpyStorage_Type);
    if (!st) {
        cuda_api->free(p, nbytes, device);
        return NULL;
    }
    st->ptr = (char *)p;
    st->nbytes = nbytes;
    st->device = device;
    st->version = 0;
    st->owner = NULL;
    st->free_fn = cuda_api->free;
    st->flags = 0;
    return st;
}

static int contig_strides(const AmpyTensor *t, const int64_t *strides)
{
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && strides[d] != expect)
            return 0;
        expect *= t->shape[d];
    }
    return 1;
}

/* dst[...] = src (src read with strides sstr over dst's shape), any devices. */
PyObject *ampy_py_device_cast(const AmpyTensor *src, const int64_t *sstr, AmpyTensor *dst)
{
    if (need_api() < 0)
        return NULL;
    ampy_status s = AMPY_OK;
    if (dst->numel == 0)
        Py_RETURN_NONE;
    if (src->device >= 0 && dst->device >= 0) {
        if (src->device != dst->device) {
            PyErr_Format(PyExc_RuntimeError,
                         "ampy: copies between cuda:%d and cuda:%d are not supported; go "
                         "through .cpu()", src->device, dst->device);
            return NULL;
        }
        s = cuda_api->cast(dst->device, dst->ndim, dst->shape, src->data, sstr, src->dtype,
                           dst->data, dst->strides, dst->dtype);
        return s == AMPY_OK ? (Py_INCREF(Py_None), Py_None) : raise_cuda(s);
    }
    const size_t nbytes = (size_t)dst->numel * ampy_dtype_size(dst->dtype);
    const int src_contig = src->dtype == dst->dtype && contig_strides(dst, sstr);
    const int dst_contig = contig_strides(dst, dst->strides);
    if (src_contig && dst_contig) {
        Py_BEGIN_ALLOW_THREADS
        s = cuda_api->memcpy(dst->data, dst->device, src->data, src->device, nbytes);
        Py_END_ALLOW_THREADS
        return s == AMPY_OK ? (Py_INCREF(Py_None), Py_None) : raise_cuda(s);
    }
    /* Stage through a contiguous buffer of dst's shape and dtype: convert on
     * the source's side, memcpy, then lay out on the destination's side. */
    AmpyTensor *stage_src = ampy_py_empty(dst->dtype, dst->ndim, dst->shape, src->device);
    if (!stage_src)
        return NULL;
    AmpyTensor *stage_dst = NULL;
    PyObject *r = NULL;
    if (src->device >= 0)
        s = cuda_api->cast(src->device, dst->ndim, dst->shape, src->data, sstr, src->dtype,
                           stage_src->data, stage_src->strides, dst->dtype);
    else
        s = ampy_cast(dst->ndim, dst->shape, src->data, sstr, src->dtype, stage_src->data,
                      stage_src->strides, dst->dtype);
    if (s != AMPY_OK) {
        r = src->device >= 0 ? raise_cuda(s) : ampy_py_raise(s);
        goto done;
    }
    if (dst_contig) {
        s = cuda_api->memcpy(dst->data, dst->device, stage_src->data, src->device, nbytes);
        if (s != AMPY_OK) {
            r = raise_cuda(s);
            goto done;
        }
    } else {
        stage_dst = ampy_py_empty(dst->dtype, dst->ndim, dst->shape, dst->device);
        if (!stage_dst)
            goto done;
        s = cuda_api->memcpy(stage_dst->data, dst->device, stage_src->data, src->device, nbytes);
        if (s != AMPY_OK) {
            r = raise_cuda(s);
            goto done;
        }
        if (dst->device >= 0)
            s = cuda_api->cast(dst->device, dst->ndim, dst->shape, stage_dst->data,
                               stage_dst->strides, dst->dtype, dst->data, dst->strides,
                               dst->dtype);
        else
            s = ampy_cast(dst->ndim, dst->shape, stage_dst->data, stage_dst->strides,
                          dst->dtype, dst->data, dst->strides, dst->dtype);
        if (s != AMPY_OK) {
            r = dst->device >= 0 ? raise_cuda(s) : ampy_py_raise(s);
            goto done;
        }
    }
    Py_INCREF(Py_None);
    r = Py_None;
done:
    Py_XDECREF(stage_src);
    Py_XDECREF(stage_dst);
    return r;
}

/* The registered table for the ewise/reduce bindings (NULL + RuntimeError
 * without ampy._C_cuda), and its error as a Python exception. */
const ampy_cuda_api *ampy_py_cuda_api(void)
{
    return need_api() < 0 ? NULL : cuda_api;
}

PyObject *ampy_py_raise_cuda(ampy_status s)
{
    return raise_cuda(s);
}

/* _register_cuda(capsule): install ampy._C_cuda's entry points. */
static PyObject *f_register_cuda(PyObject *self, PyObject *cap)
{
    const ampy_cuda_api *api = PyCapsule_GetPointer(cap, "ampy._C_cuda.api");
    if (!api)
        return NULL;
    if (api->version != AMPY_CUDA_API_VERSION) {
        PyErr_Format(PyExc_RuntimeError, "ampy._C_cuda API version %d, expected %d (rebuild)",
                     api->version, AMPY_CUDA_API_VERSION);
        return NULL;
    }
    cuda_api = api;
    Py_RETURN_NONE;
}

/* _empty_device(shape, dtype, device): a new uninitialised tensor. */
static PyObject *f_empty_device(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_empty_device(shape, dtype, device)");
        return NULL;
    }
    int nd, dt;
    int64_t shape[AMPY_MAX_DIMS];
    if (ampy_py_parse_shape(args[0], &nd, shape, "empty", "size") < 0 ||
        ampy_py_parse_dtype(args[1], AMPY_FLOAT32, &dt, "empty", "dtype") < 0)
        return NULL;
    long long dev;
    if (ampy_py_int_in(args[2], -1, INT_MAX, &dev, "empty", "device") < 0)
        return NULL;
    return (PyObject *)ampy_py_empty(dt, nd, shape, (int)dev);
}

/* _device_tensor(ptr, nbytes, device, dtype, shape, strides, owner): a tensor
 * over memory owned by `owner` (kept alive), on a CUDA device or the CPU
 * (device -1). Strides in elements. */
static PyObject *f_device_tensor(PyObject *self, PyObject *args)
{
    unsigned long long ptr, nbytes;
    int device;
    PyObject *dto, *shape_o, *strides_o, *owner;
    if (!PyArg_ParseTuple(args, "KKiOOOO:_device_tensor", &ptr, &nbytes, &device, &dto, &shape_o,
                          &strides_o, &owner))
        return NULL;
    int dt, nd, nd2;
    int64_t shape[AMPY_MAX_DIMS], strides[AMPY_MAX_DIMS];
    if (ampy_py_parse_dtype(dto, AMPY_FLOAT32, &dt, "_device_tensor", "dtype") < 0 ||
        ampy_py_parse_shape(shape_o, &nd, shape, "_device_tensor", "shape") < 0 ||
        ampy_py_parse_shape(strides_o, &nd2, strides, "_device_tensor", "strides") < 0)
        return NULL;
    if (nd != nd2) {
        PyErr_SetString(PyExc_ValueError, "_device_tensor: shape and strides differ in length");
        return NULL;
    }
    AmpyStorage *st = ampy_py_storage_borrow((char *)(uintptr_t)ptr, (size_t)nbytes, device,
                                             owner);
    if (!st)
        return NULL;
    AmpyTensor tmp; /* a stand-in source for ampy_py_view */
    memset(&tmp, 0, sizeof tmp);
    tmp.base = (PyObject *)st;
    tmp.data = st->ptr;
    tmp.dtype = dt;
    tmp.device = device;
    for (int d = 0; d < nd; d++)
        if (shape[d] < 0) {
            Py_DECREF(st);
            PyErr_SetString(PyExc_ValueError, "_device_tensor: negative dimension");
            return NULL;
        }
    AmpyTensor *t = ampy_py_view(&tmp, nd, shape, strides, 0);
    Py_DECREF(st);
    return (PyObject *)t;
}

static PyObject *f_cuda_registered(PyObject *self, PyObject *u)
{
    return PyBool_FromLong(cuda_api != NULL);
}

PyMethodDef ampy_py_device_methods[] = {
    {"_register_cuda", f_register_cuda, METH_O,
     "_register_cuda(capsule)\n--\n\nInternal: install ampy._C_cuda's entry points."},
    {"_cuda_registered", f_cuda_registered, METH_NOARGS,
     "_cuda_registered()\n--\n\nTrue once ampy._C_cuda registered its entry points."},
    {"_empty_device", (PyCFunction)(void (*)(void))f_empty_device, METH_FASTCALL,
     "_empty_device(shape, dtype, device)\n--\n\nA new uninitialised tensor on a device "
     "(-1: CPU)."},
    {"_device_tensor", f_device_tensor, METH_VARARGS,
     "_device_tensor(ptr, nbytes, device, dtype, shape, strides, owner)\n--\n\n"
     "Internal: a tensor over memory kept alive by owner."},
    {NULL, NULL, 0, NULL},
};
