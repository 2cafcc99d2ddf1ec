/* gemm_py.c — binding of gemm.h / gemm_matmul.h, for CPU and CUDA tensors.
 *
 * _C.gemm(a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0, bias=None) -> Tensor
 *   a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N), same ndim and
 *   dtype (float32/float16/bfloat16/float64), any strides (a batch stride of 0 is a
 *   broadcast). out: None (a new contiguous tensor of dtype out_dtype or
 *   a.dtype; beta is then ignored) or a tensor of shape (…, M, N) that is
 *   updated in place: out = alpha * a @ b + beta * out. bias: None or a 1-d
 *   tensor of N (= b's columns) float32/float16/bfloat16 values (float64
 *   with float64 inputs), any stride, added to every row in float32 (double
 *   for float64) before the single rounding (on a
 *   GPU: copied into the new output first, then beta = 1; not with out).
 * _C.gemm_batched(a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0):
 *   a (..., M, K) @ b (..., K, N) with the batch dims broadcast as in torch
 *   (gemm_matmul.h), every operand read in place through its strides.
 * _C.gemm_set_impl(name), _C.gemm_impl_name(dtype),
 * _C.gemm_impl_available(name): implementation selection (gemm.h).
 * The tensors of one call are on one device. Every check is made here for
 * both devices; then libampy runs CPU tensors, and CUDA tensors go through
 * the ampy_cuda_api table to cuBLAS (cuda/blas.cu, gemm_cuda.h; an operand
 * with neither matrix stride 1 is copied to contiguous memory first).
 * Shape and broadcasting rules of matmul/addmm/linear live in ampy/_gemm.py.
 */
#include "pyampy.h"

#include "ampy/cuda.h"
#include "ampy/gemm.h"
#include "ampy/gemm_matmul.h"

static int check_operand(AmpyTensor *t, const char *arg)
{
    if (t->ndim != 2 && t->ndim != 3) {
        PyErr_Format(PyExc_ValueError, "gemm: %s must be 2-d or 3-d, got %d-d", arg, t->ndim);
        return -1;
    }
    return 0;
}

/* t is on the device of a (the first operand). */
static int same_device(const AmpyTensor *a, const AmpyTensor *t, const char *fn)
{
    if (!t || t->device == a->device)
        return 0;
    char da[16], dt[16];
    snprintf(da, sizeof da, a->device < 0 ? "cpu" : "cuda:%d", a->device);
    snprintf(dt, sizeof dt, t->device < 0 ? "cpu" : "cuda:%d", t->device);
    PyErr_Format(PyExc_RuntimeError, "%s: Expected all tensors to be on the same device, but "
                 "found at least two devices, %s and %s!", fn, da, dt);
    return -1;
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

/* A given out of shape[ndim] and an allowed dtype, on a's device (a new
 * reference), or a new contiguous one (*created). */
static AmpyTensor *make_out(PyObject *out_obj, const AmpyTensor *a, int ndim,
                            const int64_t *shape, int dtype, const char *fn, int *created)
{
    *created = out_obj == Py_None;
    if (*created)
        return ampy_py_empty(dtype, ndim, shape, a->device);
    AmpyTensor *c = ampy_py_tensor_arg(out_obj, fn, "out");
    if (!c)
        return NULL;
    int same = c->ndim == ndim && c->device == a->device;
    for (int i = 0; same && i < ndim; i++)
        same = c->shape[i] == shape[i];
    if (!same) {
        PyErr_Format(PyExc_ValueError, "%s: out must be a tensor of the shape of a @ b (%d-d) on "
                     "a's device", fn, ndim);
        return NULL;
    }
    if (c->dtype != a->dtype && c->dtype != AMPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s: out must be %s or float32, got %s", fn,
                     ampy_dtype_name(a->dtype), ampy_dtype_name(c->dtype));
        return NULL;
    }
    if (ampy_py_check_write(c, "matmul", "out", AMPY_PY_WRITE_OVERLAP) < 0)
        return NULL;
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
        int device = c->device;
        Py_DECREF(c);
        if (PyErr_Occurred())
            return NULL;
        return device >= 0 ? ampy_py_raise_cuda(st) : ampy_py_raise(st);
    }
    if (!created)
        ampy_py_bump_version(c);
    return (PyObject *)c;
}

/* bias: a 1-d float32/float16/bfloat16/float64 tensor of n elements
 * (float64 only with float64 inputs: ampy_gemm_bias checks). */
