/* amp_py.c — binding of ampy/amp_cuda.h: the AMP kernels for CUDA tensors.
 *
 * Same argument lists as ampk's csrc/py/{finite,scaler,optim}_py.c, for
 * CUDA tensors; ampy/cuda/_amp.py is the Python side. Nothing here reads a
 * device value (no sync): the optimizer steps return None, not "stepped".
 * Empty until optim.h / scaler.h exist.
 */
#include "cuda_py.h"

#if __has_include("ampy/optim.h") && __has_include("ampy/scaler.h")
#include "ampy/amp_cuda.h"

/* A list/tuple of n tensors (None allowed where allow_none) into out[n]
 * (borrowed). float_only: float32/float16/bfloat16 contiguous CUDA tensors;
 * f32: float32 only. Returns n or -1. */
static Py_ssize_t tensor_list(PyObject *seq, AmpyTensor ***out, const char *fn, const char *arg,
                              int allow_none, int f32, int *device)
{
    if (!PyList_Check(seq) && !PyTuple_Check(seq)) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a list or tuple of Tensors", fn,
                     arg);
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    AmpyTensor **t = PyMem_Calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (o == Py_None && allow_none)
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s[%zd]", arg, i);
        AmpyTensor *x = ampy_cuda_py_float_contig(o, fn, what);
        if (x && f32 && x->dtype != AMPY_FLOAT32) {
            PyErr_Format(PyExc_TypeError, "%s: %s must be float32", fn, what);
            x = NULL;
        }
        if (x && *device >= 0 && x->device != *device) {
            PyErr_Format(PyExc_ValueError, "%s: %s is on cuda:%d, expected cuda:%d", fn, what,
                         x->device, *device);
            x = NULL;
        }
        /* the AMP kernels write their lists in place: never into read-only memory */
        if (x && ((AmpyStorage *)x->base)->flags && ampy_py_raise_readonly(x, fn, what) < 0)
            x = NULL;
        if (!x) {
            PyMem_Free(t);
            return -1;
        }
        *device = x->device;
        t[i] = x;
    }
    *out = t;
    return n;
}

/* A 1-element float32 (or int32) CUDA tensor, or None when allowed. */
static int scalar_arg(PyObject *o, int dtype, int allow_none, void **ptr, const char *fn,
                      const char *arg, int *device)
{
    *ptr = NULL;
    if (o == Py_None && allow_none)
        return 0;
    AmpyTensor *t = ampy_cuda_py_tensor(o, fn, arg);
    if (!t)
        return -1;
    if (t->dtype != dtype || t->numel != 1) {
        PyErr_Format(PyExc_ValueError, "%s: %s must be a 1-element %s tensor", fn, arg,
                     ampy_dtype_name(dtype));
        return -1;
    }
    if (*device >= 0 && t->device != *device) {
        PyErr_Format(PyExc_ValueError, "%s: %s is on cuda:%d, expected cuda:%d", fn, arg,
                     t->device, *device);
        return -1;
    }
    if (((AmpyStorage *)t->base)->flags)
        return ampy_py_raise_readonly(t, fn, arg);
    *device = t->device;
    *ptr = t->data;
    return 0;
}

