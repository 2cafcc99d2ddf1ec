/* sort.c — stable row sorts and top-k selection (sort.h).
 *
 * Each row becomes an array of (key, position) pairs, ordered by a total
 * order: the key (NaN above every number, reversed for descending) and then
 * the position, which makes the sort stable and the selection of top-k give
 * the same first k as that sort. Dtypes whose keys fit 32 bits pack each
 * pair into one uint64 (radix sort, integer quickselect); float64 and int64
 * keep (key, position) structs (merge sort). Rows run in parallel.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/elem.h"
#include "ampy/parallel.h"
#include "ampy/sort.h"
#include "ampy/sort_math.h"

typedef struct {
    double k;
    int64_t i;
} fpair;

typedef struct {
    int64_t k;
    int64_t i;
} ipair;

/* "a comes before b" in ascending order with NaN last; ties by position
 * (ampy/sort_math.h, the order the CUDA sort uses too). */
static inline int f_before(const fpair *a, const fpair *b, int desc)
{
    return ampy_sort_before_f(a->k, a->i, b->k, b->i, desc);
}

static inline int i_before(const ipair *a, const ipair *b, int desc)
{
    return ampy_sort_before_i(a->k, a->i, b->k, b->i, desc);
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

/* ---- dtypes with 32-bit keys: (key << 32 | position) as one uint64 ---------
 * An order-preserving 32-bit key (NaN above +inf, -0 equal to +0; inverted
 * for descending) packed above the position makes every element a distinct
 * uint64 whose integer order is the stable order: sorted by a 4-pass LSD
 * radix sort on the key bits, selected by quickselect on plain integers. */
static int packable(ampy_dtype dt, int64_t n)
{
    return dt != AMPY_FLOAT64 && dt != AMPY_INT64 && n <= (int64_t)UINT32_MAX;
}

static inline uint32_t f32_order(uint32_t u)
{
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu))
        return 0xFFFFFFFFu;
    if (u == 0x80000000u)
        u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static inline uint32_t key32(ampy_dtype dt, const char *p)
{
    uint32_t u;
    switch (dt) {
    case AMPY_FLOAT32:
        memcpy(&u, p, 4);
        return f32_order(u);
    case AMPY_FLOAT16:
    case AMPY_BFLOAT16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return f32_order(dt == AMPY_FLOAT16 ? ampy_f16_to_f32_bits(h) : ampy_bf16_to_f32_bits(h));
    }
    case AMPY_INT32:
        memcpy(&u, p, 4);
        return u ^ 0x80000000u;
    default:
        return (uint8_t)*p;
    }
}

