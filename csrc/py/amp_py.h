/* amp_py.h — tensor-list helpers shared by the AMP-kernel bindings
 * (finite_py.c defines them; scaler_py.c and optim_py.c use them).
 * Every helper raises a TypeError/ValueError naming the function and the
 * argument (with its list index) and returns -1 / NULL on failure.
 */
#ifndef AMPY_AMP_PY_H
#define AMPY_AMP_PY_H

#include "pyampy.h"

/* Owned references to the tensors of a list/tuple argument. */
typedef struct {
    Py_ssize_t n;
    AmpyTensor **t; /* n entries; NULL where the list held None */
} ampy_py_amp_tensors;

#define AMPY_PY_AMP_ALLOW_NONE 1 /* None entries allowed (t[i] = NULL)         */
#define AMPY_PY_AMP_F32 2        /* float32 only (else float32/float16/bfloat16) */
#define AMPY_PY_AMP_WRITE 4      /* written in place: the write check of pyampy.h     */
#define AMPY_PY_AMP_F64 8        /* float64 allowed too                          */

/* The device of one call. Every tensor of one call must be on one device
 * (the CPU or one GPU): *device starts at AMPY_PY_AMP_NO_DEVICE and takes the
 * first tensor's device; a tensor elsewhere is a ValueError naming it. The
 * bindings run every check first, then branch once on *device: libampy for
 * the CPU, the ampy_cuda_api table (ampy/cuda.h) for a GPU. */
#define AMPY_PY_AMP_NO_DEVICE (-2)
int ampy_py_amp_device(const AmpyTensor *t, int *device, const char *fn, const char *what);

/* Every entry: a contiguous Tensor of an allowed dtype on *device. */
int ampy_py_amp_list(PyObject *seq, ampy_py_amp_tensors *out, const char *fn, const char *arg,
                     int flags, int *device);
void ampy_py_amp_list_free(ampy_py_amp_tensors *l);
/* A 1-element tensor of `dtype` on *device: returns its data pointer (device
 * memory for a CUDA tensor: never read it on the host then). */
void *ampy_py_amp_scalar(PyObject *o, int dtype, const char *fn, const char *arg, int *device);
/* Equal shapes of a (from list what_a) and b (from list what_b) at index i. */
int ampy_py_amp_same_shape(const AmpyTensor *a, const AmpyTensor *b, const char *fn,
                           const char *what_a, const char *what_b, Py_ssize_t i);
/* Equal list lengths. */
int ampy_py_amp_len(const ampy_py_amp_tensors *a, const ampy_py_amp_tensors *b, const char *fn,
                    const char *name_a, const char *name_b);

#endif /* AMPY_AMP_PY_H */
