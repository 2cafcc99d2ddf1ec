/* rnn_py.c — binding of the fused recurrent cells (ampy/rnn.h) as
 * ampy._C.rnn_cell_fwd / rnn_cell_bwd.
 *
 * Internal API for ampy/nn/_ops_rnn.py, which passes contiguous tensors of
 * one dtype on one device: gate arrays (B, G*H), states (B, H). The binding
 * checks the shapes and dtypes once, allocates the outputs on the tensors'
 * device, runs libampy's kernel (CPU, GIL released) or cuda/rnn.cu's through
 * the ampy_cuda_api table, and maps an ampy_status to an exception.
 */
#include <string.h>

#include "pyampy.h"

#include "ampy/cuda.h"
#include "ampy/dtype.h"
#include "ampy/rnn.h"
#include "ampy/rnn_math.h"

/* The call's device: the first tensor's; the others must match. */
#define DEV_UNSET (-2)

/* A contiguous tensor on the call's device (or NULL without an exception for
 * None when opt); *err set on failure. */
static AmpyTensor *cell_arg(PyObject *o, const char *arg, int opt, int *err, int *dev)
{
    if (*err || (opt && o == Py_None))
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(o, "rnn cell", arg);
    if (t && !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "rnn cell: argument '%s' must be contiguous", arg);
        t = NULL;
    }
    if (t && *dev == DEV_UNSET) {
        *dev = t->device;
        if (*dev != AMPY_DEV_CPU && !ampy_py_cuda_api())
            t = NULL;
    } else if (t && t->device != *dev) {
        PyErr_Format(PyExc_RuntimeError, "rnn cell: Expected all tensors to be on the same "
                     "device, but argument '%s' is elsewhere", arg);
        t = NULL;
    }
    if (!t)
        *err = 1;
    return t;
}

/* t is (B, n) of dtype dt (t may be NULL: nothing to check). */
static int check_2d(const AmpyTensor *t, const char *arg, int64_t B, int64_t n, int dt)
{
    if (!t)
        return 0;
    if (t->ndim != 2 || t->shape[0] != B || t->shape[1] != n) {
        PyErr_Format(PyExc_ValueError, "rnn cell: argument '%s' must have shape (%lld, %lld)",
                     arg, (long long)B, (long long)n);
        return -1;
    }
    if (t->dtype != dt) {
        PyErr_Format(PyExc_TypeError, "rnn cell: argument '%s' must have the gates' dtype", arg);
        return -1;
    }
    return 0;
}

static AmpyTensor *new2d(int dtype, int64_t r, int64_t c, int dev)
{
    int64_t shape[2] = {r, c};
    return ampy_py_empty(dtype, 2, shape, dev);
}

static PyObject *opt_obj(AmpyTensor *t)
{
    if (t)
        return (PyObject *)t;
    Py_RETURN_NONE;
}

static int ws_dtype(int dt) { return dt == AMPY_FLOAT64 ? AMPY_FLOAT64 : AMPY_FLOAT32; }

