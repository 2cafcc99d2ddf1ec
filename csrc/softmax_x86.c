/* softmax_x86.c — the AVX-512 softmax lines of reduce_softmax.c (see
 * reduce_lines.h): reduce_softmax.c hands every float32-computed line here
 * when the CPU has AVX-512 (line_ctx.simd).
 */
#include <math.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/ewise.h"
#include "reduce_lines.h"

#ifdef AMPY_X86_SIMD
#include <immintrin.h>

#include "simd_half.h"

/* ---- AVX-512 lines ------------------------------------------------------------
 * The float32-computed line written with intrinsics, 16 lanes:
 *  - max: vmaxps lanes plus an unordered-compare NaN mask (NaN sticks);
 *  - e^(x - m): vexp_diff of vmath_impl.inc operation for operation (the
 *    TwoSum-exact difference, the same reduction and polynomial), with the
 *    2^n scale done by one vscalefps, which rounds once like vmath's two
 *    multiplications: the same bits;
 *  - the sum in double, lane l holding the elements i == l (mod 16) in order,
 *    then a halving tree (lanes l and l+8, l and l+4, ...). A line is handed
 *    in as chunks of multiples of 16 elements, so the order depends on the
 *    line alone, not on how it is chunked or threaded;
 *  - y = e / s correctly rounded without vdivps (throughput 16 cycles per
 *    16 lanes): q = e * (1/s), r = e - q s exactly (FMA), q + r (1/s) — the
 *    correction step of Markstein's theorem, exact for normal quotients
 *    (1/s is correctly rounded and s >= 1, since the maximum contributes 1);
 *  - log_softmax: (x - m) - log(s), two roundings as before.
 * Converted dtypes (float16/bfloat16, strided lines) go through a float line
 * buffer, filled once by the SIMD cast kernels and rounded once on the way
 * out, as the portable path does. */

typedef struct {
    __m512 mx;
    __mmask16 nan;
    __m512d s0, s1; /* lanes 0-7 and 8-15 of the double sum */
} smx_acc;

AMPY_TARGET_AVX512
static inline __mmask16 smx_mask(int64_t k) { return (__mmask16)((1u << k) - 1u); }

AMPY_TARGET_AVX512 static void smx_max(const float *x, int64_t n, smx_acc *a)
{
    __m512 mx = a->mx;
    __mmask16 nan = a->nan;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        mx = _mm512_max_ps(mx, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (i < n) {
        const __mmask16 k = smx_mask(n - i);
        const __m512 v = _mm512_mask_loadu_ps(mx, k, x + i);
        mx = _mm512_max_ps(mx, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    a->mx = mx;
    a->nan = nan;
}

/* e^(x - m), vmath's vexp_diff in 16 lanes */
AMPY_TARGET_AVX512 static inline __m512 smx_expdiff(__m512 x, __m512 m)
{
    const __m512 d = _mm512_sub_ps(x, m);
    const __m512 bv = _mm512_sub_ps(d, x);
    const __m512 av = _mm512_sub_ps(d, bv);
    const __m512 t = _mm512_sub_ps(x, av), u = _mm512_add_ps(m, bv);
    /* clamp below at -110 (NaN stays NaN: vmaxps returns its second operand);
     * d <= 0 unless NaN, m being the maximum */
    const __m512 dc = _mm512_max_ps(_mm512_set1_ps(-110.0f), d);
    const __mmask16 keep = _mm512_cmp_ps_mask(d, dc, _CMP_EQ_OQ);
    const __m512 ec = _mm512_maskz_sub_ps(keep, t, u); /* inf/NaN/clamped lanes: 0 */
    const __m512 k = _mm512_sub_ps(
        _mm512_fmadd_ps(_mm512_add_ps(dc, ec), _mm512_set1_ps(1.44269504088896341f),
                        _mm512_set1_ps(12582912.0f)),
        _mm512_set1_ps(12582912.0f));
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), dc); /* exact */
    r = _mm512_add_ps(r, ec);
    r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 q = _mm512_set1_ps(1.9850667740684003e-4f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.393982907757163e-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.333384990692139e-3f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.166640713810921e-2f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.1666666567325592f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(0.5f));
    const __m512 p = _mm512_add_ps(_mm512_set1_ps(1.0f),
                                   _mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r));
    return _mm512_scalef_ps(p, k);
}

AMPY_TARGET_AVX512 static inline void smx_add(smx_acc *a, __m512 e)
{
    a->s0 = _mm512_add_pd(a->s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    a->s1 = _mm512_add_pd(a->s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                     _mm512_castps_pd(e), 1))));
}

