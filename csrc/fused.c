/* fused.c — specialised hot-path kernels (see fused.h for the contract). */
#include <math.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/fused.h"
#include "ampy/mse_sum.h"
#include "ampy/nn_math.h"
#include "ampy/parallel.h"
#include "vmath.h"

/* ---- zero fill --------------------------------------------------------------- */
typedef struct {
    char *p;
} zero_ctx;

static void zero_range(int64_t b, int64_t e, void *ctx)
{
    memset(((zero_ctx *)ctx)->p + b, 0, (size_t)(e - b));
}

ampy_status ampy_fused_zero(void *p, int64_t nbytes)
{
    if (nbytes < 0)
        return ampy_error(AMPY_ERR_VALUE, "fused_zero: negative size");
    if (nbytes == 0)
        return AMPY_OK;
    zero_ctx c = {(char *)p};
    ampy_parallel_for(nbytes, (int64_t)1 << 20, zero_range, &c);
    return AMPY_OK;
}

/* ---- mse_loss, float32 ------------------------------------------------------- *
 * The element loss is the float product f * f of f = x - y (float), widened
 * exactly to double; mean/sum add those doubles in the lane order of
 * mse_sum.h as ampy_nn_mse_fwd does, so the result has the same bits. */
ampy_status ampy_fused_mse_fwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   float *out)
{
    ampy_status st = ampy_nn_mse_check_args(n, AMPY_FLOAT32, reduction, 0);
    if (st != AMPY_OK)
        return st;
    if (reduction == 0) {
        for (int64_t i = 0; i < n; i++) {
            float f = x[i] - y[i];
            out[i] = f * f;
        }
        return AMPY_OK;
    }
    double sum = ampy_mse_sum_f32(n, x, y);
    if (reduction == 1)
        sum /= (double)n;
    out[0] = (float)sum;
    return AMPY_OK;
}

typedef struct {
    const float *x, *y, *dout;
    float *dx, *dy;
    float norm, g0;
    int per_elem;
} mse_bwd_ctx;

static void mse_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const mse_bwd_ctx *c = (const mse_bwd_ctx *)ctx;
    const float *x = c->x, *y = c->y, *d = c->dout;
    float *dx = c->dx, *dy = c->dy;
    const float norm = c->norm, g0 = c->g0;
    if (c->per_elem) {
        for (int64_t i = b; i < e; i++) {
            float v = (norm * (x[i] - y[i])) * d[i];
            if (dx)
                dx[i] = v;
            if (dy)
                dy[i] = -v;
        }
    } else if (dx && dy) {
        for (int64_t i = b; i < e; i++) {
            float v = (norm * (x[i] - y[i])) * g0;
            dx[i] = v;
            dy[i] = -v;
        }
    } else if (dx) {
        for (int64_t i = b; i < e; i++)
            dx[i] = (norm * (x[i] - y[i])) * g0;
    } else {
        for (int64_t i = b; i < e; i++)
            dy[i] = -((norm * (x[i] - y[i])) * g0);
    }
}

/* v = (float)((float)norm * (x - y)) * (float)g, norm = 2/n (mean) or 2 — the
 * float operations of ampy_nn_mse_bwd, element by element. */
ampy_status ampy_fused_mse_bwd_f32(int64_t n, const float *x, const float *y, int reduction,
                                   const float *dout, float *dx, float *dy)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: negative size");
    if (reduction < 0 || reduction > 2)
        return ampy_error(AMPY_ERR_VALUE, "mse_loss_backward: bad reduction %d", reduction);
    if (n == 0 || (!dx && !dy))
        return AMPY_OK;
    double norm = reduction == 1 ? 2.0 / (double)n : 2.0;
    mse_bwd_ctx c = {x, y, dout, dx, dy, (float)norm, reduction == 0 ? 0.0f : dout[0],
                     reduction == 0};
    ampy_parallel_for(n, (int64_t)1 << 16, mse_bwd_range, &c);
    return AMPY_OK;
}