/* rnn_cell_fwd(mode, gx, gh, hx, cx, save) -> (hy, cy | None, ws | None) */
static PyObject *f_cell_fwd(PyObject *self, PyObject *args)
{
    int mode, save, err = 0, dev = DEV_UNSET;
    PyObject *ogx, *ogh, *ohx, *ocx;
    if (!PyArg_ParseTuple(args, "iOOOOp:rnn_cell_fwd", &mode, &ogx, &ogh, &ohx, &ocx, &save))
        return NULL;
    if (mode < AMPY_RNN_LSTM || mode > AMPY_RNN_RELU)
        return PyErr_Format(PyExc_ValueError, "rnn cell: unknown mode %d", mode);
    AmpyTensor *gx = cell_arg(ogx, "gx", 0, &err, &dev), *gh = cell_arg(ogh, "gh", 0, &err, &dev);
    AmpyTensor *hx = cell_arg(ohx, "hx", 1, &err, &dev), *cx = cell_arg(ocx, "cx", 1, &err, &dev);
    if (err)
        return NULL;
    int64_t G = ampy_rnn_gates(mode);
    if (gx->ndim != 2 || gx->shape[1] % G != 0)
        return PyErr_Format(PyExc_ValueError, "rnn cell: gx must be (B, %lld * hidden)",
                            (long long)G);
    int64_t B = gx->shape[0], H = gx->shape[1] / G;
    int dt = gx->dtype;
    if (check_2d(gh, "gh", B, G * H, dt) < 0 || check_2d(hx, "hx", B, H, dt) < 0 ||
        check_2d(cx, "cx", B, H, dt) < 0)
        return NULL;
    if ((mode == AMPY_RNN_LSTM && !cx) || (mode == AMPY_RNN_GRU && !hx))
        return PyErr_Format(PyExc_ValueError, "rnn cell: the previous %s state is required",
                            mode == AMPY_RNN_LSTM ? "cell" : "hidden");
    AmpyTensor *hy = new2d(dt, B, H, dev);
    AmpyTensor *cy = mode == AMPY_RNN_LSTM ? new2d(dt, B, H, dev) : NULL;
    AmpyTensor *ws = save ? new2d(ws_dtype(dt), B, ampy_rnn_saved(mode) * H, dev) : NULL;
    if (!hy || (mode == AMPY_RNN_LSTM && !cy) || (save && !ws))
        goto error;
    ampy_status s;
    const void *hxp = hx ? hx->data : NULL, *cxp = cx ? cx->data : NULL;
    void *cyp = cy ? cy->data : NULL, *wsp = ws ? ws->data : NULL;
    if (dev >= 0) {
        s = ampy_py_cuda_api()->rnn_cell_fwd(dev, mode, B, H, dt, gx->data, gh->data, hxp, cxp,
                                             hy->data, cyp, wsp);
    } else {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_rnn_cell_fwd(mode, B, H, dt, gx->data, gh->data, hxp, cxp, hy->data, cyp, wsp);
        Py_END_ALLOW_THREADS
    }
    if (s != AMPY_OK) {
        dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
        goto error;
    }
    return Py_BuildValue("(NNN)", (PyObject *)hy, opt_obj(cy), opt_obj(ws));
error:
    Py_XDECREF(hy);
    Py_XDECREF(cy);
    Py_XDECREF(ws);
    return NULL;
}

/* rnn_cell_bwd(mode, ws, hx, cx, dhy, dcy, need_dcx)
 *   -> (dgx, dgh | None, dhx | None, dcx | None) */
