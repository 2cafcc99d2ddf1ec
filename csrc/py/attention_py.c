/* attention_py.c — binding of the fused attention kernel (attention.h) as
 * ampy._C.attention_fwd / attention_bwd.
 *
 * Internal API for ampy/nn/_ops_attention.py, which checks the arguments the
 * torch way and hands over views that share one batch shape: q (batch...,
 * Lq, E), k (batch..., Lk, E), v (batch..., Lk, Ev), and the mask broadcast
 * to (batch..., Lq, Lk) (stride 0 where it broadcasts). Any strides are read
 * in place. Outputs are new contiguous tensors on the inputs' device: CPU
 * tensors run libampy's kernel, CUDA tensors the twin of cuda/attention.cu
 * through the ampy_cuda_api table.
 */
#include "pyampy.h"

#include "ampy/attention.h"
#include "ampy/cuda.h"

/* The device of the call's tensors (the first one's; the others must match). */
static _Thread_local int attn_dev;

static int operand(AmpyTensor *t, int nd, ampy_attn_operand *o)
{
    o->data = t->data;
    for (int d = 0; d < nd; d++)
        o->bs[d] = t->strides[d];
    o->rs = t->strides[nd];
    o->cs = t->strides[nd + 1];
    return 0;
}

/* A tensor argument on the call's device (the first one sets it). */
static AmpyTensor *dev_tensor(PyObject *obj, const char *arg, int first)
{
    AmpyTensor *t = ampy_py_tensor_arg(obj, "scaled_dot_product_attention", arg);
    if (!t)
        return NULL;
    if (first) {
        if (t->device != AMPY_DEV_CPU && !ampy_py_cuda_api())
            return NULL;
        attn_dev = t->device;
    } else if (t->device != attn_dev) {
        PyErr_Format(PyExc_RuntimeError, "scaled_dot_product_attention: Expected all tensors "
                     "to be on the same device, but argument '%s' is on %s", arg,
                     t->device < 0 ? "the CPU" : "a CUDA device");
        return NULL;
    }
    return t;
}

static PyObject *attn_raise(ampy_status s)
{
    return attn_dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
}

