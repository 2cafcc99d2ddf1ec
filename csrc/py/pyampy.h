/* pyampy.h — shared declarations of the CPython binding (csrc/py/ only).
 *
 * The binding is the only code that sees Python.h or NumPy. Each concern has
 * one file `csrc/py/<concern>_py.c` that exports a method table
 * `PyMethodDef ampy_py_<concern>_methods[]` (listed once in module.c); every
 * function there follows the same path:
 *   parse -> validate (naming the argument) -> get pointers
 *         -> release the GIL for large work -> call libampy
 *         -> map an ampy_status to an exception (ampy_py_raise).
 */
#ifndef AMPY_PYAMPY_H
#define AMPY_PYAMPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define PY_ARRAY_UNIQUE_SYMBOL AMPY_ARRAY_API
#ifndef AMPY_PY_DEFINE_ARRAY_API
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/iter.h"
#include "ampy/status.h"

/* Device codes carried by every tensor. */
#define AMPY_DEV_CPU (-1) /* >= 0: CUDA device index */

/* The storage object: one allocation from ampy_alloc (or a CUDA allocator),
 * freed when the last tensor viewing it goes away. */
typedef struct {
    PyObject_HEAD
    char *ptr;
    size_t nbytes;
    int device;
    int64_t version; /* bumped by every in-place write through any view */
    PyObject *owner; /* non-NULL: borrowed memory kept alive by this object */
    void (*free_fn)(void *ptr, size_t nbytes, int device); /* NULL: ampy_free */
    unsigned flags; /* AMPY_STORAGE_*: memory that no write path may touch (last field:
                     * the layout of the fields above is shared with ampy._C_cuda) */
} AmpyStorage;

/* Storage flags, set on import and shared by every view of the memory. */
#define AMPY_STORAGE_READONLY 1u   /* foreign read-only memory: a non-writeable ndarray,
                                    * bytes, a mode="r" memmap, a read-only DLPack tensor */
#define AMPY_STORAGE_ALIGN_COPY 2u /* the aligned copy from_numpy/from_dlpack made of
                                    * misaligned memory: writes would not reach it */

/* The version of the AmpyStorage / AmpyTensor layout. ampy._C_cuda reads
 * both structs by layout: its _init refuses (ImportError) a _C whose version
 * or struct sizes differ from the ones it was compiled with. Bump it with any
 * change to either struct. */
#define AMPY_PY_LAYOUT_VERSION 1

/* ampy._C.TensorBase. Strides are in ELEMENTS, like torch. `data` points at
 * the first element; `base` is the AmpyStorage holding the memory (never
 * NULL); views share it, and with it the version counter. */
typedef struct {
    PyObject_HEAD
    char *data;
    PyObject *base;
    int ndim;
    int dtype;  /* ampy_dtype  */
    int device; /* AMPY_DEV_CPU or a CUDA index */
    char requires_grad;
    int64_t numel;
    int64_t shape[AMPY_MAX_DIMS];
    int64_t strides[AMPY_MAX_DIMS];
    PyObject *grad;    /* None or a Tensor          */
    PyObject *grad_fn; /* None or an autograd node  */
    PyObject *dict;
    PyObject *weakreflist;
} AmpyTensor;

/* Process-wide binding state, filled by module exec and by _C._init() (which
 * ampy/__init__.py calls with the Python-level objects). */
typedef struct {
    PyTypeObject *tensor_base_type; /* ampy._C.TensorBase            */
    PyTypeObject *tensor_type;      /* ampy.Tensor (Python subclass) */
    PyObject *dtypes[AMPY_NUM_DTYPES];    /* ampy.float32, ...        */
    PyObject *np_dtypes[AMPY_NUM_DTYPES]; /* matching numpy dtypes     */
    PyObject *size_type;            /* ampy.Size                     */
} AmpyPyGlobals;

extern AmpyPyGlobals ampy_py;
extern PyTypeObject AmpyStorage_Type;
extern PyTypeObject AmpyTensorBase_Type;

/* ---- errors -------------------------------------------------------------- */
/* Set the exception matching `s` with libampy's last message; returns NULL. */
PyObject *ampy_py_raise(ampy_status s);
/* Same, returning -1 (for int-returning helpers). */
int ampy_py_raise_int(ampy_status s);

