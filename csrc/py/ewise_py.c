/* ewise_py.c — binding of the element-wise concern (ampy/ewise.h).
 *
 *   _C.ewise(op, out, alpha, beta, *inputs) -> Tensor
 *       inputs: Tensors or Python numbers (bool/int/float, NumPy scalars).
 *       Applies torch.result_type to the inputs (Python numbers are "wrapped
 *       numbers", 0-dim tensors their own category), broadcasts, allocates the
 *       result (or checks `out`: exact broadcast shape, result type castable
 *       to out's dtype) and runs the kernel with the GIL released for large
 *       work. alpha/beta: None or numbers (the op's scalar parameters).
 *   _C.result_type(*operands) -> dtype
 *   (the op codes: _C.EWISE_OPS, enums_py.c; promote_types / can_cast:
 *   promote_py.c)
 *   _C._math_init(default_dtype_list): where the default float dtype lives.
 *
 * An output that partially overlaps an input is handled by first copying the
 * input, so `x[1:].add_(x[:-1])` reads the old values like torch.
 */
#include "pyampy.h"

#include <limits.h>

#include "ampy/cast.h"
#include "ampy/cuda.h"
#include "ampy/elem.h"
#include "ampy/ewise.h"

static PyObject *default_dtype_list; /* ampy._dtype._default_dtype */

int ampy_py_default_float(void)
{
    int d = AMPY_FLOAT32;
    if (default_dtype_list && PyList_Check(default_dtype_list) &&
        PyList_GET_SIZE(default_dtype_list) > 0) {
        PyObject *o = PyList_GET_ITEM(default_dtype_list, 0);
        for (int i = 0; i < AMPY_NUM_DTYPES; i++)
            if (o == ampy_py.dtypes[i])
                d = i;
    }
    return d;
}

static const char *arg_name(int op, int k)
{
    static const char *const generic[3] = {"input", "other", "third"};
    switch (op) {
    case AMPY_EW_WHERE: return (const char *[]){"condition", "input", "other"}[k];
    case AMPY_EW_LERP: return (const char *[]){"input", "end", "weight"}[k];
    case AMPY_EW_ADDCMUL:
    case AMPY_EW_ADDCDIV: return (const char *[]){"input", "tensor1", "tensor2"}[k];
    case AMPY_EW_CLAMP: return (const char *[]){"input", "min", "max"}[k];
    case AMPY_EW_POW: return (const char *[]){"input", "exponent", ""}[k];
    default: return generic[k];
    }
}

/* A Python number as a wrapped scalar; returns 1 if o is one, 0 if not, -1 on
 * error (an int too large for int64). */
typedef union {
    double d;
    int64_t i;
    uint8_t b;
} scalar_buf;

/* An int beyond int64 as torch takes it: [2**63, 2**64) is a (uint64) number
 * that a floating operand takes as a double (*dt = FLOAT64); with integer
 * operands ampy raises instead of torch's wrap. Others: OverflowError as torch. */
static int parse_big_int(PyObject *o, int float_ok, scalar_buf *v, ampy_dtype *dt)
{
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred())
        return -1; /* torch's OverflowError texts are CPython's here too */
    if (!float_ok) {
        PyErr_Format(PyExc_RuntimeError, "value %R cannot be converted to type int64 "
                                         "without overflow", o);
        return -1;
    }
    v->d = (double)u;
    *dt = AMPY_FLOAT64;
    return 1;
}

static int parse_number_ex(PyObject *o, int float_ok, scalar_buf *v, ampy_dtype *dt);

static int parse_number(PyObject *o, scalar_buf *v, ampy_dtype *dt)
{
    return parse_number_ex(o, 0, v, dt);
}

