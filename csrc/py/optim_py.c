/* optim_py.c — binding of the optim concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_optim_methods[] = {
    {NULL, NULL, 0, NULL},
};
