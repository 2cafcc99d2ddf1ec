/* cast.c — portable dtype conversion loops and their dispatch (see cast.h).
 *
 * Every (source, destination) pair gets a loop generated from one macro: the
 * source is loaded into an intermediate of its kind (float for
 * float32/float16/bfloat16, double for float64, int64 for the integer types)
 * and stored through the destination's converter from that kind, so a value
 * is rounded exactly once. Contiguous runs of the four AMP conversions go to
 * the SIMD kernels of cast_x86.c when the CPU level allows.
 */
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/iter.h"
#include "ampy/parallel.h"

/* ---- loads ------------------------------------------------------------- */
static inline float ld_f32(const char *p) { return *(const float *)p; }
static inline float ld_f16(const char *p) { return ampy_f16_to_f32(*(const uint16_t *)p); }
static inline float ld_bf16(const char *p) { return ampy_bf16_to_f32(*(const uint16_t *)p); }
static inline double ld_f64(const char *p) { return *(const double *)p; }
static inline int64_t ld_i64(const char *p) { return *(const int64_t *)p; }
static inline int64_t ld_i32(const char *p) { return *(const int32_t *)p; }
static inline int64_t ld_u8(const char *p) { return *(const uint8_t *)p; }
static inline int64_t ld_b(const char *p) { return *(const uint8_t *)p != 0; }

/* ---- stores from a float (kind f) --------------------------------------- */
static inline void st_f_f32(char *p, float v) { *(float *)p = v; }
static inline void st_f_f16(char *p, float v) { *(uint16_t *)p = ampy_f32_to_f16(v); }
static inline void st_f_bf16(char *p, float v) { *(uint16_t *)p = ampy_f32_to_bf16(v); }
static inline void st_f_f64(char *p, float v) { *(double *)p = v; }
static inline void st_f_i64(char *p, float v) { *(int64_t *)p = ampy_f64_to_i64(v); }
static inline void st_f_i32(char *p, float v) { *(int32_t *)p = (int32_t)(uint32_t)ampy_f64_to_i64(v); }
static inline void st_f_u8(char *p, float v) { *(uint8_t *)p = (uint8_t)ampy_f64_to_i64(v); }
static inline void st_f_b(char *p, float v) { *(uint8_t *)p = v != 0.0f; }
/* ---- stores from a double (kind d) -------------------------------------- */
static inline void st_d_f32(char *p, double v) { *(float *)p = (float)v; }
static inline void st_d_f16(char *p, double v) { *(uint16_t *)p = ampy_f64_to_f16(v); }
static inline void st_d_bf16(char *p, double v) { *(uint16_t *)p = ampy_f64_to_bf16(v); }
static inline void st_d_f64(char *p, double v) { *(double *)p = v; }
static inline void st_d_i64(char *p, double v) { *(int64_t *)p = ampy_f64_to_i64(v); }
static inline void st_d_i32(char *p, double v) { *(int32_t *)p = (int32_t)(uint32_t)ampy_f64_to_i64(v); }
static inline void st_d_u8(char *p, double v) { *(uint8_t *)p = (uint8_t)ampy_f64_to_i64(v); }
static inline void st_d_b(char *p, double v) { *(uint8_t *)p = v != 0.0; }
/* ---- stores from an int64 (kind i); integer narrowing wraps ------------- */
static inline void st_i_f32(char *p, int64_t v) { *(float *)p = (float)v; }
static inline void st_i_f16(char *p, int64_t v) { *(uint16_t *)p = ampy_f64_to_f16((double)v); }
static inline void st_i_bf16(char *p, int64_t v) { *(uint16_t *)p = ampy_f64_to_bf16((double)v); }
static inline void st_i_f64(char *p, int64_t v) { *(double *)p = (double)v; }
static inline void st_i_i64(char *p, int64_t v) { *(int64_t *)p = v; }
static inline void st_i_i32(char *p, int64_t v) { *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; }
static inline void st_i_u8(char *p, int64_t v) { *(uint8_t *)p = (uint8_t)v; }
static inline void st_i_b(char *p, int64_t v) { *(uint8_t *)p = v != 0; }

#define SZ_f32 4
#define SZ_f16 2
#define SZ_bf16 2
#define SZ_f64 8
#define SZ_i64 8
#define SZ_i32 4
#define SZ_u8 1
#define SZ_b 1

/* One loop per pair; the contiguous branch has constant strides, which lets
 * the compiler vectorise it. */
