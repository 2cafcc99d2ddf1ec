/* random.c — random and arithmetic-sequence fills (random.h). */
#include <math.h>

#include "ampy/cast.h"
#include "ampy/parallel.h"
#include "ampy/random.h"

typedef struct {
    char *dst;
    ampy_dtype dtype;
    int kind;
    uint64_t seed, offset;
    double a, b;
} fill_ctx;

/* Values are produced in double in blocks of 256 and converted with the cast
 * kernels, so each element is rounded once to its dtype. */
static void fill_range(int64_t begin, int64_t end, void *arg)
{
    const fill_ctx *c = (const fill_ctx *)arg;
    const size_t isz = ampy_dtype_size(c->dtype);
    double buf[256];
    for (int64_t i0 = begin; i0 < end; i0 += 256) {
        int64_t m = end - i0 < 256 ? end - i0 : 256;
        for (int64_t j = 0; j < m; j++) /* never INTEGER: int_range() fills those */
            buf[j] = ampy_random_value(c->kind, c->offset + (uint64_t)(i0 + j), c->seed, c->a,
                                       c->b);
        int64_t one = 1;
        ampy_cast(1, &m, buf, &one, AMPY_FLOAT64, c->dst + i0 * (int64_t)isz, &one, c->dtype);
        if (c->kind == AMPY_RANDOM_UNIFORM && ampy_dtype_is_float(c->dtype)) {
            /* a value that rounded up to b is moved back to a (torch does the same) */
            for (int64_t j = 0; j < m; j++) {
                double back;
                int64_t o = 1;
                ampy_cast(1, &o, c->dst + (i0 + j) * (int64_t)isz, &o, c->dtype, &back, &o,
                          AMPY_FLOAT64);
                if (back >= c->b)
                    ampy_cast(1, &o, &c->a, &o, AMPY_FLOAT64, c->dst + (i0 + j) * (int64_t)isz,
                              &o, c->dtype);
            }
        }
    }
}

/* AMPY_RANDOM_INTEGER: exact int64 values, cast once to the dtype. */
static void int_range(int64_t begin, int64_t end, void *arg)
{
    const fill_ctx *c = (const fill_ctx *)arg;
    const size_t isz = ampy_dtype_size(c->dtype);
    int64_t low, buf[256];
    uint64_t range;
    ampy_random_int_unpack(c->a, c->b, &low, &range);
    for (int64_t i0 = begin; i0 < end; i0 += 256) {
        int64_t m = end - i0 < 256 ? end - i0 : 256, one = 1;
        for (int64_t j = 0; j < m; j++)
            buf[j] = (int64_t)((uint64_t)low +
                               ampy_random_below(c->offset + (uint64_t)(i0 + j), c->seed, range));
        ampy_cast(1, &m, buf, &one, AMPY_INT64, c->dst + i0 * (int64_t)isz, &one, c->dtype);
    }
}

ampy_status ampy_fill_random(void *dst, ampy_dtype dtype, int64_t n, int kind, uint64_t seed,
                             uint64_t offset, double a, double b)
{
    ampy_status st = ampy_fill_random_check_args(dtype, n, kind);
    if (st != AMPY_OK)
        return st;
    fill_ctx c = {(char *)dst, dtype, kind, seed, offset, a, b};
    ampy_parallel_for(n, (int64_t)1 << 16, kind == AMPY_RANDOM_INTEGER ? int_range : fill_range,
                      &c);
    return AMPY_OK;
}

typedef struct {
    char *dst;
    ampy_dtype dtype;
    int64_t n;
    double start, end, step;
    int linspace;
} seq_ctx;

static void seq_range(int64_t begin, int64_t end, void *arg)
{
    const seq_ctx *c = (const seq_ctx *)arg;
    const size_t isz = ampy_dtype_size(c->dtype);
    double buf[256];
    for (int64_t i0 = begin; i0 < end; i0 += 256) {
        int64_t m = end - i0 < 256 ? end - i0 : 256;
        for (int64_t j = 0; j < m; j++) {
            int64_t i = i0 + j;
            if (c->linspace && i >= c->n / 2)
                buf[j] = c->end - c->step * (double)(c->n - 1 - i);
            else
                buf[j] = c->start + c->step * (double)i;
        }
        int64_t one = 1;
        ampy_cast(1, &m, buf, &one, AMPY_FLOAT64, c->dst + i0 * (int64_t)isz, &one, c->dtype);
    }
}

ampy_status ampy_fill_arange(void *dst, ampy_dtype dtype, int64_t n, double start, double step)
{
    if (!ampy_dtype_valid(dtype) || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "arange: bad dtype or size");
    seq_ctx c = {(char *)dst, dtype, n, start, 0.0, step, 0};
    ampy_parallel_for(n, (int64_t)1 << 16, seq_range, &c);
    return AMPY_OK;
}

ampy_status ampy_fill_linspace(void *dst, ampy_dtype dtype, int64_t n, double start, double end,
                               double step)
{
    if (!ampy_dtype_valid(dtype) || n < 0)
        return ampy_error(AMPY_ERR_VALUE, "linspace: bad dtype or size");
    seq_ctx c = {(char *)dst, dtype, n, start, end, step, 1};
    ampy_parallel_for(n, (int64_t)1 << 16, seq_range, &c);
    return AMPY_OK;
}
