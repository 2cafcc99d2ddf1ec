/* cnn_py.c — binding of the cnn norm kernels (cnn.h: batch_norm, group_norm)
 * as ampy._C.cnn_* functions (the pools, padding and interpolation are
 * cnn_pool_py.c's).
 *
 * Internal API for ampy/nn/_ops_cnn.py, which checks the user's arguments
 * (torch's messages) and passes contiguous tensors of one device; here each
 * function checks what the kernel relies on once more, allocates the
 * outputs, releases the GIL for large inputs and maps an ampy_status to an
 * exception. CUDA tensors run cuda/cnn_norm.cu's kernels through the
 * ampy_cuda_api table (CN_CALL), CPU tensors libampy's.
 */
#include "pyampy.h"

#include "ampy/cnn.h"
#include "ampy/cuda.h"

/* The device of the current call (thread-local: RUN releases the GIL):
 * CN_BEGIN() unsets it, ctensor() records the first tensor's and checks
 * the others against it. */
#define CN_UNSET (-2)
static _Thread_local int cn_dev = AMPY_DEV_CPU;
#define CN_BEGIN() (cn_dev = CN_UNSET)
#define CN_DEVICE (cn_dev >= 0 ? cn_dev : AMPY_DEV_CPU)
#define CN_CALL(name, ...)                                                                       \
    (cn_dev >= 0 ? ampy_py_cuda_api()->name(cn_dev, __VA_ARGS__) : ampy_##name(__VA_ARGS__))
#define CN_RAISE(s) (cn_dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s))

#define BIG(n) ((n) >= AMPY_PY_GIL_RELEASE_MIN)
#define RUN(n, call)                                                                             \
    do {                                                                                         \
        if (BIG(n)) {                                                                            \
            Py_BEGIN_ALLOW_THREADS s = (call);                                                   \
            Py_END_ALLOW_THREADS                                                                 \
        } else {                                                                                 \
            s = (call);                                                                          \
        }                                                                                        \
    } while (0)
#define OPT(t) ((t) ? (void *)(t)->data : NULL)

/* A contiguous tensor on the call's device (None -> NULL without an
 * exception when opt). */
static AmpyTensor *ctensor(PyObject *o, const char *fn, const char *arg, int opt)
{
    if (opt && o == Py_None)
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (t && !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a contiguous tensor", fn, arg);
        return NULL;
    }
    if (t && cn_dev == CN_UNSET) {
        if (t->device >= 0 && !ampy_py_cuda_api())
            return NULL;
        cn_dev = t->device;
    } else if (t && t->device != cn_dev) {
        PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, "
                     "but argument '%s' is on %s", fn, arg,
                     t->device < 0 ? "the CPU" : "a CUDA device");
        return NULL;
    }
    return t;
}

/* ok when every tensor parsed (an optional None leaves no exception) */
#define GOT(t) ((t) || !PyErr_Occurred())

static AmpyTensor *new_shape(int dtype, int ndim, const int64_t *shape)
{
    return ampy_py_empty(dtype, ndim, shape, CN_DEVICE);
}

/* (N, C, S) of a batch (ndim >= 2) */
static int ncs(const AmpyTensor *x, int64_t *N, int64_t *C, int64_t *S, const char *fn)
{
    if (x->ndim < 2) {
        PyErr_Format(PyExc_ValueError, "%s: expects input (N, C, ...)", fn);
        return -1;
    }
    *N = x->shape[0], *C = x->shape[1], *S = 1;
    for (int i = 2; i < x->ndim; i++)
        *S *= x->shape[i];
    return 0;
}

static int check_vec(const AmpyTensor *v, int64_t C, int pdt, const char *fn, const char *arg)
{
    if (v && (v->numel != C || v->dtype != pdt)) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must hold %lld elements of the parameters' "
                     "dtype", fn, arg, (long long)C);
        return -1;
    }
    return 0;
}

