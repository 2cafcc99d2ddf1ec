/* gemm_driver.c — the blocked, threaded GEMM loop nest shared by every
 * implementation (see gemm_impl.h for the kernel contract), over one batch
 * item (the batch loop and the entry points are in gemm_batch.c).
 *
 * For each block of nc columns (jc):
 *   1. pack B[:, jc block] for ALL of K into nr-wide micro-panels, K blocks of
 *      kc one after the other (parallel over K blocks x groups of panels);
 *   2. split the M x nc block into tasks of mc rows (and, when M is too small
 *      to feed every thread, also into column slices); per task, for each K
 *      block: pack A's mc x kc block, then run the micro-kernel over every
 *      (nr panel, mr panel) pair, accumulating into a float32 block W;
 *   3. the epilogue writes alpha * W + beta * C, rounded once to C's dtype.
 * When K fits in one K block, W is skipped: each micro-tile goes through an
 * L1-sized scratch tile and is rounded into C right after its kernel call,
 * or the implementation's own macro-kernel (gemm_impl.macro, the AMX one)
 * runs the whole task. A bias row (ampy_gemm_bias) is handed to the epilogue
 * at the block's first column.
 * Keeping all of K inside one task (the loop order jc -> ic -> pc) is what
 * lets W hold the complete fp32 sum before the single rounding.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/gemm.h"
#include "ampy/parallel.h"
#include "gemm_driver.h"

#define B_PACK_BUDGET ((int64_t)16 << 20) /* bytes of packed B per jc block */
#define W_BUDGET ((int64_t)512 << 10)     /* bytes of W when K is blocked  */
#define GEMM_MAX_TILE 1024 /* floats: the largest mr * nr (AMX 32 x 32) */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* ---- workspace: kept per thread between calls -------------------------
 * Fresh multi-MiB buffers cost a page fault per 4 KiB on every call (as
 * much time as a 1024^3 AMX product), so each thread keeps its packed-B,
 * packed-A and W buffers (WS_SLOTS) and grows them on demand; they are freed
 * when the thread exits. Requests above WS_CACHE_MAX are not kept. */
enum { WS_B = 0, WS_A = 1, WS_W = 2, WS_F = 3, WS_SLOTS = 4 };
#define WS_CACHE_MAX ((size_t)64 << 20)

typedef struct ws_cache {
    void *p[WS_SLOTS];
    size_t n[WS_SLOTS];
} ws_cache;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_destroy(void *v)
{
    ws_cache *c = v;
    for (int i = 0; i < WS_SLOTS; i++)
        free(c->p[i]);
    free(c);
}

static void ws_init(void) { ws_key_ok = pthread_key_create(&ws_key, ws_destroy) == 0; }

/* A 64-byte aligned buffer of at least `bytes` for this thread's slot, or
 * NULL. Release it with ws_put (which frees it only if it is not cached). */
static void *ws_get(int slot, int64_t bytes)
{
    size_t n = (size_t)round_up(bytes > 0 ? bytes : 64, 64);
    pthread_once(&ws_once, ws_init);
    ws_cache *c = ws_key_ok ? pthread_getspecific(ws_key) : NULL;
    if (ws_key_ok && !c && (c = calloc(1, sizeof *c)) != NULL &&
        pthread_setspecific(ws_key, c) != 0) {
        free(c);
        c = NULL;
    }
    if (!c || n > WS_CACHE_MAX)
        return aligned_alloc(64, n);
    if (c->n[slot] < n) {
        free(c->p[slot]);
        c->p[slot] = aligned_alloc(64, n);
        c->n[slot] = c->p[slot] ? n : 0;
    }
    return c->p[slot];
}

static void ws_put(int slot, void *p)
{
    ws_cache *c = ws_key_ok ? pthread_getspecific(ws_key) : NULL;
    if (!c || c->p[slot] != p)
        free(p);
}

/* Packed offset, in elements, of K block k0 / micro-panel q of a block whose
 * padded width is ncp: every earlier K block is a full kc (a kunit multiple). */
static int64_t bp_offset(const gemm_ctx *x, int64_t k0, int64_t q, int64_t kcp)
{
    return k0 * x->ncp + q * x->im->nr * kcp;
}

