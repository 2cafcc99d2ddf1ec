/* clip.c — multi-tensor norm and scale for clip_grad_norm_ (see clip.h).
 *
 * The norm loop keeps eight partial accumulators per block (element i goes to
 * accumulator i % 8) so the conversion and the multiply-add pipeline; the
 * eight are merged in a fixed order, so the bits depend only on the data and
 * AMPY_CLIP_BLOCK, never on the number of threads or the CPU level (the
 * loops, clip_kernels.inc, are compiled portable, for AVX2 and for AVX-512).
 */
#include <math.h>
#include <stdlib.h>

#include "ampy/clip.h"
#include "ampy/clip_math.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/finite.h"
#include "ampy/parallel.h"
#include "simd.h"

#define CLIP_SCALE_GRAIN ((int64_t)1 << 16)

/* |element i| widened to double. */
static inline double clip_abs_f32(const void *p, int64_t i)
{
    return fabs((double)((const float *)p)[i]);
}
static inline double clip_abs_f64(const void *p, int64_t i) { return fabs(((const double *)p)[i]); }

#define CLIP_TILE 512
#define CLIP_SFX portable
#define CLIP_ATTR
#include "clip_kernels.inc"
#undef CLIP_SFX
#undef CLIP_ATTR
#if defined(AMPY_X86_SIMD)
#define CLIP_SFX avx2
#define CLIP_ATTR AMPY_TARGET_AVX2
#include "clip_kernels.inc"
#undef CLIP_SFX
#undef CLIP_ATTR
#define CLIP_SFX avx512
#define CLIP_ATTR AMPY_TARGET_AVX512
#include "clip_kernels.inc"
#undef CLIP_SFX
#undef CLIP_ATTR
#endif

typedef double (*block_fn)(const void *, int, int64_t, int64_t, double);
typedef void (*scale_fn)(void *, int, int64_t, int64_t, double);

/* The copies for this CPU's level (ampy_cpu_level_get(): a forced level or
 * AMPY_FORCE_PORTABLE picks the portable one). */
static void pick_kernels(block_fn *norm, scale_fn *scale)
{
    *norm = block_partial_portable;
    *scale = scale_range_portable;
#if defined(AMPY_X86_SIMD)
    const ampy_cpu_level lv = ampy_cpu_level_get();
    if (lv >= AMPY_CPU_AVX512) {
        *norm = block_partial_avx512;
        *scale = scale_range_avx512;
    } else if (lv >= AMPY_CPU_AVX2) {
        *norm = block_partial_avx2;
        *scale = scale_range_avx2;
    }
#endif
}

typedef struct {
    const void *const *data;
    const int *dtype;
    const int64_t *numel;
    const int64_t *block_tensor; /* block b belongs to tensor block_tensor[b] */
    const int64_t *block_first;  /* ... and starts at its element block_first[b] */
    double ord;
    double *partial;
    block_fn block;
} norms_ctx;

static void norms_range(int64_t b0, int64_t b1, void *arg)
{
    const norms_ctx *c = (const norms_ctx *)arg;
    for (int64_t b = b0; b < b1; b++) {
        int64_t t = c->block_tensor[b], first = c->block_first[b];
        int64_t last = first + AMPY_CLIP_BLOCK < c->numel[t] ? first + AMPY_CLIP_BLOCK
                                                             : c->numel[t];
        c->partial[b] = c->block(c->data[t], c->dtype[t], first, last, c->ord);
    }
}

static ampy_status check_list(const char *fn, int64_t n, const void *const *data,
                              const int64_t *numel, const int *dtype)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "%s: ntensors must be >= 0, got %lld", fn,
                          (long long)n);
    if (n > 0 && (!data || !numel || !dtype))
        return ampy_error(AMPY_ERR_VALUE, "%s: NULL tensor list", fn);
    for (int64_t i = 0; i < n; i++) {
        int dt = dtype[i];
        if (dt != AMPY_FLOAT32 && dt != AMPY_FLOAT16 && dt != AMPY_BFLOAT16 && dt != AMPY_FLOAT64)
            return ampy_error(AMPY_ERR_DTYPE, "%s: tensor %lld has dtype %s; expected float32, "
                              "float16, bfloat16 or float64", fn, (long long)i,
                              ampy_dtype_name(dt));
        if (numel[i] < 0 || (numel[i] > 0 && !data[i]))
            return ampy_error(AMPY_ERR_VALUE, "%s: tensor %lld has numel %lld and data %p", fn,
                              (long long)i, (long long)numel[i], data[i]);
    }
    return AMPY_OK;
}