static PyObject *done(ampy_status s, AmpyTensor **a, AmpyTensor **b, AmpyTensor **c,
                      AmpyTensor **d, AmpyTensor **e, AmpyTensor **f, AmpyTensor **g, void *h)
{
    PyMem_Free(a), PyMem_Free(b), PyMem_Free(c), PyMem_Free(d), PyMem_Free(e), PyMem_Free(f),
        PyMem_Free(g), PyMem_Free(h);
    if (s != AMPY_OK)
        return PyErr_Occurred() ? NULL : ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

static PyObject *f_unscale(PyObject *self, PyObject *args)
{
    const char *fn = "non_finite_check_and_unscale_";
    PyObject *gl, *fo, *io;
    if (!PyArg_ParseTuple(args, "OOO", &gl, &fo, &io))
        return NULL;
    int dev = -1;
    AmpyTensor **g = NULL;
    void *found, *inv;
    Py_ssize_t n = tensor_list(gl, &g, fn, "grads", 0, 0, &dev);
    if (n < 0 || scalar_arg(fo, AMPY_FLOAT32, 0, &found, fn, "found_inf", &dev) < 0 ||
        scalar_arg(io, AMPY_FLOAT32, 0, &inv, fn, "inv_scale", &dev) < 0)
        return done(AMPY_ERR_VALUE, g, 0, 0, 0, 0, 0, 0, 0);
    void **data = PyMem_Calloc((size_t)n + 1, sizeof *data);
    int64_t *numel = PyMem_Calloc((size_t)n + 1, sizeof *numel);
    int *dt = PyMem_Calloc((size_t)n + 1, sizeof *dt);
    if (!data || !numel || !dt) {
        PyErr_NoMemory();
        PyMem_Free(data), PyMem_Free(numel), PyMem_Free(dt);
        return done(AMPY_ERR_NOMEM, g, 0, 0, 0, 0, 0, 0, 0);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        data[i] = g[i]->data;
        numel[i] = g[i]->numel;
        dt[i] = g[i]->dtype;
    }
    ampy_status s = ampy_finite_check_unscale_cuda(dev, n, data, numel, dt, found, inv);
    for (Py_ssize_t i = 0; s == AMPY_OK && i < n; i++)
        ((AmpyStorage *)g[i]->base)->version++;
    PyMem_Free(numel), PyMem_Free(dt);
    return done(s, g, 0, 0, 0, 0, 0, 0, data);
}

static PyObject *f_update_scale(PyObject *self, PyObject *args)
{
    const char *fn = "update_scale_";
    PyObject *so, *go, *fo, *mino, *maxo, *ho;
    ampy_scaler_options o = {2.0, 0.5, 2000, 1, 0, 0.0, 0, 0.0};
    long long interval;
    int hyst;
    if (!PyArg_ParseTuple(args, "OOOddLOOiO", &so, &go, &fo, &o.growth_factor, &o.backoff_factor,
                          &interval, &mino, &maxo, &hyst, &ho))
        return NULL;
    o.growth_interval = (int64_t)interval;
    o.hysteresis = hyst;
    if (mino != Py_None) {
        o.has_min_scale = 1;
        if ((o.min_scale = PyFloat_AsDouble(mino)) == -1.0 && PyErr_Occurred())
            return NULL;
    }
    if (maxo != Py_None) {
        o.has_max_scale = 1;
        if ((o.max_scale = PyFloat_AsDouble(maxo)) == -1.0 && PyErr_Occurred())
            return NULL;
    }
    int dev = -1;
    void *scale, *tracker, *found, *htr;
    if (scalar_arg(so, AMPY_FLOAT32, 0, &scale, fn, "scale", &dev) < 0 ||
        scalar_arg(go, AMPY_INT32, 0, &tracker, fn, "growth_tracker", &dev) < 0 ||
        scalar_arg(fo, AMPY_FLOAT32, 0, &found, fn, "found_inf", &dev) < 0 ||
        scalar_arg(ho, AMPY_INT32, 1, &htr, fn, "hysteresis_tracker", &dev) < 0)
        return NULL;
    ampy_status s = ampy_scaler_update_cuda(dev, scale, tracker, htr, found, &o);
    return done(s, 0, 0, 0, 0, 0, 0, 0, 0);
}

/* _amp_adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs|None, steps,
 *                 master_params|None, inv_scale|None, found_inf|None,
 *                 lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled) */
static PyObject *f_adam(PyObject *self, PyObject *args)
{
    const char *fn = "adam_step_";
    PyObject *pl, *gl, *ml, *vl, *xl, *sl, *mal, *io, *fo;
    ampy_adam_options o;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOdddddppp", &pl, &gl, &ml, &vl, &xl, &sl, &mal, &io, &fo,
                          &o.lr, &o.beta1, &o.beta2, &o.eps, &o.weight_decay, &o.amsgrad,
                          &o.maximize, &o.decoupled_weight_decay))
        return NULL;
    o.write_grads = 1; /* GradScaler's contract: .grad holds unscaled gradients after step */
    int dev = -1;
    AmpyTensor **p = 0, **g = 0, **m = 0, **v = 0, **x = 0, **st = 0, **ma = 0;
    void *inv, *found;
    Py_ssize_t n = tensor_list(pl, &p, fn, "params", 0, 0, &dev);
    if (n < 0 || tensor_list(gl, &g, fn, "grads", 0, 0, &dev) != n ||
        tensor_list(ml, &m, fn, "exp_avgs", 0, 1, &dev) != n ||
        tensor_list(vl, &v, fn, "exp_avg_sqs", 0, 1, &dev) != n ||
        (xl != Py_None && tensor_list(xl, &x, fn, "max_exp_avg_sqs", 0, 1, &dev) != n) ||
        tensor_list(sl, &st, fn, "steps", 0, 1, &dev) != n ||
        (mal != Py_None && tensor_list(mal, &ma, fn, "master_params", 1, 1, &dev) != n) ||
        scalar_arg(io, AMPY_FLOAT32, 1, &inv, fn, "inv_scale", &dev) < 0 ||
        scalar_arg(fo, AMPY_FLOAT32, 1, &found, fn, "found_inf", &dev) < 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: every tensor list must have %zd entries", fn, n);
        return done(AMPY_ERR_VALUE, p, g, m, v, x, st, ma, 0);
    }
    ampy_adam_tensor *t = PyMem_Calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return done(AMPY_ERR_NOMEM, p, g, m, v, x, st, ma, 0);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (g[i]->numel != p[i]->numel || m[i]->numel != p[i]->numel ||
            v[i]->numel != p[i]->numel || (x && x[i]->numel != p[i]->numel) ||
            (ma && ma[i] && ma[i]->numel != p[i]->numel) || st[i]->numel != 1) {
            PyErr_Format(PyExc_ValueError, "%s: tensor %zd: sizes of param, grad, state and "
                         "master differ (or step is not 1 element)", fn, i);
            return done(AMPY_ERR_VALUE, p, g, m, v, x, st, ma, t);
        }
        t[i] = (ampy_adam_tensor){p[i]->data, ma && ma[i] ? (float *)ma[i]->data : NULL,
                                  g[i]->data, (float *)m[i]->data, (float *)v[i]->data,
                                  x ? (float *)x[i]->data : NULL, (float *)st[i]->data,
                                  p[i]->numel, p[i]->dtype, g[i]->dtype};
    }
    ampy_status s = dev < 0 && n == 0 ? AMPY_OK
                                      : ampy_optim_adam_step_cuda(dev, n, t, &o, inv, found);
    for (Py_ssize_t i = 0; s == AMPY_OK && i < n; i++) {
        ((AmpyStorage *)p[i]->base)->version++;
        if (inv)
            ((AmpyStorage *)g[i]->base)->version++;
    }
    return done(s, p, g, m, v, x, st, ma, t);
}

