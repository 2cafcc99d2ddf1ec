/* iter.c — strided N-d iteration (see iter.h).
 *
 * The space is first simplified: size-1 dimensions are dropped and adjacent
 * dimensions that are contiguous with each other for EVERY operand are merged,
 * so a contiguous tensor of any shape becomes one long run. The flattened
 * index range [0, total) is then split across threads; each chunk converts
 * its start into a multi-index and walks runs of the innermost dimension.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"
#include "ampy/iter.h"
#include "ampy/parallel.h"

typedef struct {
    int ndim, nops;
    int64_t shape[AMPY_MAX_DIMS];
    int64_t strides[AMPY_ITER_MAX_OPS][AMPY_MAX_DIMS];
    char *ptrs[AMPY_ITER_MAX_OPS];
    ampy_inner_fn fn;
    void *ctx;
    /* tiled traversal (ampy_iter_run_ew): dims tj and ndim-1 are walked in
     * tiles of TJ x TI elements; the others ("outer") in row-major order */
    int tj;
    int64_t ti_len, tj_len, nbi, nbj;
    int elsize[AMPY_ITER_MAX_OPS];
    unsigned gather; /* bit op: operand op is copied through a tile buffer */
} plan_t;

/* Drop size-1 dims, then merge dim d into d+1 when, for every operand,
 * stride[d] == stride[d+1] * shape[d+1]. */
static void simplify(plan_t *p)
{
    int nd = 0;
    for (int d = 0; d < p->ndim; d++) {
        if (p->shape[d] == 1)
            continue;
        if (nd > 0) {
            int mergeable = 1;
            for (int op = 0; op < p->nops; op++)
                if (p->strides[op][nd - 1] != p->strides[op][d] * p->shape[d])
                    mergeable = 0;
            if (mergeable) {
                p->shape[nd - 1] *= p->shape[d];
                for (int op = 0; op < p->nops; op++)
                    p->strides[op][nd - 1] = p->strides[op][d];
                continue;
            }
        }
        p->shape[nd] = p->shape[d];
        for (int op = 0; op < p->nops; op++)
            p->strides[op][nd] = p->strides[op][d];
        nd++;
    }
    if (nd == 0) { /* a single element */
        p->shape[0] = 1;
        for (int op = 0; op < p->nops; op++)
            p->strides[op][0] = 0;
        nd = 1;
    }
    p->ndim = nd;
}

static void run_range(int64_t begin, int64_t end, void *arg)
{
    const plan_t *p = (const plan_t *)arg;
    const int nd = p->ndim, inner = nd - 1;
    int64_t idx[AMPY_MAX_DIMS];
    char *ptrs[AMPY_ITER_MAX_OPS];
    int64_t inner_strides[AMPY_ITER_MAX_OPS];

    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % p->shape[d];
        rem /= p->shape[d];
    }
    for (int op = 0; op < p->nops; op++) {
        char *q = p->ptrs[op];
        for (int d = 0; d < nd; d++)
            q += idx[d] * p->strides[op][d];
        ptrs[op] = q;
        inner_strides[op] = p->strides[op][inner];
    }
    int64_t pos = begin;
    while (pos < end) {
        int64_t n = p->shape[inner] - idx[inner];
        if (n > end - pos)
            n = end - pos;
        p->fn(ptrs, inner_strides, n, p->ctx);
        pos += n;
        if (pos >= end)
            break;
        /* advance to the start of the next run */
        for (int op = 0; op < p->nops; op++)
            ptrs[op] += (p->shape[inner] - idx[inner]) * p->strides[op][inner];
        idx[inner] = p->shape[inner];
        for (int d = inner; d > 0 && idx[d] == p->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int op = 0; op < p->nops; op++)
                ptrs[op] += p->strides[op][d - 1] - p->shape[d] * p->strides[op][d];
        }
    }
}

