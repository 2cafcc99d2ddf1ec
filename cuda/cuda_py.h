/* cuda_py.h — shared declarations of ampy._C_cuda's CPython binding
 * (the cuda/..._py.c files, plain C compiled by the host compiler).
 *
 * The binding reads ampy tensors through the AmpyTensor layout of
 * csrc/py/pyampy.h (the same struct ampy._C defines); it never creates
 * tensors: the Python adapters (ampy/cuda/_ops.py) allocate outputs with
 * ampy._C._empty_device and pass them in. The tensor type is handed over by
 * _C_cuda._init(TensorBase) at import.
 */
#ifndef AMPY_CUDA_PY_H
#define AMPY_CUDA_PY_H

#include "pyampy.h"

#include "ampy/cuda.h"

extern PyTypeObject *ampy_cuda_py_tensor_type;

/* The exception for `s` with this module's last message; returns NULL. */
PyObject *ampy_cuda_py_raise(ampy_status s);
/* `o` as a CUDA tensor (device >= 0), else NULL + TypeError/ValueError
 * naming fn and arg. */
AmpyTensor *ampy_cuda_py_tensor(PyObject *o, const char *fn, const char *arg);
/* Same, and contiguous and of one of the float dtypes float32/16/bf16. */
AmpyTensor *ampy_cuda_py_float_contig(PyObject *o, const char *fn, const char *arg);

extern PyMethodDef ampy_cuda_py_runtime_methods[];
extern PyMethodDef ampy_cuda_py_ops_methods[];

/* cuda/check.cu: device-side argument checks raised at the op (1) or at the
 * next synchronisation (0, the default; AMPY_CUDA_SYNC_CHECKS=1 sets 1). */
void ampy_cuda_set_sync_checks(int on);
int ampy_cuda_get_sync_checks(void);

#endif /* AMPY_CUDA_PY_H */
