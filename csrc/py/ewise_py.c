/* ewise_py.c — binding of the ewise concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_ewise_methods[] = {
    {NULL, NULL, 0, NULL},
};