static PyObject *f_cell_bwd(PyObject *self, PyObject *args)
{
    int mode, need_dcx, err = 0, dev = DEV_UNSET;
    PyObject *ows, *ohx, *ocx, *odh, *odc;
    if (!PyArg_ParseTuple(args, "iOOOOOp:rnn_cell_bwd", &mode, &ows, &ohx, &ocx, &odh, &odc,
                          &need_dcx))
        return NULL;
    if (mode < AMPY_RNN_LSTM || mode > AMPY_RNN_RELU)
        return PyErr_Format(PyExc_ValueError, "rnn cell: unknown mode %d", mode);
    AmpyTensor *ws = cell_arg(ows, "ws", 0, &err, &dev);
    AmpyTensor *hx = cell_arg(ohx, "hx", 1, &err, &dev), *cx = cell_arg(ocx, "cx", 1, &err, &dev);
    AmpyTensor *dh = cell_arg(odh, "dhy", 1, &err, &dev), *dc = cell_arg(odc, "dcy", 1, &err, &dev);
    if (err)
        return NULL;
    int64_t S = ampy_rnn_saved(mode), G = ampy_rnn_gates(mode);
    AmpyTensor *like = dh ? dh : dc ? dc : hx ? hx : cx;
    if (!like || ws->ndim != 2 || ws->shape[1] % S != 0)
        return PyErr_Format(PyExc_ValueError, "rnn cell backward: bad workspace or gradients");
    int64_t B = ws->shape[0], H = ws->shape[1] / S;
    int dt = like->dtype;
    if (ws->dtype != ws_dtype(dt) || check_2d(hx, "hx", B, H, dt) < 0 ||
        check_2d(cx, "cx", B, H, dt) < 0 || check_2d(dh, "dhy", B, H, dt) < 0 ||
        check_2d(dc, "dcy", B, H, dt) < 0)
        return PyErr_Occurred() ? NULL
                                : PyErr_Format(PyExc_TypeError, "rnn cell: bad workspace dtype");
    if ((mode == AMPY_RNN_LSTM && !cx) || (mode == AMPY_RNN_GRU && !hx))
        return PyErr_Format(PyExc_ValueError, "rnn cell backward: the previous state is required");
    int gru = mode == AMPY_RNN_GRU;
    AmpyTensor *dgx = new2d(dt, B, G * H, dev), *dgh = gru ? new2d(dt, B, G * H, dev) : NULL;
    AmpyTensor *dhx = gru ? new2d(dt, B, H, dev) : NULL;
    AmpyTensor *dcx = mode == AMPY_RNN_LSTM && need_dcx ? new2d(dt, B, H, dev) : NULL;
    if (!dgx || (gru && (!dgh || !dhx)) || (mode == AMPY_RNN_LSTM && need_dcx && !dcx))
        goto error;
    ampy_status s;
    const void *hxp = hx ? hx->data : NULL, *cxp = cx ? cx->data : NULL;
    const void *dhp = dh ? dh->data : NULL, *dcp = dc ? dc->data : NULL;
    void *dghp = dgh ? dgh->data : NULL, *dhxp = dhx ? dhx->data : NULL;
    void *dcxp = dcx ? dcx->data : NULL;
    if (dev >= 0) {
        s = ampy_py_cuda_api()->rnn_cell_bwd(dev, mode, B, H, dt, ws->data, hxp, cxp, dhp, dcp,
                                             dgx->data, dghp, dhxp, dcxp);
    } else {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_rnn_cell_bwd(mode, B, H, dt, ws->data, hxp, cxp, dhp, dcp, dgx->data, dghp,
                              dhxp, dcxp);
        Py_END_ALLOW_THREADS
    }
    if (s != AMPY_OK) {
        dev >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
        goto error;
    }
    return Py_BuildValue("(NNNN)", (PyObject *)dgx, opt_obj(dgh), opt_obj(dhx), opt_obj(dcx));
error:
    Py_XDECREF(dgx);
    Py_XDECREF(dgh);
    Py_XDECREF(dhx);
    Py_XDECREF(dcx);
    return NULL;
}

/* ---- whole layers (CPU): rnn_layer_fwd / rnn_layer_bwd ---------------------- */

/* A contiguous CPU tensor of dtype dt and the given shape (nd dims), or NULL
 * for None when opt; *err set (with an exception) on failure. */
static AmpyTensor *layer_arg(PyObject *o, const char *arg, int opt, int dt, int nd,
                             const int64_t *shape, int *err)
{
    if (*err || (opt && o == Py_None))
        return NULL;
    AmpyTensor *t = ampy_py_tensor_arg(o, "rnn layer", arg);
    if (!t) {
        *err = 1;
        return NULL;
    }
    int ok = t->ndim == nd && ampy_py_is_contiguous(t) && t->device == AMPY_DEV_CPU;
    for (int i = 0; ok && i < nd; i++)
        ok = t->shape[i] == shape[i];
    if (!ok) {
        PyErr_Format(PyExc_ValueError, "rnn layer: argument '%s' must be a contiguous CPU "
                     "tensor of the layer's shape", arg);
        *err = 1;
        return NULL;
    }
    if (dt >= 0 && t->dtype != dt) {
        PyErr_Format(PyExc_TypeError, "rnn layer: argument '%s' must have the gates' dtype", arg);
        *err = 1;
        return NULL;
    }
    return t;
}

static void *dptr(const AmpyTensor *t) { return t ? t->data : NULL; }

