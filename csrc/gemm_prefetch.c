/* gemm_prefetch.c — software prefetch cursors for the GEMM driver: a few
 * strided regions (runs of bytes a stride apart) walked a fixed number of
 * cache lines per step, the steps spread over the micro-kernel calls of the
 * work that runs before the data is needed (the next batch item's operands,
 * the source of the next B packing item). Prefetches are hints to the cache
 * and never change a result. */
#include <stdint.h>

#include "gemm_impl.h"

void ampy_gemm_prefetch_step(gemm_prefetch *pf)
{
    for (int64_t n = pf->per_step; n > 0 && pf->cur < pf->nr; n--) {
        const gemm_pf_region *g = &pf->r[pf->cur];
        const char *start = g->p + pf->run * g->stride;
        const char *line = (const char *)((uintptr_t)start & ~(uintptr_t)63) + pf->off;
        if (pf->write[pf->cur])
            __builtin_prefetch(line, 1, 2);
        else
            __builtin_prefetch(line, 0, 2);
        pf->off += 64;
        if (line + 64 >= start + g->run_bytes) { /* that line ended the run */
            pf->off = 0;
            if (++pf->run >= g->nruns) {
                pf->run = 0;
                pf->cur++;
            }
        }
    }
    if (pf->then)
        ampy_gemm_prefetch_step(pf->then);
}

int64_t ampy_gemm_pf_add(gemm_prefetch *pf, const char *p, int64_t rows, int64_t cols,
                         int64_t rs, int64_t cs, int64_t es, int write, int contig)
{
    gemm_pf_region g;
    if (pf->nr >= GEMM_PF_REGIONS)
        return -1;
    if (cs == 1 && rs != 0) {
        g.nruns = rows, g.run_bytes = cols * es, g.stride = rs * es;
        g.p = p;
    } else if (rs == 1 && cs != 0) {
        g.nruns = cols, g.run_bytes = rows * es, g.stride = cs * es;
        g.p = p;
    } else {
        return -1;
    }
    if (g.stride == g.run_bytes) { /* contiguous */
        if (!contig)
            return -1;
        g.run_bytes *= g.nruns, g.stride = g.run_bytes, g.nruns = 1;
    }
    pf->write[pf->nr] = write;
    pf->r[pf->nr++] = g;
    return g.nruns * (g.run_bytes + 63);
}
