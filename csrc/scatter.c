/* scatter.c — gather, scatter, scatter_add and scatter_reduce along a dim
 * (scatter.h). */
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "ampy/scatter.h"
#include "simd.h"

enum { GATHER, SCATTER, SCATTER_ADD, SCATTER_REDUCE };
enum { BAD_INDEX = 1, NO_MEMORY = 2 }; /* run_ctx.failed */
enum { STREAM_BYTES = 1 << 19 };

typedef struct {
    const ampy_scatter_spec *s;
    int mode;
    char *self;
    const char *index, *other;
    int64_t bad; /* a failing index value (checks) */
    int failed;
    int stream; /* gather: out is large enough to be stored past the cache */
    int avx512; /* gather: the CPU level runs AVX-512 */
    int op;     /* scatter_reduce: an ampy_scatter_reduce_op */
} run_ctx;

/* Byte offsets of line `l` (the index positions with c[dim] = 0, row-major
 * over the other dims) in index, self and other. */
static void line_offsets(const ampy_scatter_spec *s, int64_t l, int64_t *oi, int64_t *os,
                         int64_t *oo)
{
    *oi = *os = *oo = 0;
    for (int d = s->ndim - 1; d >= 0; d--) {
        if (d == s->dim)
            continue;
        const int64_t c = l % s->shape[d];
        l /= s->shape[d];
        *oi += c * s->index_strides[d];
        *os += c * s->self_strides[d];
        *oo += c * s->other_strides[d];
    }
}

static void add_elem(ampy_dtype dt, char *d, const char *a)
{
    switch (dt) {
    case AMPY_FLOAT32: {
        float x, y;
        memcpy(&x, d, 4), memcpy(&y, a, 4), x += y, memcpy(d, &x, 4);
        break;
    }
    case AMPY_FLOAT64: {
        double x, y;
        memcpy(&x, d, 8), memcpy(&y, a, 8), x += y, memcpy(d, &x, 8);
        break;
    }
    case AMPY_INT64: {
        uint64_t x, y;
        memcpy(&x, d, 8), memcpy(&y, a, 8), x += y, memcpy(d, &x, 8);
        break;
    }
    case AMPY_INT32: {
        uint32_t x, y;
        memcpy(&x, d, 4), memcpy(&y, a, 4), x += y, memcpy(d, &x, 4);
        break;
    }
    case AMPY_UINT8:
        *(uint8_t *)d = (uint8_t)(*(const uint8_t *)d + *(const uint8_t *)a);
        break;
    default:
        *(uint8_t *)d = (uint8_t)(*(const uint8_t *)d || *(const uint8_t *)a);
        break;
    }
}

/* a combined with b: a sum (op 0) or an ampy_scatter_reduce_op; a NaN b
 * replaces a in amax/amin and a NaN a stays */
static float combine_f32(int op, float a, float b)
{
    switch (op) {
    case AMPY_SCATTER_PROD:
        return a * b;
    case AMPY_SCATTER_AMAX:
        return (b != b || b > a) ? b : a;
    case AMPY_SCATTER_AMIN:
        return (b != b || b < a) ? b : a;
    default:
        return a + b;
    }
}

/* float16/bfloat16 scatter_add / scatter_reduce: each target element of a
 * line is combined in float (its value first, then each src value in index
 * order) and rounded once, as torch's CPU kernel accumulates reduced floats
 * in float. acc and seen[] (all 0 between lines) are indexed by the target's
 * position. */