/* rnn_layer_fwd(mode, reverse, gx, w_hh, b_hh, h0, c0, save) -> (y, cs | None, ws | None) */
static PyObject *f_layer_fwd(PyObject *self, PyObject *args)
{
    int mode, reverse, save, err = 0;
    PyObject *ogx, *ow, *ob, *oh, *oc;
    if (!PyArg_ParseTuple(args, "ipOOOOOp:rnn_layer_fwd", &mode, &reverse, &ogx, &ow, &ob, &oh,
                          &oc, &save))
        return NULL;
    if (mode < AMPY_RNN_LSTM || mode > AMPY_RNN_RELU)
        return PyErr_Format(PyExc_ValueError, "rnn layer: unknown mode %d", mode);
    AmpyTensor *gx = ampy_py_tensor_arg(ogx, "rnn layer", "gx");
    if (!gx)
        return NULL;
    const int64_t G = ampy_rnn_gates(mode);
    if (gx->ndim != 3 || gx->shape[2] % G != 0)
        return PyErr_Format(PyExc_ValueError, "rnn layer: gx must be (T, B, %lld * hidden)",
                            (long long)G);
    const int64_t T = gx->shape[0], B = gx->shape[1], H = gx->shape[2] / G;
    const int dt = gx->dtype, lstm = mode == AMPY_RNN_LSTM;
    const int64_t s3[3] = {T, B, G * H}, sw[2] = {G * H, H}, sb[1] = {G * H}, sh[2] = {B, H};
    layer_arg(ogx, "gx", 0, dt, 3, s3, &err);
    AmpyTensor *w = layer_arg(ow, "w_hh", 0, dt, 2, sw, &err);
    AmpyTensor *b = layer_arg(ob, "b_hh", 1, dt, 1, sb, &err);
    AmpyTensor *h0 = layer_arg(oh, "h0", 0, dt, 2, sh, &err);
    AmpyTensor *c0 = layer_arg(oc, "c0", !lstm, dt, 2, sh, &err);
    if (err)
        return NULL;
    const int64_t sy[3] = {T, B, H}, sws[3] = {T, B, ampy_rnn_saved(mode) * H};
    AmpyTensor *y = ampy_py_empty(dt, 3, sy, AMPY_DEV_CPU);
    AmpyTensor *cs = lstm ? ampy_py_empty(dt, 3, sy, AMPY_DEV_CPU) : NULL;
    AmpyTensor *ws = save ? ampy_py_empty(ws_dtype(dt), 3, sws, AMPY_DEV_CPU) : NULL;
    if (!y || (lstm && !cs) || (save && !ws))
        goto error;
    ampy_status s;
    Py_BEGIN_ALLOW_THREADS
    s = ampy_rnn_layer_fwd(mode, reverse, T, B, H, dt, gx->data, w->data, dptr(b), h0->data,
                           dptr(c0), y->data, dptr(cs), dptr(ws));
    Py_END_ALLOW_THREADS
    if (s != AMPY_OK) {
        ampy_py_raise(s);
        goto error;
    }
    return Py_BuildValue("(NNN)", (PyObject *)y, opt_obj(cs), opt_obj(ws));
error:
    Py_XDECREF(y);
    Py_XDECREF(cs);
    Py_XDECREF(ws);
    return NULL;
}

