/* gemm_py.c — binding of gemm.h.
 *
 * _C.gemm(a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0, bias=None) -> Tensor
 *   a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N), same ndim and
 *   dtype (float32/float16/bfloat16/float64), any strides (a batch stride of 0 is a
 *   broadcast). out: None (a new contiguous tensor of dtype out_dtype or
 *   a.dtype; beta is then ignored) or a tensor of shape (…, M, N) that is
 *   updated in place: out = alpha * a @ b + beta * out. bias: None or a 1-d
 *   CPU tensor of N (= b's columns) float32/float16/bfloat16 values (float64
 *   with float64 inputs), any stride, added to every row in float32 (double
 *   for float64) before the single rounding.
 * _C.gemm_set_impl(name), _C.gemm_impl_name(dtype),
 * _C.gemm_impl_available(name): implementation selection (gemm.h).
 * Shape and broadcasting rules of matmul/addmm/linear live in ampy/_gemm.py.
 */
#include "pyampy.h"

#include "ampy/gemm.h"

static int check_operand(AmpyTensor *t, const char *arg)
{
    if (t->device != AMPY_DEV_CPU) {
        PyErr_Format(PyExc_RuntimeError, "gemm: %s is on cuda:%d; this kernel takes CPU tensors",
                     arg, t->device);
        return -1;
    }
    if (t->ndim != 2 && t->ndim != 3) {
        PyErr_Format(PyExc_ValueError, "gemm: %s must be 2-d or 3-d, got %d-d", arg, t->ndim);
        return -1;
    }
    return 0;
}

/* Sizes and element strides of t as (batch, rows, cols). */
static void dims3(const AmpyTensor *t, int64_t d[3], int64_t s[3])
{
    int o = t->ndim == 3;
    d[0] = o ? t->shape[0] : 1;
    s[0] = o ? t->strides[0] : 0;
    d[1] = t->shape[o], s[1] = t->strides[o];
    d[2] = t->shape[o + 1], s[2] = t->strides[o + 1];
}

static AmpyTensor *make_out(PyObject *out_obj, int ndim, const int64_t *shape, int dtype,
                            int *created)
{
    *created = out_obj == Py_None;
    if (*created)
        return ampy_py_empty(dtype, ndim, shape, AMPY_DEV_CPU);
    AmpyTensor *c = ampy_py_tensor_arg(out_obj, "gemm", "out");
    if (!c || check_operand(c, "out") < 0 ||
        ampy_py_check_write(c, "matmul", "out", AMPY_PY_WRITE_OVERLAP) < 0)
        return NULL;
    int same = c->ndim == ndim;
    for (int i = 0; same && i < ndim; i++)
        same = c->shape[i] == shape[i];
    if (!same) {
        PyErr_Format(PyExc_ValueError, "gemm: out has the wrong shape for a (%d-d) @ b", ndim);
        return NULL;
    }
    Py_INCREF(c);
    return c;
}

/* After a GEMM call: take the GIL back (ts from PyEval_SaveThread, or NULL),
 * drop a new out on error, count an in-place write into a given out. */
static PyObject *gemm_done(PyThreadState *ts, ampy_status st, AmpyTensor *c, int created)
{
    if (ts)
        PyEval_RestoreThread(ts);
    if (st != AMPY_OK) {
        Py_DECREF(c);
        return ampy_py_raise(st);
    }
    if (!created)
        ampy_py_bump_version(c);
    return (PyObject *)c;
}

/* bias: a 1-d CPU float32/float16/bfloat16/float64 tensor of n elements
 * (float64 only with float64 inputs: ampy_gemm_bias checks). */
static int check_bias(PyObject *o, int64_t n, AmpyTensor **out)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, "gemm", "bias");
    if (!t)
        return -1;
    if (t->device != AMPY_DEV_CPU) {
        PyErr_Format(PyExc_RuntimeError, "gemm: bias is on cuda:%d; this kernel takes CPU "
                     "tensors", t->device);
        return -1;
    }
    if (t->dtype != AMPY_FLOAT32 && t->dtype != AMPY_FLOAT16 && t->dtype != AMPY_BFLOAT16 &&
        t->dtype != AMPY_FLOAT64) {
        PyErr_Format(PyExc_TypeError, "gemm: bias must be float32, float16, bfloat16 or "
                     "float64, got %s", ampy_dtype_name(t->dtype));
        return -1;
    }
    if (t->ndim != 1 || t->shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "gemm: bias must be 1-d with %lld elements (the columns "
                     "of the result), got %d-d of %lld", (long long)n, t->ndim,
                     (long long)(t->ndim ? t->shape[0] : 1));
        return -1;
    }
    *out = t;
    return 0;
}