/* ---- element-wise traversal: dim order and 2-d tiles ------------------------
 * For element-wise work (every output element written once, from inputs that
 * either do not overlap the output or alias it element for element) the
 * traversal order does not change any result, so it may follow the memory:
 *  - dims are ordered so the output's (then the inputs') smallest stride is
 *    innermost, as torch's TensorIterator does (x.T.add_(1) becomes one run);
 *  - when an operand still walks the inner dim with a stride of a cache line
 *    or more (x.T + 1 into a contiguous result) while another dim is
 *    contiguous for it, the two dims are walked in tiles: TJ consecutive runs
 *    of TI elements each reuse the same TI cache lines of that operand. */

/* 1: dim a should sit inside (after) dim b; 0: keep the order. Operands are
 * consulted output first, zero strides (broadcast) skipped. */
static int inner_of(const plan_t *p, int a, int b)
{
    for (int k = 0; k < p->nops; k++) {
        const int op = (k + p->nops - 1) % p->nops; /* output first */
        int64_t sa = p->strides[op][a], sb = p->strides[op][b];
        sa = sa < 0 ? -sa : sa;
        sb = sb < 0 ? -sb : sb;
        if (sa == 0 || sb == 0 || sa == sb)
            continue;
        return sa < sb;
    }
    return 0;
}

static void reorder(plan_t *p)
{
    /* insertion sort from outer to inner: dim d moves outward past every
     * dim it should sit outside of */
    for (int d = 1; d < p->ndim; d++) {
        for (int e = d; e > 0 && inner_of(p, e - 1, e); e--) {
            int64_t t = p->shape[e];
            p->shape[e] = p->shape[e - 1];
            p->shape[e - 1] = t;
            for (int op = 0; op < p->nops; op++) {
                t = p->strides[op][e];
                p->strides[op][e] = p->strides[op][e - 1];
                p->strides[op][e - 1] = t;
            }
        }
    }
}

static int64_t iabs64(int64_t v) { return v < 0 ? -v : v; }

/* lowest and one past the highest byte address operand op may touch (8
 * bytes per element: the widest dtype, so conservative) */
static void span_of(const plan_t *p, int op, uintptr_t *lo, uintptr_t *hi)
{
    intptr_t a = (intptr_t)p->ptrs[op], b = a;
    for (int d = 0; d < p->ndim; d++) {
        const int64_t e = (p->shape[d] - 1) * p->strides[op][d];
        if (e < 0)
            a += e;
        else
            b += e;
    }
    *lo = (uintptr_t)a;
    *hi = (uintptr_t)b + 8;
}

/* May the traversal order change? The output (last operand) must not write
 * one element twice (no zero stride) and every input overlapping it must
 * address it element for element (same pointer, same strides). */
static int order_free(const plan_t *p)
{
    const int out = p->nops - 1;
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] > 1 && p->strides[out][d] == 0)
            return 0;
    uintptr_t olo, ohi;
    span_of(p, out, &olo, &ohi);
    for (int op = 0; op < out; op++) {
        uintptr_t lo, hi;
        span_of(p, op, &lo, &hi);
        if (!(lo < ohi && olo < hi))
            continue;
        if (p->ptrs[op] != p->ptrs[out])
            return 0;
        for (int d = 0; d < p->ndim; d++)
            if (p->shape[d] > 1 && p->strides[op][d] != p->strides[out][d])
                return 0;
    }
    return 1;
}

#define TILE_LINE 64 /* bytes */
#define TILE_I 128   /* elements of the inner dim per run */
#define TILE_STACK (64 * 1024) /* tile buffers up to this size live on the stack */

/* After simplify: pick the dim to tile with the inner one, or -1. */
static int pick_tile(const plan_t *p, int64_t *tj_len)
{
    const int inner = p->ndim - 1;
    if (p->ndim < 2 || p->shape[inner] < 16)
        return -1;
    for (int op = 0; op < p->nops; op++) {
        if (iabs64(p->strides[op][inner]) < TILE_LINE)
            continue;
        int best = -1;
        int64_t bs = TILE_LINE;
        for (int d = 0; d < inner; d++) {
            const int64_t s = iabs64(p->strides[op][d]);
            if (s != 0 && s < bs) {
                bs = s;
                best = d;
            }
        }
        if (best >= 0 && p->shape[best] >= 4) {
            int64_t t = 2 * TILE_LINE / bs; /* two lines of that operand per run */
            *tj_len = t < 8 ? 8 : t > 64 ? 64 : t;
            return best;
        }
    }
    return -1;
}

