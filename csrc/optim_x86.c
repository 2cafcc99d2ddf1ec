/* optim_x86.c — AVX-512 loops of the fused SGD / Adam steps (see optim.h)
 * and of RMSprop / Adagrad / Adadelta (optim_adaptive.h).
 *
 * Sixteen elements per step, the same op sequence as ampy_adam_elem /
 * ampy_sgd_elem in elem.h (one rounding per op, vfmadd exactly where elem.h
 * calls fmaf), so the bits equal the portable loops for every non-NaN input.
 * Half conversions: vcvtph2ps (exact), vcvtps2ph with an explicit
 * round-to-nearest-even immediate (equal to elem.h for every value an
 * arithmetic op can produce), bfloat16 by elem.h's integer rounding.
 * Compiled without -march: the target attribute enables AVX-512 per function.
 */
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/optim.h"
#include "ampy/optim_adaptive.h"
#include "ampy/optim_math.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "simd.h"


AMPY_TARGET_AVX512 static inline __mmask16 lanes(int64_t i, int64_t e)
{
    return e - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (e - i)) - 1u);
}

AMPY_TARGET_AVX512 static inline __m512 load_f32(const void *p, int dt, int64_t i, __mmask16 k)
{
    if (dt == AMPY_FLOAT16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i));
    if (dt == AMPY_BFLOAT16) {
        __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i));
        return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
    return _mm512_maskz_loadu_ps(k, (const float *)p + i);
}

AMPY_TARGET_AVX512 static inline void store_half(void *p, int dt, int64_t i, __mmask16 k, __m512 w)
{
    uint16_t *d = (uint16_t *)p + i;
    if (dt == AMPY_FLOAT16) {
        _mm256_mask_storeu_epi16(d, k, _mm512_cvtps_ph(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    } else {
        __m512i u = _mm512_castps_si512(w);
        __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(
            _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
        r = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(w, w, _CMP_UNORD_Q), r,
                                    _mm512_set1_epi32(0x7FC0));
        _mm256_mask_storeu_epi16(d, k, _mm512_cvtepi32_epi16(r));
    }
}

/* The unscaled gradient back into grad (write-back), in the grad's dtype. */
AMPY_TARGET_AVX512 static inline void store_grad(void *p, int dt, int64_t i, __mmask16 k, __m512 g)
{
    if (dt == AMPY_FLOAT32)
        _mm512_mask_storeu_ps((float *)p + i, k, g);
    else
        store_half(p, dt, i, k, g);
}

/* torch.maximum(a, b): a NaN operand wins. */
AMPY_TARGET_AVX512 static inline __m512 max_nan(__m512 a, __m512 b)
{
    __mmask16 take_a = _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take_a, b, a);
}

/* Prefetch distance, in elements, for the Adam streams (up to five of them):
 * with 16 elements per iteration the out-of-order window keeps too few lines
 * of each stream in flight for DRAM/L3; measured +10-20 % on 16M params. A
 * prefetch past the end of a buffer is harmless (it never faults). */
#define PF_EL 256

AMPY_TARGET_AVX512
void ampy_optim_adam_run_avx512(const ampy_adam_tensor *t, int64_t b, int64_t e, const void *sv)
{
    const ampy_adam_scalars *s = (const ampy_adam_scalars *)sv;
    float *W = t->master ? t->master : (float *)t->param;
    float *M = t->exp_avg, *V = t->exp_avg_sq, *VM = t->max_exp_avg_sq;
    const __m512 inv = _mm512_set1_ps(s->inv_scale), neg = _mm512_set1_ps(s->neg);
    const __m512 wd = _mm512_set1_ps(s->wd), decay = _mm512_set1_ps(s->decay_mul);
    const __m512 w1 = _mm512_set1_ps(s->w1_small ? s->w1 : s->w1m1);
    const __m512 b2 = _mm512_set1_ps(s->beta2), w2 = _mm512_set1_ps(s->w2);
    const __m512 bc2 = _mm512_set1_ps(s->bc2_sqrt), eps = _mm512_set1_ps(s->eps);
    const __m512 nss = _mm512_set1_ps(s->neg_step_size);
    const int half = t->master != 0, l2 = !s->decoupled && s->wd != 0.0f;
    const int64_t gsz = t->grad_dtype == AMPY_FLOAT32 ? 4 : 2;
    for (int64_t i = b; i < e; i += 16) {
        _mm_prefetch((const char *)(W + i + PF_EL), _MM_HINT_T0);
        _mm_prefetch((const char *)(M + i + PF_EL), _MM_HINT_T0);
        _mm_prefetch((const char *)(V + i + PF_EL), _MM_HINT_T0);
        _mm_prefetch((const char *)t->grad + (i + PF_EL) * gsz, _MM_HINT_T0);
        if (half)
            _mm_prefetch((const char *)t->param + (i + PF_EL) * 2, _MM_HINT_T0);
        __mmask16 k = lanes(i, e);
        __m512 g = _mm512_mul_ps(load_f32(t->grad, t->grad_dtype, i, k), inv);
        if (s->write_grad)
            store_grad(t->grad, t->grad_dtype, i, k, g);
        g = _mm512_mul_ps(g, neg);
        __m512 w = _mm512_maskz_loadu_ps(k, W + i);
        if (s->decoupled)
            w = _mm512_mul_ps(w, decay);
        else if (l2)
            g = _mm512_fmadd_ps(w, wd, g);
        __m512 m = _mm512_maskz_loadu_ps(k, M + i);
        __m512 d = _mm512_sub_ps(g, m);
        m = _mm512_fmadd_ps(w1, d, s->w1_small ? m : g);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, V + i), b2);
        v = _mm512_fmadd_ps(_mm512_mul_ps(w2, g), g, v); /* addcmul_: fma(c*y, z, x) */
        __m512 vd = v;
        if (s->amsgrad) {
            vd = max_nan(_mm512_maskz_loadu_ps(k, VM + i), v);
            _mm512_mask_storeu_ps(VM + i, k, vd);
        }
        __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vd), bc2), eps);
        w = _mm512_add_ps(w, _mm512_div_ps(_mm512_mul_ps(nss, m), denom));
        _mm512_mask_storeu_ps(M + i, k, m);
        _mm512_mask_storeu_ps(V + i, k, v);
        _mm512_mask_storeu_ps(W + i, k, w);
        if (half)
            store_half(t->param, t->param_dtype, i, k, w);
    }
}