static int check_bias(PyObject *o, int64_t n, AmpyTensor **out)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, "gemm", "bias");
    if (!t)
        return -1;
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

static int check_out_dtype(PyObject *dt_obj, const AmpyTensor *a, const char *fn, int *out_dt)
{
    if (ampy_py_parse_dtype(dt_obj, a->dtype, out_dt, fn, "out_dtype") < 0)
        return -1;
    if (*out_dt != a->dtype && *out_dt != AMPY_FLOAT32) {
        PyErr_Format(PyExc_TypeError, "%s: out_dtype must be %s (the inputs' dtype) or "
                     "float32, got %s", fn, ampy_dtype_name(a->dtype), ampy_dtype_name(*out_dt));
        return -1;
    }
    return 0;
}

/* ---- the CUDA branch ---------------------------------------------------------- */

/* t (a new reference) when one of its two matrix strides is 1, else a
 * contiguous copy on its device: cuBLAS reads row- or column-major matrices. */
static AmpyTensor *cublas_readable(AmpyTensor *t)
{
    const int nd = t->ndim;
    if (t->strides[nd - 1] == 1 || t->strides[nd - 2] == 1) {
        Py_INCREF(t);
        return t;
    }
    AmpyTensor *c = ampy_py_empty(t->dtype, nd, t->shape, t->device);
    PyObject *r = c ? ampy_py_device_cast(t, t->strides, c) : NULL;
    if (!r) {
        Py_XDECREF(c);
        return NULL;
    }
    Py_DECREF(r);
    return c;
}

/* g over the batch dims shape[n] (element batch strides as/bs/cs): the
 * innermost dim is cuBLAS's strided batch, one call per item of the others. */
static ampy_status gemm_cuda(int device, int n, const int64_t *shape, const int64_t *as,
                             const int64_t *bs, const int64_t *cs, ampy_gemm_cuda_args g)
{
    const ampy_cuda_api *api = ampy_py_cuda_api();
    if (!api)
        return AMPY_ERR_RUNTIME;
    const int64_t isz = (int64_t)ampy_dtype_size(g.in_dtype);
    const int64_t osz = (int64_t)ampy_dtype_size(g.out_dtype);
    const char *a0 = g.a, *b0 = g.b;
    char *c0 = g.c;
    g.batch = n ? shape[n - 1] : 1;
    g.sa_b = n ? as[n - 1] : 0, g.sb_b = n ? bs[n - 1] : 0, g.sc_b = n ? cs[n - 1] : 0;
    int64_t outer = 1;
    for (int d = 0; d < n - 1; d++)
        outer *= shape[d];
    for (int64_t i = 0; i < outer; i++) {
        int64_t r = i, oa = 0, ob = 0, oc = 0;
        for (int d = n - 2; d >= 0; d--) {
            const int64_t j = r % shape[d];
            r /= shape[d];
            oa += j * as[d], ob += j * bs[d], oc += j * cs[d];
        }
        g.a = a0 + oa * isz, g.b = b0 + ob * isz, g.c = c0 + oc * osz;
        ampy_status s = api->gemm(device, &g);
        if (s != AMPY_OK)
            return s;
    }
    return AMPY_OK;
}

/* c = bias broadcast over c's rows (converted to c's dtype), on the device. */
static ampy_status bias_into_cuda(const AmpyTensor *bias, AmpyTensor *c)
{
    const ampy_cuda_api *api = ampy_py_cuda_api();
    if (!api)
        return AMPY_ERR_RUNTIME;
    int64_t bstr[3] = {0, 0, 0};
    bstr[c->ndim - 1] = bias->strides[0];
    return api->cast(c->device, c->ndim, c->shape, bias->data, bstr, (ampy_dtype)bias->dtype,
                     c->data, c->strides, (ampy_dtype)c->dtype);
}

