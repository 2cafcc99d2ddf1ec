/* cuda_py.h — declarations of ampy._C_cuda's CPython module (module_py.c,
 * plain C compiled by the host compiler): devices, memory, the capsule of
 * the ampy_cuda_api table. It handles no tensors (ampy._C's bindings do, and
 * call the kernels through the table); pyampy.h is included for the tensor
 * layout that _init checks against ampy._C's.
 */
#ifndef AMPY_CUDA_PY_H
#define AMPY_CUDA_PY_H

#include "pyampy.h"

#include "ampy/cuda.h"

/* The exception for `s` with this module's last message; returns NULL. */
PyObject *ampy_cuda_py_raise(ampy_status s);

extern PyMethodDef ampy_cuda_py_runtime_methods[];

/* cuda/check.cu: device-side argument checks raised at the op (1) or at the
 * next synchronisation (0, the default; AMPY_CUDA_SYNC_CHECKS=1 sets 1). */
void ampy_cuda_set_sync_checks(int on);
int ampy_cuda_get_sync_checks(void);

#endif /* AMPY_CUDA_PY_H */
