/* sort.c — stable row sorts and top-k selection (sort.h).
 *
 * Each row becomes an array of (key, position) pairs, ordered by a total
 * order: the key (NaN above every number, reversed for descending) and then
 * the position, which makes the merge sort stable and the selection of
 * top-k give the same first k as that sort. Rows run in parallel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "ampy/sort.h"

typedef struct {
    double k;
    int64_t i;
} fpair;

typedef struct {
    int64_t k;
    int64_t i;
} ipair;

/* "a comes before b" in ascending order with NaN last; ties by position. */
static inline int f_before(const fpair *a, const fpair *b, int desc)
{
    const int an = isnan(a->k), bn = isnan(b->k);
    if (an || bn) {
        if (an && bn)
            return a->i < b->i;
        return desc ? an : bn;
    }
    if (a->k != b->k)
        return desc ? a->k > b->k : a->k < b->k;
    return a->i < b->i;
}

static inline int i_before(const ipair *a, const ipair *b, int desc)
{
    if (a->k != b->k)
        return desc ? a->k > b->k : a->k < b->k;
    return a->i < b->i;
}

/* merge sort of v[0..n) with tmp[n] scratch; insertion sort on runs of 16 */
#define DEFINE_SORT(NAME, T, BEFORE)                                                     \
    static void NAME##_insertion(T *v, int64_t n, int desc)                              \
    {                                                                                    \
        for (int64_t i = 1; i < n; i++) {                                                \
            T x = v[i];                                                                  \
            int64_t j = i;                                                               \
            while (j > 0 && BEFORE(&x, &v[j - 1], desc)) {                               \
                v[j] = v[j - 1];                                                         \
                j--;                                                                     \
            }                                                                            \
            v[j] = x;                                                                    \
        }                                                                                \
    }                                                                                    \
    static void NAME(T *v, T *tmp, int64_t n, int desc)                                  \
    {                                                                                    \
        for (int64_t s = 0; s < n; s += 16)                                              \
            NAME##_insertion(v + s, n - s < 16 ? n - s : 16, desc);                      \
        T *a = v, *b = tmp;                                                              \
        for (int64_t w = 16; w < n; w *= 2) {                                            \
            for (int64_t s = 0; s < n; s += 2 * w) {                                     \
                int64_t m = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;    \
                int64_t i = s, j = m, o = s;                                             \
                while (i < m && j < e)                                                   \
                    b[o++] = BEFORE(&a[j], &a[i], desc) ? a[j++] : a[i++];               \
                while (i < m)                                                            \
                    b[o++] = a[i++];                                                     \
                while (j < e)                                                            \
                    b[o++] = a[j++];                                                     \
            }                                                                            \
            T *t = a;                                                                    \
            a = b;                                                                       \
            b = t;                                                                       \
        }                                                                                \
        if (a != v)                                                                      \
            memcpy(v, a, (size_t)n * sizeof(T));                                         \
    }                                                                                    \
    /* move the k first pairs of the order into v[0..k), any order (quickselect) */     \
    static void NAME##_select(T *v, int64_t n, int64_t k, int desc)                      \
    {                                                                                    \
        int64_t lo = 0, hi = n - 1;                                                      \
        while (hi > lo && k > lo && k <= hi) {                                           \
            int64_t mid = lo + (hi - lo) / 2;                                            \
            T t;                                                                         \
            if (BEFORE(&v[mid], &v[lo], desc)) { t = v[mid]; v[mid] = v[lo]; v[lo] = t; } \
            if (BEFORE(&v[hi], &v[lo], desc)) { t = v[hi]; v[hi] = v[lo]; v[lo] = t; }    \
            if (BEFORE(&v[hi], &v[mid], desc)) { t = v[hi]; v[hi] = v[mid]; v[mid] = t; } \
            T p = v[mid];                                                                \
            int64_t i = lo, j = hi;                                                      \
            while (i <= j) {                                                             \
                while (BEFORE(&v[i], &p, desc))                                          \
                    i++;                                                                 \
                while (BEFORE(&p, &v[j], desc))                                          \
                    j--;                                                                 \
                if (i <= j) {                                                            \
                    t = v[i];                                                            \
                    v[i++] = v[j];                                                       \
                    v[j--] = t;                                                          \
                }                                                                        \
            }                                                                            \
            if (k <= j)                                                                  \
                hi = j;                                                                  \
            else if (k >= i)                                                             \
                lo = i;                                                                  \
            else                                                                         \
                break;                                                                   \
        }                                                                                \
    }

DEFINE_SORT(f_sort, fpair, f_before)
DEFINE_SORT(i_sort, ipair, i_before)

