/* optim_py.c — binding of optim.h (fused SGD / Adam / AdamW steps). The
 * Python-level signatures and docs live in ampy/amp/functional.py; here every
 * argument is checked (naming it, with its list index) before any memory is
 * touched, on either device. Then the step runs: libampy for CPU tensors
 * (the GIL released for large steps; returns whether it stepped), or the CUDA
 * twin through the ampy_cuda_api table (cuda/optim.cu; found_inf is read on
 * the device, so it returns None, and the grads are always written back
 * when inv_scale is given). The argument helpers (optim_py.h) are shared with
 * optim_adaptive_py.c.
 */
#include "pyampy.h"

#include "amp_py.h"
#include "optim_py.h"
#include "ampy/cuda.h"
#include "ampy/optim.h"

int optpy_get_double(PyObject *o, double *out, const char *fn, const char *arg)
{
    if (!PyFloat_Check(o) && !PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a float, not %s", fn, arg,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyFloat_AsDouble(o);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

int optpy_get_bool(PyObject *o, int *out)
{
    int v = PyObject_IsTrue(o);
    if (v < 0)
        return -1;
    *out = v;
    return 0;
}

/* Optional 1-element float32 tensor (None -> NULL, *ok stays 1). */
const float *optpy_opt_scalar(PyObject *o, const char *fn, const char *arg, int *device, int *ok)
{
    if (o == Py_None)
        return NULL;
    const float *p = ampy_py_amp_scalar(o, AMPY_FLOAT32, fn, arg, device);
    if (!p)
        *ok = 0;
    return p;
}

/* A keyword's value as a double (absent: *out keeps its default). */
int optpy_opt_double(PyObject *o, double *out, const char *fn, const char *arg)
{
    return o ? optpy_get_double(o, out, fn, arg) : 0;
}

int optpy_opt_bool(PyObject *o, int *out)
{
    return o ? optpy_get_bool(o, out) : 0;
}

void optpy_common_free(optpy_lists *c)
{
    ampy_py_amp_list_free(&c->p);
    ampy_py_amp_list_free(&c->g);
    ampy_py_amp_list_free(&c->m);
}

static int check_masters(const optpy_lists *c, const char *fn)
{
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
    }
    return 0;
}

/* c->device holds the device of inv_scale / found_inf (or none yet). */
int optpy_parse_common(optpy_lists *c, PyObject *params, PyObject *grads, PyObject *masters,
                       int grads_written, const char *fn)
{
    int device = c->device;
    memset(c, 0, sizeof *c);
    c->device = device;
    if (ampy_py_amp_list(params, &c->p, fn, "params", AMPY_PY_AMP_WRITE, &c->device) < 0 ||
        ampy_py_amp_list(grads, &c->g, fn, "grads", grads_written ? AMPY_PY_AMP_WRITE : 0,
                         &c->device) < 0 ||
        ampy_py_amp_len(&c->p, &c->g, fn, "params", "grads") < 0)
        return -1;
    if (masters != Py_None) {
        if (ampy_py_amp_list(masters, &c->m, fn, "master_params",
                             AMPY_PY_AMP_ALLOW_NONE | AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE,
                             &c->device) < 0 ||
            ampy_py_amp_len(&c->p, &c->m, fn, "params", "master_params") < 0)
            return -1;
    }
    if (check_masters(c, fn) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < c->p.n; i++)
        c->total += c->p.t[i]->numel;
    return 0;
}

/* A float32 state list matching params element for element. */
int optpy_parse_state(ampy_py_amp_tensors *s, PyObject *seq, optpy_lists *c, const char *fn,
                      const char *arg, int allow_none)
{
    const int flags = AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE | (allow_none ? AMPY_PY_AMP_ALLOW_NONE : 0);
    if (ampy_py_amp_list(seq, s, fn, arg, flags, &c->device) < 0 ||
        ampy_py_amp_len(&c->p, s, fn, "params", arg) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < s->n; i++)
        if (s->t[i] && ampy_py_amp_same_shape(c->p.t[i], s->t[i], fn, "params", arg, i) < 0)
            return -1;
    return 0;
}

void optpy_bump_all(ampy_py_amp_tensors *l)
{
    for (Py_ssize_t i = 0; i < l->n; i++)
        if (l->t && l->t[i])
            ampy_py_bump_version(l->t[i]);
}

/* Gradients written back (write_grads with an inv_scale != 1, applied or
 * skipped step alike: their versions move). On a GPU the value of inv_scale
 * is not read on the host: any inv_scale counts, and write_grads is on. */
int optpy_grads_written(int device, int *write, const float *inv)
{
    if (device >= 0 && inv)
        *write = 1;
    return *write && inv && (device >= 0 || *inv != 1.0f);
}

/* The step's result: whether it was applied (CPU), None on a GPU. */
PyObject *optpy_step_result(int device, int stepped)
{
    return device >= 0 ? Py_NewRef(Py_None) : PyBool_FromLong(stepped);
}

/* ---- SGD -------------------------------------------------------------------- */

typedef struct {
    PyObject *params, *grads, *bufs, *masters, *inv, *found;
} sgd_args;

/* _amp_sgd_step_(params, grads, momentum_buffers, *, master_params=None,
 *                inv_scale=None, found_inf=None, lr, momentum=0, dampening=0,
 *                nesterov=False, weight_decay=0, maximize=False, write_grads=True) */
static int parse_sgd(PyObject *args, PyObject *kw, sgd_args *a, ampy_sgd_options *o,
                     const char *fn)
{
    static char *kwlist[] = {"params", "grads", "momentum_buffers", "master_params",
                             "inv_scale", "found_inf", "lr", "momentum", "dampening", "nesterov",
                             "weight_decay", "maximize", "write_grads", NULL};
    PyObject *lr = NULL, *mom = NULL, *damp = NULL, *nest = NULL, *wd = NULL, *maxi = NULL,
             *wg = NULL;
    a->masters = a->inv = a->found = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|$OOOOOOOOOO:_amp_sgd_step_", kwlist,
                                     &a->params, &a->grads, &a->bufs, &a->masters, &a->inv,
                                     &a->found, &lr, &mom, &damp, &nest, &wd, &maxi, &wg))
        return -1;
    if (!lr) {
        PyErr_Format(PyExc_TypeError, "%s: missing required keyword argument 'lr'", fn);
        return -1;
    }
    *o = (ampy_sgd_options){0.0, 0.0, 0.0, 0.0, 0, 0, 1};
    return optpy_get_double(lr, &o->lr, fn, "lr") < 0 ||
                   optpy_opt_double(mom, &o->momentum, fn, "momentum") < 0 ||
                   optpy_opt_double(damp, &o->dampening, fn, "dampening") < 0 ||
                   optpy_opt_bool(nest, &o->nesterov) < 0 ||
                   optpy_opt_double(wd, &o->weight_decay, fn, "weight_decay") < 0 ||
                   optpy_opt_bool(maxi, &o->maximize) < 0 || optpy_opt_bool(wg, &o->write_grads) < 0
               ? -1
               : 0;
}