AMPY_TARGET_AVX512
void ampy_optim_sgd_run_avx512(const ampy_sgd_tensor *t, int64_t b, int64_t e, const void *sv)
{
    const ampy_sgd_scalars *s = (const ampy_sgd_scalars *)sv;
    float *W = t->master ? t->master : (float *)t->param;
    float *B = t->momentum_buffer;
    const __m512 inv = _mm512_set1_ps(s->inv_scale), neg = _mm512_set1_ps(s->neg);
    const __m512 wd = _mm512_set1_ps(s->wd), mom = _mm512_set1_ps(s->momentum);
    const __m512 damp = _mm512_set1_ps(s->one_m_damp), nlr = _mm512_set1_ps(s->neg_lr);
    const int half = t->master != 0, first = t->momentum_first;
    for (int64_t i = b; i < e; i += 16) {
        __mmask16 k = lanes(i, e);
        __m512 g = _mm512_mul_ps(load_f32(t->grad, t->grad_dtype, i, k), inv);
        if (s->write_grad)
            store_grad(t->grad, t->grad_dtype, i, k, g);
        g = _mm512_mul_ps(g, neg);
        __m512 w = _mm512_maskz_loadu_ps(k, W + i);
        if (s->wd != 0.0f)
            g = _mm512_fmadd_ps(w, wd, g);
        if (s->has_momentum) {
            __m512 buf = first ? g
                               : _mm512_fmadd_ps(g, damp, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, B + i), mom));
            _mm512_mask_storeu_ps(B + i, k, buf);
            g = s->nesterov ? _mm512_fmadd_ps(buf, mom, g) : buf;
        }
        w = _mm512_fmadd_ps(g, nlr, w);
        _mm512_mask_storeu_ps(W + i, k, w);
        if (half)
            store_half(t->param, t->param_dtype, i, k, w);
    }
}

/* ---- RMSprop / Adagrad / Adadelta (optim_adaptive.h) ----------------------------
 * The op sequence of ampy_rmsprop_elem / ampy_adagrad_elem / ampy_adadelta_elem
 * (optim_math.h), one rounding per op and vfmadd where they call fmaf. */

