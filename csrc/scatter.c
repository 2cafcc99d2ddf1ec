/* scatter.c — gather, scatter and scatter_add along a dim (scatter.h). */
#include <stdlib.h>
#include <string.h>

#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "ampy/scatter.h"

enum { GATHER, SCATTER, SCATTER_ADD };

typedef struct {
    const ampy_scatter_spec *s;
    int mode;
    char *self;
    const char *index, *other;
    int64_t bad; /* a failing index value (checks) */
    int failed;
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

/* float16/bfloat16 scatter_add: each target element of a line is summed in
 * float (its value first, then each addition in index order) and rounded
 * once, as torch's CPU kernel accumulates reduced floats in float. acc and
 * seen[] (all 0 between lines) are indexed by the target's position. */
static void add_line_half(const ampy_scatter_spec *s, const run_ctx *c, int64_t oi, int64_t os,
                          int64_t oo, float *acc, unsigned char *seen)
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
        acc[v] += f16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
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

#define COPY_LINE(T)                                                                    \
    for (int64_t j = 0; j < n; j++) {                                                   \
        int64_t v;                                                                      \
        memcpy(&v, c->index + oi + j * si, 8);                                          \
        char *sp = c->self + os + v * ss, *op = (char *)c->other + oo + j * so;         \
        if (g)                                                                          \
            memcpy(op, sp, sizeof(T));                                                  \
        else                                                                            \
            memcpy(sp, op, sizeof(T));                                                  \
    }

static void run_lines(int64_t begin, int64_t end, void *arg)
{
    run_ctx *c = (run_ctx *)arg;
    const ampy_scatter_spec *s = c->s;
    const size_t isz = ampy_dtype_size(s->dtype);
    const int64_t n = s->shape[s->dim], si = s->index_strides[s->dim];
    const int64_t ss = s->self_strides[s->dim], so = s->other_strides[s->dim];
    float *acc = NULL;
    unsigned char *seen = NULL;
    if (c->mode == SCATTER_ADD && ampy_dtype_is_half(s->dtype)) {
        acc = malloc((size_t)s->self_size * sizeof(float) + 1);
        seen = calloc((size_t)s->self_size + 1, 1);
        if (!acc || !seen) {
            free(acc);
            free(seen);
            c->failed = 1;
            return;
        }
    }
    for (int64_t l = begin; l < end; l++) {
        int64_t oi, os, oo;
        line_offsets(s, l, &oi, &os, &oo);
        if (acc) {
            add_line_half(s, c, oi, os, oo, acc, seen);
            continue;
        }
        if (c->mode == SCATTER_ADD) {
            for (int64_t j = 0; j < n; j++) {
                int64_t v;
                memcpy(&v, c->index + oi + j * si, 8);
                add_elem(s->dtype, c->self + os + v * ss, c->other + oo + j * so);
            }
            continue;
        }
        /* gather reads self into other, scatter the reverse: one copy loop per
         * element size, so each copy is a single load and store */
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
    free(acc);
    free(seen);
}

static void check_lines(int64_t begin, int64_t end, void *arg)
{
    run_ctx *c = (run_ctx *)arg;
    const ampy_scatter_spec *s = c->s;
    const int64_t n = s->shape[s->dim], si = s->index_strides[s->dim];
    for (int64_t l = begin; l < end && !c->failed; l++) {
        int64_t oi, os, oo;
        line_offsets(s, l, &oi, &os, &oo);
        for (int64_t j = 0; j < n; j++) {
            int64_t v;
            memcpy(&v, c->index + oi + j * si, 8);
            if (v < 0 || v >= s->self_size) {
                c->bad = v;
                c->failed = 1;
                return;
            }
        }
    }
}

static ampy_status run(const ampy_scatter_spec *s, int mode, char *self, const char *index,
                       const char *other)
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
    run_ctx c = {s, mode, self, index, other, 0, 0};
    const int64_t n = s->shape[s->dim];
    const int64_t grain = n >= 16384 ? 1 : 16384 / n + 1;
    ampy_parallel_for(lines, grain, check_lines, &c);
    if (c.failed)
        return ampy_error(AMPY_ERR_RUNTIME, "index %lld is out of bounds for dimension %d with "
                          "size %lld", (long long)c.bad, s->dim, (long long)s->self_size);
    /* the lines touch disjoint elements of self (its position on the other
     * dims is the line's own), so they run in parallel */
    ampy_parallel_for(lines, grain, run_lines, &c);
    if (c.failed)
        return ampy_error(AMPY_ERR_NOMEM, "scatter_add: out of memory");
    return AMPY_OK;
}

ampy_status ampy_gather(const ampy_scatter_spec *s, const char *self, const char *index,
                        char *out)
{
    return run(s, GATHER, (char *)self, index, out);
}

ampy_status ampy_scatter(const ampy_scatter_spec *s, char *self, const char *index,
                         const char *src)
{
    return run(s, SCATTER, self, index, src);
}

ampy_status ampy_scatter_add(const ampy_scatter_spec *s, char *self, const char *index,
                             const char *src)
{
    return run(s, SCATTER_ADD, self, index, src);
}