static int parse_number_ex(PyObject *o, int float_ok, scalar_buf *v, ampy_dtype *dt)
{
    if (PyBool_Check(o) || PyArray_IsScalar(o, Bool)) {
        v->i = 0;
        v->b = (uint8_t)PyObject_IsTrue(o);
        *dt = AMPY_BOOL;
        return 1;
    }
    if (PyLong_Check(o) || PyArray_IsScalar(o, Integer)) {
        int overflow = 0;
        PyObject *idx = PyNumber_Index(o);
        if (!idx)
            return -1;
        long long x = PyLong_AsLongLongAndOverflow(idx, &overflow);
        if (overflow) {
            int r = parse_big_int(idx, float_ok, v, dt);
            Py_DECREF(idx);
            return r;
        }
        Py_DECREF(idx);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_RuntimeError, "value %R cannot be converted to type int64 "
                                             "without overflow", o);
            return -1;
        }
        v->i = x;
        *dt = AMPY_INT64;
        return 1;
    }
    if (PyFloat_Check(o) || PyArray_IsScalar(o, Floating)) {
        double x = PyFloat_AsDouble(o);
        if (x == -1.0 && PyErr_Occurred())
            return -1;
        v->d = x;
        *dt = AMPY_FLOAT64;
        return 1;
    }
    return 0;
}

static int parse_param(PyObject *o, int k, ampy_ewise_params *p, const char *fn, const char *arg)
{
    if (o == Py_None)
        return 0;
    scalar_buf v;
    ampy_dtype dt;
    int r = parse_number(o, &v, &dt);
    if (r < 0)
        return -1;
    if (r == 0) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a number, not %s", fn, arg,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    if (dt == AMPY_FLOAT64) {
        p->f[k] = v.d;
        p->i[k] = ampy_f64_to_i64(v.d);
    } else {
        p->i[k] = dt == AMPY_BOOL ? v.b : v.i;
        p->f[k] = (double)p->i[k];
    }
    return 0;
}

static PyObject *shape_list(int ndim, const int64_t *shape)
{
    PyObject *l = PyList_New(ndim);
    for (int d = 0; l && d < ndim; d++)
        PyList_SET_ITEM(l, d, PyLong_FromLongLong(shape[d]));
    return l;
}

/* Memory span [lo, hi) that a tensor touches (empty for an empty tensor). */
static void span(const AmpyTensor *t, char **lo, char **hi)
{
    int64_t isz = (int64_t)ampy_dtype_size(t->dtype), a = 0, b = 0;
    if (t->numel == 0) {
        *lo = *hi = t->data;
        return;
    }
    for (int d = 0; d < t->ndim; d++) {
        int64_t ext = (t->shape[d] - 1) * t->strides[d];
        if (ext < 0)
            a += ext;
        else
            b += ext;
    }
    *lo = t->data + a * isz;
    *hi = t->data + (b + 1) * isz;
}

/* Byte strides of t broadcast to (ndim, shape) (t's shape fits: checked). */
static void bcast_strides(const AmpyTensor *t, int ndim, const int64_t *shape, int64_t *out)
{
    const int64_t isz = (int64_t)ampy_dtype_size(t->dtype);
    for (int d = 0; d < ndim; d++) {
        int sd = d - (ndim - t->ndim);
        out[d] = (sd < 0 || t->shape[sd] == 1) ? 0 : t->strides[sd] * isz;
    }
}

typedef struct {
    int op, arity, ndim;
    int64_t shape[AMPY_MAX_DIMS];
    AmpyTensor *t[3]; /* NULL for a number */
    scalar_buf num[3];
    ampy_dtype dt[3];
    int64_t strides[4][AMPY_MAX_DIMS];
    PyObject *tmp[3]; /* owned copies of inputs that overlap out */
    int device;       /* AMPY_DEV_CPU, or the CUDA device of the tensor inputs */
} ew_call;