/* _amp_sgd_step_(params, grads, momentum_buffers (entries may be None when
 *                momentum == 0), master_params|None, inv_scale|None,
 *                found_inf|None, lr, momentum, dampening, nesterov,
 *                weight_decay, maximize, first_flags (list of bools)) */
static PyObject *f_sgd(PyObject *self, PyObject *args)
{
    const char *fn = "sgd_step_";
    PyObject *pl, *gl, *bl, *mal, *io, *fo, *firsts;
    ampy_sgd_options o;
    if (!PyArg_ParseTuple(args, "OOOOOOdddpdpO", &pl, &gl, &bl, &mal, &io, &fo, &o.lr, &o.momentum,
                          &o.dampening, &o.nesterov, &o.weight_decay, &o.maximize, &firsts))
        return NULL;
    o.write_grads = 1; /* as in f_adam */
    int dev = -1;
    AmpyTensor **p = 0, **g = 0, **b = 0, **ma = 0;
    void *inv, *found;
    Py_ssize_t n = tensor_list(pl, &p, fn, "params", 0, 0, &dev);
    if (n < 0 || tensor_list(gl, &g, fn, "grads", 0, 0, &dev) != n ||
        tensor_list(bl, &b, fn, "momentum_buffers", 1, 1, &dev) != n ||
        (mal != Py_None && tensor_list(mal, &ma, fn, "master_params", 1, 1, &dev) != n) ||
        scalar_arg(io, AMPY_FLOAT32, 1, &inv, fn, "inv_scale", &dev) < 0 ||
        scalar_arg(fo, AMPY_FLOAT32, 1, &found, fn, "found_inf", &dev) < 0 ||
        !PySequence_Check(firsts) || PySequence_Size(firsts) != n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: every list must have %zd entries", fn, n);
        return done(AMPY_ERR_VALUE, p, g, b, ma, 0, 0, 0, 0);
    }
    ampy_sgd_tensor *t = PyMem_Calloc((size_t)n + 1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return done(AMPY_ERR_NOMEM, p, g, b, ma, 0, 0, 0, 0);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *fi = PySequence_GetItem(firsts, i);
        int first = fi ? PyObject_IsTrue(fi) : -1;
        Py_XDECREF(fi);
        if (first < 0 || g[i]->numel != p[i]->numel || (b[i] && b[i]->numel != p[i]->numel)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError, "%s: tensor %zd: sizes differ", fn, i);
            return done(AMPY_ERR_VALUE, p, g, b, ma, 0, 0, 0, t);
        }
        t[i] = (ampy_sgd_tensor){p[i]->data, ma && ma[i] ? (float *)ma[i]->data : NULL,
                                 g[i]->data, b[i] ? (float *)b[i]->data : NULL, p[i]->numel,
                                 p[i]->dtype, g[i]->dtype, first};
    }
    ampy_status s = dev < 0 && n == 0 ? AMPY_OK
                                      : ampy_optim_sgd_step_cuda(dev, n, t, &o, inv, found);
    for (Py_ssize_t i = 0; s == AMPY_OK && i < n; i++) {
        ((AmpyStorage *)p[i]->base)->version++;
        if (inv)
            ((AmpyStorage *)g[i]->base)->version++;
    }
    return done(s, p, g, b, ma, 0, 0, 0, t);
}

PyMethodDef ampy_cuda_py_amp_methods[] = {
    {"_amp_non_finite_check_and_unscale_", f_unscale, METH_VARARGS,
     "_amp_non_finite_check_and_unscale_(grads, found_inf, inv_scale)\n--\n\n"},
    {"_amp_update_scale_", f_update_scale, METH_VARARGS,
     "_amp_update_scale_(scale, growth_tracker, found_inf, growth_factor, backoff_factor, "
     "growth_interval, min_scale, max_scale, hysteresis, hysteresis_tracker)\n--\n\n"},
    {"_amp_adam_step_", f_adam, METH_VARARGS, "_amp_adam_step_(...)\n--\n\nSee ampy/cuda/_amp.py."},
    {"_amp_sgd_step_", f_sgd, METH_VARARGS, "_amp_sgd_step_(...)\n--\n\nSee ampy/cuda/_amp.py."},
    {NULL, NULL, 0, NULL},
};

#else /* the AMP-kernel headers have not landed yet */
PyMethodDef ampy_cuda_py_amp_methods[] = {
    {NULL, NULL, 0, NULL},
};
#endif