static int is_float_key(ampy_dtype dt) { return ampy_dtype_is_float(dt); }

static double f_key(ampy_dtype dt, const char *p)
{
    switch (dt) {
    case AMPY_FLOAT32: {
        float x;
        memcpy(&x, p, 4);
        return x;
    }
    case AMPY_FLOAT64: {
        double x;
        memcpy(&x, p, 8);
        return x;
    }
    default: {
        uint16_t h;
        memcpy(&h, p, 2);
        return dt == AMPY_FLOAT16 ? ampy_f16_to_f32(h) : ampy_bf16_to_f32(h);
    }
    }
}

static int64_t i_key(ampy_dtype dt, const char *p)
{
    switch (dt) {
    case AMPY_INT64: {
        int64_t x;
        memcpy(&x, p, 8);
        return x;
    }
    case AMPY_INT32: {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    default:
        return (uint8_t)*p;
    }
}

typedef struct {
    ampy_dtype dt;
    int64_t n, k; /* k: the outputs per row (n for a sort) */
    int desc, top;
    const char *in;
    char *values;
    int64_t *indices;
    int failed;
} sort_ctx;

/* One row: pairs built, ordered (fully, or the first k), written out. */
#define ROW_BODY(T, KEYFN, SORTFN)                                                      \
    do {                                                                                \
        T *v = (T *)buf, *tmp = v + c->n;                                               \
        for (int64_t j = 0; j < c->n; j++) {                                            \
            v[j].k = KEYFN(c->dt, row + j * isz);                                       \
            v[j].i = j;                                                                 \
        }                                                                               \
        int64_t m = c->n;                                                               \
        if (c->top && c->k < c->n) {                                                    \
            SORTFN##_select(v, c->n, c->k, c->desc);                                    \
            m = c->k;                                                                   \
        }                                                                               \
        SORTFN(v, tmp, m, c->desc);                                                     \
        for (int64_t j = 0; j < c->k; j++) {                                            \
            memcpy(vout + j * isz, row + v[j].i * isz, isz);                            \
            iout[j] = v[j].i;                                                           \
        }                                                                               \
    } while (0)

static void sort_rows(int64_t begin, int64_t end, void *arg)
{
    sort_ctx *c = (sort_ctx *)arg;
    const int64_t isz = (int64_t)ampy_dtype_size(c->dt);
    const size_t pair = is_float_key(c->dt) ? sizeof(fpair) : sizeof(ipair);
    char *buf = malloc(2 * (size_t)c->n * pair + 1);
    if (!buf) {
        c->failed = 1;
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        const char *row = c->in + r * c->n * isz;
        char *vout = c->values + r * c->k * isz;
        int64_t *iout = c->indices + r * c->k;
        if (is_float_key(c->dt))
            ROW_BODY(fpair, f_key, f_sort);
        else
            ROW_BODY(ipair, i_key, i_sort);
    }
    free(buf);
}

static ampy_status run(sort_ctx *c, int64_t rows)
{
    if (!ampy_dtype_valid(c->dt))
        return ampy_error(AMPY_ERR_DTYPE, "sort: invalid dtype code %d", (int)c->dt);
    if (rows < 0 || c->n < 0 || c->k < 0 || c->k > c->n)
        return ampy_error(AMPY_ERR_VALUE, "sort: bad sizes (rows %lld, n %lld, k %lld)",
                          (long long)rows, (long long)c->n, (long long)c->k);
    if (rows == 0 || c->n == 0)
        return AMPY_OK;
    if (c->n > INT64_MAX / 64)
        return ampy_error(AMPY_ERR_NOMEM, "sort: row of %lld elements is too long",
                          (long long)c->n);
    c->failed = 0;
    const int64_t grain = c->n >= 4096 ? 1 : 4096 / c->n + 1;
    ampy_parallel_for(rows, grain, sort_rows, c);
    if (c->failed)
        return ampy_error(AMPY_ERR_NOMEM, "sort: out of memory for a row of %lld elements",
                          (long long)c->n);
    return AMPY_OK;
}

ampy_status ampy_sort(ampy_dtype dtype, int64_t rows, int64_t n, const void *in, int descending,
                      void *values, int64_t *indices)
{
    sort_ctx c = {dtype, n, n, descending != 0, 0, (const char *)in, (char *)values, indices, 0};
    return run(&c, rows);
}

ampy_status ampy_topk(ampy_dtype dtype, int64_t rows, int64_t n, int64_t k, int largest,
                      const void *in, void *values, int64_t *indices)
{
    sort_ctx c = {dtype, n, k, largest != 0, 1, (const char *)in, (char *)values, indices, 0};
    return run(&c, rows);
}
