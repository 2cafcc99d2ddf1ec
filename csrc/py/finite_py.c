/* finite_py.c — binding of finite.h (non-finite check + unscale), plus the
 * tensor-list helpers shared with scaler_py.c and optim_py.c (declared in
 * amp_py.h next to this file).
 */
#include "pyampy.h"

#include "amp_py.h"
#include "ampy/cuda.h"
#include "ampy/finite.h"

/* ---- shared helpers --------------------------------------------------------- */

int ampy_py_amp_device(const AmpyTensor *t, int *device, const char *fn, const char *what)
{
    if (*device == AMPY_PY_AMP_NO_DEVICE || *device == t->device) {
        *device = t->device;
        return 0;
    }
    char had[16], got[16];
    snprintf(had, sizeof had, *device == AMPY_DEV_CPU ? "cpu" : "cuda:%d", *device);
    snprintf(got, sizeof got, t->device == AMPY_DEV_CPU ? "cpu" : "cuda:%d", t->device);
    PyErr_Format(PyExc_ValueError, "%s: %s is on %s but the tensors before it are on %s; every "
                 "tensor of one call must be on one device", fn, what, got, had);
    return -1;
}

int ampy_py_amp_list(PyObject *seq, ampy_py_amp_tensors *out, const char *fn, const char *arg,
                     int flags, int *device)
{
    out->n = 0;
    out->t = NULL;
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a list or tuple of Tensors, not %s",
                     fn, arg, Py_TYPE(seq)->tp_name);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    AmpyTensor **t = PyMem_Calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    out->t = t;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        char what[96];
        snprintf(what, sizeof what, "%s[%zd]", arg, i);
        if (o == Py_None && (flags & AMPY_PY_AMP_ALLOW_NONE))
            continue;
        if (!ampy_py_is_tensor(o)) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be a Tensor, not %s", fn, what,
                         Py_TYPE(o)->tp_name);
            goto fail;
        }
        AmpyTensor *x = (AmpyTensor *)o;
        int f32_only = (flags & AMPY_PY_AMP_F32) != 0, f64 = (flags & AMPY_PY_AMP_F64) != 0;
        if (f32_only ? x->dtype != AMPY_FLOAT32
                     : !(x->dtype == AMPY_FLOAT32 || ampy_dtype_is_half(x->dtype) ||
                         (f64 && x->dtype == AMPY_FLOAT64))) {
            PyErr_Format(PyExc_TypeError, "%s: %s has dtype %s; expected %s", fn, what,
                         ampy_dtype_name(x->dtype),
                         f32_only ? "float32"
                         : f64    ? "float32, float16, bfloat16 or float64"
                                  : "float32, float16 or bfloat16");
            goto fail;
        }
        if (ampy_py_amp_device(x, device, fn, what) < 0)
            goto fail;
        if (x->numel > 1 && !ampy_py_is_contiguous(x)) {
            PyErr_Format(PyExc_ValueError, "%s: %s is not contiguous (call .contiguous() first)",
                         fn, what);
            goto fail;
        }
        if ((flags & AMPY_PY_AMP_WRITE) && ampy_py_check_write(x, fn, what, 0) < 0)
            goto fail;
        Py_INCREF(o);
        t[i] = x;
        out->n = i + 1;
    }
    out->n = n;
    return 0;
fail:
    ampy_py_amp_list_free(out);
    return -1;
}

void ampy_py_amp_list_free(ampy_py_amp_tensors *l)
{
    if (l->t) {
        for (Py_ssize_t i = 0; i < l->n; i++)
            Py_XDECREF((PyObject *)l->t[i]);
        PyMem_Free(l->t);
    }
    l->t = NULL;
    l->n = 0;
}

void *ampy_py_amp_scalar(PyObject *o, int dtype, const char *fn, const char *arg, int *device)
{
    if (!ampy_py_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a 1-element %s Tensor, not %s", fn,
                     arg, ampy_dtype_name(dtype), Py_TYPE(o)->tp_name);
        return NULL;
    }
    AmpyTensor *t = (AmpyTensor *)o;
    if (t->dtype != dtype) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a %s tensor, got %s", fn, arg,
                     ampy_dtype_name(dtype), ampy_dtype_name(t->dtype));
        return NULL;
    }
    if (t->numel != 1) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be a 1-element tensor, got %lld elements",
                     fn, arg, (long long)t->numel);
        return NULL;
    }
    if (ampy_py_amp_device(t, device, fn, arg) < 0)
        return NULL;
    return t->data;
}

