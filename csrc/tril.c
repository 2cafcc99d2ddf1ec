/* tril.c — triangles of batched matrices (tril.h). */
#include <string.h>

#include "ampy/dtype.h"
#include "ampy/iter.h"
#include "ampy/parallel.h"
#include "ampy/tril.h"

typedef struct {
    int ndim;
    const int64_t *shape, *is, *os;
    const char *in;
    char *out;
    size_t isz;
    int64_t diag;
    int upper;
} tril_ctx;

/* rows r of all matrices, flattened as (batch..., row) */
static void tril_rows(int64_t begin, int64_t end, void *arg)
{
    const tril_ctx *c = (const tril_ctx *)arg;
    const int nd = c->ndim;
    const int64_t rows = c->shape[nd - 2], cols = c->shape[nd - 1];
    const int64_t ic = c->is[nd - 1], oc = c->os[nd - 1];
    for (int64_t r = begin; r < end; r++) {
        int64_t i = r % rows, rest = r / rows, io = i * c->is[nd - 2], oo = i * c->os[nd - 2];
        for (int d = nd - 3; d >= 0; d--) {
            const int64_t k = rest % c->shape[d];
            rest /= c->shape[d];
            io += k * c->is[d];
            oo += k * c->os[d];
        }
        /* kept: j in [lo, hi) */
        int64_t lo = c->upper ? i + c->diag : 0, hi = c->upper ? cols : i + c->diag + 1;
        lo = lo < 0 ? 0 : lo > cols ? cols : lo;
        hi = hi < lo ? lo : hi > cols ? cols : hi;
        const char *src = c->in + io;
        char *dst = c->out + oo;
        const int64_t w = (int64_t)c->isz;
        if (ic == w && oc == w) { /* contiguous rows: one copy, two clears */
            memset(dst, 0, (size_t)(lo * w));
            if (src != dst)
                memcpy(dst + lo * w, src + lo * w, (size_t)((hi - lo) * w));
            memset(dst + hi * w, 0, (size_t)((cols - hi) * w));
            continue;
        }
        for (int64_t j = 0; j < cols; j++) {
            if (j >= lo && j < hi) {
                if (src != dst)
                    memcpy(dst + j * oc, src + j * ic, c->isz);
            } else {
                memset(dst + j * oc, 0, c->isz);
            }
        }
    }
}

ampy_status ampy_tril(int ndim, const int64_t *shape, const char *in, const int64_t *in_strides,
                      char *out, const int64_t *out_strides, size_t itemsize, int64_t diagonal,
                      int upper)
{
    if (ndim < 2 || ndim > AMPY_MAX_DIMS || itemsize == 0)
        return ampy_error(AMPY_ERR_VALUE, "tril: input tensor must have at least 2 dimensions");
    int64_t rows = 1;
    for (int d = 0; d < ndim - 1; d++)
        rows *= shape[d];
    if (rows == 0 || shape[ndim - 1] == 0)
        return AMPY_OK;
    const int64_t cols = shape[ndim - 1], m = shape[ndim - 2];
    /* beyond these bounds every row is kept or cleared whole (no overflow) */
    diagonal = diagonal > cols ? cols : diagonal < -m - 1 ? -m - 1 : diagonal;
    tril_ctx c = {ndim, shape, in_strides, out_strides, in, out, itemsize, diagonal, upper != 0};
    ampy_parallel_for(rows, cols >= 8192 ? 1 : 8192 / cols + 1, tril_rows, &c);
    return AMPY_OK;
}