static int same_batch(const AmpyTensor *a, const AmpyTensor *b, int nd)
{
    for (int d = 0; d < nd; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* Fill *p from (q, k, v, mask, causal, scale, dropout_p, seed, offset). */
static int problem(PyObject *args, int first, ampy_attn_problem *p, AmpyTensor **q)
{
    PyObject *oq, *ok, *ov, *om;
    int causal;
    double scale, dp;
    unsigned long long seed, offset;
    PyObject *t = PyTuple_GetSlice(args, first, first + 9);
    if (!t)
        return -1;
    int r = PyArg_ParseTuple(t, "OOOOpddKK:attention", &oq, &ok, &ov, &om, &causal, &scale, &dp,
                             &seed, &offset);
    Py_DECREF(t);
    if (!r)
        return -1;
    AmpyTensor *tq = dev_tensor(oq, "query", 1), *tk = NULL, *tv = NULL, *tm = NULL;
    if (!tq || !(tk = dev_tensor(ok, "key", 0)) || !(tv = dev_tensor(ov, "value", 0)) ||
        (om != Py_None && !(tm = dev_tensor(om, "attn_mask", 0))))
        return -1;
    int nd = tq->ndim - 2;
    if (nd < 0 || nd > AMPY_ATTN_MAX_BATCH || tk->ndim != tq->ndim || tv->ndim != tq->ndim ||
        (tm && tm->ndim != tq->ndim)) {
        PyErr_SetString(PyExc_ValueError, "scaled_dot_product_attention: query, key, value (and "
                        "attn_mask) must have the same number of dims, 2 to 10");
        return -1;
    }
    memset(p, 0, sizeof *p);
    p->nd = nd;
    for (int d = 0; d < nd; d++)
        p->batch[d] = tq->shape[d];
    p->Lq = tq->shape[nd], p->E = tq->shape[nd + 1];
    p->Lk = tk->shape[nd], p->Ev = tv->shape[nd + 1];
    if (!same_batch(tq, tk, nd) || !same_batch(tq, tv, nd) || tk->shape[nd + 1] != p->E ||
        tv->shape[nd] != p->Lk ||
        (tm && (!same_batch(tq, tm, nd) || tm->shape[nd] != p->Lq || tm->shape[nd + 1] != p->Lk))) {
        PyErr_SetString(PyExc_ValueError, "scaled_dot_product_attention: query (..., Lq, E), key "
                        "(..., Lk, E), value (..., Lk, Ev) and attn_mask (..., Lq, Lk) must agree");
        return -1;
    }
    if (tk->dtype != tq->dtype || tv->dtype != tq->dtype) {
        PyErr_SetString(PyExc_TypeError, "scaled_dot_product_attention: query, key and value "
                        "must have the same dtype");
        return -1;
    }
    p->dtype = (ampy_dtype)tq->dtype;
    operand(tq, nd, &p->q), operand(tk, nd, &p->k), operand(tv, nd, &p->v);
    if (tm)
        operand(tm, nd, &p->mask), p->mask_dtype = (ampy_dtype)tm->dtype;
    p->causal = causal, p->scale = scale, p->dropout_p = dp;
    p->seed = seed, p->offset = offset;
    *q = tq;
    ampy_status s = ampy_attention_check(p);
    return s == AMPY_OK ? 0 : (attn_raise(s), -1);
}

static AmpyTensor *new_out(const ampy_attn_problem *p, int64_t rows, int64_t cols, int dtype,
                           int matrix)
{
    int64_t shape[AMPY_ATTN_MAX_BATCH + 2];
    for (int d = 0; d < p->nd; d++)
        shape[d] = p->batch[d];
    shape[p->nd] = rows, shape[p->nd + 1] = cols;
    return ampy_py_empty(dtype, p->nd + 1 + matrix, shape, attn_dev);
}

static int64_t work(const ampy_attn_problem *p)
{
    int64_t n = p->Lq * (p->Lk + 1);
    for (int d = 0; d < p->nd; d++)
        n *= p->batch[d];
    return n;
}

/* attention_fwd(q, k, v, mask, causal, scale, dropout_p, seed, offset, save)
 *   -> (out, lse | None) */
static PyObject *f_attn_fwd(PyObject *self, PyObject *args)
{
    ampy_attn_problem p;
    AmpyTensor *q;
    if (PyTuple_GET_SIZE(args) != 10) {
        PyErr_SetString(PyExc_TypeError, "attention_fwd: expected 10 arguments");
        return NULL;
    }
    int save = PyObject_IsTrue(PyTuple_GET_ITEM(args, 9));
    if (save < 0 || problem(args, 0, &p, &q) < 0)
        return NULL;
    int acc = p.dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    AmpyTensor *out = new_out(&p, p.Lq, p.Ev, p.dtype, 1), *lse = NULL;
    if (!out || (save && !(lse = new_out(&p, p.Lq, 1, acc, 0))))
        goto error;
    ampy_status s;
    void *lp = lse ? lse->data : NULL;
    if (attn_dev >= 0) {
        s = ampy_py_cuda_api()->attention_fwd(attn_dev, &p, out->data, lp);
    } else if (work(&p) >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS s = ampy_attention_fwd(&p, out->data, lp);
        Py_END_ALLOW_THREADS
    } else {
        s = ampy_attention_fwd(&p, out->data, lp);
    }
    if (s != AMPY_OK) {
        attn_raise(s);
        goto error;
    }
    if (!lse)
        return Py_BuildValue("NO", out, Py_None);
    return Py_BuildValue("NN", out, lse);
error:
    Py_XDECREF(out), Py_XDECREF(lse);
    return NULL;
}

static AmpyTensor *contig(PyObject *o, const ampy_attn_problem *p, int64_t rows, int64_t cols,
                          int dtype, const char *arg)
{
    AmpyTensor *t = dev_tensor(o, arg, 0);
    if (!t)
        return NULL;
    int ok = ampy_py_is_contiguous(t) && t->dtype == dtype && t->ndim >= p->nd + 1 &&
             t->shape[p->nd] == rows && (cols < 0 || t->shape[p->nd + 1] == cols);
    for (int d = 0; ok && d < p->nd; d++)
        ok = t->shape[d] == p->batch[d];
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "attention_bwd: '%s' must be a contiguous tensor of the "
                     "forward's shape and dtype", arg);
        return NULL;
    }
    return t;
}

