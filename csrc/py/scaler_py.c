/* scaler_py.c — binding of the scaler concern (filled in by its own work item). */
#include "pyampy.h"

PyMethodDef ampy_py_scaler_methods[] = {
    {NULL, NULL, 0, NULL},
};
