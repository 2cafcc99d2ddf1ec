/* optim_adaptive_py.c — binding of optim_adaptive.h (fused RMSprop, Adagrad
 * and Adadelta steps). The Python-level signatures and docs live in
 * ampy/amp/_adaptive.py; here every argument is checked (naming it, with its
 * list index) before any memory is touched, on either device, then the step
 * runs on the CPU (the GIL released for large steps; returns whether it
 * stepped) or through the ampy_cuda_api table (returns None).
 */
#include "pyampy.h"

#include "amp_py.h"
#include "ampy/cuda.h"
#include "ampy/optim_adaptive.h"
#include "optim_py.h"

typedef struct {
    PyObject *params, *grads, *s0, *s1, *s2, *steps, *masters, *inv, *found;
} adaptive_args;

/* _amp_adaptive_step_(kind, params, grads, state0, state1, state2, steps, *,
 *                     master_params=None, inv_scale=None, found_inf=None, lr,
 *                     alpha=0, rho=0, eps=0, weight_decay=0, momentum=0,
 *                     lr_decay=0, centered=False, maximize=False, write_grads=True) */
static int parse_adaptive(PyObject *args, PyObject *kw, adaptive_args *a,
                          ampy_adaptive_options *o, const char *fn)
{
    static char *kwlist[] = {"kind", "params", "grads", "state0", "state1", "state2", "steps",
                             "master_params", "inv_scale", "found_inf", "lr", "alpha", "rho",
                             "eps", "weight_decay", "momentum", "lr_decay", "centered",
                             "maximize", "write_grads", NULL};
    PyObject *v[10] = {NULL};
    a->masters = a->inv = a->found = Py_None;
    memset(o, 0, sizeof *o);
    o->write_grads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOOOOOO|$OOOOOOOOOOOOO:_amp_adaptive_step_",
                                     kwlist, &o->kind, &a->params, &a->grads, &a->s0, &a->s1,
                                     &a->s2, &a->steps, &a->masters, &a->inv, &a->found, &v[0],
                                     &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
                                     &v[9]))
        return -1;
    if (!v[0]) {
        PyErr_Format(PyExc_TypeError, "%s: missing required keyword argument 'lr'", fn);
        return -1;
    }
    return optpy_get_double(v[0], &o->lr, fn, "lr") < 0 ||
                   optpy_opt_double(v[1], &o->alpha, fn, "alpha") < 0 ||
                   optpy_opt_double(v[2], &o->rho, fn, "rho") < 0 ||
                   optpy_opt_double(v[3], &o->eps, fn, "eps") < 0 ||
                   optpy_opt_double(v[4], &o->weight_decay, fn, "weight_decay") < 0 ||
                   optpy_opt_double(v[5], &o->momentum, fn, "momentum") < 0 ||
                   optpy_opt_double(v[6], &o->lr_decay, fn, "lr_decay") < 0 ||
                   optpy_opt_bool(v[7], &o->centered) < 0 ||
                   optpy_opt_bool(v[8], &o->maximize) < 0 ||
                   optpy_opt_bool(v[9], &o->write_grads) < 0
               ? -1
               : 0;
}

typedef struct {
    ampy_py_amp_tensors s[3], sp;
} adaptive_state;

static void adaptive_state_free(adaptive_state *s)
{
    for (int k = 0; k < 3; k++)
        ampy_py_amp_list_free(&s->s[k]);
    ampy_py_amp_list_free(&s->sp);
}

/* The state lists the configuration uses (state0 always; state1 for
 * RMSprop's momentum and Adadelta; state2 for centered RMSprop) and the
 * 1-element step counts. */
static int parse_adaptive_state(adaptive_state *s, const adaptive_args *a, optpy_lists *c,
                                const ampy_adaptive_options *o, const char *fn)
{
    static const char *const names[3] = {"state0", "state1", "state2"};
    PyObject *lists[3] = {a->s0, a->s1, a->s2};
    const int used[3] = {1,
                         (o->kind == AMPY_ADAPTIVE_RMSPROP && o->momentum > 0.0) ||
                             o->kind == AMPY_ADAPTIVE_ADADELTA,
                         o->kind == AMPY_ADAPTIVE_RMSPROP && o->centered};
    for (int k = 0; k < 3; k++) {
        if (!used[k])
            continue;
        if (lists[k] == Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: this configuration needs %s", fn, names[k]);
            return -1;
        }
        if (optpy_parse_state(&s->s[k], lists[k], c, fn, names[k], 0) < 0)
            return -1;
    }
    if (ampy_py_amp_list(a->steps, &s->sp, fn, "steps", AMPY_PY_AMP_F32 | AMPY_PY_AMP_WRITE,
                         &c->device) < 0 ||
        ampy_py_amp_len(&c->p, &s->sp, fn, "params", "steps") < 0)
        return -1;
    for (Py_ssize_t i = 0; i < s->sp.n; i++)
        if (s->sp.t[i]->numel != 1) {
            PyErr_Format(PyExc_ValueError, "%s: steps[%zd] must be a 1-element float32 tensor, "
                                           "got %lld elements",
                         fn, i, (long long)s->sp.t[i]->numel);
            return -1;
        }
    return 0;
}

