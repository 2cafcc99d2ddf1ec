/* backends_py.c — the CUDA GEMM math-mode flag behind
 * ampy.backends.cuda.matmul.allow_tf32 / ampy.set_float32_matmul_precision:
 * passed through the ampy_cuda_api table to cuda/blas.cu, which picks
 * cuBLAS's TF32 compute type for float32 GEMMs while it is set.
 */
#include "pyampy.h"

#include "ampy/cuda.h"

/* The registered table, or NULL with no exception when ampy._C_cuda is not
 * loaded (then there is no CUDA GEMM to configure). */
static const ampy_cuda_api *table_or_null(void)
{
    const ampy_cuda_api *api = ampy_py_cuda_api();
    if (!api)
        PyErr_Clear();
    return api;
}

static PyObject *f_set_tf32(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    const ampy_cuda_api *api = table_or_null();
    if (!api)
        Py_RETURN_FALSE;
    api->set_matmul_tf32(on);
    Py_RETURN_TRUE;
}

static PyObject *f_get_tf32(PyObject *self, PyObject *unused)
{
    const ampy_cuda_api *api = table_or_null();
    if (!api)
        Py_RETURN_NONE;
    return PyBool_FromLong(api->get_matmul_tf32());
}

PyMethodDef ampy_py_backends_methods[] = {
    {"_cuda_set_matmul_tf32", f_set_tf32, METH_O,
     "_cuda_set_matmul_tf32($module, allow, /)\n--\n\n"
     "Set the CUDA module's float32 GEMM compute type: TF32 tensor cores when allow is true,\n"
     "full float32 otherwise. Returns False when ampy._C_cuda is not loaded."},
    {"_cuda_get_matmul_tf32", f_get_tf32, METH_NOARGS,
     "_cuda_get_matmul_tf32($module, /)\n--\n\n"
     "The flag as the CUDA module holds it (None when ampy._C_cuda is not loaded)."},
    {NULL, NULL, 0, NULL},
};