#define DEF_CAST(src, kind, dst)                                                      \
    static void cast_##src##_##dst(char **p, const int64_t *s, int64_t n, void *ctx) \
    {                                                                                 \
        (void)ctx;                                                                    \
        const char *a = p[0];                                                         \
        char *b = p[1];                                                               \
        if (s[0] == SZ_##src && s[1] == SZ_##dst) {                                   \
            for (int64_t i = 0; i < n; i++)                                           \
                st_##kind##_##dst(b + i * SZ_##dst, ld_##src(a + i * SZ_##src));     \
        } else {                                                                      \
            for (int64_t i = 0; i < n; i++, a += s[0], b += s[1])                     \
                st_##kind##_##dst(b, ld_##src(a));                                    \
        }                                                                             \
    }

#define FOR_DST(X, src, kind)                                                         \
    X(src, kind, f32) X(src, kind, f16) X(src, kind, bf16) X(src, kind, f64)          \
    X(src, kind, i64) X(src, kind, i32) X(src, kind, u8) X(src, kind, b)
#define FOR_ALL(X)                                                                    \
    FOR_DST(X, f32, f) FOR_DST(X, f16, f) FOR_DST(X, bf16, f) FOR_DST(X, f64, d)      \
    FOR_DST(X, i64, i) FOR_DST(X, i32, i) FOR_DST(X, u8, i) FOR_DST(X, b, i)

FOR_ALL(DEF_CAST)

#define TABLE_ENTRY(src, kind, dst) cast_##src##_##dst,
/* Indexed [src][dst] in ampy_dtype order (f32, f16, bf16, f64, i64, i32, u8, bool). */
static ampy_inner_fn const portable_loops[AMPY_NUM_DTYPES][AMPY_NUM_DTYPES] = {
    {FOR_DST(TABLE_ENTRY, f32, f)},  {FOR_DST(TABLE_ENTRY, f16, f)},
    {FOR_DST(TABLE_ENTRY, bf16, f)}, {FOR_DST(TABLE_ENTRY, f64, d)},
    {FOR_DST(TABLE_ENTRY, i64, i)},  {FOR_DST(TABLE_ENTRY, i32, i)},
    {FOR_DST(TABLE_ENTRY, u8, i)},   {FOR_DST(TABLE_ENTRY, b, i)},
};

/* Same dtype: a bit copy (NaN payloads and signalling NaNs kept, as the
 * SIMD copies and torch's copy_ do; a round trip through float would
 * canonicalise bfloat16 NaNs). */
#define DEF_COPY(bytes, type)                                                         \
    static void copy_##bytes(char **p, const int64_t *s, int64_t n, void *ctx)       \
    {                                                                                 \
        (void)ctx;                                                                    \
        const char *a = p[0];                                                         \
        char *b = p[1];                                                               \
        for (int64_t i = 0; i < n; i++, a += s[0], b += s[1])                         \
            *(type *)b = *(const type *)a;                                            \
    }
DEF_COPY(1, uint8_t)
DEF_COPY(2, uint16_t)
DEF_COPY(4, uint32_t)
DEF_COPY(8, uint64_t)

static ampy_inner_fn portable_loop(ampy_dtype src, ampy_dtype dst)
{
    if (src == dst) {
        switch (ampy_dtype_size(src)) {
        case 1: return copy_1;
        case 2: return copy_2;
        case 4: return copy_4;
        default: return copy_8;
        }
    }
    return portable_loops[src][dst];
}

typedef struct {
    ampy_dtype src, dst;
    ampy_inner_fn portable;
    ampy_cast_kernel simd; /* NULL: portable only */
} cast_ctx;

static void cast_inner(char **p, const int64_t *s, int64_t n, void *arg)
{
    const cast_ctx *c = (const cast_ctx *)arg;
    if (c->simd && s[0] == (int64_t)ampy_dtype_size(c->src) &&
        s[1] == (int64_t)ampy_dtype_size(c->dst)) {
        c->simd(p[0], p[1], n);
        return;
    }
    c->portable(p, s, n, NULL);
}

/* Elements per thread before a cast is split: below this the wake-up of a
 * worker costs more than it saves. */
#define CAST_GRAIN ((int64_t)1 << 18)

/* ---- fill: one source element broadcast over a dense destination --------
 * (zeros, ones, full, fill_: a 0-d value copied everywhere). The value is
 * converted once by the same loop as any cast, so the bits are the cast's,
 * then stored as a pattern: memset when its bytes are all equal, else a
 * typed store loop the compiler widens. */
typedef struct {
    char *dst;
    unsigned char v[8];
    int size;
} fill_ctx;