/* sum += e^(x - m) over x[0..n); y[i] = e^(x[i] - m) when y is not NULL.
 * The sums are a local copy: kept in *a, they went through memory on every
 * vector (the stores to y may alias *a), a store-to-load chain that took
 * half the time of a softmax line. */
AMPY_TARGET_AVX512 static void smx_expsum(const float *x, int64_t n, float m, float *y, smx_acc *a)
{
    const __m512 vm = _mm512_set1_ps(m);
    smx_acc s = *a;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = smx_expdiff(_mm512_loadu_ps(x + i), vm);
        if (y)
            _mm512_storeu_ps(y + i, e);
        smx_add(&s, e);
    }
    if (i < n) {
        const __mmask16 k = smx_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(k, smx_expdiff(_mm512_maskz_loadu_ps(k, x + i), vm));
        if (y)
            _mm512_mask_storeu_ps(y + i, k, e);
        smx_add(&s, e); /* +0.0 in the unused lanes: no change */
    }
    a->s0 = s.s0;
    a->s1 = s.s1;
}

AMPY_TARGET_AVX512 static double smx_sum(const smx_acc *a)
{
    const __m512d t = _mm512_add_pd(a->s0, a->s1);
    const __m256d u = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
    const __m128d v = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1));
    return _mm_cvtsd_f64(_mm_add_sd(v, _mm_unpackhi_pd(v, v)));
}

/* y[i] = e[i] / s, correctly rounded (see above); y may equal e */
AMPY_TARGET_AVX512 static void smx_div(const float *e, int64_t n, float s, float *y)
{
    const __m512 vs = _mm512_set1_ps(s), vi = _mm512_set1_ps(1.0f / s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(e + i);
        const __m512 q = _mm512_mul_ps(v, vi);
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vs, v), vi, q));
    }
    if (i < n) { /* the same operations as the full vectors */
        const __mmask16 k = smx_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(k, e + i);
        const __m512 q = _mm512_mul_ps(v, vi);
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vs, v), vi, q));
    }
}

/* y[i] = e^(x[i] - m) / s (the exponentials were not kept) */
AMPY_TARGET_AVX512 static void smx_expdiv(const float *x, int64_t n, float m, float s, float *y)
{
    const __m512 vm = _mm512_set1_ps(m), vs = _mm512_set1_ps(s), vi = _mm512_set1_ps(1.0f / s);
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : smx_mask(n - i);
        const __m512 v = smx_expdiff(_mm512_maskz_loadu_ps(k, x + i), vm);
        const __m512 q = _mm512_mul_ps(v, vi);
        _mm512_mask_storeu_ps(y + i, k, _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vs, v), vi, q));
    }
}

/* y[i] = (x[i] - m) - ls */
AMPY_TARGET_AVX512 static void smx_subsub(const float *x, int64_t n, float m, float ls, float *y)
{
    const __m512 vm = _mm512_set1_ps(m), vl = _mm512_set1_ps(ls);
    int64_t i = 0;
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : smx_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_sub_ps(_mm512_sub_ps(v, vm), vl));
    }
}

/* float16/bfloat16 <-> float32 in registers, the bits of elem.h: widening
 * is exact; narrowing rounds to nearest-even (vcvtps2ph for float16, whose
 * NaN result equals elem.h's for the quiet NaNs arithmetic produces; the
 * integer rounding of cast_x86.c for bfloat16, NaN -> 0x7FC0). */