/* _C.gemm for CUDA tensors (operands already checked). */
static ampy_status gemm3_cuda(AmpyTensor *a, AmpyTensor *b, AmpyTensor *c, const AmpyTensor *bias,
                              double alpha, double beta)
{
    AmpyTensor *ra = cublas_readable(a), *rb = ra ? cublas_readable(b) : NULL;
    ampy_status st = rb ? AMPY_OK : AMPY_ERR_RUNTIME;
    if (st == AMPY_OK && bias) {
        st = bias_into_cuda(bias, c);
        beta = 1.0;
    }
    if (st == AMPY_OK) {
        int64_t ad[3], as[3], bd[3], bs[3], cd[3], cs[3];
        dims3(ra, ad, as);
        dims3(rb, bd, bs);
        dims3(c, cd, cs);
        ampy_gemm_cuda_args g = {.m = ad[1], .n = bd[2], .k = ad[2], .a = ra->data,
                                 .sa_m = as[1], .sa_k = as[2], .b = rb->data, .sb_k = bs[1],
                                 .sb_n = bs[2], .c = c->data, .ldc = cs[1],
                                 .in_dtype = (ampy_dtype)a->dtype,
                                 .out_dtype = (ampy_dtype)c->dtype, .alpha = alpha, .beta = beta};
        st = gemm_cuda(c->device, 1, ad, as, bs, cs, g);
    }
    Py_XDECREF(ra);
    Py_XDECREF(rb);
    return st;
}

/* ---- _C.gemm ------------------------------------------------------------------- */

static ampy_status gemm3_cpu(const AmpyTensor *a, const AmpyTensor *b, AmpyTensor *c,
                             const AmpyTensor *bias, double alpha, double beta, int created)
{
    int64_t ad[3], as[3], bd[3], bs[3], cd[3], cs[3];
    dims3(a, ad, as);
    dims3(b, bd, bs);
    dims3(c, cd, cs);
    return ampy_gemm_bias(ad[0], ad[1], bd[2], ad[2], alpha, a->data, (ampy_dtype)a->dtype,
                          as[0], as[1], as[2], b->data, (ampy_dtype)b->dtype, bs[0], bs[1], bs[2],
                          created ? 0.0 : beta, c->data, (ampy_dtype)c->dtype, cs[0],
                          cs[1], cs[2], bias ? bias->data : NULL,
                          bias ? (ampy_dtype)bias->dtype : AMPY_FLOAT32,
                          bias ? bias->strides[0] : 0);
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
    if (!b || check_operand(a, "a") < 0 || check_operand(b, "b") < 0 ||
        same_device(a, b, "gemm") < 0)
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
    int out_dt, created;
    if ((bias_obj != Py_None && (check_bias(bias_obj, bd[2], &bias) < 0 ||
                                 same_device(a, bias, "gemm") < 0)) ||
        check_out_dtype(dt_obj, a, "gemm", &out_dt) < 0)
        return NULL;
    if (bias && out_obj != Py_None && a->device >= 0) {
        PyErr_SetString(PyExc_ValueError, "gemm: bias with out is not supported for CUDA tensors");
        return NULL;
    }
    int64_t shape[3] = {ad[0], ad[1], bd[2]};
    AmpyTensor *c = make_out(out_obj, a, a->ndim, a->ndim == 3 ? shape : shape + 1, out_dt,
                             "gemm", &created);
    if (!c)
        return NULL;
    if (a->device >= 0)
        return gemm_done(NULL, gemm3_cuda(a, b, c, bias, alpha, created ? 0.0 : beta), c, created);
    double work = (double)ad[0] * (double)ad[1] * (double)ad[2] * (double)bd[2];
    PyThreadState *ts = work >= AMPY_PY_GIL_RELEASE_MIN ? PyEval_SaveThread() : NULL;
    ampy_status st = gemm3_cpu(a, b, c, bias, alpha, beta, created);
    return gemm_done(ts, st, c, created);
}

/* ---- _C.gemm_batched ------------------------------------------------------------- */

static void operand_of(const AmpyTensor *t, ampy_gemm_operand *o)
{
    o->data = t->data;
    o->dtype = (ampy_dtype)t->dtype;
    o->ndim = t->ndim;
    o->shape = t->shape;
    o->strides = t->strides;
}

