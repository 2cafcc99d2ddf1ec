/* iter.c — strided N-d iteration (see iter.h).
 *
 * The space is first simplified: size-1 dimensions are dropped and adjacent
 * dimensions that are contiguous with each other for EVERY operand are merged,
 * so a contiguous tensor of any shape becomes one long run. The flattened
 * index range [0, total) is then split across threads; each chunk converts
 * its start into a multi-index and walks runs of the innermost dimension.
 */
#include <stdio.h>
#include <string.h>

#include "ampy/iter.h"
#include "ampy/parallel.h"

typedef struct {
    int ndim, nops;
    int64_t shape[AMPY_MAX_DIMS];
    int64_t strides[AMPY_ITER_MAX_OPS][AMPY_MAX_DIMS];
    char *ptrs[AMPY_ITER_MAX_OPS];
    ampy_inner_fn fn;
    void *ctx;
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

ampy_status ampy_iter_run(int ndim, const int64_t *shape, int nops, char *const *ptrs,
                          const int64_t *strides, ampy_inner_fn fn, void *ctx, int64_t grain)
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
    simplify(&p);
    ampy_parallel_for(total, grain, run_range, &p);
    return AMPY_OK;
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