/* attention_bwd(q, k, v, mask, causal, scale, dropout_p, seed, offset, out, dout, lse
 *               [, want_dmask]) -> (dq, dk, dv) or, with want_dmask, (dq, dk, dv, dmask):
 * dmask (batch..., Lq, Lk) float32 (float64 for float64 inputs), CPU only. */
static PyObject *f_attn_bwd(PyObject *self, PyObject *args)
{
    ampy_attn_problem p;
    AmpyTensor *q, *out, *dout, *lse;
    Py_ssize_t na = PyTuple_GET_SIZE(args);
    if (na != 12 && na != 13) {
        PyErr_SetString(PyExc_TypeError, "attention_bwd: expected 12 or 13 arguments");
        return NULL;
    }
    int want = na == 13 ? PyObject_IsTrue(PyTuple_GET_ITEM(args, 12)) : 0;
    if (want < 0 || problem(args, 0, &p, &q) < 0)
        return NULL;
    if (want && (attn_dev >= 0 || !p.mask.data)) {
        PyErr_SetString(PyExc_ValueError, "attention_bwd: the attn_mask gradient needs a mask "
                        "on the CPU");
        return NULL;
    }
    int acc = p.dtype == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32;
    if (!(out = contig(PyTuple_GET_ITEM(args, 9), &p, p.Lq, p.Ev, p.dtype, "out")) ||
        !(dout = contig(PyTuple_GET_ITEM(args, 10), &p, p.Lq, p.Ev, p.dtype, "dout")) ||
        !(lse = contig(PyTuple_GET_ITEM(args, 11), &p, p.Lq, -1, acc, "lse")))
        return NULL;
    AmpyTensor *dq = new_out(&p, p.Lq, p.E, p.dtype, 1), *dk = NULL, *dv = NULL, *dm = NULL;
    if (!dq || !(dk = new_out(&p, p.Lk, p.E, p.dtype, 1)) ||
        !(dv = new_out(&p, p.Lk, p.Ev, p.dtype, 1)) ||
        (want && !(dm = new_out(&p, p.Lq, p.Lk, acc, 1))))
        goto error;
    ampy_status s;
    if (attn_dev >= 0) {
        s = ampy_py_cuda_api()->attention_bwd(attn_dev, &p, out->data, dout->data, lse->data,
                                              dq->data, dk->data, dv->data);
    } else {
        Py_BEGIN_ALLOW_THREADS s = ampy_attention_bwd_mask(&p, out->data, dout->data, lse->data,
                                                           dq->data, dk->data, dv->data,
                                                           dm ? dm->data : NULL);
        Py_END_ALLOW_THREADS
    }
    if (s != AMPY_OK) {
        attn_raise(s);
        goto error;
    }
    if (dm)
        return Py_BuildValue("NNNN", dq, dk, dv, dm);
    return Py_BuildValue("NNN", dq, dk, dv);
error:
    Py_XDECREF(dq), Py_XDECREF(dk), Py_XDECREF(dv), Py_XDECREF(dm);
    return NULL;
}

PyMethodDef ampy_py_attention_methods[] = {
    {"attention_fwd", f_attn_fwd, METH_VARARGS,
     "attention_fwd(q, k, v, mask, causal, scale, dropout_p, seed, offset, save)\n--\n\n"
     "Internal: fused scaled dot-product attention; returns (out, lse or None)."},
    {"attention_bwd", f_attn_bwd, METH_VARARGS,
     "attention_bwd(q, k, v, mask, causal, scale, dropout_p, seed, offset, out, dout, lse"
     "[, want_dmask])\n--\n\n"
     "Internal: its backward; returns (dq, dk, dv[, dmask])."},
    {NULL, NULL, 0, NULL},
};