static PyObject *f_gemm(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a", "b", "out", "out_dtype", "alpha", "beta", "bias", NULL};
    PyObject *ao, *bo, *out_obj = Py_None, *dt_obj = Py_None, *bias_obj = Py_None;
    double alpha = 1.0, beta = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOddO:gemm", kwlist, &ao, &bo, &out_obj,
                                     &dt_obj, &alpha, &beta, &bias_obj))
        return NULL;
    AmpyTensor *a = ampy_py_tensor_arg(ao, "gemm", "a");
    AmpyTensor *b = a ? ampy_py_tensor_arg(bo, "gemm", "b") : NULL;
    if (!b || check_operand(a, "a") < 0 || check_operand(b, "b") < 0)
        return NULL;
    if (a->dtype != b->dtype) {
        PyErr_Format(PyExc_TypeError,
                     "expected mat1 and mat2 to have the same dtype, but got: %s != %s",
                     ampy_dtype_name(a->dtype), ampy_dtype_name(b->dtype));
        return NULL;
    }
    int64_t ad[3], as[3], bd[3], bs[3];
    dims3(a, ad, as);
    dims3(b, bd, bs);
    if (a->ndim != b->ndim || ad[0] != bd[0] || ad[2] != bd[1]) {
        PyErr_Format(PyExc_ValueError,
                     "gemm: shapes cannot be multiplied (batch %lld, %lldx%lld and batch %lld, "
                     "%lldx%lld)", (long long)ad[0], (long long)ad[1], (long long)ad[2],
                     (long long)bd[0], (long long)bd[1], (long long)bd[2]);
        return NULL;
    }
    AmpyTensor *bias = NULL;
    if (bias_obj != Py_None && check_bias(bias_obj, bd[2], &bias) < 0)
        return NULL;
    int out_dt;
    if (ampy_py_parse_dtype(dt_obj, a->dtype, &out_dt, "gemm", "out_dtype") < 0)
        return NULL;
    if (out_dt != a->dtype && out_dt != AMPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "gemm: out_dtype must be %s (the inputs' dtype) or "
                     "float32, got %s", ampy_dtype_name(a->dtype), ampy_dtype_name(out_dt));
        return NULL;
    }
    int64_t shape[3] = {ad[0], ad[1], bd[2]};
    int created;
    AmpyTensor *c = make_out(out_obj, a->ndim, a->ndim == 3 ? shape : shape + 1, out_dt,
                             &created);
    if (!c)
        return NULL;
    int64_t cd[3], cs[3];
    dims3(c, cd, cs);
    double work = (double)ad[0] * (double)ad[1] * (double)ad[2] * (double)bd[2];
    ampy_status st;
    PyThreadState *ts = work >= AMPY_PY_GIL_RELEASE_MIN ? PyEval_SaveThread() : NULL;
    st = ampy_gemm_bias(ad[0], ad[1], bd[2], ad[2], alpha, a->data,
                        (ampy_dtype)a->dtype, as[0], as[1], as[2], b->data, (ampy_dtype)b->dtype,
                        bs[0], bs[1], bs[2], created ? 0.0 : beta, c->data,
                        (ampy_dtype)c->dtype, cs[0], cs[1], cs[2], bias ? bias->data : NULL,
                        bias ? (ampy_dtype)bias->dtype : AMPY_FLOAT32,
                        bias ? bias->strides[0] : 0);
    return gemm_done(ts, st, c, created);
}

/* _C.gemm_batched(a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0):
 * a (..., M, K) @ b (..., K, N) with the batch dims broadcast as in torch
 * (missing leading dims and size-1 dims), every operand read in place through
 * its strides (permuted, transposed, expanded views) by ONE ampy_gemm_batched
 * call. out: None (a new contiguous tensor) or a tensor of the broadcast
 * shape (..., M, N), updated as out = alpha * a @ b + beta * out. */
