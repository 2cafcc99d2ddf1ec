/* reduce_py.c — binding of the reduce concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_reduce_methods[] = {
    {NULL, NULL, 0, NULL},
};
