/* module_py.c — ampy._C_cuda: module definition and the runtime functions
 * (devices, memory, cuBLAS's search path, the API capsule that ampy._C calls
 * through). Every op reaches the kernels of this module through that table,
 * from ampy._C's bindings (csrc/py): this binding handles no tensors.
 *
 * Importing this module makes no CUDA call: a machine without a GPU or a
 * driver imports it fine, and _device_count() reports why there is no device.
 */
#include "cuda_py.h"

#include "ampy/amp_cuda.h"
#include "ampy/conv_cuda.h"
#include "ampy/clip.h"
#include "ampy/cnn_cuda.h"
#include "ampy/gemm_cuda.h"
#include "ampy/multinomial_cuda.h"
#include "ampy/sort_cuda.h"

#include <limits.h>

PyObject *ampy_cuda_py_raise(ampy_status s)
{
    const char *msg = ampy_last_error();
    PyObject *type;
    switch (s) {
    case AMPY_ERR_DTYPE: type = PyExc_TypeError; break;
    case AMPY_ERR_SHAPE:
    case AMPY_ERR_VALUE: type = PyExc_ValueError; break;
    case AMPY_ERR_INDEX: type = PyExc_IndexError; break;
    case AMPY_ERR_NOMEM: type = PyExc_MemoryError; break;
    default: type = PyExc_RuntimeError; break;
    }
    PyErr_SetString(type, (msg && msg[0]) ? msg : "ampy: CUDA operation failed");
    return NULL;
}

/* ---- runtime functions -------------------------------------------------------- */
/* _device_count() -> (n, reason): never raises; reason is "" when n > 0. */
static PyObject *f_device_count(PyObject *self, PyObject *u)
{
    int n = 0;
    ampy_status s = ampy_cuda_device_count(&n);
    return Py_BuildValue("(is)", n, s == AMPY_OK ? "" : ampy_last_error());
}

/* A device index: an int that fits a C int (never truncated, so 2**32 is
 * not device 0). Returns 0 / -1 with ValueError or TypeError. */
static int device_arg(PyObject *arg, int *d)
{
    int over = 0;
    long long v = PyLong_AsLongLongAndOverflow(arg, &over);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (over || v < INT_MIN || v > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "device index %R is out of range", arg);
        return -1;
    }
    *d = (int)v;
    return 0;
}

static PyObject *f_current_device(PyObject *self, PyObject *u)
{
    int d;
    ampy_status s = ampy_cuda_current_device(&d);
    return s == AMPY_OK ? PyLong_FromLong(d) : ampy_cuda_py_raise(s);
}

