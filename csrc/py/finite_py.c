/* finite_py.c — binding of the finite concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_finite_methods[] = {
    {NULL, NULL, 0, NULL},
};