AMPY_TARGET_AVX512 static inline __m512 smx_ld_half(const uint16_t *p, int bf, __mmask16 k)
{
    const __m256i h = _mm256_maskz_loadu_epi16(k, p);
    if (bf)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

AMPY_TARGET_AVX512
static inline void smx_st_half(uint16_t *p, int bf, int bf16ok, __mmask16 k, __m512 v)
{
    const __m256i h = ampy_x86_f32_to_half16(v, bf, bf16ok);
    if (k == (__mmask16)0xFFFF)
        _mm256_storeu_si256((__m256i *)p, h);
    else
        _mm256_mask_storeu_epi16(p, k, h);
}

/* smx_max of n contiguous halves at p, stored as floats into buf on the way */
AMPY_TARGET_AVX512
static void smx_max_half(const uint16_t *p, int bf, int64_t n, float *buf, smx_acc *a)
{
    __m512 mx = a->mx;
    __mmask16 nan = a->nan;
    int64_t i = 0;
    /* plain stores where possible: a masked store does not forward to the
     * loads of the next pass */
    for (; i + 16 <= n; i += 16) {
        const __m512 v = smx_ld_half(p + i, bf, (__mmask16)0xFFFF);
        _mm512_storeu_ps(buf + i, v);
        mx = _mm512_max_ps(mx, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (i < n) {
        const __mmask16 k = smx_mask(n - i);
        const __m512 v = smx_ld_half(p + i, bf, k);
        _mm512_mask_storeu_ps(buf + i, k, v);
        mx = _mm512_mask_max_ps(mx, k, mx, v);
        nan |= _mm512_mask_cmp_ps_mask(k, v, v, _CMP_UNORD_Q);
    }
    a->mx = mx;
    a->nan = nan;
}

/* p[i] = half(e[i] / s) (smx_div, then rounded once to the half type) */
AMPY_TARGET_AVX512
static void smx_div_half(const float *e, int64_t n, float s, uint16_t *p, int bf, int bf16ok)
{
    const __m512 vs = _mm512_set1_ps(s), vi = _mm512_set1_ps(1.0f / s);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : smx_mask(n - i);
        const __m512 v = _mm512_maskz_loadu_ps(k, e + i);
        const __m512 q = _mm512_mul_ps(v, vi);
        smx_st_half(p + i, bf, bf16ok, k, _mm512_fmadd_ps(_mm512_fnmadd_ps(q, vs, v), vi, q));
    }
}

AMPY_TARGET_AVX512 static void smx_init(smx_acc *a)
{
    a->mx = _mm512_set1_ps(-INFINITY);
    a->nan = 0;
    a->s0 = a->s1 = _mm512_setzero_pd();
}

AMPY_TARGET_AVX512 static float smx_max_value(const smx_acc *a)
{
    return a->nan ? __builtin_nanf("") : _mm512_reduce_max_ps(a->mx);
}

/* n floats of a line at element offset off into buf (converted/strided), or
 * the data itself (contiguous float32) */
static const float *smx_in(const line_ctx *c, ampy_cast_kernel to_f32, const char *in,
                           int64_t off, int64_t n, float *buf)
{
    if (c->in_dt == AMPY_FLOAT32 && c->sin == 4)
        return (const float *)in + off;
    if (to_f32 && c->sin == 2)
        to_f32(in + off * 2, buf, n);
    else
        ampy_ewise_load(in + off * c->sin, c->sin, c->in_dt, AMPY_KIND_F32, buf, n);
    return buf;
}

static void smx_out(const line_ctx *c, ampy_cast_kernel from_f32, char *out, int64_t off,
                    int64_t n, const float *y)
{
    if (c->out_dt == AMPY_FLOAT32 && c->sout == 4)
        return; /* computed in place */
    if (from_f32 && c->sout == 2)
        from_f32(y, out + off * 2, n);
    else
        ampy_ewise_store(y, AMPY_KIND_F32, out + off * c->sout, c->sout, c->out_dt, n);
}

/* nl (1 to SMX_GROUP) whole lines of L <= SM_LINE / group elements, each
 * converted into its part of buf (SM_LINE / group floats, or read in place),
 * the exponentials kept in the output (float32) or in buf. The lines go
 * phase by phase, so that one line's horizontal reductions (max, sum, 1/s:
 * a serial latency chain) overlap the others' vector loops; each line's
 * arithmetic is its own, so the bits do not depend on the grouping. */
#define SMX_GROUP 4
AMPY_TARGET_AVX512
static void smx_short_lines(const line_ctx *c, const char *const *in, char *const *out,
                                  int nl, int group, float *buf)
{
    const int64_t L = c->len;
    const int dout = c->out_dt == AMPY_FLOAT32 && c->sout == 4;
    const int hin = c->sin == 2, hout = c->sout == 2;
    const int bfin = c->in_dt == AMPY_BFLOAT16, bfout = c->out_dt == AMPY_BFLOAT16;
    const ampy_cast_kernel to_f32 = (ampy_cast_kernel)c->to_f32;
    smx_acc a[SMX_GROUP];
    const float *x[SMX_GROUP];
    float *y[SMX_GROUP], m[SMX_GROUP];
    for (int q = 0; q < nl; q++) {
        float *b = buf + q * (SM_LINE / group);
        smx_init(&a[q]);
        x[q] = b;
        if (hin)
            smx_max_half((const uint16_t *)in[q], bfin, L, b, &a[q]);
        else
            smx_max(x[q] = smx_in(c, to_f32, in[q], 0, L, b), L, &a[q]);
        y[q] = dout ? (float *)out[q] : b;
    }
    for (int q = 0; q < nl; q++)
        m[q] = smx_max_value(&a[q]);
    for (int q = 0; q < nl; q++)
        smx_expsum(x[q], L, m[q], c->log ? NULL : y[q], &a[q]);
    for (int q = 0; q < nl; q++) {
        if (c->log)
            smx_subsub(x[q], L, m[q], (float)log(smx_sum(&a[q])), y[q]);
        else if (hout)
            smx_div_half(y[q], L, (float)smx_sum(&a[q]), (uint16_t *)out[q], bfout, c->bf16ok);
        else
            smx_div(y[q], L, (float)smx_sum(&a[q]), y[q]);
        if (c->log || !hout)
            smx_out(c, (ampy_cast_kernel)c->from_f32, out[q], 0, L, y[q]);
    }
}

AMPY_TARGET_AVX512 static void softmax_line_avx512(const line_ctx *c, const char *in, char *out)
{
    _Alignas(64) float buf[SM_LINE];
    const int64_t L = c->len;
    const int dout = c->out_dt == AMPY_FLOAT32 && c->sout == 4;
    const ampy_cast_kernel to_f32 = (ampy_cast_kernel)c->to_f32, from_f32 = (ampy_cast_kernel)c->from_f32;
    smx_acc a;
    smx_init(&a);
    /* long lines: three passes in blocks of SM_LINE (a multiple of 16) */
    for (int64_t off = 0; off < L; off += SM_LINE) {
        const int64_t k = L - off < SM_LINE ? L - off : SM_LINE;
        smx_max(smx_in(c, to_f32, in, off, k, buf), k, &a);
    }
    const float m = smx_max_value(&a);
    const int keep = dout && !c->log;
    for (int64_t off = 0; off < L; off += SM_LINE) {
        const int64_t k = L - off < SM_LINE ? L - off : SM_LINE;
        smx_expsum(smx_in(c, to_f32, in, off, k, buf), k, m, keep ? (float *)out + off : NULL,
                   &a);
    }
    const double sum = smx_sum(&a);
    const float rs = (float)sum, ls = (float)log(sum);
    for (int64_t off = 0; off < L; off += SM_LINE) {
        const int64_t k = L - off < SM_LINE ? L - off : SM_LINE;
        float *y = dout ? (float *)out + off : buf;
        if (keep) {
            smx_div(y, k, rs, y);
            continue;
        }
        const float *x = smx_in(c, to_f32, in, off, k, buf);
        if (c->log)
            smx_subsub(x, k, m, ls, y);
        else
            smx_expdiv(x, k, m, rs, y);
        smx_out(c, from_f32, out, off, k, y);
    }
}

/* Lines of up to SM_LINE / 4 go in groups of four through smx_short_lines,
 * up to SM_LINE / 2 in pairs, longer ones one by one through
 * softmax_line_avx512. */
AMPY_TARGET_AVX512
void ampy_softmax_lines_avx512(const line_ctx *c, char **ptrs, const int64_t *s, int64_t n)
{
    if (c->len <= SM_LINE / 2) {
        _Alignas(64) float buf[SM_LINE];
        const int group = c->len <= SM_LINE / SMX_GROUP ? SMX_GROUP : 2;
        const int64_t esz = (int64_t)ampy_dtype_size(c->in_dt);
        const int pf = c->sin == esz && c->len * esz <= 4096; /* contiguous lines */
        for (int64_t j = 0; j < n; j += group) {
            if (pf && j + 2 * group - 1 < n) /* the next group: too short for the hardware prefetcher */
                for (int q = group; q < 2 * group; q++)
                    for (int64_t b = 0; b < c->len * esz; b += 64)
                        _mm_prefetch(ptrs[0] + (j + q) * s[0] + b, _MM_HINT_T0);
            const char *in[SMX_GROUP];
            char *out[SMX_GROUP];
            const int nl = n - j >= group ? group : (int)(n - j);
            for (int q = 0; q < nl; q++) {
                in[q] = ptrs[0] + (j + q) * s[0];
                out[q] = ptrs[1] + (j + q) * s[1];
            }
            smx_short_lines(c, in, out, nl, group, buf);
        }
        return;
    }
    for (int64_t j = 0; j < n; j++)
        softmax_line_avx512(c, ptrs[0] + j * s[0], ptrs[1] + j * s[1]);
}
#endif