/* ---- element-wise backward kernels: load a block to float, compute, store --- */
#define BLK 512

/* Block conversions between a half dtype and float, through the SIMD cast
 * kernels of cast_x86.c looked up once per range (ampy_cast_f16_to_f32 and
 * friends re-dispatch on every call, which cost more than the work for
 * 128-element softmax rows); plain C from elem.h when there is none. Same
 * bits either way. */
typedef struct {
    int dt;
    ampy_cast_kernel to_f32, from_f32;
} conv;

static void conv_init(conv *c, int dt)
{
    int level = ampy_cpu_level_get();
    c->dt = dt;
    c->to_f32 = dt == AMPY_FLOAT32 ? NULL : ampy_cast_simd_kernel(level, dt, AMPY_FLOAT32);
    c->from_f32 = dt == AMPY_FLOAT32 ? NULL : ampy_cast_simd_kernel(level, AMPY_FLOAT32, dt);
}

/* n elements at p (+ offset i) as floats: p itself for float32, else buf. */
static const float *ld_block(const conv *c, const void *p, int64_t i, int64_t n, float *buf)
{
    if (c->dt == AMPY_FLOAT32)
        return (const float *)p + i;
    const uint16_t *s = (const uint16_t *)p + i;
    if (c->to_f32)
        c->to_f32(s, buf, n);
    else if (c->dt == AMPY_BFLOAT16)
        for (int64_t k = 0; k < n; k++)
            buf[k] = ampy_bf16_to_f32(s[k]);
    else
        for (int64_t k = 0; k < n; k++)
            buf[k] = ampy_f16_to_f32(s[k]);
    return buf;
}

static void st_block(const conv *c, void *p, int64_t i, int64_t n, const float *buf)
{
    if (c->dt == AMPY_FLOAT32) {
        if ((const float *)p + i != buf)
            memcpy((float *)p + i, buf, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = (uint16_t *)p + i;
    if (c->from_f32)
        c->from_f32(buf, d, n);
    else if (c->dt == AMPY_BFLOAT16)
        for (int64_t k = 0; k < n; k++)
            d[k] = ampy_f32_to_bf16(buf[k]);
    else
        for (int64_t k = 0; k < n; k++)
            d[k] = ampy_f32_to_f16(buf[k]);
}

static int half_or_f32(int dt)
{
    return dt == AMPY_FLOAT32 || dt == AMPY_FLOAT16 || dt == AMPY_BFLOAT16;
}

typedef struct {
    const void *a, *g;
    void *out;
    int dt;
} ew_ctx;

/* gelu (exact) backward: dx = g * (Phi(x) + x * phi(x)) (ampy's composite
 * rule), by the vectorized vmath kernel (AVX-512 or portable by CPU level) on
 * float32 blocks. */
static void gelu_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const ew_ctx *c = (const ew_ctx *)ctx;
    const ampy_vm_table *vm = ampy_vm();
    float bx[BLK], bg[BLK], bo[BLK];
    conv cv;
    conv_init(&cv, c->dt);
    if (c->dt == AMPY_FLOAT32) {
        vm->gelu_bwd((const float *)c->a + b, (const float *)c->g + b, (float *)c->out + b, e - b);
        return;
    }
    if (vm->gelu_bwd_half) { /* converts in registers */
        vm->gelu_bwd_half((const uint16_t *)c->a + b, (const uint16_t *)c->g + b,
                          (uint16_t *)c->out + b, e - b, c->dt == AMPY_BFLOAT16);
        return;
    }
    for (int64_t i = b; i < e; i += BLK) {
        int64_t n = e - i < BLK ? e - i : BLK;
        const float *x = ld_block(&cv, c->a, i, n, bx);
        const float *g = ld_block(&cv, c->g, i, n, bg);
        vm->gelu_bwd(x, g, bo, n);
        st_block(&cv, c->out, i, n, bo);
    }
}

ampy_status ampy_fused_gelu_bwd(int64_t n, const void *x, const void *g, int dtype, void *dx)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "gelu_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "gelu_backward: float32, float16 or bfloat16 only");
    ew_ctx c = {x, g, dx, dtype};
    ampy_parallel_for(n, 4096, gelu_bwd_range, &c);
    return AMPY_OK;
}