/* The momentum buffers: checked, None entries replaced by new float32
 * buffers in fresh[i] (on the params' device; zeros on a GPU). */
static int sgd_buffers(ampy_py_amp_tensors *b, AmpyTensor **fresh, PyObject *bufs,
                       optpy_lists *c, int use_buf, const char *fn)
{
    if (!use_buf) {
        if (bufs != Py_None && !PyList_Check(bufs) && !PyTuple_Check(bufs)) {
            PyErr_Format(PyExc_TypeError, "%s: argument 'momentum_buffers' must be a list or None",
                         fn);
            return -1;
        }
        return 0;
    }
    if (optpy_parse_state(b, bufs, c, fn, "momentum_buffers", 1) < 0)
        return -1;
    for (Py_ssize_t i = 0; i < c->p.n; i++)
        if (!b->t[i] && !PyList_Check(bufs)) {
            PyErr_Format(PyExc_TypeError, "%s: momentum_buffers must be a list when it holds "
                                          "None (new buffers are stored into it)", fn);
            return -1;
        }
    for (Py_ssize_t i = 0; i < c->p.n; i++) {
        AmpyTensor *p = c->p.t[i];
        if (b->t[i])
            continue;
        fresh[i] = ampy_py_empty(AMPY_FLOAT32, p->ndim, p->shape, c->device);
        if (!fresh[i])
            return -1;
        if (c->device >= 0) {
            const ampy_cuda_api *api = ampy_py_cuda_api();
            ampy_status s = api ? api->fill(c->device, fresh[i]->data, AMPY_FLOAT32, p->numel, 0.0)
                                : AMPY_ERR_RUNTIME;
            if (s != AMPY_OK)
                return api ? (ampy_py_raise_cuda(s), -1) : -1;
        }
    }
    return 0;
}

