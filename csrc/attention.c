/* attention.c — the fused CPU attention kernel of attention.h.
 *
 * The block loops are written once (attention_impl.inc) and compiled twice:
 * with a float32 accumulator (float32, float16 and bfloat16 inputs) and with
 * a double one (float64 inputs). Work is split over batch items x query
 * blocks in the forward; the backward splits over batch items, or, with
 * fewer items than threads, over (item, key block) and then (item, query
 * block) (attention_bwd.inc), so no two threads add into the same rows. Each
 * thread allocates its workspace once, O(block^2 + L*E), never O(Lq*Lk).
 */
#include <math.h>
#include <string.h>

#include "ampy/alloc.h"
#include "ampy/attention.h"
#include "ampy/attention_math.h"
#include "ampy/cast.h"
#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "vmath.h"

ampy_status ampy_attention_check(const ampy_attn_problem *p)
{
    return ampy_attn_check(p);
}

/* Element offsets of batch item b (flat) into q, k, v and the mask. */
typedef struct attn_offs {
    int64_t q, k, v, m;
} attn_offs;

static attn_offs item_offsets(const ampy_attn_problem *p, int64_t b)
{
    attn_offs o = {0, 0, 0, 0};
    for (int d = p->nd - 1; d >= 0; d--) {
        int64_t i = p->batch[d] ? b % p->batch[d] : 0;
        b = p->batch[d] ? b / p->batch[d] : 0;
        o.q += i * p->q.bs[d], o.k += i * p->k.bs[d], o.v += i * p->v.bs[d];
        o.m += i * p->mask.bs[d];
    }
    return o;
}

static int64_t num_items(const ampy_attn_problem *p)
{
    int64_t n = 1;
    for (int d = 0; d < p->nd; d++)
        n *= p->batch[d];
    return n;
}

/* The first failure of any task (tasks keep going; the caller reports it). */
static void record(ampy_status *slot, ampy_status s)
{
    if (s != AMPY_OK)
        __atomic_store_n(slot, s, __ATOMIC_RELAXED);
}

static const char *at(const void *base, int64_t elems, size_t es)
{
    return (const char *)base + elems * (int64_t)es;
}

/* float accumulator: rows use vmath's vector max / exp-sum. */
static float rowmax_f32(const float *x, int64_t n) { return ampy_vm()->rowmax(x, n); }
static float expsum_f32(float *x, int64_t n, float m)
{
    return (float)ampy_vm()->expsum(x, n, m, x);
}
static void exp_sub_f32(float *x, int64_t n, float m)
{
    for (int64_t i = 0; i < n; i++)
        x[i] -= m;
    ampy_vm()->op[AMPY_VM_EXP](x, x, n);
}
static ampy_status load_f32(const void *src, ampy_dtype dt, float *dst, int64_t n)
{
    if (dt == AMPY_FLOAT16)
        return ampy_cast_f16_to_f32(src, dst, n);
    if (dt == AMPY_BFLOAT16)
        return ampy_cast_bf16_to_f32(src, dst, n);
    memcpy(dst, src, (size_t)n * sizeof(float));
    return AMPY_OK;
}
static ampy_status store_f32(const float *src, void *dst, ampy_dtype dt, int64_t n)
{
    if (dt == AMPY_FLOAT16)
        return ampy_cast_f32_to_f16(src, dst, n);
    if (dt == AMPY_BFLOAT16)
        return ampy_cast_f32_to_bf16(src, dst, n);
    memcpy(dst, src, (size_t)n * sizeof(float));
    return AMPY_OK;
}

/* double accumulator: plain libm loops. */
static double rowmax_f64(const double *x, int64_t n)
{
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return x[i];
        m = x[i] > m ? x[i] : m;
    }
    return m;
}
static double expsum_f64(double *x, int64_t n, double m)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += (x[i] = exp(x[i] - m));
    return s;
}
static void exp_sub_f64(double *x, int64_t n, double m)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = exp(x[i] - m);
}
static ampy_status load_f64(const void *src, ampy_dtype dt, double *dst, int64_t n)
{
    (void)dt;
    memcpy(dst, src, (size_t)n * sizeof(double));
    return AMPY_OK;
}
static ampy_status store_f64(const double *src, void *dst, ampy_dtype dt, int64_t n)
{
    (void)dt;
    memcpy(dst, src, (size_t)n * sizeof(double));
    return AMPY_OK;
}

#define ACC float
#define ACC_DT AMPY_FLOAT32
#define T_(name) name##_f32
#include "attention_impl.inc"
#undef ACC
#undef ACC_DT
#undef T_

#define ACC double
#define ACC_DT AMPY_FLOAT64
#define T_(name) name##_f64
#include "attention_impl.inc"

ampy_status ampy_attention_fwd(const ampy_attn_problem *p, void *out, void *lse)
{
    ampy_status s = ampy_attention_check(p);
    if (s != AMPY_OK)
        return s;
    if (num_items(p) == 0 || p->Lq == 0)
        return AMPY_OK;
    return p->dtype == AMPY_FLOAT64 ? attn_fwd_f64(p, out, lse) : attn_fwd_f32(p, out, lse);
}

ampy_status ampy_attention_bwd(const ampy_attn_problem *p, const void *out, const void *dout,
                               const void *lse, void *dq, void *dk, void *dv)
{
    return ampy_attention_bwd_mask(p, out, dout, lse, dq, dk, dv, NULL);
}

ampy_status ampy_attention_bwd_mask(const ampy_attn_problem *p, const void *out,
                                    const void *dout, const void *lse, void *dq, void *dk,
                                    void *dv, void *dmask)
{
    ampy_status s = ampy_attention_check(p);
    if (s != AMPY_OK)
        return s;
    if (num_items(p) == 0)
        return AMPY_OK;
    return p->dtype == AMPY_FLOAT64 ? attn_bwd_f64(p, out, dout, lse, dq, dk, dv, dmask)
                                    : attn_bwd_f32(p, out, dout, lse, dq, dk, dv, dmask);
}