static int param_dtype(const AmpyTensor *x, const AmpyTensor *a, const AmpyTensor *b)
{
    if (a)
        return a->dtype;
    if (b)
        return b->dtype;
    return x->dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
}

static PyObject *opt_obj(AmpyTensor *t)
{
    if (t)
        return (PyObject *)t;
    Py_RETURN_NONE;
}

/* cnn_batch_norm_fwd(x, weight, bias, running_mean, running_var, training, momentum, eps)
 *   -> (y, save_mean, save_invstd)   (running stats updated in place) */
static PyObject *f_bn_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *ow, *ob, *orm, *orv;
    int training;
    double momentum, eps;
    if (!PyArg_ParseTuple(args, "OOOOOpdd:cnn_batch_norm_fwd", &ox, &ow, &ob, &orm, &orv,
                          &training, &momentum, &eps))
        return NULL;
    const char *fn = "batch_norm";
    CN_BEGIN();
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *w = NULL, *b = NULL, *rm = NULL, *rv = NULL;
    if (!x || !GOT(w = ctensor(ow, fn, "weight", 1)) || !GOT(b = ctensor(ob, fn, "bias", 1)) ||
        !GOT(rm = ctensor(orm, fn, "running_mean", 1)) ||
        !GOT(rv = ctensor(orv, fn, "running_var", 1)))
        return NULL;
    int64_t N, C, S;
    if (ncs(x, &N, &C, &S, fn) < 0)
        return NULL;
    int pdt = param_dtype(x, w ? w : b, rm);
    if (check_vec(w, C, pdt, fn, "weight") < 0 || check_vec(b, C, pdt, fn, "bias") < 0 ||
        check_vec(rm, C, pdt, fn, "running_mean") < 0 ||
        check_vec(rv, C, pdt, fn, "running_var") < 0)
        return NULL;
    if ((rm && ampy_py_check_write(rm, fn, "running_mean", AMPY_PY_WRITE_OVERLAP) < 0) ||
        (rv && ampy_py_check_write(rv, fn, "running_var", AMPY_PY_WRITE_OVERLAP) < 0))
        return NULL;
    AmpyTensor *y = new_shape(x->dtype, x->ndim, x->shape);
    AmpyTensor *sm = new_shape(AMPY_FLOAT64, 1, &C), *si = new_shape(AMPY_FLOAT64, 1, &C);
    if (!y || !sm || !si)
        goto error;
    ampy_status s;
    int upd = training && rm && rv;
    RUN(x->numel, CN_CALL(cnn_batch_norm_fwd, N, C, S, x->data, x->dtype, OPT(w), OPT(b),
                                          training && !upd ? NULL : OPT(rm),
                                          training && !upd ? NULL : OPT(rv), pdt, training,
                                          momentum, eps, y->data, (double *)sm->data,
                                          (double *)si->data));
    if (s != AMPY_OK) {
        CN_RAISE(s);
        goto error;
    }
    if (upd)
        ampy_py_bump_version(rm), ampy_py_bump_version(rv);
    return Py_BuildValue("NNN", y, sm, si);
error:
    Py_XDECREF(y), Py_XDECREF(sm), Py_XDECREF(si);
    return NULL;
}

/* cnn_batch_norm_bwd(x, dy, weight, bias, training, save_mean, save_invstd, need_dx, need_dw,
 *                    need_db) -> (dx | None, dw | None, db | None) */