static void combine_line_half(const ampy_scatter_spec *s, const run_ctx *c, int64_t oi,
                              int64_t os, int64_t oo, float *acc, unsigned char *seen)
{
    const int64_t n = s->shape[s->dim], si = s->index_strides[s->dim];
    const int64_t ss = s->self_strides[s->dim], so = s->other_strides[s->dim];
    const int f16 = s->dtype == AMPY_FLOAT16;
    uint16_t h;
    for (int64_t j = 0; j < n; j++) {
        int64_t v;
        memcpy(&v, c->index + oi + j * si, 8);
        if (!seen[v]) {
            seen[v] = 1;
            memcpy(&h, c->self + os + v * ss, 2);
            acc[v] = f16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
        }
        memcpy(&h, c->other + oo + j * so, 2);
        const float b = f16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
        acc[v] = combine_f32(c->mode == SCATTER_ADD ? 0 : c->op, acc[v], b);
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t v;
        memcpy(&v, c->index + oi + j * si, 8);
        if (seen[v]) {
            seen[v] = 0;
            h = f16 ? ampy_f32_to_f16(acc[v]) : ampy_f32_to_bf16(acc[v]);
            memcpy(c->self + os + v * ss, &h, 2);
        }
    }
}

/* 1 when every index of a line lies in [0, size): one OR over the line, which
 * sits in L1 when the copy loop below reads it again. */
static int line_in_bounds(const int64_t *ix, int64_t n, int64_t st, int64_t size, int64_t *bad)
{
    uint64_t over = 0;
    if (st == 1)
        for (int64_t j = 0; j < n; j++)
            over |= (uint64_t)ix[j] >= (uint64_t)size;
    else
        for (int64_t j = 0; j < n; j++)
            over |= (uint64_t)ix[j * st] >= (uint64_t)size;
    if (!over)
        return 1;
    for (int64_t j = 0;; j++)
        if ((uint64_t)ix[j * st] >= (uint64_t)size) {
            *bad = ix[j * st];
            return 0;
        }
}

/* gather reads self into other, scatter the reverse; strides in elements.
 * The contiguous index/other case gets its own loop so it compiles to plain
 * indexed loads and stores. */
#define COPY_LINE(T)                                                                    \
    do {                                                                                \
        T *restrict sp = (T *)(c->self + os), *restrict op = (T *)(c->other + oo);      \
        if (g)                                                                          \
            for (int64_t j = 0; j < n; j++)                                             \
                op[j * oe] = sp[ix[j * ie] * se];                                       \
        else                                                                            \
            for (int64_t j = 0; j < n; j++)                                             \
                sp[ix[j * ie] * se] = op[j * oe];                                       \
    } while (0)

/* gather of a line whose index and out are contiguous, checking as it goes:
 * an index out of bounds reads element 0 instead and fails the line. */
#define GATHER_CHECKED(T)                                                               \
    do {                                                                                \
        const T *restrict sp = (const T *)(c->self + os);                               \
        T *restrict op = (T *)(c->other + oo);                                          \
        uint64_t over = 0;                                                              \
        for (int64_t j = 0; j < n; j++) {                                               \
            const uint64_t v = (uint64_t)ix[j];                                         \
            const int bad = v >= size;                                                  \
            over |= (uint64_t)bad;                                                      \
            op[j] = sp[(int64_t)(bad ? 0 : v) * se];                                    \
        }                                                                               \
        return !over;                                                                   \
    } while (0)

/* 0 when an index of the line is out of bounds */
#if defined(__x86_64__)
/* 4- and 8-byte gathers into a large out store past the cache (out is
 * written once and the lines need not be read in first) */
static int gather_line_stream(const run_ctx *c, size_t isz, const int64_t *ix, int64_t n,
                              int64_t os, int64_t se, int64_t oo)
{
    const uint64_t size = (uint64_t)c->s->self_size;
    uint64_t over = 0;
    if (isz == 4) {
        const int *restrict sp = (const int *)(c->self + os);
        int *restrict op = (int *)(c->other + oo);
        for (int64_t j = 0; j < n; j++) {
            const uint64_t v = (uint64_t)ix[j];
            const int bad = v >= size;
            over |= (uint64_t)bad;
            _mm_stream_si32(op + j, sp[(int64_t)(bad ? 0 : v) * se]);
        }
    } else {
        const long long *restrict sp = (const long long *)(c->self + os);
        long long *restrict op = (long long *)(c->other + oo);
        for (int64_t j = 0; j < n; j++) {
            const uint64_t v = (uint64_t)ix[j];
            const int bad = v >= size;
            over |= (uint64_t)bad;
            _mm_stream_si64(op + j, sp[(int64_t)(bad ? 0 : v) * se]);
        }
    }
    return !over;
}
#endif

