/* gemm_batch.c — the batch loop of the GEMM driver and its entry points
 * (ampy_gemm_run_nd / ampy_gemm_run, called by gemm.c): batch items over
 * up to AMPY_GEMM_MAX_BATCH_DIMS dims, each item run by gemm_driver.c's
 * blocked loop nest (ampy_gemm_run_one).
 *
 * Batch items are described by up to AMPY_GEMM_MAX_BATCH_DIMS dims, each with
 * a stride per operand, so permuted views (the heads of an attention
 * projection) run in one call. Small items (the attention GEMMs: a few MFLOP
 * each) are split over the threads one item at a time; large ones use the
 * threads inside each item. */

#include <string.h>

#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "gemm_driver.h"

#define SERIAL_FLOPS ((int64_t)1 << 21)    /* below: one thread            */
#define MAX_DIM ((int64_t)1 << 40)

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* While a small item runs on one thread, the next item's strided operands
 * (rows of 128-256 bytes a few KiB apart: the heads of a permuted qkv
 * projection, which the hardware prefetchers do not follow) are pulled into
 * L2 a few cache lines before each micro-kernel call (before each 8-row pass
 * of the vdpbf16ps macro-kernel: gemm_impl.pf_steps); packing them from L3
 * was up to a quarter of such a GEMM's time. Contiguous operands are left to
 * the hardware on the fp32 FMA path; the vdpbf16ps path prefetches them too
 * (its packing copies read a 128 x 128 item in a few microseconds, before
 * the hardware prefetchers ramp up: a third of the item's time went to
 * packing, measured on Zen 4, and the attention products ran 15-20 % faster
 * with every operand prefetched). */
#define PF_MAX_BYTES ((int64_t)768 << 10) /* next item must fit in L2 */

typedef struct batch_ctx {
    gemm_ctx base;
    const char *a, *b;
    int nd;
    int64_t shape[AMPY_GEMM_MAX_BATCH_DIMS];
    int64_t a_bs[AMPY_GEMM_MAX_BATCH_DIMS], b_bs[AMPY_GEMM_MAX_BATCH_DIMS],
        c_bs[AMPY_GEMM_MAX_BATCH_DIMS];
    int nthreads;
    int64_t batch, chunk, next; /* items claimed `chunk` at a time (atomic next) */
    ampy_status status;
} batch_ctx;

/* Element offsets of item bi in A, B and C. */
static void item_offsets(const batch_ctx *bc, int64_t bi, int64_t off[3])
{
    off[0] = off[1] = off[2] = 0;
    for (int d = bc->nd - 1; d >= 0; d--) {
        int64_t i = bi % bc->shape[d];
        bi /= bc->shape[d];
        off[0] += i * bc->a_bs[d];
        off[1] += i * bc->b_bs[d];
        off[2] += i * bc->c_bs[d];
    }
}

/* The implementations whose batch items are prefetched (batch_range). */
static int prefetch_items(const gemm_impl *im)
{
    return im->pelem == 4 || ampy_gemm_is_bf16dp(im);
}

/* Sets up pf for the item at offsets nx, run after the item at cur; 0 when
 * prefetching does not apply. Contiguous operands are prefetched too for
 * vdpbf16ps (pelem 2): its item reads them in its packing copies, right at
 * the start, where the hardware prefetchers have not caught up yet. */
static int plan_prefetch(const batch_ctx *bc, const int64_t cur[3], const int64_t nx[3],
                         gemm_prefetch *pf)
{
    const gemm_ctx *x = &bc->base;
    const gemm_impl *im = x->im;
    int64_t asz = (int64_t)ampy_dtype_size(x->a.dt), csz = (int64_t)ampy_dtype_size(x->cdt);
    memset(pf, 0, sizeof *pf);
    int64_t bytes = 0, t;
    int contig = im->pelem == 2;
    if (nx[0] != cur[0]) { /* a broadcast operand is in cache already */
        t = ampy_gemm_pf_add(pf, bc->a + nx[0] * asz, x->M, x->K, x->a.rs, x->a.cs, asz, 0, contig);
        if (t > 0)
            bytes += t;
    }
    if (nx[1] != cur[1]) {
        t = ampy_gemm_pf_add(pf, bc->b + nx[1] * asz, x->K, x->N, x->b.rs, x->b.cs, asz, 0, contig);
        if (t > 0)
            bytes += t;
    }
    if ((t = ampy_gemm_pf_add(pf, x->c + nx[2] * csz, x->M, x->N, x->crs, x->ccs, csz, 1, contig)) > 0)
        bytes += t;
    if (pf->nr == 0 || bytes > PF_MAX_BYTES)
        return 0;
    /* spread over the micro-kernel calls of one item (one K block) */
    int64_t calls = ((x->M + im->mr - 1) / im->mr) * ((x->N + im->nr - 1) / im->nr) *
                    (im->macro && im->pf_steps > 1 ? im->pf_steps : 1);
    pf->per_step = (bytes / 64 + calls - 1) / calls + 1;
    return 1;
}