static PyObject *f_bn_bwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *ody, *ow, *ob, *om, *oi;
    int training, ndx, ndw, ndb;
    if (!PyArg_ParseTuple(args, "OOOOpOOppp:cnn_batch_norm_bwd", &ox, &ody, &ow, &ob, &training,
                          &om, &oi, &ndx, &ndw, &ndb))
        return NULL;
    const char *fn = "batch_norm_backward";
    CN_BEGIN();
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *dy = NULL, *w = NULL, *b = NULL, *m = NULL,
               *iv = NULL;
    if (!x || !(dy = ctensor(ody, fn, "grad_output", 0)) ||
        !GOT(w = ctensor(ow, fn, "weight", 1)) || !GOT(b = ctensor(ob, fn, "bias", 1)) ||
        !(m = ctensor(om, fn, "save_mean", 0)) || !(iv = ctensor(oi, fn, "save_invstd", 0)))
        return NULL;
    int64_t N, C, S;
    if (ncs(x, &N, &C, &S, fn) < 0)
        return NULL;
    int pdt = param_dtype(x, w, b);
    if (dy->numel != x->numel || dy->dtype != x->dtype || m->numel != C || iv->numel != C ||
        m->dtype != AMPY_FLOAT64 || iv->dtype != AMPY_FLOAT64 || check_vec(w, C, pdt, fn, "weight"))
        return PyErr_Occurred() ? NULL
                                : (PyErr_Format(PyExc_ValueError, "%s: mismatched arguments", fn),
                                   NULL);
    AmpyTensor *dx = NULL, *dw = NULL, *db = NULL;
    if ((ndx && !(dx = new_shape(x->dtype, x->ndim, x->shape))) ||
        (ndw && !(dw = new_shape(pdt, 1, &C))) || (ndb && !(db = new_shape(pdt, 1, &C))))
        goto error;
    ampy_status s;
    RUN(x->numel, CN_CALL(cnn_batch_norm_bwd, N, C, S, x->data, x->dtype, dy->data, OPT(w), pdt,
                                          training, (const double *)m->data,
                                          (const double *)iv->data, OPT(dx), OPT(dw), OPT(db)));
    if (s != AMPY_OK) {
        CN_RAISE(s);
        goto error;
    }
    return Py_BuildValue("NNN", opt_obj(dx), opt_obj(dw), opt_obj(db));
error:
    Py_XDECREF(dx), Py_XDECREF(dw), Py_XDECREF(db);
    return NULL;
}

/* cnn_group_norm_fwd(x, G, weight, bias, eps) -> (y, mean, rstd) */
static PyObject *f_gn_fwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *ow, *ob;
    long long G;
    double eps;
    if (!PyArg_ParseTuple(args, "OLOOd:cnn_group_norm_fwd", &ox, &G, &ow, &ob, &eps))
        return NULL;
    const char *fn = "group_norm";
    CN_BEGIN();
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *w = NULL, *b = NULL;
    if (!x || !GOT(w = ctensor(ow, fn, "weight", 1)) || !GOT(b = ctensor(ob, fn, "bias", 1)))
        return NULL;
    int64_t N, C, S;
    if (ncs(x, &N, &C, &S, fn) < 0)
        return NULL;
    int pdt = param_dtype(x, w, b);
    if (check_vec(w, C, pdt, fn, "weight") < 0 || check_vec(b, C, pdt, fn, "bias") < 0)
        return NULL;
    int64_t NG = N * (G > 0 ? G : 0);
    AmpyTensor *y = new_shape(x->dtype, x->ndim, x->shape);
    AmpyTensor *mean = new_shape(AMPY_FLOAT64, 1, &NG), *rstd = new_shape(AMPY_FLOAT64, 1, &NG);
    if (!y || !mean || !rstd)
        goto error;
    ampy_status s;
    RUN(x->numel, CN_CALL(cnn_group_norm_fwd, N, C, S, G, x->data, x->dtype, OPT(w), OPT(b), pdt,
                                          eps, y->data, (double *)mean->data,
                                          (double *)rstd->data));
    if (s != AMPY_OK) {
        CN_RAISE(s);
        goto error;
    }
    return Py_BuildValue("NNN", y, mean, rstd);
error:
    Py_XDECREF(y), Py_XDECREF(mean), Py_XDECREF(rstd);
    return NULL;
}