/* ---- tensors ------------------------------------------------------------- */
static inline int ampy_py_is_tensor(PyObject *o)
{
    return PyObject_TypeCheck(o, &AmpyTensorBase_Type);
}
/* Returns o as a tensor, or NULL with "fn: argument 'arg' must be a Tensor,
 * not <type>" as TypeError. */
AmpyTensor *ampy_py_tensor_arg(PyObject *o, const char *fn, const char *arg);

/* New contiguous CPU (device == AMPY_DEV_CPU) tensor of ampy.Tensor type,
 * uninitialised. NULL + MemoryError/ValueError on failure. */
AmpyTensor *ampy_py_empty(int dtype, int ndim, const int64_t *shape, int device);
/* New tensor viewing src's memory with another shape/strides/offset (elements,
 * relative to src->data). No bounds checks: callers compute valid views. */
AmpyTensor *ampy_py_view(AmpyTensor *src, int ndim, const int64_t *shape,
                         const int64_t *strides, int64_t offset);
int ampy_py_is_contiguous(const AmpyTensor *t);
/* Byte strides of t into out[ndim]. */
void ampy_py_byte_strides(const AmpyTensor *t, int64_t *out);
static inline void ampy_py_bump_version(AmpyTensor *t) { ((AmpyStorage *)t->base)->version++; }
/* A storage over memory owned by `owner` (kept alive), e.g. a NumPy array. */
AmpyStorage *ampy_py_storage_borrow(char *ptr, size_t nbytes, int device, PyObject *owner);

/* ---- the write check (write_check.c) --------------------------------------
 * Every path that writes into a tensor the caller passed (in-place ops, out=,
 * copy_/fill_/setitem, index_put_, optimizer and scaler steps, random fills)
 * calls ampy_py_check_write first. It raises RuntimeError naming fn and arg
 * when the memory is read-only (AMPY_STORAGE_*), and with
 * AMPY_PY_WRITE_OVERLAP when several elements share one memory location
 * (torch's "unsupported operation: more than one element ..."). The inline
 * part only reads the storage flags and the strides of a contiguous tensor. */
#define AMPY_PY_WRITE_OVERLAP 1
int ampy_py_check_write_slow(const AmpyTensor *t, const char *fn, const char *arg, int flags);
static inline int ampy_py_check_write(const AmpyTensor *t, const char *fn, const char *arg,
                                      int flags)
{
    if (((const AmpyStorage *)t->base)->flags)
        return ampy_py_check_write_slow(t, fn, arg, flags);
    if (flags & AMPY_PY_WRITE_OVERLAP) {
        int64_t expect = 1;
        for (int d = t->ndim - 1; d >= 0; d--) {
            if (t->shape[d] != 1 && t->strides[d] != expect)
                return ampy_py_check_write_slow(t, fn, arg, flags);
            expect *= t->shape[d];
        }
    }
    return 0;
}
/* 1 when two elements of t share a memory location (exact: a zero stride
 * over a size > 1 is the quick case, other layouts are decided by a
 * sufficient stride test and, failing that, by marking every element's
 * offset), 0 when none do, -1 + MemoryError. */
int ampy_py_internal_overlap(const AmpyTensor *t);
/* The read-only error for t's storage flags (fn and arg named); returns -1.
 * Inline so that ampy._C_cuda's bindings raise the same message. */
static inline int ampy_py_raise_readonly(const AmpyTensor *t, const char *fn, const char *arg)
{
    if (((const AmpyStorage *)t->base)->flags & AMPY_STORAGE_READONLY)
        PyErr_Format(PyExc_RuntimeError,
                     "%s: argument '%s' is read-only: its memory belongs to a read-only buffer "
                     "(a NumPy array with writeable=False, bytes, a mode='r' memmap, or a "
                     "DLPack tensor marked read-only), which ampy never writes. Use clone() "
                     "for a writable copy.", fn, arg);
    else
        PyErr_Format(PyExc_RuntimeError,
                     "%s: argument '%s' cannot be written: ampy copied the misaligned memory "
                     "it came from (from_numpy/from_dlpack of data whose address is not a "
                     "multiple of the %zu-byte element size), so writes would not reach the "
                     "original. Pass aligned memory to share it, or clone() for a writable "
                     "tensor.", fn, arg,
                     ampy_dtype_size(t->dtype));
    return -1;
}

