/* gemm_py.c — binding of the gemm concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_gemm_methods[] = {
    {NULL, NULL, 0, NULL},
};
