/* rnn_py.c — binding of the fused recurrent cells (ampy/rnn.h) as
 * ampy._C.rnn_cell_fwd / rnn_cell_bwd.
 *
 * Internal API for ampy/nn/_ops_rnn.py, which passes contiguous tensors of
 * one dtype on one device: gate arrays (B, G*H), states (B, H). The binding
 * checks the shapes and dtypes once, allocates the outputs on the tensors'
 * device, runs libampy's kernel (CPU, GIL released) or cuda/rnn.cu's through
 * the ampy_cuda_api table, and maps an ampy_status to an exception.
 */
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

PyMethodDef ampy_py_rnn_methods[] = {
    {"rnn_cell_fwd", f_cell_fwd, METH_VARARGS,
     "rnn_cell_fwd(mode, gx, gh, hx, cx, save)\n--\n\nInternal: one fused recurrent step."},
    {"rnn_cell_bwd", f_cell_bwd, METH_VARARGS,
     "rnn_cell_bwd(mode, ws, hx, cx, dhy, dcy, need_dcx)\n--\n\nInternal: its backward."},
    {NULL, NULL, 0, NULL},
};