AMPY_TARGET_AVX512 static inline __m512 rmsprop16(__m512 g, __m512 *w, __m512 v, __m512 *ga,
                                                  __m512 *buf, const ampy_adaptive_scalars *s)
{
    __m512 avg;
    if (s->centered) {
        __m512 d = _mm512_sub_ps(g, *ga);
        *ga = s->w_small ? _mm512_fmadd_ps(_mm512_set1_ps(s->w), d, *ga)
                         : _mm512_fmadd_ps(_mm512_set1_ps(s->wm1), d, g);
        avg = _mm512_sqrt_ps(_mm512_fnmadd_ps(*ga, *ga, v));
    } else {
        avg = _mm512_sqrt_ps(v);
    }
    avg = _mm512_add_ps(avg, _mm512_set1_ps(s->eps));
    const __m512 nlr = _mm512_set1_ps(s->neg_lr);
    if (s->has_momentum) {
        *buf = _mm512_add_ps(_mm512_mul_ps(*buf, _mm512_set1_ps(s->momentum)),
                             _mm512_div_ps(g, avg));
        *w = _mm512_fmadd_ps(*buf, nlr, *w);
    } else {
        *w = _mm512_add_ps(*w, _mm512_div_ps(_mm512_mul_ps(nlr, g), avg));
    }
    return v;
}

AMPY_TARGET_AVX512
void ampy_optim_adaptive_run_avx512(const ampy_adaptive_tensor *t, int64_t b, int64_t e,
                                    const void *sv)
{
    const ampy_adaptive_scalars *s = (const ampy_adaptive_scalars *)sv;
    float *W = t->master ? t->master : (float *)t->param;
    float *S0 = t->state0, *S1 = t->state1, *S2 = t->state2;
    const __m512 inv = _mm512_set1_ps(s->inv_scale), neg = _mm512_set1_ps(s->neg);
    const __m512 wd = _mm512_set1_ps(s->wd), decay = _mm512_set1_ps(s->decay);
    const __m512 wt = _mm512_set1_ps(s->w), eps = _mm512_set1_ps(s->eps);
    const __m512 nlr = _mm512_set1_ps(s->neg_lr);
    const int half = t->master != 0;
    for (int64_t i = b; i < e; i += 16) {
        __mmask16 k = lanes(i, e);
        __m512 g = _mm512_mul_ps(load_f32(t->grad, t->grad_dtype, i, k), inv);
        if (s->write_grad)
            store_grad(t->grad, t->grad_dtype, i, k, g);
        g = _mm512_mul_ps(g, neg);
        __m512 w = _mm512_maskz_loadu_ps(k, W + i);
        if (s->wd != 0.0f)
            g = _mm512_fmadd_ps(w, wd, g);
        __m512 a = _mm512_maskz_loadu_ps(k, S0 + i);
        if (s->kind == AMPY_ADAPTIVE_ADAGRAD) {
            a = _mm512_fmadd_ps(g, g, a);
            __m512 std = _mm512_add_ps(_mm512_sqrt_ps(a), eps);
            w = _mm512_add_ps(w, _mm512_div_ps(_mm512_mul_ps(nlr, g), std));
        } else if (s->kind == AMPY_ADAPTIVE_ADADELTA) {
            a = _mm512_fmadd_ps(_mm512_mul_ps(wt, g), g, _mm512_mul_ps(a, decay));
            __m512 acc = _mm512_maskz_loadu_ps(k, S1 + i);
            __m512 std = _mm512_sqrt_ps(_mm512_add_ps(a, eps));
            __m512 d = _mm512_div_ps(_mm512_sqrt_ps(_mm512_add_ps(acc, eps)), std);
            d = _mm512_mul_ps(d, g);
            acc = _mm512_fmadd_ps(_mm512_mul_ps(wt, d), d, _mm512_mul_ps(acc, decay));
            _mm512_mask_storeu_ps(S1 + i, k, acc);
            w = _mm512_fmadd_ps(d, nlr, w);
        } else {
            a = _mm512_fmadd_ps(_mm512_mul_ps(wt, g), g, _mm512_mul_ps(a, decay));
            __m512 ga = s->centered ? _mm512_maskz_loadu_ps(k, S2 + i) : a;
            __m512 buf = s->has_momentum ? _mm512_maskz_loadu_ps(k, S1 + i) : a;
            rmsprop16(g, &w, a, &ga, &buf, s);
            if (s->centered)
                _mm512_mask_storeu_ps(S2 + i, k, ga);
            if (s->has_momentum)
                _mm512_mask_storeu_ps(S1 + i, k, buf);
        }
        _mm512_mask_storeu_ps(S0 + i, k, a);
        _mm512_mask_storeu_ps(W + i, k, w);
        if (half)
            store_half(t->param, t->param_dtype, i, k, w);
    }
}

#else
typedef int ampy_optim_x86_unused; /* ISO C forbids an empty translation unit */
#endif