/* relu backward from the output y: dx = y > 0 ? g : +0 (ampy's rule
 * where(y > 0, g, 0)); operates on the bits, so it is exact for every dtype. */
static void relu_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const ew_ctx *c = (const ew_ctx *)ctx;
    /* a float value is > 0 when its bits are in [1, +inf]: sign clear, not
     * +0, not NaN; (v - 1) mod 2^bits < inf tests that without branches */
    if (c->dt == AMPY_FLOAT32) {
        const uint32_t *y = (const uint32_t *)c->a, *g = (const uint32_t *)c->g;
        uint32_t *o = (uint32_t *)c->out;
        for (int64_t i = b; i < e; i++) {
            uint32_t keep = (uint32_t)(y[i] - 1u) < 0x7F800000u;
            o[i] = g[i] & (uint32_t)-keep;
        }
        return;
    }
    const uint16_t *y = (const uint16_t *)c->a, *g = (const uint16_t *)c->g;
    uint16_t *o = (uint16_t *)c->out;
    const uint16_t inf = c->dt == AMPY_FLOAT16 ? 0x7C00u : 0x7F80u;
    for (int64_t i = b; i < e; i++) {
        uint16_t keep = (uint16_t)(y[i] - 1u) < inf;
        o[i] = g[i] & (uint16_t)-keep;
    }
}

ampy_status ampy_fused_relu_bwd(int64_t n, const void *y, const void *g, int dtype, void *dx)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "relu_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "relu_backward: float32, float16 or bfloat16 only");
    ew_ctx c = {y, g, dx, dtype};
    ampy_parallel_for(n, 32768, relu_bwd_range, &c);
    return AMPY_OK;
}

/* softmax backward over rows of N: s = sum_j float(g_j * y_j) accumulated in
 * double and rounded to float (ampy's sum: per block of AMPY_EWISE_BLOCK, 16
 * lanes by j mod 16 and a halving tree, see SUM16 in csrc/reduce.c), dx_j =
 * y_j * (g_j - s) in float: the composite rule's bits. */
typedef struct {
    const void *y, *g;
    void *out;
    int64_t N;
    int dt;
    int bf16ok; /* AVX512-BF16 present (vcvtneps2bf16) */
} sm_ctx;

#define SM_SUM_BLOCK 256 /* AMPY_EWISE_BLOCK: the blocks of ampy's sum */