static PyObject *f_gemm_batched(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a", "b", "out", "out_dtype", "alpha", "beta", NULL};
    PyObject *ao, *bo, *out_obj = Py_None, *dt_obj = Py_None;
    double alpha = 1.0, beta = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOdd:gemm_batched", kwlist, &ao, &bo,
                                     &out_obj, &dt_obj, &alpha, &beta))
        return NULL;
    AmpyTensor *a = ampy_py_tensor_arg(ao, "gemm_batched", "a");
    AmpyTensor *b = a ? ampy_py_tensor_arg(bo, "gemm_batched", "b") : NULL;
    if (!b)
        return NULL;
    AmpyTensor *ops[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        if (ops[i]->device != AMPY_DEV_CPU) {
            PyErr_Format(PyExc_RuntimeError, "gemm_batched: %s is on cuda:%d; this kernel "
                         "takes CPU tensors", i ? "b" : "a", ops[i]->device);
            return NULL;
        }
        if (ops[i]->ndim < 2) {
            PyErr_Format(PyExc_ValueError, "gemm_batched: %s must be at least 2-d, got %d-d",
                         i ? "b" : "a", ops[i]->ndim);
            return NULL;
        }
    }
    if (a->dtype != b->dtype) {
        PyErr_Format(PyExc_TypeError,
                     "expected mat1 and mat2 to have the same dtype, but got: %s != %s",
                     ampy_dtype_name(a->dtype), ampy_dtype_name(b->dtype));
        return NULL;
    }
    int an = a->ndim, bn = b->ndim;
    int64_t M = a->shape[an - 2], K = a->shape[an - 1], N = b->shape[bn - 1];
    if (b->shape[bn - 2] != K) {
        PyErr_Format(PyExc_ValueError, "gemm_batched: a's last dim (%lld) must equal b's "
                     "second-to-last dim (%lld)", (long long)K, (long long)b->shape[bn - 2]);
        return NULL;
    }
    /* broadcast batch shape, right-aligned */
    int nd = (an > bn ? an : bn) - 2;
    int64_t shape[AMPY_MAX_DIMS], ast[AMPY_MAX_DIMS], bst[AMPY_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int ai = d - (nd - (an - 2)), bi = d - (nd - (bn - 2));
        int64_t sa = ai >= 0 ? a->shape[ai] : 1, sb = bi >= 0 ? b->shape[bi] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            PyErr_Format(PyExc_ValueError, "gemm_batched: batch dims of a and b do not "
                         "broadcast: a's size %lld vs b's size %lld at batch dim %d",
                         (long long)sa, (long long)sb, d);
            return NULL;
        }
        shape[d] = sa == 1 ? sb : sa;
        ast[d] = sa == 1 ? 0 : a->strides[ai];
        bst[d] = sb == 1 ? 0 : b->strides[bi];
    }
    int out_dt;
    if (ampy_py_parse_dtype(dt_obj, a->dtype, &out_dt, "gemm_batched", "out_dtype") < 0)
        return NULL;
    if (out_dt != a->dtype && out_dt != AMPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "gemm_batched: out_dtype must be %s (the inputs' dtype) "
                     "or float32, got %s", ampy_dtype_name(a->dtype), ampy_dtype_name(out_dt));
        return NULL;
    }
    int64_t oshape[AMPY_MAX_DIMS];
    memcpy(oshape, shape, (size_t)nd * sizeof *shape);
    oshape[nd] = M, oshape[nd + 1] = N;
    int created = out_obj == Py_None;
    AmpyTensor *c;
    if (created) {
        c = ampy_py_empty(out_dt, nd + 2, oshape, AMPY_DEV_CPU);
        if (!c)
            return NULL;
    } else {
        c = ampy_py_tensor_arg(out_obj, "gemm_batched", "out");
        if (!c)
            return NULL;
        int same = c->ndim == nd + 2 && c->device == AMPY_DEV_CPU;
        for (int i = 0; same && i < nd + 2; i++)
            same = c->shape[i] == oshape[i];
        if (!same) {
            PyErr_Format(PyExc_ValueError, "gemm_batched: out must be a CPU tensor of the "
                         "broadcast shape of a @ b (%d-d)", nd + 2);
            return NULL;
        }
        if (c->dtype != a->dtype && c->dtype != AMPY_FLOAT32) {
            PyErr_Format(PyExc_TypeError, "gemm_batched: out must be %s or float32, got %s",
                         ampy_dtype_name(a->dtype), ampy_dtype_name(c->dtype));
            return NULL;
        }
        if (ampy_py_check_write(c, "matmul", "out", AMPY_PY_WRITE_OVERLAP) < 0)
            return NULL;
        Py_INCREF(c);
    }
    /* drop size-1 batch dims (the C API takes at most AMPY_GEMM_MAX_BATCH_DIMS) */
    int64_t fs[AMPY_MAX_DIMS], fa[AMPY_MAX_DIMS], fb[AMPY_MAX_DIMS], fc[AMPY_MAX_DIMS];
    int n = 0;
    double work = (double)M * (double)N * (double)K;
    for (int d = 0; d < nd; d++) {
        work *= (double)shape[d];
        if (shape[d] == 1)
            continue;
        fs[n] = shape[d], fa[n] = ast[d], fb[n] = bst[d], fc[n] = c->strides[d];
        n++;
    }
    if (n > AMPY_GEMM_MAX_BATCH_DIMS) {
        Py_DECREF(c);
        PyErr_Format(PyExc_ValueError, "gemm_batched: at most %d batch dims of size > 1, got %d",
                     AMPY_GEMM_MAX_BATCH_DIMS, n);
        return NULL;
    }
    PyThreadState *ts = work >= AMPY_PY_GIL_RELEASE_MIN ? PyEval_SaveThread() : NULL;
    ampy_status st = ampy_gemm_batched(
        n, fs, M, N, K, alpha, a->data, (ampy_dtype)a->dtype, fa, a->strides[an - 2],
        a->strides[an - 1], b->data, (ampy_dtype)b->dtype, fb, b->strides[bn - 2],
        b->strides[bn - 1], created ? 0.0 : beta, c->data, (ampy_dtype)c->dtype, fc,
        c->strides[nd], c->strides[nd + 1]);
    return gemm_done(ts, st, c, created);
}