/* Packing item t of the block: K block t / ngrp, panel group t % ngrp (up to
 * x->bgroup panels, B_GROUP unless B is packed in the tasks). A group, not a
 * single panel, per call: with B row-major a panel alone reads only nr
 * elements of each k row, i.e. a new line (and a new page once the row is
 * 4 KiB) per k; a group reads B_GROUP * nr. */
#define B_GROUP 8
static int64_t b_groups(const gemm_ctx *x)
{
    return (x->ncp / x->im->nr + x->bgroup - 1) / x->bgroup;
}

/* K offset, K size and first block column / column count of item t. */
static void b_item(const gemm_ctx *x, int64_t t, int64_t *k0, int64_t *kc, int64_t *j0,
                   int64_t *cols)
{
    const gemm_impl *im = x->im;
    int64_t ngrp = b_groups(x), g = x->bgroup * im->nr;
    *k0 = t / ngrp * im->kc, *kc = x->K - *k0 < im->kc ? x->K - *k0 : im->kc;
    *j0 = t % ngrp * g, *cols = x->nc - *j0 < g ? x->nc - *j0 : g;
}

static void pack_b_item(gemm_ctx *x, int64_t t)
{
    const gemm_impl *im = x->im;
    int64_t k0, kc, j0, cols;
    b_item(x, t, &k0, &kc, &j0, &cols);
    int64_t kcp = round_up(kc, im->kunit);
    im->pack_b(&x->b, k0, kc, kcp, x->jc + j0, cols,
               x->bp + bp_offset(x, k0, j0 / im->nr, kcp) * (int64_t)im->pelem);
}

/* Work items (B panels, then tasks) are claimed one at a time from a shared
 * counter rather than split statically: when a thread is descheduled (2 cores
 * shared with other processes) the others take its share, and the last item
 * finishes no later than one item after the rest. */
static int64_t claim(gemm_ctx *x) { return __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED); }

/* ---- B packed in the tasks (gemm_impl.pack_b_in_task) ----------------------
 * Instead of a packing pass before the tasks (and the barrier after it), the
 * first task to reach a packing item packs it and the others reuse it, and
 * while a task computes with one item it prefetches the source of the next
 * one it will visit (if nobody has started on it) into L2, a share before
 * each pass of the micro-kernel, so the copy reads from L2: the packing
 * pass read B at memory speed with the cores idle (a sixth of a weight
 * gradient's time, K = 4096). Items are sized so that a source fits in L2
 * beside the packed A block (B_PF_BYTES). Concurrent tasks start at different
 * groups, so they pack disjoint ones, and a task that reaches an item another
 * thread is packing goes on with the others first. Only the order in which
 * panels are visited changes, never the K order of any output's sum. */
enum { B_TODO = 0, B_BUSY = 1, B_DONE = 2 };
#define B_PF_BYTES ((int64_t)256 << 10)
#define B_DEFER 16 /* busy items a walk sets aside before it waits */

/* Item t is packed when this returns 1: it was, or this thread packed it;
 * 0: another thread is packing it (wait: 1 waits for it). */