/* Dtype rules: fills *compute and *result (the dtype of a fresh output). */
static int ew_types(ew_call *c, ampy_dtype *compute, ampy_dtype *result)
{
    const char *name = ampy_ewise_op_name(c->op);
    const unsigned fl = ampy_ewise_op_flags(c->op);
    ampy_dtype dts[3];
    int kinds[3], n = 0;
    for (int k = (fl & AMPY_EWF_SKIP_FIRST) ? 1 : 0; k < c->arity; k++, n++) {
        dts[n] = c->dt[k];
        kinds[n] = !c->t[k] ? AMPY_OPERAND_WRAPPED
                   : c->t[k]->ndim == 0 ? AMPY_OPERAND_ZERODIM : AMPY_OPERAND_DIM;
    }
    const ampy_dtype dflt = (ampy_dtype)ampy_py_default_float();
    ampy_dtype r = ampy_result_type(n, dts, kinds, dflt);
    if ((fl & AMPY_EWF_INT_ONLY) && ampy_dtype_is_float(r)) {
        PyErr_Format(PyExc_TypeError, "%s: not implemented for '%s' (integer or bool tensors "
                     "only)", name, ampy_dtype_torch_name(r));
        return -1;
    }
    if ((fl & AMPY_EWF_FLOAT_ONLY) && !ampy_dtype_is_float(r)) {
        PyErr_Format(PyExc_NotImplementedError, "\"%s\" not implemented for '%s'", name,
                     ampy_dtype_torch_name(r));
        return -1;
    }
    if ((fl & AMPY_EWF_NO_BOOL) && r == AMPY_BOOL) {
        PyErr_Format(PyExc_TypeError, "%s: not supported for bool tensors (use logical_not() "
                     "or logical_xor() instead)", name);
        return -1;
    }
    if ((fl & AMPY_EWF_SKIP_FIRST) && c->dt[0] != AMPY_BOOL && c->dt[0] != AMPY_UINT8) {
        PyErr_Format(PyExc_TypeError, "%s: expected condition to be a boolean tensor, but got "
                     "a tensor with dtype %s", name, ampy_dtype_name(c->dt[0]));
        return -1;
    }
    if ((fl & AMPY_EWF_INT_TO_FLOAT) && !ampy_dtype_is_float(r))
        r = dflt;
    *compute = r;
    *result = (fl & AMPY_EWF_OUT_BOOL) ? AMPY_BOOL : r;
    return 0;
}

/* 1 when some input of op is a floating tensor (then an int in [2**63,
 * 2**64) is taken as a double, as torch). */
static int float_operand(int op, PyObject *const *args)
{
    for (int k = 0; k < ampy_ewise_op_arity(op); k++)
        if (ampy_py_is_tensor(args[k]) && ampy_dtype_is_float(((AmpyTensor *)args[k])->dtype))
            return 1;
    return 0;
}

/* Parse inputs, broadcast. Returns 0 / -1. */
static int ew_inputs(ew_call *c, PyObject *const *args)
{
    const char *name = ampy_ewise_op_name(c->op);
    int have_tensor = 0;
    c->ndim = 0;
    c->device = AMPY_DEV_CPU;
    for (int k = 0; k < c->arity; k++) /* CUDA: every tensor on one device; 0-dim CPU ok */
        if (ampy_py_is_tensor(args[k]) && ((AmpyTensor *)args[k])->device != AMPY_DEV_CPU)
            c->device = ((AmpyTensor *)args[k])->device;
    for (int k = 0; k < c->arity; k++) {
        PyObject *o = args[k];
        c->t[k] = NULL;
        c->tmp[k] = NULL;
        if (ampy_py_is_tensor(o)) {
            AmpyTensor *t = (AmpyTensor *)o;
            if (t->device != c->device && !(t->device == AMPY_DEV_CPU && t->ndim == 0)) {
                PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same "
                             "device, but argument '%s' is on %s%d", name, arg_name(c->op, k),
                             t->device < 0 ? "cpu" : "cuda:", t->device < 0 ? 0 : t->device);
                return -1;
            }
            c->t[k] = t;
            c->dt[k] = (ampy_dtype)t->dtype;
            int nd;
            int64_t sh[AMPY_MAX_DIMS];
            ampy_status s = ampy_broadcast_shapes(c->ndim, c->shape, t->ndim, t->shape, &nd, sh,
                                                  name);
            if (s != AMPY_OK)
                return ampy_py_raise_int(s);
            c->ndim = nd;
            memcpy(c->shape, sh, sizeof(int64_t) * (size_t)nd);
            have_tensor = 1;
            continue;
        }
        int r = parse_number_ex(o, float_operand(c->op, args), &c->num[k], &c->dt[k]);
        if (r < 0)
            return -1;
        if (r == 0) {
            PyErr_Format(PyExc_TypeError, "%s: argument '%s' must be a Tensor or a number, "
                         "not %s", name, arg_name(c->op, k), Py_TYPE(o)->tp_name);
            return -1;
        }
    }
    if (!have_tensor) {
        PyErr_Format(PyExc_TypeError, "%s: expected at least one Tensor argument", name);
        return -1;
    }
    return 0;
}