/* The operands read (or, the output, written) through a tile buffer: those
 * walking the inner dim a line or more apart and dim tj closer. */
static unsigned pick_gather(const plan_t *p)
{
    const int inner = p->ndim - 1;
    unsigned m = 0;
    for (int op = 0; op < p->nops; op++) {
        const int64_t si = iabs64(p->strides[op][inner]), sj = iabs64(p->strides[op][p->tj]);
        const int e = p->elsize[op];
        if ((e == 1 || e == 2 || e == 4 || e == 8) && si >= TILE_LINE && sj != 0 && sj < si)
            m |= 1u << op;
    }
    return m;
}

/* Copies an ni x nj tile between an operand (element (i, j) at
 * p + i * si + j * sj) and a buffer whose row j (ni contiguous elements)
 * starts at b + j * pitch. The operand is walked along j, its contiguous dim. */
#define TILE_COPY(T)                                                                       \
    for (int64_t i = 0; i < ni; i++)                                                       \
        for (int64_t j = i < i8 ? j8 : 0; j < nj; j++) {                                   \
            T *o = (T *)(b + j * pitch + i * (int64_t)sizeof(T));                          \
            T *q = (T *)(p + i * si + j * sj);                                             \
            if (to_buf)                                                                    \
                *o = *q;                                                                   \
            else                                                                           \
                *q = *o;                                                                   \
        }
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "simd.h"
/* dst row m (m < 8) := column m of the 8 x 8 block of 4-byte elements whose
 * row k starts at src + k * ss; bits are moved, never converted. */