static PyObject *f_set_impl(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    ampy_status st = ampy_gemm_set_impl(name);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *f_impl_name(PyObject *self, PyObject *arg)
{
    int dt;
    if (ampy_py_parse_dtype(arg, AMPY_FLOAT32, &dt, "gemm_impl_name", "dtype") < 0)
        return NULL;
    return PyUnicode_FromString(ampy_gemm_impl_name((ampy_dtype)dt));
}

static PyObject *f_impl_available(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    return PyBool_FromLong(ampy_gemm_impl_available(name));
}

PyMethodDef ampy_py_gemm_methods[] = {
    {"gemm", (PyCFunction)(void (*)(void))f_gemm, METH_VARARGS | METH_KEYWORDS,
     "gemm($module, /, a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0, bias=None)\n--\n\n"
     "out = alpha * a @ b + beta * out (+ bias[j] per column) for 2-d or 3-d (batched) CPU "
     "tensors, float32 accumulation, rounded once to out's dtype. A new tensor when out is "
     "None."},
    {"gemm_batched", (PyCFunction)(void (*)(void))f_gemm_batched, METH_VARARGS | METH_KEYWORDS,
     "gemm_batched($module, /, a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0)\n--\n\n"
     "out = alpha * a @ b + beta * out for (..., M, K) @ (..., K, N) CPU tensors with "
     "broadcast batch dims, all read in place through their strides, in one C call."},
    {"gemm_set_impl", f_set_impl, METH_O,
     "gemm_set_impl($module, name, /)\n--\n\n"
     "Select the GEMM implementation: 'auto', 'amx', 'avx512', 'avx2' or 'portable'."},
    {"gemm_impl_name", f_impl_name, METH_O,
     "gemm_impl_name($module, dtype, /)\n--\n\nImplementation used now for dtype."},
    {"gemm_impl_available", f_impl_available, METH_O,
     "gemm_impl_available($module, name, /)\n--\n\nWhether this CPU/OS can run name."},
    {NULL, NULL, 0, NULL},
};