/* Allocate the backward's outputs (flags: need dh0, dc0, dw_hh, db_hh). */
static int layer_grads(ampy_rnn_layer_bwd_args *a, AmpyTensor **o, const int *need)
{
    const int64_t GH = ampy_rnn_gates(a->mode) * a->H;
    const int64_t sg[3] = {a->T, a->B, GH}, sh[2] = {a->B, a->H}, sw[2] = {GH, a->H};
    const int64_t sb[1] = {GH};
    const int gru = a->mode == AMPY_RNN_GRU, lstm = a->mode == AMPY_RNN_LSTM;
    o[0] = ampy_py_empty(a->dtype, 3, sg, AMPY_DEV_CPU);
    o[1] = gru ? ampy_py_empty(a->dtype, 3, sg, AMPY_DEV_CPU) : NULL;
    o[2] = need[0] ? ampy_py_empty(a->dtype, 2, sh, AMPY_DEV_CPU) : NULL;
    o[3] = need[1] && lstm ? ampy_py_empty(a->dtype, 2, sh, AMPY_DEV_CPU) : NULL;
    o[4] = need[2] ? ampy_py_empty(a->dtype, 2, sw, AMPY_DEV_CPU) : NULL;
    o[5] = need[3] ? ampy_py_empty(a->dtype, 1, sb, AMPY_DEV_CPU) : NULL;
    if (!o[0] || (gru && !o[1]) || (need[0] && !o[2]) || (need[1] && lstm && !o[3]) ||
        (need[2] && !o[4]) || (need[3] && !o[5]))
        return -1;
    a->dgx = o[0]->data;
    a->dgh = dptr(o[1]);
    a->dh0 = dptr(o[2]);
    a->dc0 = dptr(o[3]);
    a->dw_hh = dptr(o[4]);
    a->db_hh = dptr(o[5]);
    return 0;
}

/* rnn_layer_bwd(mode, reverse, ws, y, cs, h0, c0, w_hh, dy, dhT, dcT,
 *               need_dh0, need_dc0, need_dw, need_db)
 *   -> (dgx, dgh | None, dh0 | None, dc0 | None, dw_hh | None, db_hh | None) */
static PyObject *f_layer_bwd(PyObject *self, PyObject *args)
{
    ampy_rnn_layer_bwd_args a = {0};
    int need[4], err = 0;
    PyObject *ows, *oy, *ocs, *oh, *oc, *ow, *ody, *odh, *odc;
    if (!PyArg_ParseTuple(args, "ipOOOOOOOOOpppp:rnn_layer_bwd", &a.mode, &a.reverse, &ows, &oy,
                          &ocs, &oh, &oc, &ow, &ody, &odh, &odc, &need[0], &need[1], &need[2],
                          &need[3]))
        return NULL;
    if (a.mode < AMPY_RNN_LSTM || a.mode > AMPY_RNN_RELU)
        return PyErr_Format(PyExc_ValueError, "rnn layer: unknown mode %d", a.mode);
    AmpyTensor *y = ampy_py_tensor_arg(oy, "rnn layer", "y");
    if (!y)
        return NULL;
    if (y->ndim != 3)
        return PyErr_Format(PyExc_ValueError, "rnn layer: y must be (T, B, hidden)");
    a.T = y->shape[0], a.B = y->shape[1], a.H = y->shape[2], a.dtype = y->dtype;
    const int lstm = a.mode == AMPY_RNN_LSTM, dt = a.dtype;
    const int64_t sy[3] = {a.T, a.B, a.H}, sh[2] = {a.B, a.H};
    const int64_t sws[3] = {a.T, a.B, ampy_rnn_saved(a.mode) * a.H};
    const int64_t sw[2] = {ampy_rnn_gates(a.mode) * a.H, a.H};
    AmpyTensor *ws = layer_arg(ows, "ws", 0, ws_dtype(dt), 3, sws, &err);
    layer_arg(oy, "y", 0, dt, 3, sy, &err);
    AmpyTensor *cs = layer_arg(ocs, "cs", !lstm, dt, 3, sy, &err);
    AmpyTensor *h0 = layer_arg(oh, "h0", 0, dt, 2, sh, &err);
    AmpyTensor *c0 = layer_arg(oc, "c0", !lstm, dt, 2, sh, &err);
    AmpyTensor *w = layer_arg(ow, "w_hh", 0, dt, 2, sw, &err);
    AmpyTensor *dy = layer_arg(ody, "dy", 1, dt, 3, sy, &err);
    AmpyTensor *dh = layer_arg(odh, "dhT", 1, dt, 2, sh, &err);
    AmpyTensor *dc = layer_arg(odc, "dcT", 1, dt, 2, sh, &err);
    if (err)
        return NULL;
    a.ws = ws->data, a.y = y->data, a.cs = dptr(cs), a.h0 = h0->data, a.c0 = dptr(c0);
    a.w_hh = w->data, a.dy = dptr(dy), a.dhT = dptr(dh), a.dcT = lstm ? dptr(dc) : NULL;
    AmpyTensor *o[6] = {NULL};
    ampy_status s = AMPY_OK;
    if (layer_grads(&a, o, need) < 0)
        goto error;
    Py_BEGIN_ALLOW_THREADS
    s = ampy_rnn_layer_bwd(&a);
    Py_END_ALLOW_THREADS
    if (s != AMPY_OK) {
        ampy_py_raise(s);
        goto error;
    }
    return Py_BuildValue("(NNNNNN)", (PyObject *)o[0], opt_obj(o[1]), opt_obj(o[2]),
                         opt_obj(o[3]), opt_obj(o[4]), opt_obj(o[5]));
error:
    for (int i = 0; i < 6; i++)
        Py_XDECREF(o[i]);
    return NULL;
}

