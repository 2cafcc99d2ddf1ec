/* cnn_pool_max.c — one plane of max_pool2d's forward on float32 values:
 * the windows that lie wholly inside the plane sixteen outputs at a time in
 * AVX-512 vectors, the others (and every window on CPUs without AVX-512)
 * in the branch-free scalar loop.
 *
 * Both loops visit a window's elements in the same order (rows, then
 * columns) and apply the same rule to each: take v when v > max or v is
 * NaN. So the maximum and its index are those of torch's scalar loop
 * (aten/src/ATen/native/cpu/MaxPoolKernel.cpp): the first maximum on ties,
 * the last NaN when there are several.
 */
#include <math.h>
#include <stdint.h>

#include "ampy/cpu.h"
#include "cnn_pool_max.h"
#include "simd.h"
#if defined(AMPY_X86_SIMD)
#include <immintrin.h>
#endif

/* Output (oh, ow) of the plane x: the clipped window's maximum into *m and
 * its flat index into *best. */
static inline void max_window(const float *x, int64_t H, int64_t W, const ampy_cnn_window *w,
                              int64_t oh, int64_t ow, float *m_out, int64_t *best_out)
{
    int64_t h0 = oh * w->sh - w->ph, h1 = h0 + (w->kh - 1) * w->dh + 1;
    h1 = h1 < H ? h1 : H;
    while (h0 < 0)
        h0 += w->dh;
    int64_t w0 = ow * w->sw - w->pw, w1 = w0 + (w->kw - 1) * w->dw + 1;
    w1 = w1 < W ? w1 : W;
    while (w0 < 0)
        w0 += w->dw;
    int64_t best = h0 * W + w0;
    float m = -INFINITY;
    for (int64_t ih = h0; ih < h1; ih += w->dh) {
        const float *r = x + ih * W;
        for (int64_t iw = w0; iw < w1; iw += w->dw) {
            const float v = r[iw];
            const int take = (v > m) | (v != v);
            m = take ? v : m;
            best = take ? ih * W + iw : best;
        }
    }
    *m_out = m;
    *best_out = best;
}

static void scalar_cols(const float *x, int64_t H, int64_t W, int64_t OW,
                        const ampy_cnn_window *w, int64_t oh, int64_t ow0, int64_t ow1, float *y,
                        int64_t *idx)
{
    for (int64_t ow = ow0; ow < ow1; ow++)
        max_window(x, H, W, w, oh, ow, y + oh * OW + ow, idx + oh * OW + ow);
}

#if defined(AMPY_X86_SIMD)
static AMPY_TARGET_AVX512 inline __mmask16 lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* The 16 (or cnt) values r[c + sw * lane] for lane < cnt, other lanes 0. */
static AMPY_TARGET_AVX512 inline __m512 load_cols(const float *r, int64_t sw, int64_t cnt,
                                                  __m512i step)
{
    const __mmask16 m = lanes(cnt);
    if (sw == 1)
        return _mm512_maskz_loadu_ps(m, r);
    if (sw == 2) {
        const int64_t need = 2 * cnt - 1;
        const __m512 a = _mm512_maskz_loadu_ps(lanes(need), r);
        const __m512 b = _mm512_maskz_loadu_ps(need > 16 ? lanes(need - 16) : 0, r + 16);
        const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                              4, 2, 0);
        return _mm512_permutex2var_ps(a, even, b);
    }
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, step, r, 4);
}

/* Outputs [ow0, ow0 + cnt) of row oh, whose windows lie inside the plane
 * in columns; rows h0..h1 as the scalar loop clips them. */
static AMPY_TARGET_AVX512 void vec_cols(const float *x, int64_t H, int64_t W, int64_t OW,
                                        const ampy_cnn_window *w, int64_t oh, int64_t ow0,
                                        int64_t cnt, float *y, int64_t *idx)
{
    int64_t h0 = oh * w->sh - w->ph, h1 = h0 + (w->kh - 1) * w->dh + 1;
    h1 = h1 < H ? h1 : H;
    while (h0 < 0)
        h0 += w->dh;
    const int64_t c0 = ow0 * w->sw - w->pw;
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i step = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int)w->sw));
    __m512 m = _mm512_set1_ps(-INFINITY);
    __m512i best = _mm512_add_epi32(step, _mm512_set1_epi32((int)(h0 * W + c0)));
    for (int64_t ih = h0; ih < h1; ih += w->dh)
        for (int64_t j = 0; j < w->kw; j++) {
            const int64_t col = c0 + j * w->dw;
            const __m512 v = load_cols(x + ih * W + col, w->sw, cnt, step);
            const __mmask16 take = _mm512_cmp_ps_mask(v, m, _CMP_GT_OQ) |
                                   _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            m = _mm512_mask_mov_ps(m, take, v);
            best = _mm512_mask_mov_epi32(
                best, take, _mm512_add_epi32(step, _mm512_set1_epi32((int)(ih * W + col))));
        }
    const __mmask16 mk = lanes(cnt);
    _mm512_mask_storeu_ps(y + oh * OW + ow0, mk, m);
    int64_t *o = idx + oh * OW + ow0;
    _mm512_mask_storeu_epi64(o, (__mmask8)(mk & 0xFF),
                             _mm512_cvtepi32_epi64(_mm512_castsi512_si256(best)));
    _mm512_mask_storeu_epi64(o + 8, (__mmask8)(mk >> 8),
                             _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(best, 1)));
}

static void plane_avx512(const float *x, int64_t H, int64_t W, int64_t OH, int64_t OW,
                         const ampy_cnn_window *w, float *y, int64_t *idx)
{
    /* interior columns: ow * sw - pw >= 0 and the last tap < W */
    int64_t a = (w->pw + w->sw - 1) / w->sw;
    const int64_t span = (w->kw - 1) * w->dw;
    int64_t b = W - 1 - span + w->pw >= 0 ? (W - 1 - span + w->pw) / w->sw + 1 : 0;
    a = a < OW ? a : OW;
    b = b < OW ? b : OW;
    b = b > a ? b : a;
    for (int64_t oh = 0; oh < OH; oh++) {
        scalar_cols(x, H, W, OW, w, oh, 0, a, y, idx);
        for (int64_t ow = a; ow < b; ow += 16)
            vec_cols(x, H, W, OW, w, oh, ow, b - ow < 16 ? b - ow : 16, y, idx);
        scalar_cols(x, H, W, OW, w, oh, b, OW, y, idx);
    }
}
#endif

void ampy_cnn_max_plane_f32(const float *x, int64_t H, int64_t W, int64_t OH, int64_t OW,
                            const ampy_cnn_window *w, float *y, int64_t *idx)
{
#if defined(AMPY_X86_SIMD)
    /* the vector loop keeps flat indices in int32 lanes */
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512 && H * W + 16 * w->sw < INT32_MAX) {
        plane_avx512(x, H, W, OH, OW, w, y, idx);
        return;
    }
#endif
    for (int64_t oh = 0; oh < OH; oh++)
        scalar_cols(x, H, W, OW, w, oh, 0, OW, y, idx);
}