#if defined(AMPY_X86_SIMD)
/* 4-byte gather of a contiguous line with AVX-512: eight int64 indices per
 * vpgatherqd, the lanes out of bounds masked off (and the line failed). */
AMPY_TARGET_AVX512 static int gather_line_avx512(const run_ctx *c, const int64_t *ix, int64_t n,
                                                 int64_t os, int64_t se, int64_t oo)
{
    const int *sp = (const int *)(c->self + os);
    int *op = (int *)(c->other + oo);
    const __m512i size = _mm512_set1_epi64(c->s->self_size), step = _mm512_set1_epi64(se);
    __mmask8 ok = 0xFF;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m512i v = _mm512_loadu_si512((const void *)(ix + j));
        const __mmask8 in = _mm512_cmplt_epu64_mask(v, size);
        ok &= in;
        const __m256i g = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), in,
                                                      _mm512_mullo_epi64(v, step), sp, 4);
        if (c->stream)
            _mm256_stream_si256((__m256i *)(op + j), g);
        else
            _mm256_storeu_si256((__m256i *)(op + j), g);
    }
    uint64_t over = ok != 0xFF;
    for (; j < n; j++) {
        const uint64_t v = (uint64_t)ix[j];
        const int bad = v >= (uint64_t)c->s->self_size;
        over |= (uint64_t)bad;
        op[j] = sp[(int64_t)(bad ? 0 : v) * se];
    }
    return !over;
}
#endif

static int gather_line_checked(const run_ctx *c, size_t isz, const int64_t *ix, int64_t n,
                               int64_t os, int64_t se, int64_t oo)
{
    const uint64_t size = (uint64_t)c->s->self_size;
    switch (isz) {
    case 8:
        GATHER_CHECKED(uint64_t);
    case 4:
        GATHER_CHECKED(uint32_t);
    case 2:
        GATHER_CHECKED(uint16_t);
    default:
        GATHER_CHECKED(uint8_t);
    }
}

#define ADD_LINE(T)                                                                     \
    do {                                                                                \
        T *sp = (T *)(c->self + os);                                                    \
        const T *op = (const T *)(c->other + oo);                                       \
        for (int64_t j = 0; j < n; j++)                                                 \
            sp[ix[j * ie] * se] += op[j * oe];                                          \
    } while (0)

/* scatter_add of one line in a full-width type (integers wrap: unsigned sums) */
static void add_line(const run_ctx *c, ampy_dtype dt, const int64_t *ix, int64_t n, int64_t ie,
                     int64_t os, int64_t se, int64_t oo, int64_t oe)
{
    switch (dt) {
    case AMPY_FLOAT32:
        ADD_LINE(float);
        break;
    case AMPY_FLOAT64:
        ADD_LINE(double);
        break;
    case AMPY_INT64:
        ADD_LINE(uint64_t);
        break;
    case AMPY_INT32:
        ADD_LINE(uint32_t);
        break;
    default:
        for (int64_t j = 0; j < n; j++)
            add_elem(dt, c->self + os + ix[j * ie] * se, c->other + oo + j * oe);
        break;
    }
}

#define REDUCE_LINE(T, EXPR)                                                            \
    do {                                                                                \
        T *sp = (T *)(c->self + os);                                                    \
        const T *op = (const T *)(c->other + oo);                                       \
        for (int64_t j = 0; j < n; j++) {                                               \
            T *d = sp + ix[j * ie] * se;                                                \
            const T a = *d, b = op[j * oe];                                             \
            *d = (EXPR);                                                                \
        }                                                                               \
    } while (0)