static int take_b_item(gemm_ctx *x, int64_t t, int wait)
{
    int *st = &x->bstate[t], todo = B_TODO;
    if (__atomic_load_n(st, __ATOMIC_ACQUIRE) == B_DONE)
        return 1;
    if (__atomic_compare_exchange_n(st, &todo, B_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        pack_b_item(x, t);
        __atomic_store_n(st, B_DONE, __ATOMIC_RELEASE);
        return 1;
    }
    while (wait && __atomic_load_n(st, __ATOMIC_ACQUIRE) != B_DONE)
        sched_yield();
    return wait;
}

/* One task's walk over the packing items of its panels [q0, q1). */
typedef struct task_b {
    gemm_ctx *x;
    int64_t q0, q1, start, steps; /* start: first group of the walk */
    int64_t cols_end;             /* the task's column end in the block */
    gemm_prefetch pf;
} task_b;

static void task_b_init(task_b *tb, gemm_ctx *x, int64_t t, int64_t q0, int64_t q1,
                        int64_t rows)
{
    const gemm_impl *im = x->im;
    int64_t kcp = round_up(x->K < im->kc ? x->K : im->kc, im->kunit);
    int64_t g0 = q0 / x->bgroup, ng = (q1 - 1) / x->bgroup + 1 - g0;
    tb->x = x, tb->q0 = q0, tb->q1 = q1;
    /* concurrent tasks over the same columns start a share of them apart */
    tb->start = x->n_js > 1 || x->nthreads < 2 ? 0 : t % x->nthreads * ng / x->nthreads;
    /* prefetch steps while one item computes: passes per micro-tile call */
    tb->steps = x->bgroup * ((rows + im->mr - 1) / im->mr) *
                (im->pf_steps > 1 ? im->pf_steps : 1) *
                (im->pf_kch > 0 ? (kcp + im->pf_kch - 1) / im->pf_kch : 1);
    memset(&tb->pf, 0, sizeof tb->pf);
}

/* Points tb->pf at the source of item t when no thread has started on it. */
static void task_b_plan(task_b *tb, int64_t t)
{
    gemm_ctx *x = tb->x;
    gemm_prefetch *then = tb->pf.then; /* the next A block's cursor stays */
    memset(&tb->pf, 0, sizeof tb->pf);
    tb->pf.then = then;
    if (t < 0 || __atomic_load_n(&x->bstate[t], __ATOMIC_RELAXED) != B_TODO)
        return;
    int64_t k0, kc, j0, cols, es = (int64_t)ampy_dtype_size(x->b.dt);
    b_item(x, t, &k0, &kc, &j0, &cols);
    const char *p = x->b.p + (k0 * x->b.rs + (x->jc + j0) * x->b.cs) * es;
    int64_t bytes = ampy_gemm_pf_add(&tb->pf, p, kc, cols, x->b.rs, x->b.cs, es, 0, 1);
    if (bytes <= 0) {
        memset(&tb->pf, 0, sizeof tb->pf);
        tb->pf.then = then;
    } else {
        tb->pf.per_step = (bytes / 64 + tb->steps - 1) / tb->steps + 1;
    }
}

/* ---- the next A block, prefetched (vdpbf16ps) ------------------------------
 * A task packs its A block (mc rows x a K block) from memory right before
 * using it, a copy that waited on L3 for a tenth of a 4096 x 256 x 1024
 * product (Zen 5, 1 thread) and more for the k-major A of a weight
 * gradient. So while a K block computes, the source of the block the
 * thread packs next (the task's next K block, else, at one thread, the
 * first block of task t + 1; with more threads the next claim is not known)
 * is pulled into L2, chained to the B cursor (stepped before every pass of the
 * kernel), up to A_PF_BYTES of it and no more than fits beside the packed
 * block in half of a 1 MiB L2 (A_PF_PAIR; none below A_PF_MIN: a 2048-long
 * K block of 128 rows fills that half alone).
 * Measured (perf, loaded machine): the copy went from 10 % to 7 % of that
 * product, the steps cost 2.5 %, so the net gain is small; more where A
 * comes from memory rather than L3. Prefetches never change a result. */
#define A_PF_BYTES ((int64_t)256 << 10)
#define A_PF_PAIR ((int64_t)512 << 10) /* packed block + prefetched source */
#define A_PF_MIN ((int64_t)32 << 10)

int ampy_gemm_is_bf16dp(const gemm_impl *im)
{
    const gemm_impl *bf = ampy_gemm_impl_avx512bf16(AMPY_BFLOAT16);
    return bf && (im == bf || (bf->for_a && im->for_a == bf->for_a));
}

/* Points apf at A rows [i0, i0+rows) x k [k0, k0+kc), capped, spread over
 * `steps` steps; an empty cursor when it does not apply. */
static void plan_a_next(const gemm_ctx *x, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                        int64_t steps, int64_t cap, gemm_prefetch *apf)
{
    int64_t es = (int64_t)ampy_dtype_size(x->a.dt);
    memset(apf, 0, sizeof *apf);
    if (rows <= 0 || kc <= 0 || steps <= 0)
        return;
    const char *p = x->a.p + (i0 * x->a.rs + k0 * x->a.cs) * es;
    if (ampy_gemm_pf_add(apf, p, rows, kc, x->a.rs, x->a.cs, es, 0, 1) <= 0) {
        memset(apf, 0, sizeof *apf);
        return;
    }
    gemm_pf_region *g = &apf->r[0];
    if (g->nruns == 1 && g->run_bytes > cap)
        g->run_bytes = cap;
    else if (g->nruns * (g->run_bytes + 63) > cap)
        g->nruns = cap / (g->run_bytes + 63) > 1 ? cap / (g->run_bytes + 63) : 1;
    apf->per_step = (g->nruns * ((g->run_bytes + 63) / 64 + 1) + steps - 1) / steps + 1;
}

/* The A block this thread packs after K block k0 of task t (rows i0..):
 * apf, and 1, when there is one to prefetch (0: no cursor, none stepped). */
static int plan_a_after(const gemm_ctx *x, int64_t t, int64_t i0, int64_t rows, int64_t k0,
                        int64_t steps, gemm_prefetch *apf)
{
    const gemm_impl *im = x->im;
    memset(apf, 0, sizeof *apf);
    if (!x->bstate || !ampy_gemm_is_bf16dp(im) || x->pf)
        return 0;
    /* room beside the packed block (mc x a K block) */
    int64_t kb = x->K < im->kc ? x->K : im->kc;
    int64_t cap = A_PF_PAIR - round_up(rows, im->mr) * round_up(kb, im->kunit) *
                                  (int64_t)im->pelem;
    if (cap > A_PF_BYTES)
        cap = A_PF_BYTES;
    if (cap < A_PF_MIN)
        return 0;
    if (k0 + im->kc < x->K) {
        int64_t k1 = k0 + im->kc, kc = x->K - k1 < im->kc ? x->K - k1 : im->kc;
        plan_a_next(x, i0, rows, k1, kc, steps, cap, apf);
        return apf->nr > 0;
    }
    int64_t tn = t + 1, in = tn / x->n_js * x->mc;
    if (x->nthreads > 1 || tn >= x->n_ic * x->n_js || in == i0)
        return 0;
    plan_a_next(x, in, x->M - in < x->mc ? x->M - in : x->mc, 0, kb, steps, cap, apf);
    return apf->nr > 0;
}

typedef void (*visit_fn)(void *ctx, int64_t qa, int64_t qb);

/* Calls visit over the task's panels of K block kb, a packing item (panels
 * [qa, qb)) at a time once it is packed, from group tb->start on: an item
 * another thread is packing is set aside (up to B_DEFER) and visited after
 * the rest. While one item computes, the next one's source is prefetched.
 * Without bstate (B packed before the tasks): one visit of all panels. */
static void walk_b(task_b *tb, int64_t kb, visit_fn visit, void *ctx)
{
    gemm_ctx *x = tb->x;
    if (!x->bstate) {
        visit(ctx, tb->q0, tb->q1);
        return;
    }
    int64_t G = x->bgroup, ngrp = b_groups(x), g0 = tb->q0 / G;
    int64_t ng = (tb->q1 - 1) / G + 1 - g0, defer[B_DEFER];
    int nd = 0;
    for (int64_t i = 0; i < ng + nd; i++) {
        int64_t g = i < ng ? g0 + (i + tb->start) % ng : defer[i - ng];
        if (!take_b_item(x, kb * ngrp + g, i >= ng || nd == B_DEFER)) {
            defer[nd++] = g;
            continue;
        }
        int64_t nx = i + 1 < ng ? kb * ngrp + g0 + (i + 1 + tb->start) % ng
                     : (kb + 1) * x->im->kc < x->K ? (kb + 1) * ngrp + g0 + tb->start : -1;
        task_b_plan(tb, nx);
        visit(ctx, g * G > tb->q0 ? g * G : tb->q0, (g + 1) * G < tb->q1 ? (g + 1) * G : tb->q1);
    }
}

static void pack_b_range(int64_t t0, int64_t t1, void *vctx)
{
    (void)t0, (void)t1;
    gemm_ctx *x = vctx;
    int64_t n = b_groups(x) * ((x->K + x->im->kc - 1) / x->im->kc);
    for (int64_t t; (t = claim(x)) < n;)
        pack_b_item(x, t);
}

/* What a task's visits over its B panels (walk_b) need. */
typedef struct visit_ctx {
    gemm_ctx *x;
    task_b *tb;
    int64_t i0, rows, j0, kcp, k0;
    char *ap;
    float *w;
    int64_t ldw;
    int a_packed;
} visit_ctx;

/* One K block through the implementation's macro-kernel: panels [qa, qb). */
static void visit_macro(void *vc, int64_t qa, int64_t qb)
{
    visit_ctx *v = vc;
    gemm_ctx *x = v->x;
    const gemm_impl *im = x->im;
    int64_t csz = (int64_t)ampy_dtype_size(x->cdt), ja = qa * im->nr;
    int64_t jb = qb * im->nr < v->tb->cols_end ? qb * im->nr : v->tb->cols_end;
    gemm_task tk = {&x->a, v->i0, v->rows, jb - ja, x->K, v->kcp,
                    x->bp + bp_offset(x, 0, qa, v->kcp) * (int64_t)im->pelem, v->ap, x->alpha,
                    x->beta, x->bias ? x->bias + x->jc + ja : NULL,
                    x->c + (v->i0 * x->crs + (x->jc + ja) * x->ccs) * csz, x->cdt, x->crs,
                    x->ccs, x->pf, v->a_packed, x->bstate ? &v->tb->pf : NULL};
    im->macro(&tk);
    v->a_packed = 1;
}

/* K block v->k0 of a task with several: panels [qa, qb) into W. */
static void visit_kblock(void *vc, int64_t qa, int64_t qb)
{
    visit_ctx *v = vc;
    gemm_ctx *x = v->x;
    const gemm_impl *im = x->im;
    int64_t pe = (int64_t)im->pelem, npanels = (v->rows + im->mr - 1) / im->mr;
    for (int64_t q = qa; q < qb; q++) {
        const char *bq = x->bp + bp_offset(x, v->k0, q, v->kcp) * pe;
        float *wq = v->w + (q * im->nr - v->j0);
        for (int64_t p = 0; p < npanels; p++) {
            const char *ar = v->ap + p * im->mr * v->kcp * pe;
            float *wp = wq + p * im->mr * v->ldw;
            if (x->bstate && im->kernel_pf)
                im->kernel_pf(v->kcp, ar, bq, wp, v->ldw, v->k0 > 0, &v->tb->pf);
            else
                im->kernel(v->kcp, ar, bq, wp, v->ldw, v->k0 > 0);
        }
    }
}

/* One task (claim number t): rows [i0, i0+rows) x block columns [j0, j0+cols). */
static void run_task(gemm_ctx *x, int64_t i0, int64_t rows, int64_t j0, int64_t cols,
                     char *ap, float *w, int64_t ldw, int64_t t)
{
    const gemm_impl *im = x->im;
    int64_t pe = (int64_t)im->pelem, q0 = j0 / im->nr, q1 = (j0 + cols + im->nr - 1) / im->nr;
    int64_t npanels = (rows + im->mr - 1) / im->mr;
    int64_t csz = (int64_t)ampy_dtype_size(x->cdt);
    task_b tb;
    gemm_prefetch apf;
    task_b_init(&tb, x, t, q0, q1, rows);
    tb.cols_end = j0 + cols;
    /* steps of the B cursor per K block: passes per tile x tiles */
    int64_t asteps = tb.steps / x->bgroup * (q1 - q0);
    visit_ctx v = {x, &tb, i0, rows, j0, 0, 0, ap, w, ldw, 0};
    if (x->K <= im->kc) {
        /* One K block: each micro-tile is complete after one kernel call, so
         * it goes through a tile-sized scratch that stays in L1 and is rounded
         * into C at once. A full-width W would be written and read back from
         * L2/L3 and evict the packed A block that every B panel reuses. */
        int64_t kcp = round_up(x->K, im->kunit);
        if (im->macro) {
            v.kcp = kcp;
            tb.pf.then = plan_a_after(x, t, i0, rows, 0, asteps, &apf) ? &apf : NULL;
            walk_b(&tb, 0, visit_macro, &v);
            return;
        }
        float tile[GEMM_MAX_TILE] __attribute__((aligned(64)));
        if (x->direct_a) { /* A read in place (float32) or widened row by row */
            const float *a0 = (const float *)x->a.p + i0 * x->a.rs;
            int64_t ars = x->a.rs, acs = x->a.cs;
            if (x->direct_a == 2) {
                ampy_gemm_direct_widen_rows(x->a.p + i0 * x->a.rs * 2, x->a.dt, x->a.rs, rows,
                                            x->K, (float *)ap);
                a0 = (const float *)ap, ars = x->K, acs = 1;
            }
            for (int64_t q = q0; q < q1; q++) {
                const float *bq = (const float *)(x->bp + bp_offset(x, 0, q, kcp) * pe);
                int64_t jq = q * im->nr, tc = j0 + cols - jq < im->nr ? j0 + cols - jq : im->nr;
                for (int64_t ip = 0; ip < rows; ip += im->mr) {
                    int64_t tr = rows - ip < im->mr ? rows - ip : im->mr;
                    if (x->pf)
                        ampy_gemm_prefetch_step(x->pf);
                    ampy_gemm_direct_a_f32(x->K, a0 + ip * ars, ars, acs, (int)tr, bq, tile,
                                           im->nr);
                    im->epilogue(tile, im->nr, tr, tc, x->alpha, x->beta,
                                 x->bias ? x->bias + x->jc + jq : NULL,
                                 x->c + ((i0 + ip) * x->crs + (x->jc + jq) * x->ccs) * csz,
                                 x->cdt, x->crs, x->ccs);
                }
            }
            return;
        }
        im->pack_a(&x->a, i0, rows, 0, x->K, kcp, ap);
        for (int64_t q = q0; q < q1; q++) {
            const char *bq = x->bp + bp_offset(x, 0, q, kcp) * pe;
            int64_t jq = q * im->nr, tc = j0 + cols - jq < im->nr ? j0 + cols - jq : im->nr;
            for (int64_t p = 0; p < npanels; p++) {
                int64_t ip = p * im->mr, tr = rows - ip < im->mr ? rows - ip : im->mr;
                if (x->pf)
                    ampy_gemm_prefetch_step(x->pf);
                im->kernel(kcp, ap + ip * kcp * pe, bq, tile, im->nr, 0);
                im->epilogue(tile, im->nr, tr, tc, x->alpha, x->beta,
                             x->bias ? x->bias + x->jc + jq : NULL,
                             x->c + ((i0 + ip) * x->crs + (x->jc + jq) * x->ccs) * csz,
                             x->cdt, x->crs, x->ccs);
            }
        }
        return;
    }
    for (int64_t k0 = 0; k0 < x->K; k0 += im->kc) {
        int64_t kc = x->K - k0 < im->kc ? x->K - k0 : im->kc;
        v.k0 = k0, v.kcp = round_up(kc, im->kunit);
        im->pack_a(&x->a, i0, rows, k0, kc, v.kcp, ap);
        tb.pf.then = plan_a_after(x, t, i0, rows, k0, asteps, &apf) ? &apf : NULL;
        walk_b(&tb, k0 / im->kc, visit_kblock, &v);
    }
    im->epilogue(w, ldw, rows, cols, x->alpha, x->beta, x->bias ? x->bias + x->jc + j0 : NULL,
                 x->c + (i0 * x->crs + (x->jc + j0) * x->ccs) * csz, x->cdt, x->crs, x->ccs);
}

static void task_range(int64_t t0, int64_t t1, void *vctx)
{
    (void)t0, (void)t1;
    gemm_ctx *x = vctx;
    const gemm_impl *im = x->im;
    int64_t mcp = round_up(x->mc, im->mr);
    int64_t ldw = round_up(x->js_cols, im->nr);
    if (ldw % 256 == 0) /* avoid 4 KiB-aliased rows of W */
        ldw += 16;
    char *ap = ws_get(WS_A, mcp * round_up(im->kc, im->kunit) * (int64_t)im->pelem);
    int need_w = x->K > im->kc; /* a single K block needs no W (run_task) */
    float *w = need_w ? ws_get(WS_W, mcp * ldw * 4) : NULL;
    if (!ap || (need_w && !w)) {
        x->failed = 1;
    } else {
        if (im->thread_begin)
            im->thread_begin();
        for (int64_t t; (t = claim(x)) < x->n_ic * x->n_js;) {
            int64_t ic = t / x->n_js, js = t % x->n_js;
            int64_t i0 = ic * x->mc, j0 = js * x->js_cols;
            int64_t rows = x->M - i0 < x->mc ? x->M - i0 : x->mc;
            int64_t cols = x->nc - j0 < x->js_cols ? x->nc - j0 : x->js_cols;
            if (cols > 0)
                run_task(x, i0, rows, j0, cols, ap, w, ldw, t);
        }
        if (im->thread_end)
            im->thread_end();
    }
    ws_put(WS_A, ap);
    if (w)
        ws_put(WS_W, w);
}

/* Split the M x nc block into n_ic row blocks x n_js column slices. */
static void plan_tasks(gemm_ctx *x, int nthreads)
{
    const gemm_impl *im = x->im;
    int64_t mc = im->mc;
    if (nthreads > 1 && (x->M + mc - 1) / mc < nthreads) {
        mc = round_up((x->M + nthreads - 1) / nthreads, im->mr);
    } else {
        /* Even row blocks, up to 5/4 of mc each: M = 256 with mc = 252 would
         * otherwise leave a 4-row task that streams all of packed B again
         * (and runs the kernel 4/mr full). Row blocking does not change any
         * output's K summation order, so the bits stay the same. */
        int64_t n = (x->M + mc * 5 / 4 - 1) / (mc * 5 / 4);
        mc = round_up((x->M + n - 1) / n, im->mr);
    }
    x->mc = mc;
    x->n_ic = (x->M + mc - 1) / mc;
    x->n_js = 1;
    if (nthreads > 1 && x->n_ic % nthreads != 0 && x->n_ic < 4 * nthreads)
        x->n_js = nthreads;
    x->js_cols = round_up((x->nc + x->n_js - 1) / x->n_js, im->nr);
}

ampy_status ampy_gemm_run_one(gemm_ctx *x, int nthreads)
{
    const gemm_impl *im = x->im;
    int64_t pe = (int64_t)im->pelem;
    int64_t nc_max = B_PACK_BUDGET / (x->kp * pe) / im->nr * im->nr;
    if (x->K > im->kc) {
        /* Several K blocks: the float32 W block (mc x nc) is read and written
         * once per K block, so keep it at a quarter of L2 next to the packed
         * A block and the K block of B streaming through (256 x 1024 with
         * K = 4096, a weight gradient, would otherwise thrash L2). */
        int64_t w_cols = W_BUDGET / (im->mc * 5 / 4 * 4) / im->nr * im->nr;
        if (w_cols < nc_max)
            nc_max = w_cols;
    }
    if (nc_max < im->nr)
        nc_max = im->nr;
    int64_t ncap = round_up(x->N < nc_max ? x->N : nc_max, im->nr);
    x->bp = ws_get(WS_B, x->kp * ncap * pe);
    if (!x->bp)
        return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: cannot allocate %lld bytes for packed B",
                          (long long)(x->kp * ncap * pe));
    x->failed = 0;
    x->nthreads = nthreads;
    int64_t nkb = (x->K + im->kc - 1) / im->kc;
    int lazy = im->pack_b_in_task && (im->macro || nkb > 1);
    int64_t kb0 = x->K < im->kc ? x->K : im->kc, src = kb0 * im->nr * (int64_t)ampy_dtype_size(x->b.dt);
    x->bgroup = lazy && B_GROUP * src > B_PF_BYTES ? (B_PF_BYTES / src > 1 ? B_PF_BYTES / src : 1)
                                                   : B_GROUP;
    int64_t nbs = (ncap / im->nr + x->bgroup - 1) / x->bgroup * nkb; /* packing items */
    x->bstate = lazy ? ws_get(WS_F, nbs * (int64_t)sizeof(int)) : NULL;
    for (x->jc = 0; x->jc < x->N && !x->failed; x->jc += nc_max) {
        x->nc = x->N - x->jc < nc_max ? x->N - x->jc : nc_max;
        x->ncp = round_up(x->nc, im->nr);
        int64_t nitems = b_groups(x) * nkb;
        x->next = 0;
        if (x->bstate)
            memset(x->bstate, 0, (size_t)nitems * sizeof(int));
        else
            ampy_parallel_for(nitems < nthreads ? nitems : nthreads, 1, pack_b_range, x);
        plan_tasks(x, nthreads);
        int64_t ntasks = x->n_ic * x->n_js;
        x->next = 0;
        ampy_parallel_for(ntasks < nthreads ? ntasks : nthreads, 1, task_range, x);
    }
    ws_put(WS_B, x->bp);
    x->bp = NULL;
    if (x->bstate)
        ws_put(WS_F, x->bstate);
    x->bstate = NULL;
    if (x->failed)
        return ampy_error(AMPY_ERR_NOMEM, "ampy_gemm: cannot allocate the workspace");
    return AMPY_OK;
}