AMPY_TARGET_AVX2 static void tr8x8_32(const char *src, int64_t ss, char *dst, int64_t ds)
{
    __m256 r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm256_loadu_ps((const float *)(src + k * ss));
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        r[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xEE);
        r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xEE);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps((float *)(dst + k * ds), _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
        _mm256_storeu_ps((float *)(dst + (k + 4) * ds),
                         _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
    }
}
/* the same for 2-byte elements */
AMPY_TARGET_AVX2 static void tr8x8_16(const char *src, int64_t ss, char *dst, int64_t ds)
{
    __m128i r[8], t[8];
    for (int k = 0; k < 8; k++)
        r[k] = _mm_loadu_si128((const __m128i *)(src + k * ss));
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm_unpacklo_epi16(r[k], r[k + 1]);
        t[k + 1] = _mm_unpackhi_epi16(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        r[k] = _mm_unpacklo_epi32(t[k], t[k + 2]);
        r[k + 1] = _mm_unpackhi_epi32(t[k], t[k + 2]);
        r[k + 2] = _mm_unpacklo_epi32(t[k + 1], t[k + 3]);
        r[k + 3] = _mm_unpackhi_epi32(t[k + 1], t[k + 3]);
    }
    for (int k = 0; k < 4; k++) {
        _mm_storeu_si128((__m128i *)(dst + (2 * k) * ds), _mm_unpacklo_epi64(r[k], r[k + 4]));
        _mm_storeu_si128((__m128i *)(dst + (2 * k + 1) * ds), _mm_unpackhi_epi64(r[k], r[k + 4]));
    }
}
/* the same for 8-byte elements, a 4 x 4 block */
AMPY_TARGET_AVX2 static void tr4x4_64(const char *src, int64_t ss, char *dst, int64_t ds)
{
    const __m256d r0 = _mm256_loadu_pd((const double *)src);
    const __m256d r1 = _mm256_loadu_pd((const double *)(src + ss));
    const __m256d r2 = _mm256_loadu_pd((const double *)(src + 2 * ss));
    const __m256d r3 = _mm256_loadu_pd((const double *)(src + 3 * ss));
    const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd((double *)dst, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd((double *)(dst + ds), _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd((double *)(dst + 2 * ds), _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd((double *)(dst + 3 * ds), _mm256_permute2f128_pd(t1, t3, 0x31));
}
#define HAVE_TR 1
#endif

static void tile_copy(int to_buf, char *p, int64_t si, int64_t sj, char *b, int64_t pitch,
                      int64_t ni, int64_t nj, int size)
{
    int64_t i8 = 0, j8 = 0;
#ifdef HAVE_TR
    /* 8 x 8 blocks (4 x 4 of 8-byte elements) moved through registers when
     * the operand is contiguous along j (the rest, below, element by element) */
    if ((size == 8 || size == 4 || size == 2) && sj == size &&
        ampy_cpu_level_get() >= AMPY_CPU_AVX2) {
        const int64_t B = size == 8 ? 4 : 8; /* block edge */
        i8 = ni & ~(B - 1);
        j8 = nj & ~(B - 1);
        for (int64_t i = 0; i < i8; i += B)
            for (int64_t j = 0; j < j8; j += B) {
                char *q = p + i * si + j * sj, *c = b + j * pitch + i * size;
                const char *from = to_buf ? q : c;
                char *to = to_buf ? c : q;
                const int64_t fs = to_buf ? si : pitch, ts = to_buf ? pitch : si;
                if (size == 8)
                    tr4x4_64(from, fs, to, ts);
                else if (size == 4)
                    tr8x8_32(from, fs, to, ts);
                else
                    tr8x8_16(from, fs, to, ts);
            }
    }
#endif
    switch (size) {
    case 1: TILE_COPY(uint8_t) break;
    case 2: TILE_COPY(uint16_t) break;
    case 4: TILE_COPY(uint32_t) break;
    default: TILE_COPY(uint64_t) break;
    }
}
#undef TILE_COPY

static void run_tiles(int64_t begin, int64_t end, void *arg)
{
    const plan_t *p = (const plan_t *)arg;
    const int inner = p->ndim - 1, tj = p->tj, out = p->nops - 1;
    int64_t inner_strides[AMPY_ITER_MAX_OPS], row_step[AMPY_ITER_MAX_OPS];
    char *ptrs[AMPY_ITER_MAX_OPS], *buf[AMPY_ITER_MAX_OPS];
    /* buffer rows of ti_len elements plus a line, so that the rows do not
     * all fall in the same cache sets; small enough for the stack usually */
    int64_t pitch[AMPY_ITER_MAX_OPS], total = TILE_LINE;
    for (int op = 0; op < p->nops; op++) {
        pitch[op] = p->ti_len * p->elsize[op] + TILE_LINE;
        if ((p->gather >> op) & 1)
            total += p->tj_len * pitch[op];
    }
    _Alignas(64) char stack_mem[TILE_STACK];
    char *mem = stack_mem, *heap = NULL;
    unsigned gather = p->gather;
    if (gather && total > TILE_STACK) {
        mem = heap = (char *)malloc((size_t)total);
        if (!heap)
            gather = 0; /* walk the operands in place */
        else
            mem = (char *)(((uintptr_t)heap + TILE_LINE - 1) & ~(uintptr_t)(TILE_LINE - 1));
    }
    for (int op = 0; op < p->nops; op++) {
        const int g = (gather >> op) & 1;
        inner_strides[op] = g ? p->elsize[op] : p->strides[op][inner];
        row_step[op] = g ? pitch[op] : p->strides[op][tj];
        buf[op] = g ? mem : NULL;
        if (g)
            mem += p->tj_len * pitch[op];
    }
    for (int64_t t = begin; t < end; t++) {
        int64_t r = t;
        const int64_t jb = r % p->nbj;
        r /= p->nbj;
        const int64_t ib = r % p->nbi;
        r /= p->nbi;
        const int64_t i0 = ib * p->ti_len, j0 = jb * p->tj_len;
        const int64_t ni = p->shape[inner] - i0 < p->ti_len ? p->shape[inner] - i0 : p->ti_len;
        const int64_t nj = p->shape[tj] - j0 < p->tj_len ? p->shape[tj] - j0 : p->tj_len;
        for (int op = 0; op < p->nops; op++)
            ptrs[op] = p->ptrs[op] + i0 * p->strides[op][inner] + j0 * p->strides[op][tj];
        for (int d = inner - 1; d >= 0; d--) { /* the outer dims, row-major */
            if (d == tj)
                continue;
            const int64_t idx = r % p->shape[d];
            r /= p->shape[d];
            for (int op = 0; op < p->nops; op++)
                ptrs[op] += idx * p->strides[op][d];
        }
        char *base[AMPY_ITER_MAX_OPS];
        for (int op = 0; op < p->nops; op++) {
            base[op] = ptrs[op];
            if ((gather >> op) & 1) {
                if (op != out)
                    tile_copy(1, ptrs[op], p->strides[op][inner], p->strides[op][tj], buf[op],
                              pitch[op], ni, nj, p->elsize[op]);
                base[op] = buf[op];
            }
        }
        for (int64_t j = 0; j < nj; j++) {
            char *row[AMPY_ITER_MAX_OPS];
            for (int op = 0; op < p->nops; op++)
                row[op] = base[op] + j * row_step[op];
            p->fn(row, inner_strides, ni, p->ctx);
        }
        if ((gather >> out) & 1)
            tile_copy(0, ptrs[out], p->strides[out][inner], p->strides[out][tj], buf[out],
                      pitch[out], ni, nj, p->elsize[out]);
    }
    free(heap);
}

static ampy_status iter_run(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                            const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain,
                            const int *elsize)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "iteration over %d dims (at most %d supported)", ndim,
                          AMPY_MAX_DIMS);
    if (nops < 1 || nops > AMPY_ITER_MAX_OPS)
        return ampy_error(AMPY_ERR_VALUE, "iteration over %d operands (1..%d supported)", nops,
                          AMPY_ITER_MAX_OPS);
    plan_t p;
    p.ndim = ndim;
    p.nops = nops;
    p.fn = fn;
    p.ctx = ctx;
    int64_t total = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return AMPY_OK;
        p.shape[d] = shape[d];
        total *= shape[d];
    }
    for (int op = 0; op < nops; op++) {
        p.ptrs[op] = ptrs[op];
        for (int d = 0; d < ndim; d++)
            p.strides[op][d] = strides[op * ndim + d];
    }
    int ew = elsize != NULL && ndim >= 2 && order_free(&p);
    if (ew)
        reorder(&p);
    simplify(&p);
    if (ew && (p.tj = pick_tile(&p, &p.tj_len)) >= 0) {
        const int inner = p.ndim - 1;
        p.ti_len = TILE_I;
        for (int op = 0; op < nops; op++)
            p.elsize[op] = elsize[op];
        p.gather = pick_gather(&p);
        p.nbi = (p.shape[inner] + p.ti_len - 1) / p.ti_len;
        p.nbj = (p.shape[p.tj] + p.tj_len - 1) / p.tj_len;
        int64_t ntiles = p.nbi * p.nbj;
        for (int d = 0; d < inner; d++)
            if (d != p.tj)
                ntiles *= p.shape[d];
        const int64_t per = p.ti_len * p.tj_len;
        ampy_parallel_for(ntiles, grain <= 0 ? 0 : (grain + per - 1) / per, run_tiles, &p);
        return AMPY_OK;
    }
    ampy_parallel_for(total, grain, run_range, &p);
    return AMPY_OK;
}