#define REDUCE_TYPED(T, UT)                                                             \
    do {                                                                                \
        if (c->op == AMPY_SCATTER_PROD)                                                 \
            REDUCE_LINE(UT, (UT)(a * b));                                               \
        else if (c->op == AMPY_SCATTER_AMAX)                                            \
            REDUCE_LINE(T, (b != b || b > a) ? b : a);                                  \
        else                                                                            \
            REDUCE_LINE(T, (b != b || b < a) ? b : a);                                  \
    } while (0)

/* scatter_reduce of one line in a full-width type (bool: uint8 0/1 values,
 * whose product / max / min are and / or / and) */
static void reduce_line(const run_ctx *c, ampy_dtype dt, const int64_t *ix, int64_t n,
                        int64_t ie, int64_t os, int64_t se, int64_t oo, int64_t oe)
{
    switch (dt) {
    case AMPY_FLOAT32:
        REDUCE_TYPED(float, float);
        break;
    case AMPY_FLOAT64:
        REDUCE_TYPED(double, double);
        break;
    case AMPY_INT64:
        REDUCE_TYPED(int64_t, uint64_t);
        break;
    case AMPY_INT32:
        REDUCE_TYPED(int32_t, uint32_t);
        break;
    default:
        REDUCE_TYPED(uint8_t, uint8_t);
        break;
    }
}

static void copy_line(const run_ctx *c, size_t isz, const int64_t *ix, int64_t n, int64_t ie,
                      int64_t os, int64_t se, int64_t oo, int64_t oe)
{
    const int g = c->mode == GATHER;
    switch (isz) {
    case 8:
        COPY_LINE(uint64_t);
        break;
    case 4:
        COPY_LINE(uint32_t);
        break;
    case 2:
        COPY_LINE(uint16_t);
        break;
    default:
        COPY_LINE(uint8_t);
        break;
    }
}

static void run_lines(int64_t begin, int64_t end, void *arg)
{
    run_ctx *c = (run_ctx *)arg;
    const ampy_scatter_spec *s = c->s;
    const size_t isz = ampy_dtype_size(s->dtype);
    const int64_t n = s->shape[s->dim], ie = s->index_strides[s->dim] / 8;
    const int64_t se = s->self_strides[s->dim] / (int64_t)isz;
    const int64_t oe = s->other_strides[s->dim] / (int64_t)isz;
    float *acc = NULL;
    unsigned char *seen = NULL;
    if ((c->mode == SCATTER_ADD || c->mode == SCATTER_REDUCE) && ampy_dtype_is_half(s->dtype)) {
        acc = malloc((size_t)s->self_size * sizeof(float) + 1);
        seen = calloc((size_t)s->self_size + 1, 1);
        if (!acc || !seen) {
            free(acc);
            free(seen);
            c->failed = NO_MEMORY;
            return;
        }
    }
    for (int64_t l = begin; l < end; l++) {
        int64_t oi, os, oo;
        line_offsets(s, l, &oi, &os, &oo);
        const int64_t *ix = (const int64_t *)(c->index + oi);
        if (c->mode == GATHER && ie == 1 && oe == 1) {
#if defined(__x86_64__)
            const int ok = c->avx512 && isz == 4 && !((uintptr_t)(c->other + oo) & 31)
                               ? gather_line_avx512(c, ix, n, os, se, oo)
                           : c->stream && (isz == 4 || isz == 8)
                               ? gather_line_stream(c, isz, ix, n, os, se, oo)
                               : gather_line_checked(c, isz, ix, n, os, se, oo);
#else
            const int ok = gather_line_checked(c, isz, ix, n, os, se, oo);
#endif
            if (!ok) {
                line_in_bounds(ix, n, ie, s->self_size, &c->bad);
                c->failed = BAD_INDEX;
                break;
            }
            continue;
        }
        if (c->mode == GATHER && !line_in_bounds(ix, n, ie, s->self_size, &c->bad)) {
            c->failed = BAD_INDEX; /* out is the call's own: nothing of the caller's written */
            break;
        }
        if (acc)
            combine_line_half(s, c, oi, os, oo, acc, seen);
        else if (c->mode == SCATTER_ADD)
            add_line(c, s->dtype, ix, n, ie, os, se, oo, oe);
        else if (c->mode == SCATTER_REDUCE)
            reduce_line(c, s->dtype, ix, n, ie, os, se, oo, oe);
        else
            copy_line(c, isz, ix, n, ie, os, se, oo, oe);
    }
#if defined(__x86_64__)
    if (c->stream) /* the streamed stores are seen before this task reports done */
        _mm_sfence();
#endif
    free(acc);
    free(seen);
}

