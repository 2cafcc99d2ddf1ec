/* tensorops_py.c — binding of the row sorts (sort.h), gather/scatter along a
 * dim (scatter.h), triangles (tril.h) and categorical sampling
 * (multinomial.h) as ampy._C.sort / topk / gather / scatter_ / scatter_reduce_ / tril /
 * multinomial.
 *
 * Internal API for ampy/_sorting.py, ampy/_scatter.py and ampy/_tril.py,
 * which check torch's argument rules and shape the arguments (sort rows made
 * contiguous, dims wrapped, int64 indices); here every tensor must be a CPU
 * tensor and the sizes must fit, else ValueError. Large calls release the GIL.
 */
#include "pyampy.h"

#include "ampy/multinomial.h"
#include "ampy/scatter.h"
#include "ampy/sort.h"
#include "ampy/cuda.h"
#include "ampy/tril.h"

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

/* a CPU tensor (contiguous when `contig`), or NULL with ValueError/TypeError */
static AmpyTensor *cpu_tensor(PyObject *o, const char *fn, const char *arg, int contig)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, arg);
    if (!t)
        return NULL;
    if (t->device != AMPY_DEV_CPU || (contig && !ampy_py_is_contiguous(t))) {
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' must be a %sCPU tensor", fn, arg,
                     contig ? "contiguous " : "");
        return NULL;
    }
    return t;
}

/* rows and row length of a contiguous tensor sorted along its last dim */
static void rows_of(const AmpyTensor *x, int64_t *rows, int64_t *n)
{
    *n = x->ndim ? x->shape[x->ndim - 1] : 1;
    *rows = *n ? x->numel / *n : 0;
    if (x->ndim)
        for (int d = 0; d < x->ndim - 1; d++)
            if (x->shape[d] == 0)
                *rows = 0;
}

static PyObject *pair(AmpyTensor *v, AmpyTensor *i)
{
    return Py_BuildValue("(NN)", (PyObject *)v, (PyObject *)i);
}

/* a contiguous tensor of the CPU or a CUDA device (the row sorts run on
 * both: cuda/sort.cu through the ampy_cuda_api table), or NULL */
static AmpyTensor *sort_tensor(PyObject *o, const char *fn)
{
    AmpyTensor *t = ampy_py_tensor_arg(o, fn, "input");
    if (t && !ampy_py_is_contiguous(t)) {
        PyErr_Format(PyExc_ValueError, "%s: argument 'input' must be a contiguous tensor", fn);
        return NULL;
    }
    return t && t->device >= 0 && !ampy_py_cuda_api() ? NULL : t;
}