static void u64_insertion(uint64_t *v, int64_t n)
{
    for (int64_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        int64_t j = i;
        while (j > 0 && v[j - 1] > x) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
}

/* v[0..n) sorted (tmp[n] scratch) on bits from `lo` up: lo = 32 when the low
 * 32 bits (the positions) are already in increasing order, 0 otherwise */
static void u64_radix(uint64_t *v, uint64_t *tmp, int64_t n, int lo)
{
    if (n < 64) {
        u64_insertion(v, n);
        return;
    }
    uint64_t *a = v, *b = tmp;
    for (int shift = lo; shift < 64; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t i = 0; i < n; i++)
            count[((a[i] >> shift) & 0xFF) + 1]++;
        int skip = 0;
        for (int d = 1; d <= 256; d++)
            skip |= count[d] == n;
        if (skip)
            continue;
        for (int d = 1; d <= 256; d++)
            count[d] += count[d - 1];
        for (int64_t i = 0; i < n; i++)
            b[count[(a[i] >> shift) & 0xFF]++] = a[i];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    if (a != v)
        memcpy(v, a, (size_t)n * sizeof(uint64_t));
}

/* the k smallest of v[0..n) moved to v[0..k) (distinct values) */
static void u64_select(uint64_t *v, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (hi > lo && k > lo && k <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        uint64_t a = v[lo], b = v[mid], c = v[hi];
        const uint64_t p = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < p)
                i++;
            while (v[j] > p)
                j--;
            if (i <= j) {
                const uint64_t t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            break;
    }
}

/* the capacity of topk's candidate buffer (small k of a long row) */
static int64_t topk_cap(const sort_ctx *c)
{
    return c->top && c->k * 4 + 64 < c->n ? c->k * 4 + 64 : c->n;
}

#define PACKED(DT) ((uint64_t)(key32(DT, row + j * isz) ^ flip) << 32 | (uint64_t)j)

/* topk of a long row in one pass: candidates below the running threshold
 * (the k-th smallest of a full buffer) are kept; a full buffer is cut back
 * to its k smallest. Returns the number kept (>= k). */
#define FILTER(DT)                                                                         \
    for (int64_t j = 0; j < c->n; j++) {                                                   \
        const uint64_t e = PACKED(DT);                                                     \
        if (e > thr)                                                                       \
            continue;                                                                      \
        v[m++] = e;                                                                        \
        if (m == cap) {                                                                    \
            u64_select(v, m, c->k);                                                        \
            m = c->k;                                                                      \
            thr = 0;                                                                       \
            for (int64_t q = 0; q < m; q++)                                                \
                thr = v[q] > thr ? v[q] : thr;                                             \
        }                                                                                  \
    }

#define PACK(DT)                                                                           \
    if (cap < c->n) {                                                                      \
        FILTER(DT)                                                                         \
    } else {                                                                               \
        for (int64_t j = 0; j < c->n; j++)                                                 \
            v[m++] = PACKED(DT);                                                           \
    }

static void packed_row(const sort_ctx *c, const char *row, char *vout, int64_t *iout,
                       uint64_t *v, uint64_t *tmp)
{
    const int64_t isz = (int64_t)ampy_dtype_size(c->dt), cap = topk_cap(c);
    const uint32_t flip = c->desc ? 0xFFFFFFFFu : 0u;
    uint64_t thr = UINT64_MAX;
    int64_t m = 0;
    switch (c->dt) { /* one loop per dtype: key32's switch folds away */
    case AMPY_FLOAT32:
        PACK(AMPY_FLOAT32);
        break;
    case AMPY_FLOAT16:
        PACK(AMPY_FLOAT16);
        break;
    case AMPY_BFLOAT16:
        PACK(AMPY_BFLOAT16);
        break;
    case AMPY_INT32:
        PACK(AMPY_INT32);
        break;
    default:
        PACK(AMPY_UINT8);
        break;
    }
    int in_order = 1; /* the positions still increase (no selection reordered them) */
    if (c->top && (c->k < m || cap < c->n)) {
        u64_select(v, m, c->k);
        m = c->k;
        in_order = 0;
    }
    u64_radix(v, tmp, m, in_order ? 32 : 0);
    for (int64_t j = 0; j < c->k; j++) {
        const int64_t i = (int64_t)(v[j] & 0xFFFFFFFFu);
        memcpy(vout + j * isz, row + i * isz, (size_t)isz);
        iout[j] = i;
    }
}
#undef PACK
#undef FILTER
#undef PACKED

static void sort_rows(int64_t begin, int64_t end, void *arg)
{
    sort_ctx *c = (sort_ctx *)arg;
    const int64_t isz = (int64_t)ampy_dtype_size(c->dt);
    const int packed = packable(c->dt, c->n);
    const size_t pair = packed ? sizeof(uint64_t) : is_float_key(c->dt) ? sizeof(fpair)
                                                                       : sizeof(ipair);
    const int64_t len = packed ? topk_cap(c) : c->n;
    char *buf = malloc(2 * (size_t)len * pair + 1);
    if (!buf) {
        c->failed = 1;
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        const char *row = c->in + r * c->n * isz;
        char *vout = c->values + r * c->k * isz;
        int64_t *iout = c->indices + r * c->k;
        if (packed)
            packed_row(c, row, vout, iout, (uint64_t *)buf, (uint64_t *)buf + len);
        else if (is_float_key(c->dt))
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