/* Check a user-given output (`self` of an in-place op, or out=): the write
 * check, device, shape and castability. Returns 0 / -1. */
static int ew_check_out(ew_call *c, AmpyTensor *out, ampy_dtype result)
{
    const char *name = ampy_ewise_op_name(c->op);
    if (out->device != c->device) {
        PyErr_Format(PyExc_RuntimeError, "%s: expected the output on the inputs' device", name);
        return -1;
    }
    int same = out->ndim == c->ndim;
    for (int d = 0; same && d < c->ndim; d++)
        same = out->shape[d] == c->shape[d];
    if (!same) {
        PyObject *a = shape_list(out->ndim, out->shape), *b = shape_list(c->ndim, c->shape);
        if (a && b)
            PyErr_Format(PyExc_RuntimeError, "%s: output with shape %R doesn't match the "
                         "broadcast shape %R", name, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
        return -1;
    }
    if (!ampy_can_cast(result, (ampy_dtype)out->dtype)) {
        PyErr_Format(PyExc_RuntimeError, "%s: result type %s can't be cast to the desired output "
                     "type %s", name, ampy_dtype_torch_name(result),
                     ampy_dtype_torch_name((ampy_dtype)out->dtype));
        return -1;
    }
    return ampy_py_check_write(out, name, out == c->t[0] ? "self" : "out", AMPY_PY_WRITE_OVERLAP);
}

/* Replace inputs that partially overlap out by contiguous copies. */
static int ew_unalias(ew_call *c, AmpyTensor *out)
{
    char *olo, *ohi;
    span(out, &olo, &ohi);
    int64_t ostr[AMPY_MAX_DIMS];
    bcast_strides(out, c->ndim, c->shape, ostr);
    for (int k = 0; k < c->arity; k++) {
        AmpyTensor *t = c->t[k];
        if (!t || t->numel == 0)
            continue;
        char *lo, *hi;
        span(t, &lo, &hi);
        if (!(lo < ohi && olo < hi))
            continue;
        int64_t st[AMPY_MAX_DIMS];
        bcast_strides(t, c->ndim, c->shape, st);
        int same = t->data == out->data && t->dtype == out->dtype;
        for (int d = 0; same && d < c->ndim; d++)
            same = c->shape[d] <= 1 || st[d] == ostr[d];
        if (same)
            continue;
        AmpyTensor *cp = ampy_py_empty(t->dtype, t->ndim, t->shape, t->device);
        if (!cp)
            return -1;
        if (t->device != AMPY_DEV_CPU) {
            PyObject *r = ampy_py_device_cast(t, t->strides, cp);
            if (!r) {
                Py_DECREF(cp);
                return -1;
            }
            Py_DECREF(r);
            c->tmp[k] = (PyObject *)cp;
            c->t[k] = cp;
            continue;
        }
        ampy_status s = ampy_cast(t->ndim, t->shape, t->data, t->strides, (ampy_dtype)t->dtype,
                                  cp->data, cp->strides, (ampy_dtype)t->dtype);
        if (s != AMPY_OK) {
            Py_DECREF(cp);
            return ampy_py_raise_int(s);
        }
        c->tmp[k] = (PyObject *)cp;
        c->t[k] = cp;
    }
    return 0;
}

/* torch rounds a Python number to a float16/bfloat16 common dtype before the
 * op (TensorIterator casts CPU scalars), except where a kernel reads the
 * original value in float "opmath": mul, div, pow, clamp, lerp, addcmul and
 * addcdiv. Matching this keeps half results bit-identical to torch. */
static void round_scalars(ew_call *c, ampy_dtype compute)
{
    if (!ampy_dtype_is_half(compute) || c->arity == 1)
        return;
    if (c->arity == 3 && c->op != AMPY_EW_WHERE)
        return;
    if (c->op == AMPY_EW_MUL || c->op == AMPY_EW_DIV || c->op == AMPY_EW_POW)
        return;
    for (int k = 0; k < c->arity; k++) {
        if (c->t[k])
            continue;
        double v = c->dt[k] == AMPY_FLOAT64 ? c->num[k].d
                   : c->dt[k] == AMPY_BOOL  ? (double)c->num[k].b
                                            : (double)c->num[k].i;
        uint16_t h = compute == AMPY_FLOAT16 ? ampy_f64_to_f16(v) : ampy_f64_to_bf16(v);
        memcpy(&c->num[k], &h, sizeof h);
        c->dt[k] = compute;
    }
}

/* The call's operands in libampy's form (broadcast strides; Python numbers and
 * 0-dim CPU tensors beside CUDA operands read from the host); returns the
 * mask of host scalars. */
static unsigned ew_operands(ew_call *c, const AmpyTensor *out, ampy_ewise_operand *in,
                            ampy_ewise_operand *o)
{
    unsigned host_scalars = 0;
    for (int k = 0; k < c->arity; k++) {
        if (c->t[k] && c->device != AMPY_DEV_CPU && c->t[k]->device == AMPY_DEV_CPU) {
            memset(c->strides[k], 0, sizeof c->strides[k]); /* a 0-dim CPU tensor */
            in[k].data = c->t[k]->data;
            host_scalars |= 1u << k;
        } else if (c->t[k]) {
            bcast_strides(c->t[k], c->ndim, c->shape, c->strides[k]);
            in[k].data = c->t[k]->data;
        } else {
            memset(c->strides[k], 0, sizeof c->strides[k]);
            in[k].data = &c->num[k];
            host_scalars |= 1u << k;
        }
        in[k].strides = c->strides[k];
        in[k].dtype = c->dt[k];
    }
    bcast_strides(out, c->ndim, c->shape, c->strides[3]);
    o->data = out->data;
    o->strides = c->strides[3];
    o->dtype = (ampy_dtype)out->dtype;
    return host_scalars;
}

/* Runs the op where its operands live: libampy on the CPU (without the GIL for
 * large outputs), or cuda/ewise.cu through the ampy_cuda_api table, queued on
 * the device's stream. A written `out` (bump) gets a new version. 0, or -1 with
 * an exception set. */
static int ew_run(const ew_call *c, AmpyTensor *out, const ampy_ewise_operand *in,
                  const ampy_ewise_operand *o, ampy_dtype compute, const ampy_ewise_params *prm,
                  unsigned host_scalars, int bump)
{
    ampy_status s;
    if (c->device != AMPY_DEV_CPU) {
        const ampy_cuda_api *api = ampy_py_cuda_api();
        if (!api)
            return -1;
        s = api->ewise(c->device, c->op, c->ndim, c->shape, in, o, compute, prm, host_scalars);
        if (bump)
            ampy_py_bump_version(out);
        if (s != AMPY_OK) {
            ampy_py_raise_cuda(s);
            return -1;
        }
        return 0;
    }
    if (out->numel >= AMPY_PY_GIL_RELEASE_MIN) {
        Py_BEGIN_ALLOW_THREADS
        s = ampy_ewise((ampy_ewise_op)c->op, c->ndim, c->shape, in, o, compute, prm);
        Py_END_ALLOW_THREADS
    } else {
        s = ampy_ewise((ampy_ewise_op)c->op, c->ndim, c->shape, in, o, compute, prm);
    }
    if (bump)
        ampy_py_bump_version(out);
    if (s != AMPY_OK) {
        ampy_py_raise(s);
        return -1;
    }
    return 0;
}

static PyObject *f_ewise(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 5) {
        PyErr_SetString(PyExc_TypeError, "ewise(op, out, alpha, beta, *inputs)");
        return NULL;
    }
    ew_call c;
    long long op;
    if (ampy_py_int_in(args[0], 0, INT_MAX, &op, "ewise", "op") < 0)
        return NULL;
    c.op = (int)op;
    c.arity = ampy_ewise_op_arity(c.op);
    if (c.arity == 0 || nargs != 4 + c.arity) {
        PyErr_Format(PyExc_TypeError, "ewise: op %d takes %d inputs, got %zd", c.op, c.arity,
                     nargs - 4);
        return NULL;
    }
    const char *name = ampy_ewise_op_name(c.op);
    ampy_ewise_params prm = {{1.0, 0.0}, {1, 0}};
    if (parse_param(args[2], 0, &prm, name, "alpha") < 0 ||
        parse_param(args[3], 1, &prm, name, "beta") < 0 || ew_inputs(&c, args + 4) < 0)
        return NULL;
    ampy_dtype compute, result;
    if (ew_types(&c, &compute, &result) < 0)
        return NULL;
    round_scalars(&c, compute);
    AmpyTensor *out;
    PyObject *ret = NULL;
    if (args[1] != Py_None) {
        out = ampy_py_tensor_arg(args[1], name, "out");
        if (!out || ew_check_out(&c, out, result) < 0 || ew_unalias(&c, out) < 0)
            goto done;
        Py_INCREF(out);
    } else if (!(out = ampy_py_empty(result, c.ndim, c.shape, c.device))) {
        goto done;
    }
    ampy_ewise_operand ops_in[3], op_out;
    const unsigned host_scalars = ew_operands(&c, out, ops_in, &op_out);
    if (ew_run(&c, out, ops_in, &op_out, compute, &prm, host_scalars, args[1] != Py_None) < 0) {
        Py_DECREF(out);
        goto done;
    }
    ret = (PyObject *)out;
done:
    for (int k = 0; k < c.arity; k++)
        Py_XDECREF(c.tmp[k]);
    return ret;
}

