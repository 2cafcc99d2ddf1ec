/* mse_sum.c — mse_loss's float32 sum of squared differences in the lane
 * order of mse_sum.h, in C and with AVX-512. */
#include "ampy/mse_sum.h"

#include "ampy/cpu.h"
#include "simd.h"

double ampy_mse_lanes_total(const double *acc)
{
    double s[AMPY_MSE_LANES];
    for (int k = 0; k < AMPY_MSE_LANES; k++)
        s[k] = acc[k];
    for (int w = AMPY_MSE_LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++)
            s[k] = s[2 * k] + s[2 * k + 1];
    return s[0];
}

static void mse_tail(int64_t i, int64_t n, const float *x, const float *y, double *acc)
{
    for (; i < n; i++) {
        const float f = x[i] - y[i];
        acc[i % AMPY_MSE_LANES] += (double)(f * f);
    }
}

#ifdef AMPY_X86_SIMD
#include <immintrin.h>

/* lanes 0-7 in s0, 8-15 in s1: each 16 elements widen their float squares
 * to double (exact) and add them, element i into lane i % 16 */
AMPY_TARGET_AVX512 static int64_t mse_body_avx512(int64_t n, const float *x, const float *y,
                                                  double *acc)
{
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 f = _mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i));
        const __m512 q = _mm512_mul_ps(f, f);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(q)));
        s1 = _mm512_add_pd(
            s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(q), 1))));
    }
    _mm512_storeu_pd(acc, s0);
    _mm512_storeu_pd(acc + 8, s1);
    return i;
}
#endif

double ampy_mse_sum_f32(int64_t n, const float *x, const float *y)
{
    double acc[AMPY_MSE_LANES] = {0.0};
    int64_t i = 0;
#ifdef AMPY_X86_SIMD
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512)
        i = mse_body_avx512(n, x, y, acc);
#endif
    mse_tail(i, n, x, y, acc);
    return ampy_mse_lanes_total(acc);
}