#define DEF_FILL(bytes, type)                                               \
    static void fill_##bytes(type *d, int64_t n, const unsigned char *v)   \
    {                                                                       \
        type x;                                                             \
        memcpy(&x, v, sizeof x);                                            \
        for (int64_t i = 0; i < n; i++)                                     \
            d[i] = x;                                                       \
    }
DEF_FILL(2, uint16_t)
DEF_FILL(4, uint32_t)
DEF_FILL(8, uint64_t)

static void fill_range(int64_t i0, int64_t i1, void *arg)
{
    const fill_ctx *f = (const fill_ctx *)arg;
    char *d = f->dst + i0 * f->size;
    int same = 1;
    for (int b = 1; b < f->size; b++)
        same &= f->v[b] == f->v[0];
    if (same)
        memset(d, f->v[0], (size_t)((i1 - i0) * f->size));
    else if (f->size == 2)
        fill_2((uint16_t *)d, i1 - i0, f->v);
    else if (f->size == 4)
        fill_4((uint32_t *)d, i1 - i0, f->v);
    else
        fill_8((uint64_t *)d, i1 - i0, f->v);
}

/* Dense C-order destination (size-1 dims ignored) and a source whose every
 * stride is 0: the number of elements, else 0. */
static int64_t fill_count(int ndim, const int64_t *shape, const int64_t *src_strides,
                          const int64_t *dst_strides)
{
    int64_t n = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] == 1)
            continue;
        if (src_strides[d] != 0 || dst_strides[d] != n)
            return 0;
        n *= shape[d];
    }
    return n;
}

#define FILL_GRAIN ((int64_t)1 << 20)

ampy_status ampy_cast(int ndim, const int64_t *shape, const void *src,
                      const int64_t *src_strides, ampy_dtype src_dtype, void *dst,
                      const int64_t *dst_strides, ampy_dtype dst_dtype)
{
    if (!ampy_dtype_valid(src_dtype) || !ampy_dtype_valid(dst_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "cast: invalid dtype code %d -> %d", (int)src_dtype,
                          (int)dst_dtype);
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "cast: bad ndim %d", ndim);
    cast_ctx c = {src_dtype, dst_dtype, portable_loop(src_dtype, dst_dtype),
                  ampy_cast_simd_kernel(ampy_cpu_level_get(), src_dtype, dst_dtype)};
    int64_t strides[2 * AMPY_MAX_DIMS];
    const int64_t ss = (int64_t)ampy_dtype_size(src_dtype), ds = (int64_t)ampy_dtype_size(dst_dtype);
    for (int d = 0; d < ndim; d++) {
        strides[d] = src_strides[d] * ss;
        strides[ndim + d] = dst_strides[d] * ds;
    }
    int64_t nfill = fill_count(ndim, shape, src_strides, dst_strides);
    if (nfill > 1) {
        fill_ctx f = {(char *)dst, {0}, (int)ds};
        char *one[2] = {(char *)src, (char *)f.v};
        const int64_t zero[2] = {0, 0};
        c.portable(one, zero, 1, NULL);
        ampy_parallel_for(nfill, FILL_GRAIN, fill_range, &f);
        return AMPY_OK;
    }
    char *ptrs[2] = {(char *)src, (char *)dst};
    const int elsize[2] = {(int)ss, (int)ds};
    return ampy_iter_run_ew(ndim, shape, 2, ptrs, strides, cast_inner, &c, CAST_GRAIN, elsize);
}

static ampy_status cast_contig(const void *src, ampy_dtype s, void *dst, ampy_dtype d, int64_t n)
{
    if (n < 0)
        return ampy_error(AMPY_ERR_VALUE, "cast: negative element count %lld", (long long)n);
    int64_t one = 1;
    return ampy_cast(1, &n, src, &one, s, dst, &one, d);
}

ampy_status ampy_cast_f32_to_f16(const float *src, uint16_t *dst, int64_t n)
{
    return cast_contig(src, AMPY_FLOAT32, dst, AMPY_FLOAT16, n);
}
ampy_status ampy_cast_f32_to_bf16(const float *src, uint16_t *dst, int64_t n)
{
    return cast_contig(src, AMPY_FLOAT32, dst, AMPY_BFLOAT16, n);
}
ampy_status ampy_cast_f16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    return cast_contig(src, AMPY_FLOAT16, dst, AMPY_FLOAT32, n);
}
ampy_status ampy_cast_bf16_to_f32(const uint16_t *src, float *dst, int64_t n)
{
    return cast_contig(src, AMPY_BFLOAT16, dst, AMPY_FLOAT32, n);
}