#define SORT_CALL(x, name, ...)                                                                  \
    ((x)->device >= 0 ? ampy_py_cuda_api()->name((x)->device, __VA_ARGS__)                       \
                      : ampy_##name(__VA_ARGS__))

/* sort(x, descending) -> (values, indices), along x's last dim */
static PyObject *f_sort(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox;
    int desc;
    if (!PyArg_ParseTuple(args, "Op:sort", &ox, &desc))
        return NULL;
    AmpyTensor *x = sort_tensor(ox, "sort");
    if (!x)
        return NULL;
    int64_t rows, n;
    rows_of(x, &rows, &n);
    AmpyTensor *v = ampy_py_empty(x->dtype, x->ndim, x->shape, x->device);
    AmpyTensor *i = v ? ampy_py_empty(AMPY_INT64, x->ndim, x->shape, x->device) : NULL;
    if (!i) {
        Py_XDECREF(v);
        return NULL;
    }
    ampy_status s;
    RUN(x->numel, SORT_CALL(x, sort, (ampy_dtype)x->dtype, rows, n, x->data, desc, v->data,
                            (int64_t *)i->data));
    if (s != AMPY_OK) {
        Py_DECREF(v);
        Py_DECREF(i);
        return x->device >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    }
    return pair(v, i);
}

/* topk(x, k, largest) -> (values, indices) of shape x.shape[:-1] + (k,) */
static PyObject *f_topk(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox;
    long long k;
    int largest;
    if (!PyArg_ParseTuple(args, "OLp:topk", &ox, &k, &largest))
        return NULL;
    AmpyTensor *x = sort_tensor(ox, "topk");
    if (!x)
        return NULL;
    int64_t rows, n, shape[AMPY_MAX_DIMS];
    rows_of(x, &rows, &n);
    if (k < 0 || k > n) {
        PyErr_SetString(PyExc_ValueError, "topk: k out of range");
        return NULL;
    }
    for (int d = 0; d < x->ndim; d++)
        shape[d] = d == x->ndim - 1 ? k : x->shape[d];
    AmpyTensor *v = ampy_py_empty(x->dtype, x->ndim, shape, x->device);
    AmpyTensor *i = v ? ampy_py_empty(AMPY_INT64, x->ndim, shape, x->device) : NULL;
    if (!i) {
        Py_XDECREF(v);
        return NULL;
    }
    ampy_status s;
    RUN(x->numel, SORT_CALL(x, topk, (ampy_dtype)x->dtype, rows, n, k, largest, x->data,
                            v->data, (int64_t *)i->data));
    if (s != AMPY_OK) {
        Py_DECREF(v);
        Py_DECREF(i);
        return x->device >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    }
    return pair(v, i);
}

/* The spec of a gather/scatter call; the index's shape is the iteration's. */
typedef struct {
    ampy_scatter_spec s;
    int64_t shape[AMPY_MAX_DIMS], is[AMPY_MAX_DIMS], ss[AMPY_MAX_DIMS], os[AMPY_MAX_DIMS];
} spec_buf;

static int make_spec(spec_buf *b, AmpyTensor *self_, int dim, AmpyTensor *ix, AmpyTensor *other,
                     const char *fn)
{
    const int nd = ix->ndim ? ix->ndim : 1;
    if (ix->dtype != AMPY_INT64 || other->dtype != self_->dtype ||
        (ix->ndim ? ix->ndim : 1) != (self_->ndim ? self_->ndim : 1) ||
        (other->ndim ? other->ndim : 1) != nd || dim < 0 || dim >= nd) {
        PyErr_Format(PyExc_ValueError, "%s: inconsistent arguments", fn);
        return -1;
    }
    const int64_t isz = (int64_t)ampy_dtype_size(self_->dtype);
    for (int d = 0; d < nd; d++) {
        const int z = ix->ndim == 0;
        b->shape[d] = z ? 1 : ix->shape[d];
        b->is[d] = z ? 0 : ix->strides[d] * 8;
        b->ss[d] = self_->ndim ? self_->strides[d] * isz : 0;
        b->os[d] = other->ndim ? other->strides[d] * isz : 0;
        const int64_t sz = self_->ndim ? self_->shape[d] : 1, oz = other->ndim ? other->shape[d] : 1;
        if ((d != dim && b->shape[d] > sz) || b->shape[d] > oz) {
            PyErr_Format(PyExc_ValueError, "%s: index larger than self or src", fn);
            return -1;
        }
    }
    b->s.ndim = nd;
    b->s.dim = dim;
    b->s.shape = b->shape;
    b->s.index_strides = b->is;
    b->s.self_size = self_->ndim ? self_->shape[dim] : 1;
    b->s.self_strides = b->ss;
    b->s.other_strides = b->os;
    b->s.dtype = (ampy_dtype)self_->dtype;
    return 0;
}

/* gather(self, dim, index) -> out with index's shape */
static PyObject *f_gather(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox, *oi;
    int dim;
    if (!PyArg_ParseTuple(args, "OiO:gather", &ox, &dim, &oi))
        return NULL;
    AmpyTensor *x = cpu_tensor(ox, "gather", "input", 0), *ix = x ? cpu_tensor(oi, "gather",
                                                                                 "index", 0) : NULL;
    if (!ix)
        return NULL;
    AmpyTensor *out = ampy_py_empty(x->dtype, ix->ndim, ix->shape, AMPY_DEV_CPU);
    if (!out)
        return NULL;
    spec_buf b;
    if (make_spec(&b, x, dim, ix, out, "gather") < 0) {
        Py_DECREF(out);
        return NULL;
    }
    ampy_status s;
    RUN(ix->numel, ampy_gather(&b.s, x->data, ix->data, out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(s);
    }
    return (PyObject *)out;
}

/* scatter_(self, dim, index, src, add): self[...index...] = src (add: +=), in place */
static PyObject *f_scatter_(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox, *oi, *osrc;
    int dim, add;
    if (!PyArg_ParseTuple(args, "OiOOp:scatter_", &ox, &dim, &oi, &osrc, &add))
        return NULL;
    const char *fn = add ? "scatter_add_" : "scatter_";
    AmpyTensor *x = cpu_tensor(ox, fn, "self", 0);
    AmpyTensor *ix = x ? cpu_tensor(oi, fn, "index", 0) : NULL;
    AmpyTensor *src = ix ? cpu_tensor(osrc, fn, "src", 0) : NULL;
    if (!src)
        return NULL;
    spec_buf b;
    if (make_spec(&b, x, dim, ix, src, fn) < 0 ||
        ampy_py_check_write(x, fn, "self", AMPY_PY_WRITE_OVERLAP) < 0)
        return NULL;
    ampy_status s;
    RUN(ix->numel, (add ? ampy_scatter_add : ampy_scatter)(&b.s, x->data, ix->data, src->data));
    if (s != AMPY_OK)
        return ampy_py_raise(s);
    ampy_py_bump_version(x);
    Py_RETURN_NONE;
}

/* scatter_reduce_(self, dim, index, src, op): self[...index...] combined with
 * src by op (1 prod, 2 amax, 3 amin), in place */
static PyObject *f_scatter_reduce_(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox, *oi, *osrc;
    int dim, op;
    if (!PyArg_ParseTuple(args, "OiOOi:scatter_reduce_", &ox, &dim, &oi, &osrc, &op))
        return NULL;
    const char *fn = "scatter_reduce_";
    AmpyTensor *x = cpu_tensor(ox, fn, "self", 0);
    AmpyTensor *ix = x ? cpu_tensor(oi, fn, "index", 0) : NULL;
    AmpyTensor *src = ix ? cpu_tensor(osrc, fn, "src", 0) : NULL;
    if (!src)
        return NULL;
    spec_buf b;
    if (make_spec(&b, x, dim, ix, src, fn) < 0 ||
        ampy_py_check_write(x, fn, "self", AMPY_PY_WRITE_OVERLAP) < 0)
        return NULL;
    ampy_status s;
    RUN(ix->numel, ampy_scatter_reduce(&b.s, (ampy_scatter_reduce_op)op, x->data, ix->data,
                                       src->data));
    if (s != AMPY_OK)
        return ampy_py_raise(s);
    ampy_py_bump_version(x);
    Py_RETURN_NONE;
}

/* tril(x, diagonal, upper, inplace) -> a new contiguous tensor, or x itself */
static PyObject *f_tril(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ox;
    long long diag;
    int upper, inplace;
    if (!PyArg_ParseTuple(args, "OLpp:tril", &ox, &diag, &upper, &inplace))
        return NULL;
    const char *fn = upper ? "triu" : "tril";
    AmpyTensor *x = cpu_tensor(ox, fn, "input", 0);
    if (!x)
        return NULL;
    if (x->ndim < 2) {
        PyErr_Format(PyExc_ValueError, "%s: input tensor must have at least 2 dimensions", fn);
        return NULL;
    }
    AmpyTensor *out = x;
    if (inplace) {
        if (ampy_py_check_write(x, fn, "self", AMPY_PY_WRITE_OVERLAP) < 0)
            return NULL;
        Py_INCREF(out);
    } else if (!(out = ampy_py_empty(x->dtype, x->ndim, x->shape, AMPY_DEV_CPU))) {
        return NULL;
    }
    int64_t is[AMPY_MAX_DIMS], os[AMPY_MAX_DIMS];
    ampy_py_byte_strides(x, is);
    ampy_py_byte_strides(out, os);
    ampy_status s;
    RUN(x->numel, ampy_tril(x->ndim, x->shape, x->data, is, out->data, os,
                            ampy_dtype_size(x->dtype), diag, upper));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return ampy_py_raise(s);
    }
    if (inplace)
        ampy_py_bump_version(x);
    return (PyObject *)out;
}

/* multinomial(p, num_samples, replacement, u) -> int64 [rows, num_samples];
 * p: contiguous float64 [rows, ncat], u: contiguous float64 uniforms, both
 * on the CPU or both on one CUDA device (whose weights the caller has
 * checked: multinomial_cuda.h) */
static PyObject *f_multinomial(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *op, *ou;
    long long ns;
    int repl;
    if (!PyArg_ParseTuple(args, "OLpO:multinomial", &op, &ns, &repl, &ou))
        return NULL;
    AmpyTensor *p = sort_tensor(op, "multinomial");
    AmpyTensor *u = p ? ampy_py_tensor_arg(ou, "multinomial", "uniforms") : NULL;
    if (!u)
        return NULL;
    if (p->ndim != 2 || p->dtype != AMPY_FLOAT64 || u->dtype != AMPY_FLOAT64 ||
        u->numel != p->shape[0] * (repl ? ns : p->shape[1]) || u->device != p->device ||
        !ampy_py_is_contiguous(u)) {
        PyErr_SetString(PyExc_ValueError, "multinomial: inconsistent arguments");
        return NULL;
    }
    int64_t shape[2] = {p->shape[0], ns};
    AmpyTensor *out = ampy_py_empty(AMPY_INT64, 2, shape, p->device);
    if (!out)
        return NULL;
    ampy_status s = AMPY_OK;
    if (shape[0])
        RUN(p->numel, SORT_CALL(p, multinomial, shape[0], p->shape[1], (const double *)p->data,
                                ns, repl, (const double *)u->data, (int64_t *)out->data));
    if (s != AMPY_OK) {
        Py_DECREF(out);
        return p->device >= 0 ? ampy_py_raise_cuda(s) : ampy_py_raise(s);
    }
    return (PyObject *)out;
}

PyMethodDef ampy_py_tensorops_methods[] = {
    {"sort", f_sort, METH_VARARGS,
     "sort(x, descending) -> (values, indices)\n--\n\nStable sort of a contiguous tensor "
     "along its last dim (NaN largest)."},
    {"topk", f_topk, METH_VARARGS,
     "topk(x, k, largest) -> (values, indices)\n--\n\nThe k largest/smallest along the last "
     "dim, sorted."},
    {"gather", f_gather, METH_VARARGS,
     "gather(input, dim, index) -> Tensor\n--\n\ntorch.gather on CPU tensors (dim wrapped)."},
    {"scatter_", f_scatter_, METH_VARARGS,
     "scatter_(self, dim, index, src, add) -> None\n--\n\nIn-place scatter / scatter_add."},
    {"scatter_reduce_", f_scatter_reduce_, METH_VARARGS,
     "scatter_reduce_(self, dim, index, src, op) -> None\n--\n\nIn-place scatter_reduce "
     "(op 1 prod, 2 amax, 3 amin)."},
    {"tril", f_tril, METH_VARARGS,
     "tril(x, diagonal, upper, inplace) -> Tensor\n--\n\nLower (upper) triangle of the last two "
     "dims."},
    {"multinomial", f_multinomial, METH_VARARGS,
     "multinomial(p, num_samples, replacement, uniforms) -> Tensor\n--\n\nCategorical samples "
     "of float64 weight rows."},
    {NULL, NULL, 0, NULL},
};
