/* clip_py.c — binding of clip.h: the total gradient norm and the in-place
 * scale of torch.nn.utils.clip_grad_norm_, over a list of contiguous
 * float tensors of one device (CPU, or one GPU through the ampy_cuda_api
 * table).
 *
 * The total norm follows torch's dtypes (clip.h): each tensor's norm is
 * rounded to that tensor's dtype (torch's _foreach_norm), and the norm of
 * the norms to the dtype of `out`, which the caller makes the promoted dtype
 * of the tensors (torch.stack). Both results stay on the tensors' device.
 */

#include "pyampy.h"

#include "amp_py.h"
#include "ampy/clip.h"
#include "ampy/cuda.h"
#include "ampy/elem.h"

typedef struct {
    ampy_py_amp_tensors g;
    void **data;
    int64_t *numel;
    int *dtype;
    int64_t total;
} clip_list;

static void list_free(clip_list *l)
{
    PyMem_Free(l->data);
    PyMem_Free(l->numel);
    PyMem_Free(l->dtype);
    ampy_py_amp_list_free(&l->g);
}

static int list_get(PyObject *seq, clip_list *l, const char *fn, int flags, int *dev)
{
    memset(l, 0, sizeof *l);
    if (ampy_py_amp_list(seq, &l->g, fn, "tensors", flags | AMPY_PY_AMP_F64, dev) < 0)
        return -1;
    size_t n = (size_t)l->g.n + 1;
    l->data = PyMem_Calloc(n, sizeof *l->data);
    l->numel = PyMem_Calloc(n, sizeof *l->numel);
    l->dtype = PyMem_Calloc(n, sizeof *l->dtype);
    if (!l->data || !l->numel || !l->dtype) {
        list_free(l);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < l->g.n; i++) {
        l->data[i] = l->g.t[i]->data;
        l->numel[i] = l->g.t[i]->numel;
        l->dtype[i] = l->g.t[i]->dtype;
        l->total += l->g.t[i]->numel;
    }
    return 0;
}

/* out / coef: a 1-element float tensor on the device of the list. */
static AmpyTensor *scalar_arg(PyObject *o, const char *fn, const char *arg, int *dev)
{
    if (!ampy_py_is_tensor(o)) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a 1-element Tensor, not %s", fn,
                     arg, Py_TYPE(o)->tp_name);
        return NULL;
    }
    AmpyTensor *t = (AmpyTensor *)o;
    if (!(t->dtype == AMPY_FLOAT32 || t->dtype == AMPY_FLOAT64 || ampy_dtype_is_half(t->dtype)) ||
        t->numel != 1) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be a 1-element floating tensor, got %lld "
                     "elements of %s", fn, arg, (long long)t->numel, ampy_dtype_name(t->dtype));
        return NULL;
    }
    return ampy_py_amp_device(t, dev, fn, arg) < 0 ? NULL : t;
}

static PyObject *fail(ampy_status s, int dev, clip_list *l)
{
    if (!PyErr_Occurred())
        dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    list_free(l);
    return NULL;
}

static PyObject *f_total_norm(PyObject *self, PyObject *args)
{
    static const char *fn = "clip_total_norm";
    PyObject *seq, *out_o;
    double p;
    if (!PyArg_ParseTuple(args, "OdO:clip_total_norm", &seq, &p, &out_o))
        return NULL;
    if (p != p) {
        PyErr_SetString(PyExc_ValueError, "clip_total_norm: norm_type must not be NaN");
        return NULL;
    }
    int dev = AMPY_PY_AMP_NO_DEVICE;
    clip_list l;
    if (list_get(seq, &l, fn, 0, &dev) < 0)
        return NULL;
    AmpyTensor *out = scalar_arg(out_o, fn, "out", &dev);
    if (!out || ampy_py_check_write(out, fn, "out", 0) < 0) {
        list_free(&l);
        return NULL;
    }
    const void *const *data = (const void *const *)l.data;
    ampy_status s;
    if (dev >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        s = api ? api->clip_total_norm(dev, l.g.n, data, l.numel, l.dtype, p, out->dtype,
                                       out->data)
                : AMPY_ERR_RUNTIME;
    } else {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_clip_total_norm(l.g.n, data, l.numel, l.dtype, p, out->dtype, out->data);
        Py_END_ALLOW_THREADS
    }
    if (s != AMPY_OK)
        return fail(s, dev, &l);
    ampy_py_bump_version(out);
    list_free(&l);
    Py_RETURN_NONE;
}

static double host_value(const AmpyTensor *t)
{
    switch (t->dtype) {
    case AMPY_FLOAT16: return ampy_f16_to_f32(*(const uint16_t *)t->data);
    case AMPY_BFLOAT16: return ampy_bf16_to_f32(*(const uint16_t *)t->data);
    case AMPY_FLOAT32: return *(const float *)t->data;
    default: return *(const double *)t->data;
    }
}

static PyObject *f_scale(PyObject *self, PyObject *args)
{
    static const char *fn = "clip_scale_";
    PyObject *seq, *coef_o;
    if (!PyArg_ParseTuple(args, "OO:clip_scale_", &seq, &coef_o))
        return NULL;
    int dev = AMPY_PY_AMP_NO_DEVICE;
    clip_list l;
    if (list_get(seq, &l, fn, AMPY_PY_AMP_WRITE, &dev) < 0)
        return NULL;
    AmpyTensor *coef = scalar_arg(coef_o, fn, "coef", &dev);
    if (!coef) {
        list_free(&l);
        return NULL;
    }
    ampy_status s;
    if (dev >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        s = api ? api->clip_scale(dev, l.g.n, l.data, l.numel, l.dtype, coef->data, coef->dtype)
                : AMPY_ERR_RUNTIME;
    } else {
        double c = host_value(coef);
        if (l.total >= AMPY_PY_GIL_RELEASE_MIN) {
            Py_BEGIN_ALLOW_THREADS
            s = ampy_clip_scale(l.g.n, l.data, l.numel, l.dtype, c);
            Py_END_ALLOW_THREADS
        } else {
            s = ampy_clip_scale(l.g.n, l.data, l.numel, l.dtype, c);
        }
    }
    if (s != AMPY_OK)
        return fail(s, dev, &l);
    for (Py_ssize_t i = 0; i < l.g.n; i++)
        if (l.g.t[i]->numel)
            ampy_py_bump_version(l.g.t[i]);
    list_free(&l);
    Py_RETURN_NONE;
}

PyMethodDef ampy_py_clip_methods[] = {
    {"clip_total_norm", f_total_norm, METH_VARARGS,
     "clip_total_norm($module, tensors, norm_type, out, /)\n--\n\n"
     "Write into the 1-element tensor out the norm_type-norm of the per-tensor norms of\n"
     "contiguous float tensors of one device, each rounded to its tensor's dtype, the total\n"
     "rounded to out's dtype (torch's clip_grad_norm_ total). One pass over all elements."},
    {"clip_scale_", f_scale, METH_VARARGS,
     "clip_scale_($module, tensors, coef, /)\n--\n\n"
     "Multiply every element of contiguous float tensors of one device by the 1-element\n"
     "tensor coef in place (halves and float32 in float32, float64 in double)."},
    {NULL, NULL, 0, NULL},
};