/* ---- argument parsing ---------------------------------------------------- */
/* dtype object (ampy.float16), a code int, or None (-> *out = dflt). Raises
 * TypeError naming fn/arg otherwise. Returns 0 / -1. */
int ampy_py_parse_dtype(PyObject *o, int dflt, int *out, const char *fn, const char *arg);
/* A sequence of non-negative ints (or one int) -> shape. Returns 0 / -1. */
int ampy_py_parse_shape(PyObject *o, int *ndim, int64_t *shape, const char *fn, const char *arg);
PyObject *ampy_py_dtype_obj(int dtype); /* new reference */
/* An int in [lo, hi] (never truncated): ValueError naming fn/arg when out of
 * range, TypeError when not an int. Returns 0 / -1. */
int ampy_py_int_in(PyObject *o, long long lo, long long hi, long long *out, const char *fn,
                   const char *arg);

/* New tensor object of ampy.Tensor type with no memory yet (base NULL,
 * grad/grad_fn None); the caller fills data, base, dtype, shape, strides. */
AmpyTensor *ampy_py_tensor_alloc(void);
/* t.shape as an ampy.Size (a new reference; c is unused: a getter) */
PyObject *ampy_py_shape_obj(AmpyTensor *t, void *c);
/* TensorBase._ag_inputs (tensor_autograd.c), a METH_FASTCALL static method */
PyObject *ampy_py_ag_inputs(PyObject *unused, PyObject *const *a, Py_ssize_t n);

/* tracemalloc domain under which tensor storage is reported ("ampy"). */
#define AMPY_TRACEMALLOC_DOMAIN 0x616d7079u

/* Release the GIL around work of at least this many elements. */
#define AMPY_PY_GIL_RELEASE_MIN 16384

/* ---- the method tables of each concern (module.c lists them) ------------- */
extern PyMethodDef ampy_py_tensor_methods[];
extern PyMethodDef ampy_py_cast_methods[];
extern PyMethodDef ampy_py_ewise_methods[];
extern PyMethodDef ampy_py_promote_methods[];
extern PyMethodDef ampy_py_reduce_methods[];
extern PyMethodDef ampy_py_index_methods[];
extern PyMethodDef ampy_py_random_methods[];
extern PyMethodDef ampy_py_gemm_methods[];
extern PyMethodDef ampy_py_finite_methods[];
extern PyMethodDef ampy_py_scaler_methods[];
extern PyMethodDef ampy_py_optim_methods[];
extern PyMethodDef ampy_py_runtime_methods[];
extern PyMethodDef ampy_py_nn_methods[];
extern PyMethodDef ampy_py_conv_methods[];
extern PyMethodDef ampy_py_device_methods[]; /* device_py.c (CUDA tensors)   */
extern PyMethodDef ampy_py_dlpack_methods[]; /* dlpack_py.c (DLPack, CAI)    */
/* libampy's enums as module constants (enums_py.c; DLPack's from dlpack_py.c). */
int ampy_py_add_enums(PyObject *m);
int ampy_py_dlpack_add_constants(PyObject *m);

/* ---- CUDA tensors (device_py.c; fail with RuntimeError until ampy._C_cuda
 * registered its entry points) ------------------------------------------- */
AmpyStorage *ampy_py_storage_new_device(size_t nbytes, int device);
/* dst[...] = src read with element strides sstr (dst's shape), either side on
 * a CUDA device. Returns None or NULL with an exception. */
PyObject *ampy_py_device_cast(const AmpyTensor *src, const int64_t *sstr, AmpyTensor *dst);
/* ampy._C_cuda's entry points (ampy/cuda.h's ampy_cuda_api; NULL + RuntimeError
 * when not registered) and its last error raised as a Python exception. */
struct ampy_cuda_api;
const struct ampy_cuda_api *ampy_py_cuda_api(void);
PyObject *ampy_py_raise_cuda(ampy_status s);

#endif /* AMPY_PYAMPY_H */
