/* enums_py.c — libampy's enums as constants of ampy._C, so Python names the
 * C values instead of retyping them:
 *
 *   EWISE_OPS        {name: op code} of ampy_ewise_op (ewise.h), for _C.ewise
 *   REDUCE_OPS       {name: op code} of ampy_reduce_op (reduce.h); _C.reduce
 *                    takes the names
 *   SCAN_CUMSUM, SCAN_CUMPROD                 _C.scan's op (reduce.h)
 *   RANDOM_UNIFORM, RANDOM_NORMAL, RANDOM_INTEGER, RANDOM_BERNOULLI
 *                                             _C.fill_random's kind (random.h)
 *   NN_REDUCTION_NONE, NN_REDUCTION_MEAN, NN_REDUCTION_SUM
 *                                             the losses' reduction (nn.h)
 *   DLPACK_CPU, DLPACK_CUDA, DLPACK_CUDA_HOST, DLPACK_CUDA_MANAGED
 *                                             DLPack device types (dlpack_py.c)
 *   MAX_DIMS                                  AMPY_MAX_DIMS
 */
#include "pyampy.h"

#include "ampy/ewise.h"
#include "ampy/nn.h"
#include "ampy/random.h"
#include "ampy/reduce.h"

/* {name_fn(i): i for i < n} as module attribute `attr`. */
static int add_name_table(PyObject *m, const char *attr, int n, const char *(*name_fn)(int))
{
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < n; i++) {
        PyObject *v = PyLong_FromLong(i);
        int bad = !v || PyDict_SetItemString(d, name_fn(i), v) < 0;
        Py_XDECREF(v);
        if (bad)
            Py_CLEAR(d);
    }
    if (!d)
        return -1;
    if (PyModule_AddObject(m, attr, d) < 0) {
        Py_DECREF(d);
        return -1;
    }
    return 0;
}

int ampy_py_add_enums(PyObject *m)
{
    static const struct {
        const char *name;
        long value;
    } ints[] = {
        {"MAX_DIMS", AMPY_MAX_DIMS},
        {"SCAN_CUMSUM", AMPY_SCAN_CUMSUM},
        {"SCAN_CUMPROD", AMPY_SCAN_CUMPROD},
        {"RANDOM_UNIFORM", AMPY_RANDOM_UNIFORM},
        {"RANDOM_NORMAL", AMPY_RANDOM_NORMAL},
        {"RANDOM_INTEGER", AMPY_RANDOM_INTEGER},
        {"RANDOM_BERNOULLI", AMPY_RANDOM_BERNOULLI},
        {"NN_REDUCTION_NONE", AMPY_NN_REDUCTION_NONE},
        {"NN_REDUCTION_MEAN", AMPY_NN_REDUCTION_MEAN},
        {"NN_REDUCTION_SUM", AMPY_NN_REDUCTION_SUM},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, ints[i].value) < 0)
            return -1;
    if (add_name_table(m, "EWISE_OPS", AMPY_EW_NUM_OPS, ampy_ewise_op_name) < 0 ||
        add_name_table(m, "REDUCE_OPS", AMPY_RED_NUM_OPS, ampy_reduce_op_name) < 0)
        return -1;
    return ampy_py_dlpack_add_constants(m);
}