static PyObject *f_result_type(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    ampy_dtype dts[8];
    int kinds[8];
    if (nargs < 1 || nargs > 8) {
        PyErr_SetString(PyExc_TypeError, "result_type: expected 1 to 8 operands");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nargs; k++) {
        if (ampy_py_is_tensor(args[k])) {
            AmpyTensor *t = (AmpyTensor *)args[k];
            dts[k] = (ampy_dtype)t->dtype;
            kinds[k] = t->ndim == 0 ? AMPY_OPERAND_ZERODIM : AMPY_OPERAND_DIM;
            continue;
        }
        scalar_buf v;
        int r = parse_number(args[k], &v, &dts[k]);
        if (r < 0)
            return NULL;
        if (r == 0) {
            PyErr_Format(PyExc_TypeError, "result_type: operand %zd must be a Tensor or a number, "
                         "not %s", k, Py_TYPE(args[k])->tp_name);
            return NULL;
        }
        kinds[k] = AMPY_OPERAND_WRAPPED;
    }
    return ampy_py_dtype_obj(ampy_result_type((int)nargs, dts, kinds,
                                              (ampy_dtype)ampy_py_default_float()));
}

static PyObject *f_math_init(PyObject *self, PyObject *lst)
{
    if (!PyList_Check(lst)) {
        PyErr_SetString(PyExc_TypeError, "_math_init: expected the default-dtype list");
        return NULL;
    }
    Py_INCREF(lst);
    Py_XSETREF(default_dtype_list, lst);
    Py_RETURN_NONE;
}

PyMethodDef ampy_py_ewise_methods[] = {
    {"ewise", (PyCFunction)(void (*)(void))f_ewise, METH_FASTCALL,
     "ewise(op, out, alpha, beta, *inputs)\n--\n\nElement-wise op with torch type promotion "
     "and broadcasting; out=None allocates."},
    {"result_type", (PyCFunction)(void (*)(void))f_result_type, METH_FASTCALL,
     "result_type(*operands)\n--\n\ntorch.result_type over Tensors and Python numbers."},
    {"_math_init", (PyCFunction)f_math_init, METH_O,
     "_math_init(default_dtype_list)\n--\n\nInternal: where the default float dtype lives."},
    {NULL, NULL, 0, NULL},
};
