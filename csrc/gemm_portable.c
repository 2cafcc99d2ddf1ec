/* gemm_portable.c — plain C11 packing, micro-kernel and epilogue.
 *
 * Always compiled and always tested (AMPY_FORCE_PORTABLE=1 or
 * ampy_gemm_set_impl("portable") selects it). The packed format is float32:
 * an A micro-panel stores, for each k, the mr values of column k of the panel
 * ([k][mr]); a B micro-panel stores, for each k, nr values of row k ([k][nr]).
 * The SIMD files reuse these packers for layouts they do not specialise.
 */
#include <string.h>

#include "ampy/elem.h"
#include "gemm_impl.h"

#define P_MR 4
#define P_NR 16

static inline float ld(const char *p, ampy_dtype dt, int64_t idx)
{
    if (dt == AMPY_FLOAT32) {
        float f;
        memcpy(&f, p + idx * 4, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + idx * 2, 2);
    return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
}

void ampy_gemm_pack_a_f32(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                          int64_t kc, int64_t kcp, int mr, float *dst)
{
    for (int64_t p0 = 0; p0 < rows; p0 += mr, dst += mr * kcp) {
        int64_t h = rows - p0 < mr ? rows - p0 : mr;
        memset(dst, 0, sizeof(float) * (size_t)(mr * kcp));
        for (int64_t i = 0; i < h; i++) {
            int64_t base = (i0 + p0 + i) * a->rs + k0 * a->cs;
            for (int64_t k = 0; k < kc; k++)
                dst[k * mr + i] = ld(a->p, a->dt, base + k * a->cs);
        }
    }
}

void ampy_gemm_pack_b_f32(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                          int64_t j0, int64_t cols, int nr, float *dst)
{
    for (int64_t q0 = 0; q0 < cols; q0 += nr, dst += nr * kcp) {
        int64_t w = cols - q0 < nr ? cols - q0 : nr;
        if (w < nr || kcp > kc)
            memset(dst, 0, sizeof(float) * (size_t)(nr * kcp));
        for (int64_t k = 0; k < kc; k++) {
            int64_t base = (k0 + k) * b->rs + (j0 + q0) * b->cs;
            for (int64_t j = 0; j < w; j++)
                dst[k * nr + j] = ld(b->p, b->dt, base + j * b->cs);
        }
    }
}

static void pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                   int64_t kcp, void *dst)
{
    ampy_gemm_pack_a_f32(a, i0, rows, k0, kc, kcp, P_MR, dst);
}

static void pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp, int64_t j0,
                   int64_t cols, void *dst)
{
    ampy_gemm_pack_b_f32(b, k0, kc, kcp, j0, cols, P_NR, dst);
}

/* 4 x 16 tile; the j loop is written so a compiler can vectorise it with
 * whatever baseline SIMD the target has (SSE2 on x86-64). */
static void kernel(int64_t kcp, const void *va, const void *vb, float *w, int64_t ldw,
                   int accumulate)
{
    const float *a = va, *b = vb;
    float acc[P_MR][P_NR];
    memset(acc, 0, sizeof acc);
    for (int64_t k = 0; k < kcp; k++) {
        for (int i = 0; i < P_MR; i++) {
            float ai = a[k * P_MR + i];
            for (int j = 0; j < P_NR; j++)
                acc[i][j] += ai * b[k * P_NR + j];
        }
    }
    for (int i = 0; i < P_MR; i++)
        for (int j = 0; j < P_NR; j++)
            w[i * ldw + j] = accumulate ? w[i * ldw + j] + acc[i][j] : acc[i][j];
}

void ampy_gemm_epilogue_portable(const float *w, int64_t ldw, int64_t rows, int64_t cols,
                                 float alpha, float beta, const float *bias, void *vc,
                                 ampy_dtype cdt, int64_t crs, int64_t ccs)
{
    char *c = vc;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            int64_t idx = i * crs + j * ccs;
            float r = alpha * w[i * ldw + j];
            if (beta != 0.0f)
                r += beta * ld(c, cdt, idx);
            if (bias)
                r += bias[j];
            if (cdt == AMPY_FLOAT32) {
                memcpy(c + idx * 4, &r, 4);
            } else {
                uint16_t h = cdt == AMPY_FLOAT16 ? ampy_f32_to_f16(r) : ampy_f32_to_bf16(r);
                memcpy(c + idx * 2, &h, 2);
            }
        }
}

const gemm_impl ampy_gemm_impl_portable = {
    "portable", P_MR, P_NR, 1, 128, 256, sizeof(float),
    pack_a, pack_b, kernel, ampy_gemm_epilogue_portable, 0, 0, 0,
};