ampy_status ampy_iter_run(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                          const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain)
{
    return iter_run(ndim, shape, nops, ptrs, strides, fn, ctx, grain, NULL);
}

ampy_status ampy_iter_run_ew(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                             const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain,
                             const int *elsize)
{
    return iter_run(ndim, shape, nops, ptrs, strides, fn, ctx, grain, elsize);
}

ampy_status ampy_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b,
                                  int *nout, int64_t *out_shape, const char *what)
{
    int n = na > nb ? na : nb;
    if (n > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_SHAPE, "%s: result has %d dims (at most %d supported)", what, n,
                          AMPY_MAX_DIMS);
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) {
            char sa[160], sb[160];
            int pa = 0, pb = 0;
            pa += snprintf(sa, sizeof sa, "(");
            for (int k = 0; k < na && pa < 140; k++)
                pa += snprintf(sa + pa, sizeof sa - pa, k ? ", %lld" : "%lld", (long long)a[k]);
            snprintf(sa + pa, sizeof sa - pa, na == 1 ? ",)" : ")");
            pb += snprintf(sb, sizeof sb, "(");
            for (int k = 0; k < nb && pb < 140; k++)
                pb += snprintf(sb + pb, sizeof sb - pb, k ? ", %lld" : "%lld", (long long)b[k]);
            snprintf(sb + pb, sizeof sb - pb, nb == 1 ? ",)" : ")");
            return ampy_error(AMPY_ERR_SHAPE, "%s: shapes %s and %s cannot broadcast", what, sa, sb);
        }
        out_shape[i] = da == 1 ? db : da;
    }
    *nout = n;
    return AMPY_OK;
}