static ampy_status run_sgd(int device, int64_t total, Py_ssize_t n, const ampy_sgd_tensor *t,
                           const ampy_sgd_options *o, const float *inv, const float *found,
                           int *stepped)
{
    if (device >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        *stepped = 1; /* not known on the host; the state is stored either way */
        return api ? api->sgd_step(device, n, t, o, inv, found) : AMPY_ERR_RUNTIME;
    }
    ampy_status st;
    if (total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_optim_sgd_step(n, t, o, inv, found, stepped);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_optim_sgd_step(n, t, o, inv, found, stepped);
    }
    return st;
}

/* Raise for a failed step: the CUDA module's message on a GPU. */
void optpy_raise_step(int device, ampy_status st)
{
    if (!PyErr_Occurred())
        device >= 0 ? ampy_py_raise_cuda(st) : ampy_py_raise(st);
}

static PyObject *f_sgd(PyObject *self, PyObject *args, PyObject *kw)
{
    static const char *fn = "sgd_step_";
    sgd_args a;
    ampy_sgd_options o;
    optpy_lists c = {.device = AMPY_PY_AMP_NO_DEVICE};
    int ok = 1;
    if (parse_sgd(args, kw, &a, &o, fn) < 0)
        return NULL;
    const float *inv = optpy_opt_scalar(a.inv, fn, "inv_scale", &c.device, &ok);
    const float *found = ok ? optpy_opt_scalar(a.found, fn, "found_inf", &c.device, &ok) : NULL;
    if (!ok)
        return NULL;
    /* hyper-parameters first, for both devices: a bad lr is reported as torch reports it */
    ampy_status st = ampy_optim_sgd_step(0, NULL, &o, NULL, NULL, NULL);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    ampy_py_amp_tensors b = {0, NULL};
    PyObject *result = NULL;
    ampy_sgd_tensor *t = NULL;
    AmpyTensor **fresh = NULL;
    Py_ssize_t n = 0;
    const int use_buf = o.momentum != 0.0;
    if (optpy_parse_common(&c, a.params, a.grads, a.masters,
                           optpy_grads_written(c.device, &o.write_grads, inv),
                     fn) < 0)
        goto done;
    n = c.p.n;
    t = PyMem_Calloc((size_t)n + 1, sizeof *t);
    fresh = PyMem_Calloc((size_t)n + 1, sizeof *fresh);
    if (!t || !fresh) {
        PyErr_NoMemory();
        goto done;
    }
    if (sgd_buffers(&b, fresh, a.bufs, &c, use_buf, fn) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        AmpyTensor *p = c.p.t[i], *m = c.m.t ? c.m.t[i] : NULL, *g = c.g.t[i];
        AmpyTensor *buf = use_buf ? (b.t[i] ? b.t[i] : fresh[i]) : NULL;
        t[i] = (ampy_sgd_tensor){p->data, m ? (float *)m->data : NULL, g->data,
                                 buf ? (float *)buf->data : NULL, p->numel, p->dtype, g->dtype,
                                 use_buf && !b.t[i]};
    }
    int stepped = 0;
    if ((st = run_sgd(c.device, c.total, n, t, &o, inv, found, &stepped)) != AMPY_OK) {
        optpy_raise_step(c.device, st);
        goto done;
    }
    if (optpy_grads_written(c.device, &o.write_grads, inv))
        optpy_bump_all(&c.g);
    if (stepped) {
        optpy_bump_all(&c.p);
        optpy_bump_all(&c.m);
        optpy_bump_all(&b);
        for (Py_ssize_t i = 0; i < n; i++)
            if (fresh[i]) {
                PyList_SetItem(a.bufs, i, (PyObject *)fresh[i]); /* steals */
                fresh[i] = NULL;
            }
    }
    result = optpy_step_result(c.device, stepped);
done:
    for (Py_ssize_t i = 0; fresh && i < n; i++)
        Py_XDECREF((PyObject *)fresh[i]);
    PyMem_Free(fresh);
    PyMem_Free(t);
    ampy_py_amp_list_free(&b);
    optpy_common_free(&c);
    return result;
}

/* ---- Adam / AdamW ------------------------------------------------------------- */