int ampy_py_amp_same_shape(const AmpyTensor *a, const AmpyTensor *b, const char *fn,
                           const char *what_a, const char *what_b, Py_ssize_t i)
{
    int same = a->ndim == b->ndim;
    for (int d = 0; same && d < a->ndim; d++)
        same = a->shape[d] == b->shape[d];
    if (same)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: %s[%zd] has %lld elements in %d dims but %s[%zd] has %lld "
                                   "in %d dims (shapes must match)",
                 fn, what_b, i, (long long)b->numel, b->ndim, what_a, i, (long long)a->numel,
                 a->ndim);
    return -1;
}

int ampy_py_amp_len(const ampy_py_amp_tensors *a, const ampy_py_amp_tensors *b, const char *fn,
                    const char *name_a, const char *name_b)
{
    if (a->n == b->n)
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: '%s' has %zd tensors but '%s' has %zd", fn, name_b, b->n,
                 name_a, a->n);
    return -1;
}

/* ---- non_finite_check_and_unscale_ -------------------------------------------- */

/* The kernel over the checked list: libampy on the CPU (inv_scale read on the
 * host), cuda/amp.cu through the table for CUDA tensors (read on the device). */
static ampy_status run_unscale(int device, const ampy_py_amp_tensors *g, void **data,
                               const int64_t *numel, const int *dtype, float *found,
                               const float *inv, int64_t total, int *wrote)
{
    if (device >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api)
            return AMPY_ERR_RUNTIME;
        *wrote = 1;
        return api->finite_check_unscale(device, g->n, data, numel, dtype, found, inv);
    }
    float inv_v = *inv;
    *wrote = inv_v != 1.0f;
    ampy_status s;
    if (total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_finite_check_unscale(g->n, data, numel, dtype, found, &inv_v);
        Py_END_ALLOW_THREADS
    } else {
        s = ampy_finite_check_unscale(g->n, data, numel, dtype, found, &inv_v);
    }
    return s;
}

static PyObject *f_unscale(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fn = "non_finite_check_and_unscale_";
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(grads, found_inf, inv_scale) takes 3 arguments, got %zd",
                     fn, nargs);
        return NULL;
    }
    int dev = AMPY_PY_AMP_NO_DEVICE;
    float *found = ampy_py_amp_scalar(args[1], AMPY_FLOAT32, fn, "found_inf", &dev);
    float *inv = found ? ampy_py_amp_scalar(args[2], AMPY_FLOAT32, fn, "inv_scale", &dev) : NULL;
    if (!inv || ampy_py_check_write((AmpyTensor *)args[1], fn, "found_inf", 0) < 0)
        return NULL;
    ampy_py_amp_tensors g;
    if (ampy_py_amp_list(args[0], &g, fn, "grads", AMPY_PY_AMP_WRITE | AMPY_PY_AMP_F64, &dev) < 0)
        return NULL;
    PyObject *result = NULL;
    void **data = PyMem_Calloc((size_t)g.n + 1, sizeof *data);
    int64_t *numel = PyMem_Calloc((size_t)g.n + 1, sizeof *numel);
    int *dtype = PyMem_Calloc((size_t)g.n + 1, sizeof *dtype);
    if (!data || !numel || !dtype) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < g.n; i++) {
        AmpyTensor *x = g.t[i];
        if ((char *)found >= x->data &&
            (char *)found < x->data + x->numel * (int64_t)ampy_dtype_size(x->dtype)) {
            PyErr_Format(PyExc_ValueError, "%s: found_inf overlaps grads[%zd]", fn, i);
            goto done;
        }
        data[i] = x->data;
        numel[i] = x->numel;
        dtype[i] = x->dtype;
        total += x->numel;
    }
    int wrote = 0;
    ampy_status s = run_unscale(dev, &g, data, numel, dtype, found, inv, total, &wrote);
    if (s != AMPY_OK) {
        if (!PyErr_Occurred())
            dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
        goto done;
    }
    ampy_py_bump_version((AmpyTensor *)args[1]);
    if (wrote)
        for (Py_ssize_t i = 0; i < g.n; i++)
            if (g.t[i]->numel)
                ampy_py_bump_version(g.t[i]);
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(data);
    PyMem_Free(numel);
    PyMem_Free(dtype);
    ampy_py_amp_list_free(&g);
    return result;
}

PyMethodDef ampy_py_finite_methods[] = {
    {"_amp_non_finite_check_and_unscale_", (PyCFunction)(void (*)(void))f_unscale, METH_FASTCALL,
     "_amp_non_finite_check_and_unscale_($module, grads, found_inf, inv_scale, /)\n--\n\n"
     "In place over contiguous float32/float16/bfloat16/float64 grads (CPU; CUDA without\n"
     "float64): set found_inf[0] = 1.0 if\n"
     "any value is inf/NaN (or becomes inf when multiplied by inv_scale[0]), and multiply\n"
     "every value by inv_scale[0] unless it is 1. See csrc/include/ampy/finite.h."},
    {NULL, NULL, 0, NULL},
};