/* the canonical double sum of float(g[k] * y[k]) over one block */
static double sm_dot_block(const float *g, const float *y, int64_t n)
{
    double s[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            s[l] += (double)(g[i + l] * y[i + l]);
    for (int l = 0; i + l < n; l++)
        s[l] += (double)(g[i + l] * y[i + l]);
    for (int h = 8; h >= 1; h >>= 1)
        for (int l = 0; l < h; l++)
            s[l] += s[l + h];
    return s[0];
}

static void softmax_bwd_range(int64_t b, int64_t e, void *ctx)
{
    const sm_ctx *c = (const sm_ctx *)ctx;
    const int64_t N = c->N;
    float by[SM_SUM_BLOCK], bg[SM_SUM_BLOCK], bo[SM_SUM_BLOCK];
    conv cv;
    conv_init(&cv, c->dt);
    for (int64_t r = b; r < e; r++) {
        double acc = 0.0;
        for (int64_t j = 0; j < N; j += SM_SUM_BLOCK) {
            int64_t n = N - j < SM_SUM_BLOCK ? N - j : SM_SUM_BLOCK;
            const float *y = ld_block(&cv, c->y, r * N + j, n, by);
            const float *g = ld_block(&cv, c->g, r * N + j, n, bg);
            acc += sm_dot_block(g, y, n);
        }
        const float s = (float)acc;
        for (int64_t j = 0; j < N; j += SM_SUM_BLOCK) {
            int64_t n = N - j < SM_SUM_BLOCK ? N - j : SM_SUM_BLOCK;
            const float *y = ld_block(&cv, c->y, r * N + j, n, by);
            const float *g = ld_block(&cv, c->g, r * N + j, n, bg);
            float *o = c->dt == AMPY_FLOAT32 ? (float *)c->out + r * N + j : bo;
            for (int64_t k = 0; k < n; k++)
                o[k] = y[k] * (g[k] - s);
            st_block(&cv, c->out, r * N + j, n, o);
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The AVX-512 rows: conversions in registers (bfloat16 widening by a shift,
 * narrowing by elem.h's integer rounding with NaN -> 0x7FC0; float16 by
 * vcvtph2ps / vcvtps2ph, whose NaN result equals elem.h's for the quiet NaNs
 * arithmetic produces), the sum's lanes as two vectors of 8 doubles, and two
 * rows at a time so that one row's horizontal sum overlaps the other's
 * loops. Same operations per element as softmax_bwd_range: the same bits. */
#include <immintrin.h>
#include "simd_half.h"
#include "simd.h"

AMPY_TARGET_AVX512 static inline __m512 smb_ld(const void *p, int64_t i, int dt, __mmask16 k)
{
    if (dt == AMPY_FLOAT32)
        return _mm512_maskz_loadu_ps(k, (const float *)p + i);
    const __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)p + i);
    if (dt == AMPY_BFLOAT16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

AMPY_TARGET_AVX512
static inline void smb_st(void *p, int64_t i, int dt, int bf16ok, __mmask16 k, __m512 v)
{
    if (dt == AMPY_FLOAT32) {
        _mm512_mask_storeu_ps((float *)p + i, k, v);
        return;
    }
    const __m256i h = ampy_x86_f32_to_half16(v, dt == AMPY_BFLOAT16, bf16ok);
    _mm256_mask_storeu_epi16((uint16_t *)p + i, k, h);
}

AMPY_TARGET_AVX512 static inline __mmask16 smb_mask(int64_t n, int64_t i)
{
    return n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
}

/* sum of one block of each of NR rows (row q at element offset i0 + q N) as
 * sm_dot_block computes it; the rows' loops interleaved, so that their
 * addition chains (one per lane, in order) run side by side */
#define SMB_NR 4
#define SMB_KEEP 512 /* half rows up to this long keep their floats for pass 2 */
AMPY_TARGET_AVX512
static inline void smb_dot(const void *g, const void *y, int64_t i0, int64_t N, int64_t n,
                                 int dt, int nr, double *acc, float *keep)
{
    __m512d s0[SMB_NR], s1[SMB_NR];
    for (int q = 0; q < SMB_NR; q++)
        s0[q] = s1[q] = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = smb_mask(n, i);
        for (int q = 0; q < nr; q++) {
            const int64_t o = i0 + q * N + i;
            /* the next group of rows (the streams are too short for the
             * hardware prefetcher to run ahead); every 64 bytes */
            const int64_t esz = dt == AMPY_FLOAT32 ? 4 : 2, pf = (o + (8 / esz) * SMB_NR * N) * esz; /* ~2 KiB ahead */
            if (esz == 4 || !(i & 16)) {
                _mm_prefetch((const char *)g + pf, _MM_HINT_T0);
                _mm_prefetch((const char *)y + pf, _MM_HINT_T0);
            }
            const __m512 vg = smb_ld(g, o, dt, k), vy = smb_ld(y, o, dt, k);
            if (keep) { /* stores cost no ALU slots; pass 2 skips its conversions */
                _mm512_storeu_ps(keep + (2 * q) * SMB_KEEP + i, vy);
                _mm512_storeu_ps(keep + (2 * q + 1) * SMB_KEEP + i, vg);
            }
            const __m512 p = _mm512_mul_ps(vg, vy);
            s0[q] = _mm512_add_pd(s0[q], _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
            s1[q] = _mm512_add_pd(s1[q], _mm512_cvtps_pd(_mm256_castpd_ps(
                                             _mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
        }
    }
    for (int q = 0; q < nr; q++) {
        const __m512d t = _mm512_add_pd(s0[q], s1[q]);
        const __m256d u = _mm256_add_pd(_mm512_castpd512_pd256(t), _mm512_extractf64x4_pd(t, 1));
        const __m128d v = _mm_add_pd(_mm256_castpd256_pd128(u), _mm256_extractf128_pd(u, 1));
        acc[q] += _mm_cvtsd_f64(_mm_add_sd(v, _mm_unpackhi_pd(v, v)));
    }
}

AMPY_TARGET_AVX512 static void smb_rows(const sm_ctx *c, int64_t r0, int nr)
{
    const int64_t N = c->N;
    const int dt = c->dt;
    double acc[SMB_NR] = {0.0, 0.0, 0.0, 0.0};
    _Alignas(64) float kb[2 * SMB_NR * SMB_KEEP];
    float *keep = dt != AMPY_FLOAT32 && nr == SMB_NR && N <= SMB_KEEP ? kb : NULL;
    for (int64_t j = 0; j < N; j += SM_SUM_BLOCK) {
        const int64_t n = N - j < SM_SUM_BLOCK ? N - j : SM_SUM_BLOCK;
        if (nr == SMB_NR)
            smb_dot(c->g, c->y, r0 * N + j, N, n, dt, SMB_NR, acc, keep ? keep + j : NULL);
        else
            for (int q = 0; q < nr; q++)
                smb_dot(c->g, c->y, (r0 + q) * N + j, N, n, dt, 1, acc + q, NULL);
    }
    for (int q = 0; q < nr; q++) {
        const __m512 s = _mm512_set1_ps((float)acc[q]);
        const int64_t o = (r0 + q) * N;
        for (int64_t i = 0; i < N; i += 16) {
            const __mmask16 k = smb_mask(N, i);
            __m512 y, g;
            if (keep) {
                y = _mm512_loadu_ps(keep + (2 * q) * SMB_KEEP + i);
                g = _mm512_loadu_ps(keep + (2 * q + 1) * SMB_KEEP + i);
            } else {
                y = smb_ld(c->y, o + i, dt, k), g = smb_ld(c->g, o + i, dt, k);
            }
            smb_st(c->out, o + i, dt, c->bf16ok, k, _mm512_mul_ps(y, _mm512_sub_ps(g, s)));
        }
    }
}

static void softmax_bwd_range_avx512(int64_t b, int64_t e, void *ctx)
{
    for (int64_t r = b; r < e; r += SMB_NR)
        smb_rows((const sm_ctx *)ctx, r, e - r >= SMB_NR ? SMB_NR : (int)(e - r));
}
#define HAVE_SMB 1
#endif

ampy_status ampy_fused_softmax_bwd(int64_t M, int64_t N, const void *y, const void *g,
                                   int dtype, void *dx)
{
    if (M < 0 || N < 0)
        return ampy_error(AMPY_ERR_VALUE, "softmax_backward: negative size");
    if (!half_or_f32(dtype))
        return ampy_error(AMPY_ERR_DTYPE, "softmax_backward: float32, float16 or bfloat16 only");
    if (N == 0)
        return AMPY_OK;
    sm_ctx c = {y, g, dx, N, dtype, 0};
#ifdef HAVE_SMB
    if (ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
        c.bf16ok = ampy_cpu_level_get() >= AMPY_CPU_AVX512_BF16;
        ampy_parallel_for(M, 32768 / N + 1, softmax_bwd_range_avx512, &c);
        return AMPY_OK;
    }
#endif
    ampy_parallel_for(M, 32768 / N + 1, softmax_bwd_range, &c);
    return AMPY_OK;
}