static void batch_range(int64_t b0, int64_t b1, void *vctx)
{
    batch_ctx *bc = vctx;
    int64_t asz = (int64_t)ampy_dtype_size(bc->base.a.dt);
    int64_t csz = (int64_t)ampy_dtype_size(bc->base.cdt);
    /* Prefetch only when each item runs on this thread alone, in one K
     * block, with a float32 FMA or vdpbf16ps kernel: an AMX item is over
     * before the prefetches land, and they stalled it (bf16 attention GEMMs
     * 10-20 % slower with them, the FMA ones 3-8 % faster). */
    int use_pf = bc->nthreads == 1 && b1 - b0 > 1 && bc->base.K <= bc->base.im->kc &&
                 prefetch_items(bc->base.im);
    int64_t off[3] = {0, 0, 0}, nx[3] = {0, 0, 0};
    if (b0 < b1)
        item_offsets(bc, b0, off);
    for (int64_t bi = b0; bi < b1; bi++) {
        gemm_ctx x = bc->base;
        gemm_prefetch pf;
        x.a.p = bc->a + off[0] * asz;
        x.b.p = bc->b + off[1] * asz;
        x.c = bc->base.c + off[2] * csz;
        if (bi + 1 < b1)
            item_offsets(bc, bi + 1, nx);
        x.pf = use_pf && bi + 1 < b1 && plan_prefetch(bc, off, nx, &pf) ? &pf : NULL;
        ampy_status s = ampy_gemm_run_one(&x, bc->nthreads);
        if (s != AMPY_OK)
            bc->status = s;
        memcpy(off, nx, sizeof off);
    }
}

/* One thread of a batch split: consecutive runs of `chunk` items are claimed
 * from a shared counter (as the driver's panels and tasks are), so a
 * descheduled thread's share is taken by the others. */
static void batch_worker(int64_t t0, int64_t t1, void *vctx)
{
    (void)t0, (void)t1;
    batch_ctx *bc = vctx;
    for (int64_t b0; (b0 = __atomic_fetch_add(&bc->next, bc->chunk, __ATOMIC_RELAXED)) <
                     bc->batch;)
        batch_range(b0, b0 + bc->chunk < bc->batch ? b0 + bc->chunk : bc->batch, bc);
}

/* The driver over nd batch dims (sizes >= 1, already validated; nd may be
 * 0): see ampy_gemm_batched in gemm.h. */
ampy_status ampy_gemm_run_nd(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                             float alpha, const gemm_operand *a, const int64_t *a_bs,
                             const gemm_operand *b, const int64_t *b_bs, float beta,
                             const float *bias, char *c,
                             ampy_dtype cdt, const int64_t *c_bs, int64_t crs, int64_t ccs,
                             const gemm_impl *im)
{
    if (M > MAX_DIM || N > MAX_DIM || K > MAX_DIM)
        return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: sizes too large (M=%lld N=%lld K=%lld)",
                          (long long)M, (long long)N, (long long)K);
    if (nd < 0 || nd > AMPY_GEMM_MAX_BATCH_DIMS)
        return ampy_error(AMPY_ERR_SHAPE, "ampy_gemm: %d batch dims (at most %d)", nd,
                          AMPY_GEMM_MAX_BATCH_DIMS);
    if (im->for_a)
        im = im->for_a(a);
    batch_ctx bc;
    memset(&bc, 0, sizeof bc);
    gemm_ctx *x = &bc.base;
    x->im = im;
    x->a = *a;
    x->b = *b;
    x->M = M, x->N = N, x->K = K;
    x->kp = K / im->kc * im->kc + round_up(K % im->kc, im->kunit);
    x->alpha = alpha, x->beta = beta, x->bias = bias;
    x->c = c, x->cdt = cdt, x->crs = crs, x->ccs = ccs;
    x->pf = NULL;
    x->direct_a = ampy_gemm_direct_a_ok(im, a, K);
    bc.a = a->p, bc.b = b->p;
    int64_t batch = 1;
    bc.nd = nd;
    for (int d = 0; d < nd; d++) {
        bc.shape[d] = shape[d];
        bc.a_bs[d] = a_bs[d], bc.b_bs[d] = b_bs[d], bc.c_bs[d] = c_bs[d];
        batch *= shape[d];
    }
    if (batch == 0)
        return AMPY_OK;
    int nthreads = ampy_get_num_threads();
    double flops = (double)M * (double)N * (double)K;
    if (flops * (double)batch < (double)SERIAL_FLOPS)
        nthreads = 1;
    bc.nthreads = nthreads;
    bc.status = AMPY_OK;
    /* Many small items: one item per thread; otherwise threads inside each. */
    if (batch > 1 && nthreads > 1 && flops < 64.0 * SERIAL_FLOPS) {
        bc.nthreads = 1;
        bc.batch = batch;
        bc.chunk = batch / ((int64_t)nthreads * 8);
        if (bc.chunk < 1)
            bc.chunk = 1;
        bc.next = 0;
        ampy_parallel_for(batch < nthreads ? batch : nthreads, 1, batch_worker, &bc);
    } else {
        batch_range(0, batch, &bc);
    }
    return bc.status;
}

ampy_status ampy_gemm_run(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                          const gemm_operand *a, int64_t a_bs, const gemm_operand *b,
                          int64_t b_bs, float beta, const float *bias, char *c, ampy_dtype cdt,
                          int64_t c_bs, int64_t crs, int64_t ccs, const gemm_impl *im)
{
    return ampy_gemm_run_nd(1, &batch, M, N, K, alpha, a, &a_bs, b, &b_bs, beta, bias, c, cdt,
                            &c_bs, crs, ccs, im);
}
