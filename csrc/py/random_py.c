/* random_py.c — random and sequence fills of fresh contiguous tensors. */
#include "pyampy.h"

#include "ampy/cuda.h"
#include "ampy/random.h"

static AmpyTensor *contig_cpu_arg(PyObject *o, const char *fn)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, "out");
    if (t && (!ampy_py_is_contiguous(t) || t->device != AMPY_DEV_CPU)) {
        PyErr_Format(PyExc_ValueError, "%s: expects a contiguous CPU tensor", fn);
        return NULL;
    }
    return t && ampy_py_check_write(t, fn, "out", 0) < 0 ? NULL : t;
}

static PyObject *finish(ampy_status s, AmpyTensor *t)
{
    if (s != AMPY_OK)
        return ampy_py_raise(s);
    ampy_py_bump_version(t);
    Py_RETURN_NONE;
}

/* fill_random(t, kind, seed, offset, a, b) */
static PyObject *f_fill_random(PyObject *self, PyObject *args)
{
    PyObject *o;
    int kind;
    unsigned long long seed, offset;
    double a, b;
    if (!PyArg_ParseTuple(args, "OiKKdd:fill_random", &o, &kind, &seed, &offset, &a, &b))
        return NULL;
    AmpyTensor *ct = ampy_py_tensor_arg(o, "fill_random", "out");
    if (ct && ct->device != AMPY_DEV_CPU && ampy_py_is_contiguous(ct)) {
        /* CUDA: cuda/nn.cu draws the same Philox values on the device */
        if (ampy_py_check_write(ct, "fill_random", "out", 0) < 0)
            return NULL;
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api)
            return NULL;
        ampy_status s = api->fill_random(ct->device, ct->data, (ampy_dtype)ct->dtype, ct->numel,
                                         kind, seed, offset, a, b);
        if (s != AMPY_OK)
            return ampy_py_raise_cuda(s);
        ampy_py_bump_version(ct);
        Py_RETURN_NONE;
    }
    AmpyTensor *t = contig_cpu_arg(o, "fill_random");
    if (!t)
        return NULL;
    ampy_status s;
    Py_BEGIN_ALLOW_THREADS
    s = ampy_fill_random(t->data, t->dtype, t->numel, kind, seed, offset, a, b);
    Py_END_ALLOW_THREADS
    return finish(s, t);
}

/* fill_randint(t, seed, offset, low, range): low + uniform [0, range) as
 * exact integers (range 0: 2**64), drawn by ampy_random_below. The caller
 * checks that every value fits t's dtype. */
static PyObject *f_fill_randint(PyObject *self, PyObject *args)
{
    PyObject *o;
    unsigned long long seed, offset, range;
    long long low;
    if (!PyArg_ParseTuple(args, "OKKLK:fill_randint", &o, &seed, &offset, &low, &range))
        return NULL;
    double a, b;
    ampy_random_int_pack((int64_t)low, (uint64_t)range, &a, &b);
    PyObject *r = Py_BuildValue("(OiKKdd)", o, (int)AMPY_RANDOM_INTEGER, seed, offset, a, b);
    if (!r)
        return NULL;
    PyObject *res = f_fill_random(self, r);
    Py_DECREF(r);
    return res;
}

static PyObject *f_fill_arange(PyObject *self, PyObject *args)
{
    PyObject *o;
    double start, step;
    if (!PyArg_ParseTuple(args, "Odd:fill_arange", &o, &start, &step))
        return NULL;
    AmpyTensor *t = contig_cpu_arg(o, "arange");
    return t ? finish(ampy_fill_arange(t->data, t->dtype, t->numel, start, step), t) : NULL;
}

static PyObject *f_fill_linspace(PyObject *self, PyObject *args)
{
    PyObject *o;
    double start, end, step;
    if (!PyArg_ParseTuple(args, "Oddd:fill_linspace", &o, &start, &end, &step))
        return NULL;
    AmpyTensor *t = contig_cpu_arg(o, "linspace");
    return t ? finish(ampy_fill_linspace(t->data, t->dtype, t->numel, start, end, step), t) : NULL;
}

PyMethodDef ampy_py_random_methods[] = {
    {"fill_random", f_fill_random, METH_VARARGS,
     "fill_random(t, kind, seed, offset, a, b)\n--\n\nInternal: Philox random fill."},
    {"fill_randint", f_fill_randint, METH_VARARGS,
     "fill_randint(t, seed, offset, low, range)\n--\n\nInternal: exact Philox integers."},
    {"fill_arange", f_fill_arange, METH_VARARGS,
     "fill_arange(t, start, step)\n--\n\nInternal: t[i] = start + i*step."},
    {"fill_linspace", f_fill_linspace, METH_VARARGS,
     "fill_linspace(t, start, end, step)\n--\n\nInternal: torch.linspace values."},
    {NULL, NULL, 0, NULL},
};