static ampy_status run_adaptive(int device, int64_t total, Py_ssize_t n,
                                const ampy_adaptive_tensor *t, const ampy_adaptive_options *o,
                                const float *inv, const float *found, int *stepped)
{
    if (device >= 0) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        *stepped = 1; /* not known on the host */
        return api ? api->adaptive_step(device, n, t, o, inv, found) : AMPY_ERR_RUNTIME;
    }
    ampy_status st;
    if (total >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        st = ampy_optim_adaptive_step(n, t, o, inv, found, stepped);
        Py_END_ALLOW_THREADS
    } else {
        st = ampy_optim_adaptive_step(n, t, o, inv, found, stepped);
    }
    return st;
}

static float *data_or_null(ampy_py_amp_tensors *l, Py_ssize_t i)
{
    return l->t ? (float *)l->t[i]->data : NULL;
}

static PyObject *f_adaptive(PyObject *self, PyObject *args, PyObject *kw)
{
    static const char *fn = "adaptive_step_";
    adaptive_args a;
    ampy_adaptive_options o;
    optpy_lists c = {.device = AMPY_PY_AMP_NO_DEVICE};
    if (parse_adaptive(args, kw, &a, &o, fn) < 0)
        return NULL;
    int ok = 1;
    const float *inv = optpy_opt_scalar(a.inv, fn, "inv_scale", &c.device, &ok);
    const float *found = ok ? optpy_opt_scalar(a.found, fn, "found_inf", &c.device, &ok) : NULL;
    if (!ok)
        return NULL;
    ampy_status st = ampy_optim_adaptive_step(0, NULL, &o, NULL, NULL, NULL); /* both devices */
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    adaptive_state s;
    memset(&s, 0, sizeof s);
    PyObject *result = NULL;
    ampy_adaptive_tensor *t = NULL;
    if (optpy_parse_common(&c, a.params, a.grads, a.masters,
                           optpy_grads_written(c.device, &o.write_grads, inv), fn) < 0 ||
        parse_adaptive_state(&s, &a, &c, &o, fn) < 0)
        goto done;
    t = PyMem_Calloc((size_t)c.p.n + 1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < c.p.n; i++) {
        AmpyTensor *p = c.p.t[i], *m = c.m.t ? c.m.t[i] : NULL, *g = c.g.t[i];
        t[i] = (ampy_adaptive_tensor){p->data, m ? (float *)m->data : NULL, g->data,
                                      data_or_null(&s.s[0], i), data_or_null(&s.s[1], i),
                                      data_or_null(&s.s[2], i), (float *)s.sp.t[i]->data,
                                      p->numel, p->dtype, g->dtype};
    }
    int stepped = 0;
    if ((st = run_adaptive(c.device, c.total, c.p.n, t, &o, inv, found, &stepped)) != AMPY_OK) {
        optpy_raise_step(c.device, st);
        goto done;
    }
    if (optpy_grads_written(c.device, &o.write_grads, inv))
        optpy_bump_all(&c.g);
    if (stepped) {
        optpy_bump_all(&c.p);
        optpy_bump_all(&c.m);
        for (int k = 0; k < 3; k++)
            optpy_bump_all(&s.s[k]);
        optpy_bump_all(&s.sp);
    }
    result = optpy_step_result(c.device, stepped);
done:
    PyMem_Free(t);
    adaptive_state_free(&s);
    optpy_common_free(&c);
    return result;
}

PyMethodDef ampy_py_optim_adaptive_methods[] = {
    {"_amp_adaptive_step_", (PyCFunction)(void (*)(void))f_adaptive,
     METH_VARARGS | METH_KEYWORDS,
     "_amp_adaptive_step_($module, kind, params, grads, state0, state1, state2, steps, *,\n"
     "                    master_params=None, inv_scale=None, found_inf=None, lr, alpha=0.0,\n"
     "                    rho=0.0, eps=0.0, weight_decay=0.0, momentum=0.0, lr_decay=0.0,\n"
     "                    centered=False, maximize=False, write_grads=True)\n"
     "--\n\nFused RMSprop (kind 0), Adagrad (1) or Adadelta (2) step over CPU or CUDA tensors;\n"
     "returns False when skipped (found_inf != 0) on the CPU, None on a GPU. See\n"
     "optim_adaptive.h."},
    {NULL, NULL, 0, NULL},
};