static void check_lines(int64_t begin, int64_t end, void *arg)
{
    run_ctx *c = (run_ctx *)arg;
    const ampy_scatter_spec *s = c->s;
    const int64_t n = s->shape[s->dim], ie = s->index_strides[s->dim] / 8;
    for (int64_t l = begin; l < end && !c->failed; l++) {
        int64_t oi, os, oo;
        line_offsets(s, l, &oi, &os, &oo);
        if (!line_in_bounds((const int64_t *)(c->index + oi), n, ie, s->self_size, &c->bad))
            c->failed = BAD_INDEX;
    }
}

static ampy_status run(const ampy_scatter_spec *s, int mode, int op, char *self,
                       const char *index, const char *other)
{
    if (s->ndim < 1 || s->dim < 0 || s->dim >= s->ndim || !ampy_dtype_valid(s->dtype))
        return ampy_error(AMPY_ERR_VALUE, "gather/scatter: bad spec (ndim %d, dim %d)", s->ndim,
                          s->dim);
    int64_t lines = 1;
    for (int d = 0; d < s->ndim; d++) {
        if (s->shape[d] == 0)
            return AMPY_OK;
        if (d != s->dim)
            lines *= s->shape[d];
    }
    run_ctx c = {s, mode, self, index, other, 0, 0, 0, 0, op};
#if defined(AMPY_X86_SIMD)
    c.avx512 = ampy_cpu_level_get() >= AMPY_CPU_AVX512;
#endif
    c.stream = mode == GATHER && lines * s->shape[s->dim] * (int64_t)ampy_dtype_size(s->dtype) >= STREAM_BYTES;
    const int64_t n = s->shape[s->dim];
    const int64_t grain = n >= 16384 ? 1 : 16384 / n + 1;
    /* scatter writes the caller's self: every index is checked first; gather
     * checks each line just before copying it */
    if (mode != GATHER)
        ampy_parallel_for(lines, grain, check_lines, &c);
    if (!c.failed)
        /* the lines touch disjoint elements of self (its position on the
         * other dims is the line's own), so they run in parallel */
        ampy_parallel_for(lines, grain, run_lines, &c);

    if (c.failed == BAD_INDEX)
        return ampy_error(AMPY_ERR_RUNTIME, "index %lld is out of bounds for dimension %d with "
                          "size %lld", (long long)c.bad, s->dim, (long long)s->self_size);
    if (c.failed)
        return ampy_error(AMPY_ERR_NOMEM, "scatter_add/scatter_reduce: out of memory");
    return AMPY_OK;
}

ampy_status ampy_gather(const ampy_scatter_spec *s, const char *self, const char *index,
                        char *out)
{
    return run(s, GATHER, 0, (char *)self, index, out);
}

ampy_status ampy_scatter(const ampy_scatter_spec *s, char *self, const char *index,
                         const char *src)
{
    return run(s, SCATTER, 0, self, index, src);
}

ampy_status ampy_scatter_add(const ampy_scatter_spec *s, char *self, const char *index,
                             const char *src)
{
    return run(s, SCATTER_ADD, 0, self, index, src);
}

ampy_status ampy_scatter_reduce(const ampy_scatter_spec *s, ampy_scatter_reduce_op op,
                                char *self, const char *index, const char *src)
{
    if (op != AMPY_SCATTER_PROD && op != AMPY_SCATTER_AMAX && op != AMPY_SCATTER_AMIN)
        return ampy_error(AMPY_ERR_VALUE, "scatter_reduce: bad reduction %d", (int)op);
    return run(s, SCATTER_REDUCE, (int)op, self, index, src);
}
