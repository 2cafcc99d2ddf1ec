/* ops_py.c — binding of the CUDA op kernels: GEMM (gemm_cuda.h) and fills.
 * The Python side (ampy/cuda/_kernels.py) computes shapes, broadcasting and
 * strides and allocates outputs; these functions check pointers and devices
 * and queue the work on the device's stream.
 */
#include "cuda_py.h"

#include "ampy/gemm_cuda.h"

/* _gemm(a, b, c, batch, m, n, k, sa_b, sa_m, sa_k, sb_b, sb_k, sb_n, sc_b, ldc,
 *       alpha, beta): c = alpha * a @ b + beta * c over a strided batch
 * (element strides; a, b, c are CUDA tensors whose data pointers are the
 * first elements). */
static PyObject *f_gemm(PyObject *self, PyObject *args)
{
    PyObject *ao, *bo, *co;
    ampy_gemm_cuda_args g;
    long long v[12];
    if (!PyArg_ParseTuple(args, "OOOLLLLLLLLLLLLdd", &ao, &bo, &co, &v[0], &v[1], &v[2], &v[3],
                          &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &g.alpha,
                          &g.beta))
        return NULL;
    AmpyTensor *a = ampy_cuda_py_tensor(ao, "matmul", "a");
    AmpyTensor *b = a ? ampy_cuda_py_tensor(bo, "matmul", "b") : NULL;
    AmpyTensor *c = b ? ampy_cuda_py_tensor(co, "matmul", "out") : NULL;
    if (!c || (((AmpyStorage *)c->base)->flags && ampy_py_raise_readonly(c, "matmul", "out") < 0))
        return NULL;
    if (a->device != b->device || a->device != c->device) {
        PyErr_Format(PyExc_RuntimeError, "Expected all tensors to be on the same device, but "
                     "found at least two devices, cuda:%d and cuda:%d!", a->device,
                     a->device != b->device ? b->device : c->device);
        return NULL;
    }
    if (a->dtype != b->dtype) {
        PyErr_Format(PyExc_TypeError, "expected m1 and m2 to have the same dtype, but got: %s != %s",
                     ampy_dtype_name(a->dtype), ampy_dtype_name(b->dtype));
        return NULL;
    }
    g.batch = v[0], g.m = v[1], g.n = v[2], g.k = v[3];
    g.sa_b = v[4], g.sa_m = v[5], g.sa_k = v[6];
    g.sb_b = v[7], g.sb_k = v[8], g.sb_n = v[9];
    g.sc_b = v[10], g.ldc = v[11];
    g.a = a->data, g.b = b->data, g.c = c->data;
    g.in_dtype = (ampy_dtype)a->dtype;
    g.out_dtype = (ampy_dtype)c->dtype;
    ampy_status s = ampy_gemm_cuda(a->device, &g);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    ((AmpyStorage *)c->base)->version++;
    Py_RETURN_NONE;
}

/* _fill(t, value): every element of a contiguous CUDA tensor = value. */
static PyObject *f_fill(PyObject *self, PyObject *args)
{
    PyObject *to;
    double value;
    if (!PyArg_ParseTuple(args, "Od", &to, &value))
        return NULL;
    AmpyTensor *t = ampy_cuda_py_tensor(to, "fill_", "self");
    if (!t || (((AmpyStorage *)t->base)->flags && ampy_py_raise_readonly(t, "fill_", "self") < 0))
        return NULL;
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->strides[d] != expect) {
            PyErr_SetString(PyExc_ValueError, "_fill: tensor must be contiguous");
            return NULL;
        }
        expect *= t->shape[d];
    }
    ampy_status s = ampy_fill_cuda(t->device, t->data, (ampy_dtype)t->dtype, t->numel, value);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    ((AmpyStorage *)t->base)->version++;
    Py_RETURN_NONE;
}

static PyObject *f_blas_add_path(PyObject *self, PyObject *arg)
{
    const char *dir = PyUnicode_AsUTF8(arg);
    if (!dir)
        return NULL;
    ampy_status s = ampy_cuda_blas_add_path(dir);
    if (s != AMPY_OK)
        return ampy_cuda_py_raise(s);
    Py_RETURN_NONE;
}

PyMethodDef ampy_cuda_py_ops_methods[] = {
    {"_gemm", f_gemm, METH_VARARGS,
     "_gemm(a, b, c, batch, m, n, k, sa_b, sa_m, sa_k, sb_b, sb_k, sb_n, sc_b, ldc, alpha, "
     "beta)\n--\n\nc = alpha * a @ b + beta * c (strided batch, cuBLAS, fp32 accumulation)."},
    {"_fill", f_fill, METH_VARARGS, "_fill(t, value)\n--\n\nFill a contiguous CUDA tensor."},
    {"_blas_add_path", f_blas_add_path, METH_O,
     "_blas_add_path(dir)\n--\n\nA directory searched for libcublas at the first GEMM."},
    {NULL, NULL, 0, NULL},
};
