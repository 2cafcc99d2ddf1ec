#include "cuda_py.h"
PyMethodDef ampy_cuda_py_amp_methods[] = {
    {NULL, NULL, 0, NULL},
};