/* _rnn_layer_set_packed(on): the layer's time-loop switch
 * (ampy_rnn_layer_set_packed); returns the previous setting. */
static PyObject *f_layer_set_packed(PyObject *self, PyObject *arg)
{
    (void)self;
    const int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    return PyBool_FromLong(ampy_rnn_layer_set_packed(on));
}

/* _rnn_layer_packed(name, K): whether a layer's K-term products of dtype
 * `name` ("float32", "float16", "bfloat16") run in the packed loop now. */
static PyObject *f_layer_packed(PyObject *self, PyObject *args)
{
    (void)self;
    static const struct { const char *name; int dt; } names[] = {
        {"float32", AMPY_FLOAT32}, {"float16", AMPY_FLOAT16}, {"bfloat16", AMPY_BFLOAT16}};
    const char *name;
    long long K;
    if (!PyArg_ParseTuple(args, "sL:_rnn_layer_packed", &name, &K))
        return NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0)
            return PyBool_FromLong(ampy_rnn_layer_packed(names[i].dt, (int64_t)K));
    PyErr_SetString(PyExc_ValueError,
                    "_rnn_layer_packed: expected 'float32', 'float16' or 'bfloat16'");
    return NULL;
}

PyMethodDef ampy_py_rnn_methods[] = {
    {"rnn_cell_fwd", f_cell_fwd, METH_VARARGS,
     "rnn_cell_fwd(mode, gx, gh, hx, cx, save)\n--\n\nInternal: one fused recurrent step."},
    {"rnn_cell_bwd", f_cell_bwd, METH_VARARGS,
     "rnn_cell_bwd(mode, ws, hx, cx, dhy, dcy, need_dcx)\n--\n\nInternal: its backward."},
    {"rnn_layer_fwd", f_layer_fwd, METH_VARARGS,
     "rnn_layer_fwd(mode, reverse, gx, w_hh, b_hh, h0, c0, save)\n--\n\n"
     "Internal: one recurrent layer of one direction over all steps (CPU)."},
    {"rnn_layer_bwd", f_layer_bwd, METH_VARARGS,
     "rnn_layer_bwd(mode, reverse, ws, y, cs, h0, c0, w_hh, dy, dhT, dcT, need_dh0, need_dc0, "
     "need_dw, need_db)\n--\n\nInternal: its backward through time."},
    {"_rnn_layer_set_packed", f_layer_set_packed, METH_O,
     "_rnn_layer_set_packed(on, /)\n--\n\n"
     "Internal (tests): turn the layer's packed-weight time loop on or off; returns the old "
     "setting."},
    {"_rnn_layer_packed", f_layer_packed, METH_VARARGS,
     "_rnn_layer_packed(dtype_name, K, /)\n--\n\n"
     "Internal (tests): whether a layer's K-term products of that dtype run in the packed "
     "loop now."},
    {NULL, NULL, 0, NULL},
};
