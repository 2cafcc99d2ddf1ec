/* module.c — ampy._C: module definition, error mapping, shared state.
 *
 * Multi-phase initialisation (PEP 489). The binding keeps its process-wide
 * objects (the Tensor types, the dtype singletons) in `ampy_py`: ampy is
 * imported once per process and does not support sub-interpreters.
 */
#define AMPY_PY_DEFINE_ARRAY_API
#include "pyampy.h"

AmpyPyGlobals ampy_py;

PyObject *ampy_py_raise(ampy_status s)
{
    const char *msg = ampy_last_error();
    PyObject *type;
    switch (s) {
    case AMPY_ERR_DTYPE: type = PyExc_TypeError; break;
    case AMPY_ERR_SHAPE: type = PyExc_ValueError; break;
    case AMPY_ERR_VALUE: type = PyExc_ValueError; break;
    case AMPY_ERR_INDEX: type = PyExc_IndexError; break;
    case AMPY_ERR_NOMEM: type = PyExc_MemoryError; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, (msg && msg[0]) ? msg : "ampy: operation failed");
    return NULL;
}

int ampy_py_raise_int(ampy_status s)
{
    ampy_py_raise(s);
    return -1;
}

/* _C._init(tensor_type, dtypes, np_dtypes, size_type): called once by
 * ampy/__init__.py to hand the binding its Python-level objects. */
static PyObject *py_init(PyObject *self, PyObject *args)
{
    PyObject *ttype, *dtypes, *npdtypes, *size_type;
    if (!PyArg_ParseTuple(args, "O!O!O!O:_init", &PyType_Type, &ttype, &PyTuple_Type, &dtypes,
                          &PyTuple_Type, &npdtypes, &size_type))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)ttype, &AmpyTensorBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "_init: tensor_type must subclass TensorBase");
        return NULL;
    }
    if (PyTuple_GET_SIZE(dtypes) != AMPY_NUM_DTYPES || PyTuple_GET_SIZE(npdtypes) != AMPY_NUM_DTYPES) {
        PyErr_SetString(PyExc_ValueError, "_init: expected one dtype per ampy dtype code");
        return NULL;
    }
    Py_INCREF(ttype);
    Py_XSETREF(ampy_py.tensor_type, (PyTypeObject *)ttype);
    for (int i = 0; i < AMPY_NUM_DTYPES; i++) {
        PyObject *d = PyTuple_GET_ITEM(dtypes, i), *nd = PyTuple_GET_ITEM(npdtypes, i);
        Py_INCREF(d);
        Py_XSETREF(ampy_py.dtypes[i], d);
        Py_INCREF(nd);
        Py_XSETREF(ampy_py.np_dtypes[i], nd);
    }
    Py_INCREF(size_type);
    Py_XSETREF(ampy_py.size_type, size_type);
    Py_RETURN_NONE;
}

extern PyMethodDef ampy_py_fused_methods[]; /* fused_py.c */
extern PyMethodDef ampy_py_tensorops_methods[]; /* tensorops_py.c */
extern PyMethodDef ampy_py_attention_methods[]; /* attention_py.c */
extern PyMethodDef ampy_py_clip_methods[], ampy_py_backends_methods[]; /* clip_py.c, backends_py.c */
extern PyMethodDef ampy_py_cnn_methods[], ampy_py_cnn_pool_methods[]; /* cnn_py.c, cnn_pool_py.c */
extern PyMethodDef ampy_py_cnn_pool3d_methods[]; /* cnn_pool3d_py.c */

static PyMethodDef module_methods[] = {
    {"_init", py_init, METH_VARARGS, "_init(tensor_type, dtypes, np_dtypes, size_type)\n--\n\n"
                                     "Internal: register the Python-level objects."},
    {NULL, NULL, 0, NULL},
};

static int add_methods(PyObject *m, PyMethodDef *defs)
{
    return PyModule_AddFunctions(m, defs);
}

static int module_exec(PyObject *m)
{
    if (PyArray_ImportNumPyAPI() < 0)
        return -1;
    if (PyType_Ready(&AmpyStorage_Type) < 0 || PyType_Ready(&AmpyTensorBase_Type) < 0)
        return -1;
    ampy_py.tensor_base_type = &AmpyTensorBase_Type;
    Py_INCREF(&AmpyTensorBase_Type);
    if (PyModule_AddObject(m, "TensorBase", (PyObject *)&AmpyTensorBase_Type) < 0) {
        Py_DECREF(&AmpyTensorBase_Type);
        return -1;
    }
    Py_INCREF(&AmpyStorage_Type);
    if (PyModule_AddObject(m, "Storage", (PyObject *)&AmpyStorage_Type) < 0) {
        Py_DECREF(&AmpyStorage_Type);
        return -1;
    }
    PyMethodDef *tables[] = {
        module_methods,          ampy_py_tensor_methods, ampy_py_cast_methods,
        ampy_py_ewise_methods,   ampy_py_promote_methods, ampy_py_reduce_methods,
        ampy_py_index_methods,   ampy_py_random_methods, ampy_py_gemm_methods,
        ampy_py_finite_methods,
        ampy_py_scaler_methods,  ampy_py_optim_methods,  ampy_py_runtime_methods,
        ampy_py_device_methods,  ampy_py_dlpack_methods, /* CUDA, DLPack */
        ampy_py_nn_methods,      ampy_py_fused_methods,
        ampy_py_optim_adaptive_methods,
        ampy_py_cnn_methods,     ampy_py_cnn_pool_methods,
        ampy_py_cnn_pool3d_methods,
        ampy_py_conv_methods,
        ampy_py_rnn_methods,
        ampy_py_tensorops_methods,
        ampy_py_attention_methods,
        ampy_py_clip_methods,    ampy_py_backends_methods,
    };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        if (add_methods(m, tables[i]) < 0)
            return -1;
    /* (version, sizeof AmpyTensor, sizeof AmpyStorage): checked by _C_cuda._init */
    PyObject *layout = Py_BuildValue("(inn)", AMPY_PY_LAYOUT_VERSION, (Py_ssize_t)sizeof(AmpyTensor),
                                     (Py_ssize_t)sizeof(AmpyStorage));
    if (!layout || PyModule_AddObject(m, "_TENSOR_LAYOUT", layout) < 0) {
        Py_XDECREF(layout);
        return -1;
    }
    return ampy_py_add_enums(m);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ampy._C",
    .m_doc = "ampy's C core: tensors, casts and the AMP kernels.",
    .m_size = 0,
    .m_methods = NULL,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit__C(void) { return PyModuleDef_Init(&module_def); }