static PyObject *f_set_device(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    ampy_status s = ampy_cuda_set_device(d);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

static PyObject *f_synchronize(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    ampy_status s;
    Py_BEGIN_ALLOW_THREADS
    s = ampy_cuda_synchronize(d);
    Py_END_ALLOW_THREADS
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

static PyObject *f_device_name(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    char buf[256];
    ampy_status s = ampy_cuda_device_name(d, buf, sizeof buf);
    return s == AMPY_OK ? PyUnicode_FromString(buf) : ampy_cuda_py_raise(s);
}

static PyObject *f_device_caps(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    int ma, mi, sm;
    ampy_status s = ampy_cuda_device_caps(d, &ma, &mi, &sm);
    return s == AMPY_OK ? Py_BuildValue("(iii)", ma, mi, sm) : ampy_cuda_py_raise(s);
}

static PyObject *f_memory_stats(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    ampy_cuda_mem_stats m;
    ampy_status s = ampy_cuda_memory_stats(d, &m);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    return Py_BuildValue("{sLsLsLsLsL}", "allocated_bytes", (long long)m.allocated,
                         "max_allocated_bytes", (long long)m.max_allocated, "reserved_bytes",
                         (long long)m.reserved, "max_reserved_bytes", (long long)m.max_reserved,
                         "num_alloc_retries_or_mallocs", (long long)m.num_allocs);
}

static PyObject *f_reset_peak(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    ampy_cuda_reset_peak_memory_stats(d);
    Py_RETURN_NONE;
}

static PyObject *f_empty_cache(PyObject *self, PyObject *u)
{
    ampy_status s = ampy_cuda_empty_cache();
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

static PyObject *f_stream(PyObject *self, PyObject *arg)
{
    int d;
    if (device_arg(arg, &d) < 0)
        return NULL;
    void *st = ampy_cuda_stream(d);
    if (!st)
        return ampy_cuda_py_raise(AMPY_ERR_RUNTIME);
    return PyLong_FromVoidPtr(st);
}

static const ampy_cuda_api api_table = {
    .version = AMPY_CUDA_API_VERSION,
    .alloc = ampy_cuda_alloc,
    .free = ampy_cuda_free,
    .memcpy = ampy_cuda_memcpy,
    .cast = ampy_cast_cuda,
    .synchronize = ampy_cuda_synchronize,
    .last_error = ampy_last_error,
    .ewise = ampy_ewise_cuda,
    .reduce = ampy_reduce_cuda,
    .softmax = ampy_softmax_cuda,
    .nn_layer_norm_fwd = ampy_nn_layer_norm_fwd_cuda,
    .nn_layer_norm_bwd = ampy_nn_layer_norm_bwd_cuda,
    .nn_cross_entropy_fwd = ampy_nn_cross_entropy_fwd_cuda,
    .nn_cross_entropy_bwd = ampy_nn_cross_entropy_bwd_cuda,
    .nn_nll_loss_fwd = ampy_nn_nll_loss_fwd_cuda,
    .nn_nll_loss_bwd = ampy_nn_nll_loss_bwd_cuda,
    .nn_embedding_fwd = ampy_nn_embedding_fwd_cuda,
    .nn_embedding_bwd = ampy_nn_embedding_bwd_cuda,
    .nn_mask_scale = ampy_nn_mask_scale_cuda,
    .fill_random = ampy_fill_random_cuda,
    .nn_mse_fwd = ampy_nn_mse_fwd_cuda,
    .nn_mse_bwd = ampy_nn_mse_bwd_cuda,
    .scan = ampy_scan_cuda,
    .fill = ampy_fill_cuda,
    .gemm = ampy_gemm_cuda,
    .index_gather = ampy_index_gather_cuda,
    .index_scatter = ampy_index_scatter_cuda,
    .nonzero_count = ampy_nonzero_cuda,
    .nonzero_fill = ampy_nonzero_fill_cuda,
    .finite_check_unscale = ampy_finite_check_unscale_cuda,
    .scaler_update = ampy_scaler_update_cuda,
    .adam_step = ampy_optim_adam_step_cuda,
    .sgd_step = ampy_optim_sgd_step_cuda,
    .adaptive_step = ampy_optim_adaptive_step_cuda,
    /* conv */
    .conv2d_forward = ampy_conv2d_forward_cuda,
    .conv2d_backward_input = ampy_conv2d_backward_input_cuda,
    .conv2d_backward_weight = ampy_conv2d_backward_weight_cuda,
    .conv_backward_bias = ampy_conv_backward_bias_cuda,
    .rnn_cell_fwd = ampy_rnn_cell_fwd_cuda,
    .rnn_cell_bwd = ampy_rnn_cell_bwd_cuda,
    .attention_fwd = ampy_attention_fwd_cuda, /* attn */
    .attention_bwd = ampy_attention_bwd_cuda,
    /* utils */
    .clip_total_norm = ampy_clip_total_norm_cuda,
    .clip_scale = ampy_clip_scale_cuda,
    .set_matmul_tf32 = ampy_cuda_set_matmul_tf32,
    .get_matmul_tf32 = ampy_cuda_get_matmul_tf32,
    /* cnn, sort */
    .cnn_batch_norm_fwd = ampy_cnn_batch_norm_fwd_cuda,
    .cnn_batch_norm_bwd = ampy_cnn_batch_norm_bwd_cuda,
    .cnn_group_norm_fwd = ampy_cnn_group_norm_fwd_cuda,
    .cnn_group_norm_bwd = ampy_cnn_group_norm_bwd_cuda,
    .cnn_max_pool2d_fwd = ampy_cnn_max_pool2d_fwd_cuda,
    .cnn_max_pool2d_bwd = ampy_cnn_max_pool2d_bwd_cuda,
    .cnn_avg_pool2d_fwd = ampy_cnn_avg_pool2d_fwd_cuda,
    .cnn_avg_pool2d_bwd = ampy_cnn_avg_pool2d_bwd_cuda,
    .cnn_adaptive_avg_pool2d_fwd = ampy_cnn_adaptive_avg_pool2d_fwd_cuda,
    .cnn_adaptive_avg_pool2d_bwd = ampy_cnn_adaptive_avg_pool2d_bwd_cuda,
    .cnn_pad_fwd = ampy_cnn_pad_fwd_cuda,
    .cnn_pad_bwd = ampy_cnn_pad_bwd_cuda,
    .cnn_interp2d_fwd = ampy_cnn_interp2d_fwd_cuda,
    .cnn_interp2d_bwd = ampy_cnn_interp2d_bwd_cuda,
    .sort = ampy_sort_cuda,
    .topk = ampy_topk_cuda,
    .multinomial = ampy_multinomial_cuda,
};

/* _api_entries() -> {name: bool}: which entries of the table are filled
 * (test_cuda_build.py checks every kernel is linked in). */
static PyObject *f_api_entries(PyObject *self, PyObject *u)
{
    const ampy_cuda_api *t = &api_table;
#define E(f) {#f, (const void *)t->f}
    const struct {
        const char *name;
        const void *fn;
    } e[] = {E(alloc), E(free), E(memcpy), E(cast), E(synchronize), E(last_error), E(ewise),
             E(reduce), E(softmax), E(nn_layer_norm_fwd), E(nn_layer_norm_bwd),
             E(nn_cross_entropy_fwd), E(nn_cross_entropy_bwd), E(nn_nll_loss_fwd),
             E(nn_nll_loss_bwd), E(nn_embedding_fwd), E(nn_embedding_bwd), E(nn_mask_scale),
             E(fill_random), E(nn_mse_fwd), E(nn_mse_bwd), E(scan), E(fill), E(gemm),
             E(index_gather), E(index_scatter), E(nonzero_count), E(nonzero_fill),
             E(finite_check_unscale), E(scaler_update), E(adam_step), E(sgd_step),
             E(adaptive_step),
             E(conv2d_forward), E(conv2d_backward_input), E(conv2d_backward_weight),
             E(conv_backward_bias),
             E(rnn_cell_fwd), E(rnn_cell_bwd),
             E(attention_fwd), E(attention_bwd),
             E(clip_total_norm), E(clip_scale), E(set_matmul_tf32), E(get_matmul_tf32),
             /* cnn, sort */
             E(cnn_batch_norm_fwd), E(cnn_batch_norm_bwd), E(cnn_group_norm_fwd),
             E(cnn_group_norm_bwd), E(cnn_max_pool2d_fwd), E(cnn_max_pool2d_bwd),
             E(cnn_avg_pool2d_fwd), E(cnn_avg_pool2d_bwd), E(cnn_adaptive_avg_pool2d_fwd),
             E(cnn_adaptive_avg_pool2d_bwd), E(cnn_pad_fwd), E(cnn_pad_bwd), E(cnn_interp2d_fwd),
             E(cnn_interp2d_bwd), E(sort), E(topk), E(multinomial),
    };
#undef E
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < sizeof e / sizeof e[0]; i++)
        if (PyDict_SetItemString(d, e[i].name, e[i].fn ? Py_True : Py_False) < 0)
            Py_CLEAR(d);
    return d;
}

static PyObject *f_api(PyObject *self, PyObject *u)
{
    return PyCapsule_New((void *)&api_table, "ampy._C_cuda.api", NULL);
}

/* _init(TensorBase, layout): check that ampy._C was built from the same
 * tensor layout as this module: layout is _C._TENSOR_LAYOUT, (version,
 * sizeof AmpyTensor, sizeof AmpyStorage), and TensorBase's basic size must be
 * sizeof AmpyTensor. The kernels behind the table see only data pointers, but
 * pyampy.h is shared with this module, so a mismatch means a stale build:
 * ImportError (ampy.cuda then disables CUDA with a warning). */
static PyObject *f_init(PyObject *self, PyObject *args)
{
    PyObject *type;
    int version;
    Py_ssize_t tensor_size, storage_size;
    if (!PyArg_ParseTuple(args, "O!(inn):_init", &PyType_Type, &type, &version, &tensor_size,
                          &storage_size))
        return NULL;
    Py_ssize_t basic = ((PyTypeObject *)type)->tp_basicsize;
    if (version != AMPY_PY_LAYOUT_VERSION || tensor_size != (Py_ssize_t)sizeof(AmpyTensor) ||
        storage_size != (Py_ssize_t)sizeof(AmpyStorage) || basic != (Py_ssize_t)sizeof(AmpyTensor)) {
        PyErr_Format(PyExc_ImportError,
                     "ampy._C_cuda was built for tensor layout %d (AmpyTensor %zd bytes, "
                     "AmpyStorage %zd bytes) but ampy._C has layout %d (%zd, %zd bytes; "
                     "%s is %zd bytes): rebuild ampy",
                     AMPY_PY_LAYOUT_VERSION, sizeof(AmpyTensor), sizeof(AmpyStorage), version,
                     tensor_size, storage_size, ((PyTypeObject *)type)->tp_name, basic);
        return NULL;
    }
    Py_RETURN_NONE;
}

/* _blas_add_path(dir): a directory searched for libcublas at the first GEMM. */
static PyObject *f_blas_add_path(PyObject *self, PyObject *arg)
{
    const char *dir = PyUnicode_AsUTF8(arg);
    if (!dir)
        return NULL;
    ampy_status s = ampy_cuda_blas_add_path(dir);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

/* set_sync_checks(on) / get_sync_checks(): device-side argument checks raise
 * at the op (a synchronisation each) instead of at the next sync point. */
static PyObject *f_set_sync_checks(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    ampy_cuda_set_sync_checks(on);
    Py_RETURN_NONE;
}

static PyObject *f_get_sync_checks(PyObject *self, PyObject *u)
{
    return PyBool_FromLong(ampy_cuda_get_sync_checks());
}

PyMethodDef ampy_cuda_py_runtime_methods[] = {
    {"set_sync_checks", f_set_sync_checks, METH_O,
     "set_sync_checks(on)\n--\n\nRaise device-side argument errors at the op (syncs)."},
    {"get_sync_checks", f_get_sync_checks, METH_NOARGS, "get_sync_checks()\n--\n\n"},
    {"_init", f_init, METH_VARARGS,
     "_init(TensorBase, layout)\n--\n\nInternal: check _C's tensor layout (_C._TENSOR_LAYOUT)."},
    {"_blas_add_path", f_blas_add_path, METH_O,
     "_blas_add_path(dir)\n--\n\nA directory searched for libcublas at the first GEMM."},
    {"_api", f_api, METH_NOARGS, "_api()\n--\n\nThe capsule of C entry points for ampy._C."},
    {"_api_entries", f_api_entries, METH_NOARGS,
     "_api_entries()\n--\n\n{entry: filled} of the table ampy._C calls through."},
    {"_device_count", f_device_count, METH_NOARGS,
     "_device_count()\n--\n\n(number of devices, reason when 0); never raises."},
    {"current_device", f_current_device, METH_NOARGS, "current_device()\n--\n\n"},
    {"set_device", f_set_device, METH_O, "set_device(device)\n--\n\n"},
    {"synchronize", f_synchronize, METH_O,
     "synchronize(device)\n--\n\nWait for the device's current stream (-1: current)."},
    {"get_device_name", f_device_name, METH_O, "get_device_name(device)\n--\n\n"},
    {"get_device_caps", f_device_caps, METH_O,
     "get_device_caps(device)\n--\n\n(major, minor, multiprocessor count)."},
    {"memory_stats", f_memory_stats, METH_O, "memory_stats(device)\n--\n\n"},
    {"reset_peak_memory_stats", f_reset_peak, METH_O, "reset_peak_memory_stats(device)\n--\n\n"},
    {"empty_cache", f_empty_cache, METH_NOARGS, "empty_cache()\n--\n\n"},
    {"_stream", f_stream, METH_O, "_stream(device)\n--\n\nThe current stream (cudaStream_t)."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *m)
{
    return PyModule_AddFunctions(m, ampy_cuda_py_runtime_methods);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ampy._C_cuda",
    .m_doc = "ampy's CUDA backend: device runtime, caching allocator, kernels, cuBLAS GEMM.",
    .m_size = 0,
    .m_slots = module_slots,
};

__attribute__((visibility("default"))) PyMODINIT_FUNC PyInit__C_cuda(void)
{
    return PyModuleDef_Init(&module_def);
}
