/* runtime_py.c — threads, CPU dispatch level and allocator statistics. */
#include "pyampy.h"

#include <limits.h>

#include "ampy/alloc.h"
#include "ampy/cpu.h"
#include "ampy/parallel.h"

#include <string.h>

static PyObject *f_get_num_threads(PyObject *self, PyObject *u)
{
    return PyLong_FromLong(ampy_get_num_threads());
}

static PyObject *f_set_num_threads(PyObject *self, PyObject *arg)
{
    /* as torch: an int (not a bool) that fits a C int, then positive */
    if (!PyLong_Check(arg) || PyBool_Check(arg)) {
        PyErr_Format(PyExc_RuntimeError, "set_num_threads expects an int, but got %s",
                     Py_TYPE(arg)->tp_name);
        return NULL;
    }
    int over = 0;
    long long n = PyLong_AsLongLongAndOverflow(arg, &over);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (over || n > INT_MAX || n < INT_MIN) {
        PyErr_SetString(PyExc_ValueError, "Overflow when unpacking long");
        return NULL;
    }
    if (n < 1) {
        PyErr_SetString(PyExc_RuntimeError, "set_num_threads expects a positive integer");
        return NULL;
    }
    ampy_set_num_threads((int)n);
    Py_RETURN_NONE;
}

static PyObject *f_cpu_info(PyObject *self, PyObject *u)
{
    unsigned f = ampy_cpu_features();
    return Py_BuildValue("{s:s,s:O,s:O,s:O,s:O,s:O}", "level",
                         ampy_cpu_level_name(ampy_cpu_level_get()), "avx2",
                         (f & AMPY_CPU_HAS_AVX2) ? Py_True : Py_False, "avx512",
                         (f & AMPY_CPU_HAS_AVX512) ? Py_True : Py_False, "avx512_bf16",
                         (f & AMPY_CPU_HAS_AVX512BF16) ? Py_True : Py_False, "avx512_fp16",
                         (f & AMPY_CPU_HAS_AVX512FP16) ? Py_True : Py_False, "amx_bf16",
                         (f & AMPY_CPU_HAS_AMX_BF16) ? Py_True : Py_False);
}

/* _set_cpu_level(name or None): force "portable", "avx2", "avx512",
 * "avx512bf16" or "amx" (clamped to what the CPU has). */
static PyObject *f_set_cpu_level(PyObject *self, PyObject *arg)
{
    if (arg == Py_None) {
        ampy_cpu_level_set(-1);
        Py_RETURN_NONE;
    }
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    for (int l = AMPY_CPU_PORTABLE; l <= AMPY_CPU_AMX; l++)
        if (strcmp(name, ampy_cpu_level_name(l)) == 0) {
            ampy_cpu_level_set(l);
            Py_RETURN_NONE;
        }
    PyErr_Format(PyExc_ValueError, "unknown CPU level %R (portable, avx2, avx512, avx512bf16, amx)", arg);
    return NULL;
}

static PyObject *f_alloc_stats(PyObject *self, PyObject *u)
{
    ampy_alloc_stats s;
    ampy_alloc_get_stats(&s);
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:L,s:L}", "allocated_bytes",
                         (long long)s.allocated_bytes, "peak_allocated_bytes",
                         (long long)s.peak_allocated_bytes, "cached_bytes",
                         (long long)s.cached_bytes, "live_blocks", (long long)s.live_blocks,
                         "cache_hits", (long long)s.cache_hits, "cache_misses",
                         (long long)s.cache_misses);
}

static PyObject *f_empty_cache(PyObject *self, PyObject *u)
{
    ampy_alloc_empty_cache();
    Py_RETURN_NONE;
}

static PyObject *f_reset_peak(PyObject *self, PyObject *u)
{
    ampy_alloc_reset_peak();
    Py_RETURN_NONE;
}

/* shape_numel(shape): prod(shape) with the binding's one overflow rule
 * (ampy_shape_numel), for the Python layer's shape arithmetic. */
static PyObject *f_shape_numel(PyObject *self, PyObject *arg)
{
    int nd;
    int64_t shape[AMPY_MAX_DIMS], numel;
    if (ampy_py_parse_shape(arg, &nd, shape, "shape_numel", "shape") < 0)
        return NULL;
    ampy_status s = ampy_shape_numel(nd, shape, &numel);
    return s == AMPY_OK ? PyLong_FromLongLong(numel) : ampy_py_raise(s);
}

PyMethodDef ampy_py_runtime_methods[] = {
    {"shape_numel", f_shape_numel, METH_O,
     "shape_numel(shape)\n--\n\nNumber of elements; RuntimeError on int64 overflow."},
    {"get_num_threads", f_get_num_threads, METH_NOARGS,
     "get_num_threads()\n--\n\nThreads used by large loops."},
    {"set_num_threads", f_set_num_threads, METH_O,
     "set_num_threads(n)\n--\n\nSet the threads used by large loops."},
    {"cpu_info", f_cpu_info, METH_NOARGS,
     "cpu_info()\n--\n\nDetected CPU features and the SIMD level in use."},
    {"_set_cpu_level", f_set_cpu_level, METH_O,
     "_set_cpu_level(name)\n--\n\nForce a SIMD level; None restores the default."},
    {"alloc_stats", f_alloc_stats, METH_NOARGS,
     "alloc_stats()\n--\n\nHost allocator counters."},
    {"empty_cache", f_empty_cache, METH_NOARGS,
     "empty_cache()\n--\n\nReturn cached host blocks to the OS."},
    {"reset_peak_stats", f_reset_peak, METH_NOARGS,
     "reset_peak_stats()\n--\n\nReset the peak allocated counter."},
    {NULL, NULL, 0, NULL},
};