/* The broadcast batched GEMM of the plan on CUDA tensors. */
static ampy_status matmul_cuda(const ampy_gemm_plan *p, AmpyTensor *a, AmpyTensor *b,
                               AmpyTensor *c, double alpha, double beta)
{
    AmpyTensor *ra = cublas_readable(a), *rb = ra ? cublas_readable(b) : NULL;
    ampy_status st = rb ? AMPY_OK : AMPY_ERR_RUNTIME;
    ampy_gemm_operand oa, ob;
    ampy_gemm_plan q;
    int n = 0;
    int64_t sh[AMPY_GEMM_MAX_BATCH_DIMS], as[AMPY_GEMM_MAX_BATCH_DIMS],
        bs[AMPY_GEMM_MAX_BATCH_DIMS], cs[AMPY_GEMM_MAX_BATCH_DIMS];
    if (st == AMPY_OK) { /* the copies' strides */
        operand_of(ra, &oa);
        operand_of(rb, &ob);
        st = ampy_gemm_matmul_plan(&oa, &ob, &q);
    }
    if (st == AMPY_OK)
        st = ampy_gemm_matmul_batch(&q, c->strides, &n, sh, as, bs, cs);
    if (st == AMPY_OK) {
        const int an = ra->ndim, bn = rb->ndim, nd = p->nd;
        ampy_gemm_cuda_args g = {.m = p->M, .n = p->N, .k = p->K, .a = ra->data,
                                 .sa_m = ra->strides[an - 2], .sa_k = ra->strides[an - 1],
                                 .b = rb->data, .sb_k = rb->strides[bn - 2],
                                 .sb_n = rb->strides[bn - 1], .c = c->data, .ldc = c->strides[nd],
                                 .in_dtype = (ampy_dtype)a->dtype,
                                 .out_dtype = (ampy_dtype)c->dtype, .alpha = alpha, .beta = beta};
        st = gemm_cuda(c->device, n, sh, as, bs, cs, g);
    }
    Py_XDECREF(ra);
    Py_XDECREF(rb);
    return st;
}

static PyObject *f_gemm_batched(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"a", "b", "out", "out_dtype", "alpha", "beta", NULL};
    static const char fn[] = "gemm_batched";
    PyObject *ao, *bo, *out_obj = Py_None, *dt_obj = Py_None;
    double alpha = 1.0, beta = 0.0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|OOdd:gemm_batched", kwlist, &ao, &bo,
                                     &out_obj, &dt_obj, &alpha, &beta))
        return NULL;
    AmpyTensor *a = ampy_py_tensor_arg(ao, fn, "a");
    AmpyTensor *b = a ? ampy_py_tensor_arg(bo, fn, "b") : NULL;
    if (!b)
        return NULL;
    ampy_gemm_operand oa, ob, oc;
    ampy_gemm_plan p;
    operand_of(a, &oa);
    operand_of(b, &ob);
    ampy_status st = ampy_gemm_matmul_plan(&oa, &ob, &p);
    if (st != AMPY_OK)
        return ampy_py_raise(st);
    int out_dt, created;
    if (same_device(a, b, fn) < 0 || check_out_dtype(dt_obj, a, fn, &out_dt) < 0)
        return NULL;
    AmpyTensor *c = make_out(out_obj, a, p.nd + 2, p.shape, out_dt, fn, &created);
    if (!c)
        return NULL;
    if (a->device >= 0)
        return gemm_done(NULL, matmul_cuda(&p, a, b, c, alpha, created ? 0.0 : beta), c, created);
    operand_of(c, &oc);
    double work = (double)p.M * (double)p.N * (double)p.K;
    for (int d = 0; d < p.nd; d++)
        work *= (double)p.shape[d];
    PyThreadState *ts = work >= AMPY_PY_GIL_RELEASE_MIN ? PyEval_SaveThread() : NULL;
    st = ampy_gemm_matmul(&p, alpha, &oa, &ob, created ? 0.0 : beta, &oc);
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
     "out = alpha * a @ b + beta * out (+ bias[j] per column) for 2-d or 3-d (batched) "
     "tensors of one device, float32 accumulation, rounded once to out's dtype. A new tensor "
     "when out is None."},
    {"gemm_batched", (PyCFunction)(void (*)(void))f_gemm_batched, METH_VARARGS | METH_KEYWORDS,
     "gemm_batched($module, /, a, b, out=None, out_dtype=None, alpha=1.0, beta=0.0)\n--\n\n"
     "out = alpha * a @ b + beta * out for (..., M, K) @ (..., K, N) tensors of one device "
     "with broadcast batch dims, all read in place through their strides, in one C call."},
    {"gemm_set_impl", f_set_impl, METH_O,
     "gemm_set_impl($module, name, /)\n--\n\n"
     "Select the GEMM implementation: 'auto', 'amx', 'avx512', 'avx2' or 'portable'."},
    {"gemm_impl_name", f_impl_name, METH_O,
     "gemm_impl_name($module, dtype, /)\n--\n\nImplementation used now for dtype."},
    {"gemm_impl_available", f_impl_available, METH_O,
     "gemm_impl_available($module, name, /)\n--\n\nWhether this CPU/OS can run name."},
    {NULL, NULL, 0, NULL},
};
