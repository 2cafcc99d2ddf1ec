/* optim_py.c — binding of optim.h (fused SGD / Adam / AdamW steps). The
 * Python-level signatures and docs live in ampy/amp/functional.py; here every
 * argument is checked (naming it, with its list index) before any memory is
 * touched, then libampy runs with the GIL released for large steps.
 */
#include "pyampy.h"

#include "amp_py.h"
#include "ampy/optim.h"

static int get_double(PyObject *o, double *out, const char *fn, const char *arg)
{
    if (!PyFloat_Check(o) && !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a float, not %s", fn, arg,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int get_bool(PyObject *o, int *out)
{
    int v = PyObject_IsTrue(o);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Optional 1-element float32 tensor (None -> NULL, *ok stays 1). */
static const float *opt_scalar(PyObject *o, const char *fn, const char *arg, int *ok)
{
    if (o == Py_None)
        return NULL;
    const float *p = ampy_py_amp_scalar(o, AMPY_FLOAT32, fn, arg);
    if (!p)
        *ok = 0;
    return p;
}

/* The lists every optimizer shares: params, grads and (optional) masters. */
typedef struct {
    ampy_py_amp_tensors p, g, m;
    int64_t total;
} common_lists;

static void common_free(common_lists *c)
{
    ampy_py_amp_list_free(&c->p);
    ampy_py_amp_list_free(&c->g);
    ampy_py_amp_list_free(&c->m);
}

static int parse_common(common_lists *c, PyObject *params, PyObject *grads, PyObject *masters,
                        int grads_written, const char *fn)
{
    memset(c, 0, sizeof *c);
    if (ampy_py_amp_list(params, &c->p, fn, "params", AMPY_PY_AMP_WRITE) < 0 ||
        ampy_py_amp_list(grads, &c->g, fn, "grads", grads_written ? AMPY_PY_AMP_WRITE : 0) < 0 ||
        ampy_py_amp_len(&c->p, &c->g, fn, "params", "grads") < 0)
        return -1;
    if (masters != Py_None) {
        if (ampy_py_amp_list(masters, &c->m, fn, "master_params",
                             AMPY_PY_AMP_ALLOW_NONE | AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE) < 0 ||
            ampy_py_amp_len(&c->p, &c->m, fn, "params", "master_params") < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < c->p.n; i++) {
        AmpyTensor *p = c->p.t[i];
        AmpyTensor *m = c->m.t ? c->m.t[i] : NULL;
        if (ampy_py_amp_same_shape(p, c->g.t[i], fn, "params", "grads", i) < 0)
            return -1;
        if (p->dtype == AMPY_FLOAT32 && m) {
            PyErr_Format(PyExc_ValueError, "%s: params[%zd] is float32 and is updated directly; "
                                           "master_params[%zd] must be None",
                         fn, i, i);
            return -1;
        }
        if (p->dtype != AMPY_FLOAT32 && !m) {
            PyErr_Format(PyExc_ValueError, "%s: params[%zd] is %s and needs a float32 master copy "
                                           "in master_params[%zd]",
                         fn, i, ampy_dtype_name(p->dtype), i);
            return -1;
        }
        if (m && ampy_py_amp_same_shape(p, m, fn, "params", "master_params", i) < 0)
            return -1;
        c->total += p->numel;
    }
    return 0;
}

/* A float32 state list matching params element for element. */
static int parse_state(ampy_py_amp_tensors *s, PyObject *seq, const common_lists *c,
                       const char *fn, const char *arg, int allow_none)
{
    const int flags = AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE | (allow_none ? AMPY_PY_AMP_ALLOW_NONE : 0);
    if (ampy_py_amp_list(seq, s, fn, arg, flags) < 0 ||
        ampy_py_amp_len(&c->p, s, fn, "params", arg) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < s->n; i++)
        if (s->t[i] && ampy_py_amp_same_shape(c->p.t[i], s->t[i], fn, "params", arg, i) < 0)
            return -1;
    return 0;
}

static void bump_all(ampy_py_amp_tensors *l)
{
    for (Py_ssize_t i = 0; i < l->n; i++)
        if (l->t && l->t[i])
            ampy_py_bump_version(l->t[i]);
}

/* ---- SGD -------------------------------------------------------------------- */

/* Gradients written back (write_grads with an inv_scale != 1, applied or
 * skipped step alike): their versions move. */
static int grads_written(int write, const float *inv)
{
    return write && inv && *inv != 1.0f;
}

static void bump_grads(ampy_py_amp_tensors *g, int write, const float *inv)
{
    if (grads_written(write, inv))
        bump_all(g);
}

/* _amp_sgd_step_(params, grads, momentum_buffers, master_params, inv_scale,
 *                found_inf, lr, momentum, dampening, nesterov, weight_decay,
 *                maximize, write_grads) -> bool (False: skipped, found_inf != 0) */
static PyObject *f_sgd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fn = "sgd_step_";
    if (nargs != 13) {
        PyErr_Format(PyExc_TypeError, "_amp_sgd_step_ takes 13 arguments, got %zd", nargs);
        return NULL;
    }
    ampy_sgd_options o;
    int ok = 1;
    if (get_double(args[6], &o.lr, fn, "lr") < 0 || get_double(args[7], &o.momentum, fn, "momentum") < 0 ||
        get_double(args[8], &o.dampening, fn, "dampening") < 0 || get_bool(args[9], &o.nesterov) < 0 ||
        get_double(args[10], &o.weight_decay, fn, "weight_decay") < 0 ||
        get_bool(args[11], &o.maximize) < 0 || get_bool(args[12], &o.write_grads) < 0)
        return NULL;
    const float *inv = opt_scalar(args[4], fn, "inv_scale", &ok);
    const float *found = ok ? opt_scalar(args[5], fn, "found_inf", &ok) : NULL;
    if (!ok)
        return NULL;
    /* hyper-parameters first: a bad lr is reported as torch reports it */
    ampy_status st = ampy_optim_sgd_step(0, NULL, &o, NULL, NULL, NULL);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    common_lists c;
    ampy_py_amp_tensors b = {0, NULL};
    PyObject *result = NULL;
    ampy_sgd_tensor *t = NULL;
    AmpyTensor **fresh = NULL;
    Py_ssize_t n = 0;
    if (parse_common(&c, args[0], args[1], args[3], grads_written(o.write_grads, inv), fn) < 0)
        goto done;
    n = c.p.n;
    int use_buf = o.momentum != 0.0;
    PyObject *bufs = args[2];
    if (use_buf) {
        if (parse_state(&b, bufs, &c, fn, "momentum_buffers", 1) < 0)
            goto done;
        for (Py_ssize_t i = 0; i < n; i++)
            if (!b.t[i] && !PyList_Check(bufs)) {
                PyErr_Format(PyExc_TypeError, "%s: momentum_buffers must be a list when it holds "
                                              "None (new buffers are stored into it)", fn);
                goto done;
            }
    } else if (bufs != Py_None && !PyList_Check(bufs) && !PyTuple_Check(bufs)) {
        PyErr_Format(PyExc_TypeError, "%s: argument 'momentum_buffers' must be a list or None", fn);
        goto done;
    }
    t = PyMem_Calloc((size_t)n + 1, sizeof *t);
    fresh = PyMem_Calloc((size_t)n + 1, sizeof *fresh);
    if (!t || !fresh) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpyTensor *p = c.p.t[i], *m = c.m.t ? c.m.t[i] : NULL, *g = c.g.t[i];
        AmpyTensor *buf = use_buf ? b.t[i] : NULL;
        if (use_buf && !buf) {
            fresh[i] = ampy_py_empty(AMPY_FLOAT32, p->ndim, p->shape, AMPY_DEV_CPU);
            if (!fresh[i])
                goto done;
            buf = fresh[i];
        }
        ampy_sgd_tensor x = {p->data, m ? (float *)m->data : NULL, g->data,
                             buf ? (float *)buf->data : NULL, p->numel, p->dtype, g->dtype,
                             use_buf && !b.t[i]};
        t[i] = x;
    }
    int stepped = 0;
    if (c.total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_optim_sgd_step(n, t, &o, inv, found, &stepped);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_optim_sgd_step(n, t, &o, inv, found, &stepped);
    }
    if (st != AMPY_OK) {
        ampy_py_raise(st);
        goto done;
    }
    bump_grads(&c.g, o.write_grads, inv);
    if (stepped) {
        bump_all(&c.p);
        bump_all(&c.m);
        bump_all(&b);
        for (Py_ssize_t i = 0; i < n; i++)
            if (fresh[i]) {
                PyList_SetItem(bufs, i, (PyObject *)fresh[i]); /* steals */
                fresh[i] = NULL;
            }
    }
    result = PyBool_FromLong(stepped);
done:
    for (Py_ssize_t i = 0; fresh && i < n; i++)
        Py_XDECREF((PyObject *)fresh[i]);
    PyMem_Free(fresh);
    PyMem_Free(t);
    ampy_py_amp_list_free(&b);
    common_free(&c);
    return result;
}

/* ---- Adam / AdamW ------------------------------------------------------------- */

/* _amp_adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
 *                 master_params, inv_scale, found_inf, lr, beta1, beta2, eps,
 *                 weight_decay, amsgrad, maximize, decoupled_weight_decay,
 *                 write_grads) -> bool */
static PyObject *f_adam(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    static const char *fn = "adam_step_";
    if (nargs != 18) {
        PyErr_Format(PyExc_TypeError, "_amp_adam_step_ takes 18 arguments, got %zd", nargs);
        return NULL;
    }
    ampy_adam_options o;
    if (get_double(args[9], &o.lr, fn, "lr") < 0 || get_double(args[10], &o.beta1, fn, "beta1") < 0 ||
        get_double(args[11], &o.beta2, fn, "beta2") < 0 || get_double(args[12], &o.eps, fn, "eps") < 0 ||
        get_double(args[13], &o.weight_decay, fn, "weight_decay") < 0 ||
        get_bool(args[14], &o.amsgrad) < 0 || get_bool(args[15], &o.maximize) < 0 ||
        get_bool(args[16], &o.decoupled_weight_decay) < 0 || get_bool(args[17], &o.write_grads) < 0)
        return NULL;
    int ok = 1;
    const float *inv = opt_scalar(args[7], fn, "inv_scale", &ok);
    const float *found = ok ? opt_scalar(args[8], fn, "found_inf", &ok) : NULL;
    if (!ok)
        return NULL;
    ampy_status st = ampy_optim_adam_step(0, NULL, &o, NULL, NULL, NULL);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    common_lists c;
    ampy_py_amp_tensors ea = {0, NULL}, es = {0, NULL}, mx = {0, NULL}, sp = {0, NULL};
    PyObject *result = NULL;
    ampy_adam_tensor *t = NULL;
    if (parse_common(&c, args[0], args[1], args[6], grads_written(o.write_grads, inv), fn) < 0 ||
        parse_state(&ea, args[2], &c, fn, "exp_avgs", 0) < 0 ||
        parse_state(&es, args[3], &c, fn, "exp_avg_sqs", 0) < 0)
        goto done;
    if (o.amsgrad) {
        if (args[4] == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: amsgrad=True needs max_exp_avg_sqs", fn);
            goto done;
        }
        if (parse_state(&mx, args[4], &c, fn, "max_exp_avg_sqs", 0) < 0)
            goto done;
    }
    if (ampy_py_amp_list(args[5], &sp, fn, "steps", AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE) < 0 ||
        ampy_py_amp_len(&c.p, &sp, fn, "params", "steps") < 0)
        goto done;
    for (Py_ssize_t i = 0; i < sp.n; i++)
        if (sp.t[i]->numel != 1) {
            PyErr_Format(PyExc_ValueError, "%s: steps[%zd] must be a 1-element float32 tensor, got "
                                           "%lld elements",
                         fn, i, (long long)sp.t[i]->numel);
            goto done;
        }
    t = PyMem_Calloc((size_t)c.p.n + 1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < c.p.n; i++) {
        AmpyTensor *p = c.p.t[i], *m = c.m.t ? c.m.t[i] : NULL, *g = c.g.t[i];
        ampy_adam_tensor x = {p->data,
                              m ? (float *)m->data : NULL,
                              g->data,
                              (float *)ea.t[i]->data,
                              (float *)es.t[i]->data,
                              o.amsgrad ? (float *)mx.t[i]->data : NULL,
                              (float *)sp.t[i]->data,
                              p->numel,
                              p->dtype,
                              g->dtype};
        t[i] = x;
    }
    int stepped = 0;
    if (c.total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_optim_adam_step(c.p.n, t, &o, inv, found, &stepped);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_optim_adam_step(c.p.n, t, &o, inv, found, &stepped);
    }
    if (st != AMPY_OK) {
        ampy_py_raise(st);
        goto done;
    }
    bump_grads(&c.g, o.write_grads, inv);
    if (stepped) {
        bump_all(&c.p);
        bump_all(&c.m);
        bump_all(&ea);
        bump_all(&es);
        bump_all(&mx);
        bump_all(&sp);
    }
    result = PyBool_FromLong(stepped);
done:
    PyMem_Free(t);
    ampy_py_amp_list_free(&ea);
    ampy_py_amp_list_free(&es);
    ampy_py_amp_list_free(&mx);
    ampy_py_amp_list_free(&sp);
    common_free(&c);
    return result;
}

PyMethodDef ampy_py_optim_methods[] = {
    {"_amp_sgd_step_", (PyCFunction)(void (*)(void))f_sgd, METH_FASTCALL,
     "_amp_sgd_step_($module, params, grads, momentum_buffers, master_params, inv_scale,\n"
     "               found_inf, lr, momentum, dampening, nesterov, weight_decay, maximize,\n"
     "               write_grads, /)\n"
     "--\n\nFused SGD step; returns False when skipped (found_inf != 0). With write_grads\n"
     "and inv_scale, grads are unscaled in place (also when skipped). See optim.h."},
    {"_amp_adam_step_", (PyCFunction)(void (*)(void))f_adam, METH_FASTCALL,
     "_amp_adam_step_($module, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,\n"
     "                master_params, inv_scale, found_inf, lr, beta1, beta2, eps,\n"
     "                weight_decay, amsgrad, maximize, decoupled_weight_decay, write_grads, /)\n"
     "--\n\nFused Adam/AdamW step; returns False when skipped (found_inf != 0). With\n"
     "write_grads and inv_scale, grads are unscaled in place (also when skipped). See optim.h."},
    {NULL, NULL, 0, NULL},
};
