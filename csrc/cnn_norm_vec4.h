/* cnn_norm_vec4.h — the four-block sum loops of cnn_norm.inc in AVX2
 * vectors (CN_VEC4_*), for cnn_norm.c's AVX2 copy. Include only from an
 * x86-64 GCC/Clang translation unit, inside functions compiled with
 * AMPY_TARGET_AVX2 (the macros expand there). */
#ifndef AMPY_CNN_NORM_VEC4_H
#define AMPY_CNN_NORM_VEC4_H

#include <immintrin.h>

/* The four-block loops of the AVX2 copy: partial sum j of block k is lane
 * j of acc[k], each element widened to double and added in the scalar
 * loop's order (the float32 difference and square first where the scalar
 * loop takes them), so the lanes hold the scalar sums' bits; the
 * accumulators start from and return to a[k][0..3]. */
#define CN_VEC4_SUMS(a, p, m, i)                                                                \
    do {                                                                                        \
        __m256d acc_[4];                                                                        \
        for (int k_ = 0; k_ < 4; k_++)                                                          \
            acc_[k_] = _mm256_loadu_pd(a[k_]);                                                  \
        for (; i + 4 <= m; i += 4)                                                              \
            for (int k_ = 0; k_ < 4; k_++)                                                      \
                acc_[k_] = _mm256_add_pd(acc_[k_], _mm256_cvtps_pd(_mm_loadu_ps(p[k_] + i)));   \
        for (int k_ = 0; k_ < 4; k_++)                                                          \
            _mm256_storeu_pd(a[k_], acc_[k_]);                                                  \
    } while (0)
#define CN_VEC4_SQDEV(a, p, m, i, mean)                                                         \
    do {                                                                                        \
        __m256d acc_[4];                                                                        \
        const __m128 mu_ = _mm_set1_ps(mean);                                                   \
        for (int k_ = 0; k_ < 4; k_++)                                                          \
            acc_[k_] = _mm256_loadu_pd(a[k_]);                                                  \
        for (; i + 4 <= m; i += 4)                                                              \
            for (int k_ = 0; k_ < 4; k_++) {                                                    \
                __m128 d_ = _mm_sub_ps(_mm_loadu_ps(p[k_] + i), mu_);                           \
                acc_[k_] = _mm256_add_pd(acc_[k_], _mm256_cvtps_pd(_mm_mul_ps(d_, d_)));        \
            }                                                                                   \
        for (int k_ = 0; k_ < 4; k_++)                                                          \
            _mm256_storeu_pd(a[k_], acc_[k_]);                                                  \
    } while (0)
#define CN_VEC4_DOT(a, b, px, pg, m, i, mean)                                                   \
    do {                                                                                        \
        __m256d sa_[4], sb_[4];                                                                 \
        const __m128 mu_ = _mm_set1_ps(mean);                                                   \
        for (int k_ = 0; k_ < 4; k_++) {                                                        \
            sa_[k_] = _mm256_loadu_pd(a[k_]);                                                   \
            sb_[k_] = _mm256_loadu_pd(b[k_]);                                                   \
        }                                                                                       \
        for (; i + 4 <= m; i += 4)                                                              \
            for (int k_ = 0; k_ < 4; k_++) {                                                    \
                const __m128 g_ = _mm_loadu_ps(pg[k_] + i);                                     \
                const __m128 d_ = _mm_sub_ps(_mm_loadu_ps(px[k_] + i), mu_);                    \
                sa_[k_] = _mm256_add_pd(sa_[k_], _mm256_cvtps_pd(g_));                          \
                sb_[k_] = _mm256_add_pd(sb_[k_], _mm256_cvtps_pd(_mm_mul_ps(d_, g_)));          \
            }                                                                                   \
        for (int k_ = 0; k_ < 4; k_++) {                                                        \
            _mm256_storeu_pd(a[k_], sa_[k_]);                                                   \
            _mm256_storeu_pd(b[k_], sb_[k_]);                                                   \
        }                                                                                       \
    } while (0)
#define CN_VEC4_DSQDEV(a, p, m, i, mean)                                                        \
    do {                                                                                        \
        __m256d acc_[4], mu_[4];                                                                \
        for (int k_ = 0; k_ < 4; k_++) {                                                        \
            acc_[k_] = _mm256_loadu_pd(a[k_]);                                                  \
            mu_[k_] = _mm256_set1_pd(mean[k_]);                                                 \
        }                                                                                       \
        for (; i + 4 <= m; i += 4)                                                              \
            for (int k_ = 0; k_ < 4; k_++) {                                                    \
                __m256d d_ = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(p[k_] + i)), mu_[k_]);  \
                acc_[k_] = _mm256_add_pd(acc_[k_], _mm256_mul_pd(d_, d_));                      \
            }                                                                                   \
        for (int k_ = 0; k_ < 4; k_++)                                                          \
            _mm256_storeu_pd(a[k_], acc_[k_]);                                                  \
    } while (0)
#define CN_VEC4_GSUMS(ds, db, px, pg, m, i)                                                     \
    do {                                                                                        \
        __m256d sa_[4], sb_[4];                                                                 \
        for (int k_ = 0; k_ < 4; k_++) {                                                        \
            sa_[k_] = _mm256_loadu_pd(ds[k_]);                                                  \
            sb_[k_] = _mm256_loadu_pd(db[k_]);                                                  \
        }                                                                                       \
        for (; i + 4 <= m; i += 4)                                                              \
            for (int k_ = 0; k_ < 4; k_++) {                                                    \
                const __m256d g_ = _mm256_cvtps_pd(_mm_loadu_ps(pg[k_] + i));                   \
                sa_[k_] = _mm256_add_pd(                                                        \
                    sa_[k_], _mm256_mul_pd(g_, _mm256_cvtps_pd(_mm_loadu_ps(px[k_] + i))));    \
                sb_[k_] = _mm256_add_pd(sb_[k_], g_);                                           \
            }                                                                                   \
        for (int k_ = 0; k_ < 4; k_++) {                                                        \
            _mm256_storeu_pd(ds[k_], sa_[k_]);                                                  \
            _mm256_storeu_pd(db[k_], sb_[k_]);                                                  \
        }                                                                                       \
    } while (0)
#endif