ampy_status ampy_clip_norms(int64_t ntensors, const void *const *data, const int64_t *numel,
                            const int *dtype, double p, double *norms)
{
    ampy_status s = check_list("clip_norms", ntensors, data, numel, dtype);
    if (s != AMPY_OK)
        return s;
    if (p != p || (ntensors > 0 && !norms))
        return ampy_error(AMPY_ERR_VALUE, "clip_norms: the order is NaN or norms is NULL");
    int64_t nblocks = 0;
    for (int64_t i = 0; i < ntensors; i++)
        nblocks += (numel[i] + AMPY_CLIP_BLOCK - 1) / AMPY_CLIP_BLOCK;
    int64_t *bt = malloc(sizeof(int64_t) * (size_t)(2 * nblocks + 1));
    double *part = malloc(sizeof(double) * (size_t)(nblocks + 1));
    if (!bt || !part) {
        free(bt);
        free(part);
        return ampy_error(AMPY_ERR_NOMEM, "clip_norms: out of memory");
    }
    int64_t *bf = bt + nblocks, b = 0;
    for (int64_t i = 0; i < ntensors; i++)
        for (int64_t e = 0; e < numel[i]; e += AMPY_CLIP_BLOCK, b++) {
            bt[b] = i;
            bf[b] = e;
        }
    scale_fn unused;
    norms_ctx c = {data, dtype, numel, bt, bf, p, part, NULL};
    pick_kernels(&c.block, &unused);
    ampy_parallel_for(nblocks, 1, norms_range, &c);
    b = 0;
    for (int64_t i = 0; i < ntensors; i++) {
        double acc = ampy_norm_init(p);
        for (int64_t e = 0; e < numel[i]; e += AMPY_CLIP_BLOCK, b++)
            acc = ampy_norm_merge(acc, part[b], p);
        norms[i] = ampy_norm_finish(acc, p);
    }
    free(bt);
    free(part);
    return AMPY_OK;
}

ampy_status ampy_clip_total_norm(int64_t ntensors, const void *const *data, const int64_t *numel,
                                 const int *dtype, double p, int out_dtype, void *out)
{
    if (!out || !(out_dtype == AMPY_FLOAT32 || out_dtype == AMPY_FLOAT64 ||
                  ampy_dtype_is_half(out_dtype)))
        return ampy_error(AMPY_ERR_VALUE, "clip_total_norm: bad output");
    double *norms = malloc(sizeof(double) * (size_t)(ntensors + 1));
    if (!norms)
        return ampy_error(AMPY_ERR_NOMEM, "clip_total_norm: out of memory");
    ampy_status s = ampy_clip_norms(ntensors, data, numel, dtype, p, norms);
    if (s == AMPY_OK) {
        double acc = ampy_norm_init(p);
        for (int64_t i = 0; i < ntensors; i++)
            acc = ampy_norm_step(acc, fabs(ampy_norm_round(norms[i], dtype[i])), p);
        double total = ntensors ? ampy_norm_round(ampy_norm_finish(acc, p), out_dtype) : 0.0;
        ampy_nn_store1(out, out_dtype, 0, total);
    }
    free(norms);
    return s;
}

typedef struct {
    void *const *data;
    const int *dtype;
    double coef;
    scale_fn scale;
} scale_ctx;

static void scale_chunk(int64_t t, int64_t begin, int64_t end, void *arg)
{
    const scale_ctx *c = (const scale_ctx *)arg;
    c->scale(c->data[t], c->dtype[t], begin, end, c->coef);
}

ampy_status ampy_clip_scale(int64_t ntensors, void *const *data, const int64_t *numel,
                            const int *dtype, double coef)
{
    ampy_status s = check_list("clip_scale", ntensors, (const void *const *)data, numel, dtype);
    if (s != AMPY_OK || ntensors == 0)
        return s;
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(ntensors + 1));
    if (!off)
        return ampy_error(AMPY_ERR_NOMEM, "clip_scale: out of memory");
    off[0] = 0;
    for (int64_t i = 0; i < ntensors; i++) {
        if (numel[i] > INT64_MAX - off[i]) {
            free(off);
            return ampy_error(AMPY_ERR_VALUE, "clip_scale: total element count overflows");
        }
        off[i + 1] = off[i] + numel[i];
    }
    block_fn unused;
    scale_ctx c = {data, dtype, coef, NULL};
    pick_kernels(&unused, &c.scale);
    ampy_mt_parallel(ntensors, off, CLIP_SCALE_GRAIN, scale_chunk, &c);
    free(off);
    return AMPY_OK;
}