/* "[a, b, c]" of shape into buf (truncated with "..." past the buffer) */
static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t p = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && p + 24 < cap; d++)
        p += (size_t)snprintf(buf + p, cap - p, d ? ", %lld" : "%lld", (long long)shape[d]);
    snprintf(buf + p, cap - p, p + 24 < cap || ndim == 0 ? "]" : "...]");
}

/* prod(shape) in uint64 with c10's sticky overflow flag; -1: a negative dim */
static int shape_prod_u64(int ndim, const int64_t *shape, uint64_t *out)
{
    uint64_t n = 1;
    int over = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return -1;
        over |= __builtin_mul_overflow(n, (uint64_t)shape[d], &n);
    }
    *out = n;
    return over;
}

ampy_status ampy_shape_numel(int ndim, const int64_t *shape, int64_t *numel)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "shape: %d dims (at most %d supported)", ndim,
                          AMPY_MAX_DIMS);
    uint64_t n;
    int r = shape_prod_u64(ndim, shape, &n);
    if (r < 0)
        return ampy_error(AMPY_ERR_VALUE, "shape: negative dimension in a size");
    if (r || n > (uint64_t)INT64_MAX)
        return ampy_error(AMPY_ERR_RUNTIME, "numel: integer multiplication overflow");
    *numel = (int64_t)n;
    return AMPY_OK;
}

ampy_status ampy_shape_nbytes(int ndim, const int64_t *shape, int64_t itemsize, int64_t *nbytes)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS || itemsize <= 0)
        return ampy_error(AMPY_ERR_VALUE, "shape: %d dims or item size %lld", ndim,
                          (long long)itemsize);
    uint64_t n;
    int r = shape_prod_u64(ndim, shape, &n);
    if (r < 0)
        return ampy_error(AMPY_ERR_VALUE, "shape: negative dimension in a size");
    r |= __builtin_mul_overflow(n, (uint64_t)itemsize, &n);
    if (r || n > (uint64_t)INT64_MAX) {
        char s[256];
        shape_str(s, sizeof s, ndim, shape);
        return ampy_error(AMPY_ERR_RUNTIME, "Storage size calculation overflowed with sizes=%s", s);
    }
    /* the contiguous strides, prod(max(size, 1)) of the later dims, must fit
     * too (an empty tensor of [0, 2**40, 2**40] has no storage overflow) */
    int64_t st = 1;
    for (int d = ndim - 1; d > 0; d--)
        if (__builtin_mul_overflow(st, shape[d] > 1 ? shape[d] : 1, &st))
            return ampy_error(AMPY_ERR_RUNTIME, "Stride calculation overflowed");
    *nbytes = (int64_t)n;
    return AMPY_OK;
}