/* cnn_group_norm_bwd(x, dy, G, weight, bias, mean, rstd, need_dx, need_dw, need_db) */
static PyObject *f_gn_bwd(PyObject *self, PyObject *args)
{
    PyObject *ox, *ody, *ow, *ob, *om, *orr;
    long long G;
    int ndx, ndw, ndb;
    if (!PyArg_ParseTuple(args, "OOLOOOOppp:cnn_group_norm_bwd", &ox, &ody, &G, &ow, &ob, &om,
                          &orr, &ndx, &ndw, &ndb))
        return NULL;
    const char *fn = "group_norm_backward";
    CN_BEGIN();
    AmpyTensor *x = ctensor(ox, fn, "input", 0), *dy = NULL, *w = NULL, *b = NULL, *m = NULL,
               *r = NULL;
    if (!x || !(dy = ctensor(ody, fn, "grad_output", 0)) ||
        !GOT(w = ctensor(ow, fn, "weight", 1)) || !GOT(b = ctensor(ob, fn, "bias", 1)) ||
        !(m = ctensor(om, fn, "mean", 0)) || !(r = ctensor(orr, fn, "rstd", 0)))
        return NULL;
    int64_t N, C, S;
    if (ncs(x, &N, &C, &S, fn) < 0)
        return NULL;
    int pdt = param_dtype(x, w, b);
    if (dy->numel != x->numel || dy->dtype != x->dtype || m->dtype != AMPY_FLOAT64 ||
        r->dtype != AMPY_FLOAT64 || G < 1 || m->numel != N * G || r->numel != N * G ||
        check_vec(w, C, pdt, fn, "weight"))
        return PyErr_Occurred() ? NULL
                                : (PyErr_Format(PyExc_ValueError, "%s: mismatched arguments", fn),
                                   NULL);
    AmpyTensor *dx = NULL, *dw = NULL, *db = NULL;
    if ((ndx && !(dx = new_shape(x->dtype, x->ndim, x->shape))) ||
        (ndw && !(dw = new_shape(pdt, 1, &C))) || (ndb && !(db = new_shape(pdt, 1, &C))))
        goto error;
    ampy_status s;
    RUN(x->numel, CN_CALL(cnn_group_norm_bwd, N, C, S, G, x->data, x->dtype, dy->data, OPT(w), pdt,
                                          (const double *)m->data, (const double *)r->data,
                                          OPT(dx), OPT(dw), OPT(db)));
    if (s != AMPY_OK) {
        CN_RAISE(s);
        goto error;
    }
    return Py_BuildValue("NNN", opt_obj(dx), opt_obj(dw), opt_obj(db));
error:
    Py_XDECREF(dx), Py_XDECREF(dw), Py_XDECREF(db);
    return NULL;
}

PyMethodDef ampy_py_cnn_methods[] = {
    {"cnn_batch_norm_fwd", f_bn_fwd, METH_VARARGS,
     "cnn_batch_norm_fwd(x, weight, bias, running_mean, running_var, training, momentum, eps)"
     "\n--\n\nInternal: batch norm; updates the running stats in place."},
    {"cnn_batch_norm_bwd", f_bn_bwd, METH_VARARGS,
     "cnn_batch_norm_bwd(x, dy, weight, bias, training, save_mean, save_invstd, need_dx, "
     "need_dw, need_db)\n--\n\nInternal: batch norm backward."},
    {"cnn_group_norm_fwd", f_gn_fwd, METH_VARARGS,
     "cnn_group_norm_fwd(x, groups, weight, bias, eps)\n--\n\nInternal: group norm."},
    {"cnn_group_norm_bwd", f_gn_bwd, METH_VARARGS,
     "cnn_group_norm_bwd(x, dy, groups, weight, bias, mean, rstd, need_dx, need_dw, need_db)"
     "\n--\n\nInternal: group norm backward."},
    {NULL, NULL, 0, NULL},
};
