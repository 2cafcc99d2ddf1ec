/* gemm_matmul.c — torch.matmul's batch broadcasting over raw operands
 * (gemm_matmul.h), in front of ampy_gemm_batched (gemm.h). */
#include "ampy/gemm_matmul.h"

static const char fn[] = "gemm_batched";

/* The broadcast batch dims of a and b, right-aligned, into p. */
static ampy_status broadcast_batch(const ampy_gemm_operand *a, const ampy_gemm_operand *b,
                                   ampy_gemm_plan *p)
{
    const int an = a->ndim, bn = b->ndim, nd = (an > bn ? an : bn) - 2;
    for (int d = 0; d < nd; d++) {
        int ai = d - (nd - (an - 2)), bi = d - (nd - (bn - 2));
        int64_t sa = ai >= 0 ? a->shape[ai] : 1, sb = bi >= 0 ? b->shape[bi] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return ampy_error(AMPY_ERR_VALUE, "%s: batch dims of a and b do not broadcast: a's "
                              "size %lld vs b's size %lld at batch dim %d",
                              fn, (long long)sa, (long long)sb, d);
        p->shape[d] = sa == 1 ? sb : sa;
        p->a_bs[d] = sa == 1 ? 0 : a->strides[ai];
        p->b_bs[d] = sb == 1 ? 0 : b->strides[bi];
    }
    p->nd = nd;
    return AMPY_OK;
}

ampy_status ampy_gemm_matmul_plan(const ampy_gemm_operand *a, const ampy_gemm_operand *b,
                                  ampy_gemm_plan *p)
{
    const ampy_gemm_operand *ops[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (ops[i]->ndim < 2 || ops[i]->ndim > AMPY_MAX_DIMS)
            return ampy_error(AMPY_ERR_VALUE, "%s: %s must be at least 2-d, got %d-d", fn,
                              i ? "b" : "a", ops[i]->ndim);
    if (a->dtype != b->dtype)
        return ampy_error(AMPY_ERR_DTYPE,
                          "expected mat1 and mat2 to have the same dtype, but got: %s != %s",
                          ampy_dtype_name(a->dtype), ampy_dtype_name(b->dtype));
    const int an = a->ndim, bn = b->ndim;
    p->M = a->shape[an - 2], p->K = a->shape[an - 1], p->N = b->shape[bn - 1];
    if (b->shape[bn - 2] != p->K)
        return ampy_error(AMPY_ERR_VALUE, "%s: a's last dim (%lld) must equal b's second-to-last "
                          "dim (%lld)", fn, (long long)p->K, (long long)b->shape[bn - 2]);
    ampy_status s = broadcast_batch(a, b, p);
    if (s != AMPY_OK)
        return s;
    p->shape[p->nd] = p->M;
    p->shape[p->nd + 1] = p->N;
    return AMPY_OK;
}

ampy_status ampy_gemm_matmul_batch(const ampy_gemm_plan *p, const int64_t *c_strides, int *n,
                                   int64_t *shape, int64_t *a_bs, int64_t *b_bs, int64_t *c_bs)
{
    int k = 0;
    for (int d = 0; d < p->nd; d++)
        k += p->shape[d] != 1;
    if (k > AMPY_GEMM_MAX_BATCH_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "%s: at most %d batch dims of size > 1, got %d", fn,
                          AMPY_GEMM_MAX_BATCH_DIMS, k);
    k = 0;
    for (int d = 0; d < p->nd; d++) {
        const int64_t s = p->shape[d];
        if (s == 1)
            continue;
        if (k > 0 && a_bs[k - 1] == p->a_bs[d] * s && b_bs[k - 1] == p->b_bs[d] * s &&
            c_bs[k - 1] == c_strides[d] * s) { /* d flattens into the dim before it */
            shape[k - 1] *= s;
            a_bs[k - 1] = p->a_bs[d], b_bs[k - 1] = p->b_bs[d], c_bs[k - 1] = c_strides[d];
            continue;
        }
        shape[k] = s, a_bs[k] = p->a_bs[d], b_bs[k] = p->b_bs[d], c_bs[k] = c_strides[d];
        k++;
    }
    *n = k;
    return AMPY_OK;
}

ampy_status ampy_gemm_matmul(const ampy_gemm_plan *p, double alpha, const ampy_gemm_operand *a,
                             const ampy_gemm_operand *b, double beta, const ampy_gemm_operand *c)
{
    int64_t sh[AMPY_GEMM_MAX_BATCH_DIMS], as[AMPY_GEMM_MAX_BATCH_DIMS],
        bs[AMPY_GEMM_MAX_BATCH_DIMS], cs[AMPY_GEMM_MAX_BATCH_DIMS];
    int n;
    ampy_status s = ampy_gemm_matmul_batch(p, c->strides, &n, sh, as, bs, cs);
    if (s != AMPY_OK)
        return s;
    const int an = a->ndim, bn = b->ndim, nd = p->nd;
    return ampy_gemm_batched(n, sh, p->M, p->N, p->K, alpha, a->data, a->dtype, as,
                             a->strides[an - 2], a->strides[an - 1], b->data, b->dtype, bs,
                             b->strides[bn - 2], b->strides[bn - 1], beta, c->data, c->dtype, cs,
                             c->strides[nd], c->strides[nd + 1]);
}