typedef struct {
    PyObject *params, *grads, *exp_avgs, *exp_avg_sqs, *max_exp_avg_sqs, *steps, *masters,
        *inv, *found;
} adam_args;

/* _amp_adam_step_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
 *                 *, master_params=None, inv_scale=None, found_inf=None, lr,
 *                 beta1, beta2, eps, weight_decay, amsgrad, maximize,
 *                 decoupled_weight_decay=False, write_grads=True) */
static int parse_adam(PyObject *args, PyObject *kw, adam_args *a, ampy_adam_options *o,
                      const char *fn)
{
    static char *kwlist[] = {"params", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs",
                             "steps", "master_params", "inv_scale", "found_inf", "lr", "beta1",
                             "beta2", "eps", "weight_decay", "amsgrad", "maximize",
                             "decoupled_weight_decay", "write_grads", NULL};
    PyObject *v[9] = {NULL};
    static const char *const need[] = {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad",
                                       "maximize"};
    a->masters = a->inv = a->found = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO|$OOOOOOOOOOOO:_amp_adam_step_", kwlist,
                                     &a->params, &a->grads, &a->exp_avgs, &a->exp_avg_sqs,
                                     &a->max_exp_avg_sqs, &a->steps, &a->masters, &a->inv,
                                     &a->found, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                                     &v[7], &v[8]))
        return -1;
    for (int i = 0; i < 7; i++)
        if (!v[i]) {
            PyErr_Format(PyExc_TypeError, "%s: missing required keyword argument '%s'", fn,
                         need[i]);
            return -1;
        }
    o->decoupled_weight_decay = 0;
    o->write_grads = 1;
    return optpy_get_double(v[0], &o->lr, fn, "lr") < 0 ||
                   optpy_get_double(v[1], &o->beta1, fn, "beta1") < 0 ||
                   optpy_get_double(v[2], &o->beta2, fn, "beta2") < 0 ||
                   optpy_get_double(v[3], &o->eps, fn, "eps") < 0 ||
                   optpy_get_double(v[4], &o->weight_decay, fn, "weight_decay") < 0 ||
                   optpy_get_bool(v[5], &o->amsgrad) < 0 ||
                   optpy_get_bool(v[6], &o->maximize) < 0 ||
                   optpy_opt_bool(v[7], &o->decoupled_weight_decay) < 0 ||
                   optpy_opt_bool(v[8], &o->write_grads) < 0
               ? -1
               : 0;
}

/* Adam's state lists: moments, (amsgrad) maxima, 1-element step counts. */
typedef struct {
    ampy_py_amp_tensors ea, es, mx, sp;
} adam_state;

static void adam_state_free(adam_state *s)
{
    ampy_py_amp_list_free(&s->ea);
    ampy_py_amp_list_free(&s->es);
    ampy_py_amp_list_free(&s->mx);
    ampy_py_amp_list_free(&s->sp);
}

static int parse_adam_state(adam_state *s, const adam_args *a, optpy_lists *c, int amsgrad,
                            const char *fn)
{
    if (optpy_parse_state(&s->ea, a->exp_avgs, c, fn, "exp_avgs", 0) < 0 ||
        optpy_parse_state(&s->es, a->exp_avg_sqs, c, fn, "exp_avg_sqs", 0) < 0)
        return -1;
    if (amsgrad) {
        if (a->max_exp_avg_sqs == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: amsgrad=True needs max_exp_avg_sqs", fn);
            return -1;
        }
        if (optpy_parse_state(&s->mx, a->max_exp_avg_sqs, c, fn, "max_exp_avg_sqs", 0) < 0)
            return -1;
    }
    if (ampy_py_amp_list(a->steps, &s->sp, fn, "steps", AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE,
                         &c->device) < 0 ||
        ampy_py_amp_len(&c->p, &s->sp, fn, "params", "steps") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < s->sp.n; i++)
        if (s->sp.t[i]->numel != 1) {
            PyErr_Format(PyExc_ValueError, "%s: steps[%zd] must be a 1-element float32 tensor, got "
                                           "%lld elements",
                         fn, i, (long long)s->sp.t[i]->numel);
            return -1;
        }
    return 0;
}

static ampy_status run_adam(int device, int64_t total, Py_ssize_t n, const ampy_adam_tensor *t,
                            const ampy_adam_options *o, const float *inv, const float *found,
                            int *stepped)
{
    if (device >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        *stepped = 1; /* not known on the host */
        return api ? api->adam_step(device, n, t, o, inv, found) : AMPY_ERR_RUNTIME;
    }
    ampy_status st;
    if (total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_optim_adam_step(n, t, o, inv, found, stepped);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_optim_adam_step(n, t, o, inv, found, stepped);
    }
    return st;
}

static PyObject *f_adam(PyObject *self, PyObject *args, PyObject *kw)
{
    static const char *fn = "adam_step_";
    adam_args a;
    ampy_adam_options o;
    optpy_lists c = {.device = AMPY_PY_AMP_NO_DEVICE};
    if (parse_adam(args, kw, &a, &o, fn) < 0)
        return NULL;
    int ok = 1;
    const float *inv = optpy_opt_scalar(a.inv, fn, "inv_scale", &c.device, &ok);
    const float *found = ok ? optpy_opt_scalar(a.found, fn, "found_inf", &c.device, &ok) : NULL;
    if (!ok)
        return NULL;
    ampy_status st = ampy_optim_adam_step(0, NULL, &o, NULL, NULL, NULL); /* both devices */
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    adam_state s = {{0, NULL}, {0, NULL}, {0, NULL}, {0, NULL}};
    PyObject *result = NULL;
    ampy_adam_tensor *t = NULL;
    if (optpy_parse_common(&c, a.params, a.grads, a.masters,
                     optpy_grads_written(c.device, &o.write_grads, inv), fn) < 0 ||
        parse_adam_state(&s, &a, &c, o.amsgrad, fn) < 0)
        goto done;
    t = PyMem_Calloc((size_t)c.p.n + 1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < c.p.n; i++) {
        AmpyTensor *p = c.p.t[i], *m = c.m.t ? c.m.t[i] : NULL, *g = c.g.t[i];
        t[i] = (ampy_adam_tensor){p->data, m ? (float *)m->data : NULL, g->data,
                                  (float *)s.ea.t[i]->data, (float *)s.es.t[i]->data,
                                  o.amsgrad ? (float *)s.mx.t[i]->data : NULL,
                                  (float *)s.sp.t[i]->data, p->numel, p->dtype, g->dtype};
    }
    int stepped = 0;
    if ((st = run_adam(c.device, c.total, c.p.n, t, &o, inv, found, &stepped)) != AMPY_OK) {
        optpy_raise_step(c.device, st);
        goto done;
    }
    if (optpy_grads_written(c.device, &o.write_grads, inv))
        optpy_bump_all(&c.g);
    if (stepped) {
        optpy_bump_all(&c.p);
        optpy_bump_all(&c.m);
        optpy_bump_all(&s.ea);
        optpy_bump_all(&s.es);
        optpy_bump_all(&s.mx);
        optpy_bump_all(&s.sp);
    }
    result = optpy_step_result(c.device, stepped);
done:
    PyMem_Free(t);
    adam_state_free(&s);
    optpy_common_free(&c);
    return result;
}

PyMethodDef ampy_py_optim_methods[] = {
    {"_amp_sgd_step_", (PyCFunction)(void (*)(void))f_sgd, METH_VARARGS | METH_KEYWORDS,
     "_amp_sgd_step_($module, params, grads, momentum_buffers, *, master_params=None,\n"
     "               inv_scale=None, found_inf=None, lr, momentum=0.0, dampening=0.0,\n"
     "               nesterov=False, weight_decay=0.0, maximize=False, write_grads=True)\n"
     "--\n\nFused SGD step over CPU or CUDA tensors; returns False when skipped (found_inf != 0)\n"
     "on the CPU, None on a GPU. With write_grads and inv_scale, grads are unscaled in place\n"
     "(also when skipped). See optim.h."},
    {"_amp_adam_step_", (PyCFunction)(void (*)(void))f_adam, METH_VARARGS | METH_KEYWORDS,
     "_amp_adam_step_($module, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,\n"
     "                *, master_params=None, inv_scale=None, found_inf=None, lr, beta1, beta2,\n"
     "                eps, weight_decay, amsgrad, maximize, decoupled_weight_decay=False,\n"
     "                write_grads=True)\n"
     "--\n\nFused Adam/AdamW step over CPU or CUDA tensors; returns False when skipped\n"
     "(found_inf != 0) on the CPU, None on a GPU. With write_grads and inv_scale, grads are\n"
     "unscaled in place (also when skipped). See optim.h."},
    {NULL, NULL, 0, NULL},
};
