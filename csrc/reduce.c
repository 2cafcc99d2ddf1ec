/* reduce.c — reductions over chosen dims (see reduce.h).
 *
 * The input's dims are split into kept dims (one output each) and reduced
 * dims. The reduced dims keep their order (so a flattened position is the
 * row-major index torch's argmax returns) and are merged where contiguous.
 * ampy_iter_run walks the kept space; for each output the reduced sub-block
 * is walked row by row, converted into a double (or int64) block buffer by
 * ampy_ewise_load, and folded into an accumulator by a per-class block
 * function. An op is one or two passes of such classes (var: sum, then sum of
 * squared deviations from the mean; logsumexp: max, then sum of exp(x - max)).
 * A pass is a fold over a range of flat positions, so when there are fewer
 * outputs than threads a pass is split into per-thread ranges whose partial
 * accumulators are combined in range order.
 */
#include <math.h>
#include <string.h>

#include "ampy/ewise.h"
#include "ampy/iter.h"
#include "ampy/parallel.h"
#include "ampy/reduce.h"
#include "ampy/reduce_math.h"

typedef ampy_reduce_acc acc_t;

typedef struct {
    ampy_reduce_op op;
    int kind, cls[2]; /* cls[1]: -1 for single-pass ops */
    ampy_dtype in_dt, out_dt;
    int nr;
    int64_t rshape[AMPY_MAX_DIMS], rstride[AMPY_MAX_DIMS];
    int64_t R;
    double correction;
    int split;   /* split each pass over threads */
    int has_idx; /* operand 2 is the int64 index output */
} red_ctx;

const char *ampy_reduce_op_name(int op) { return ampy_reduce_name(op); }

/* The canonical float sum of a block (AMPY_EWISE_BLOCK elements at most): 16
 * partial sums in double, lane l taking the elements i == l (mod 16) in
 * order, then a halving tree (lane l += lane l+8, then l+4, l+2, l+1). More
 * accurate than one chain, free of its loop-carried latency, and the order
 * SIMD lanes give: the fused kernels that need ampy.sum's bits (softmax
 * backward, csrc/fused.c) use the same order. No lane ever holds -0.0, so
 * lanes a short block does not reach are as good as absent. */
#define SUM16(EXPR)                                                             \
    do {                                                                        \
        double s_[16] = {0};                                                    \
        int64_t i = 0;                                                          \
        for (; i + 16 <= n; i += 16)                                            \
            for (int l = 0; l < 16; l++) {                                      \
                double v0 = x[i + l];                                           \
                s_[l] += EXPR(v0);                                              \
            }                                                                   \
        for (int l = 0; i + l < n; l++) {                                       \
            double v0 = x[i + l];                                               \
            s_[l] += EXPR(v0);                                                  \
        }                                                                       \
        for (int h = 8; h >= 1; h >>= 1)                                        \
            for (int l = 0; l < h; l++)                                         \
                s_[l] += s_[l + h];                                             \
        a->s += s_[0];                                                          \
    } while (0)
#define E_ID(v) (v)
#define E_SQ(v) ((v) * (v))
#define E_DEV2(v) (((v) - center) * ((v) - center))
#define E_EXP(v) exp((v) - center)

/* Max/min with NaN propagation: the first NaN wins, ties keep the first. */
#define BEST(T, FIELD, BETTER, ISNAN)                                           \
    do {                                                                        \
        for (int64_t i = 0; i < n; i++) {                                       \
            T v = x[i];                                                         \
            if (ISNAN(v)) {                                                     \
                a->nan = a->has = 1;                                            \
                a->FIELD = v;                                                   \
                a->bidx = i0 + i;                                               \
                return;                                                         \
            }                                                                   \
            if (!a->has || v BETTER a->FIELD) {                                 \
                a->has = 1;                                                     \
                a->FIELD = v;                                                   \
                a->bidx = i0 + i;                                               \
            }                                                                   \
        }                                                                       \
    } while (0)
#define IS_NAN_D(v) ((v) != (v))
#define NEVER(v) 0

static void block_d(int cls, const double *x, int64_t n, int64_t i0, double center, acc_t *a)
{
    switch (cls) {
    case AMPY_RC_SUM: SUM16(E_ID); break;
    case AMPY_RC_SUMSQ: SUM16(E_SQ); break;
    case AMPY_RC_DEV2: SUM16(E_DEV2); break;
    case AMPY_RC_SUMEXP: SUM16(E_EXP); break;
    case AMPY_RC_PROD:
        for (int64_t i = 0; i < n; i++)
            a->s *= x[i];
        break;
    case AMPY_RC_MAX: BEST(double, best, >, IS_NAN_D); break;
    case AMPY_RC_MIN: BEST(double, best, <, IS_NAN_D); break;
    case AMPY_RC_NZ:
        for (int64_t i = 0; i < n; i++)
            a->is += x[i] != 0.0;
        break;
    default: break;
    }
}

/* AMPY_RC_SUM of a float32 block read in place: SUM16's bits (the widening is exact) */
static void sum_f32(const float *x, int64_t n, acc_t *a) { SUM16(E_ID); }

static void block_i(int cls, const int64_t *x, int64_t n, int64_t i0, acc_t *a)
{
    uint64_t u = (uint64_t)a->is;
    switch (cls) {
    case AMPY_RC_SUM:
        for (int64_t i = 0; i < n; i++)
            u += (uint64_t)x[i];
        a->is = (int64_t)u;
        break;
    case AMPY_RC_PROD:
        for (int64_t i = 0; i < n; i++)
            u *= (uint64_t)x[i];
        a->is = (int64_t)u;
        break;
    case AMPY_RC_MAX: BEST(int64_t, ibest, >, NEVER); break;
    case AMPY_RC_MIN: BEST(int64_t, ibest, <, NEVER); break;
    case AMPY_RC_NZ:
        for (int64_t i = 0; i < n; i++)
            a->is += x[i] != 0;
        break;
    default: break;
    }
}

/* Fold flat positions [pos, pos + m) of one row (byte stride s) into a. */
static void fold_row(const red_ctx *c, const char *p, int64_t s, int64_t m, int64_t pos, int cls,
                     double center, acc_t *a)
{
    _Alignas(64) char buf[AMPY_EWISE_BLOCK * 8];
    for (int64_t off = 0; off < m; off += AMPY_EWISE_BLOCK) {
        if (a->nan)
            return;
        const int64_t k = m - off < AMPY_EWISE_BLOCK ? m - off : AMPY_EWISE_BLOCK;
        const char *q = p + off * s;
        const void *x = buf;
        if (cls == AMPY_RC_SUM && s == 4 && c->in_dt == AMPY_FLOAT32) {
            sum_f32((const float *)q, k, a);
            continue;
        }
        if (s == 8 && (c->in_dt == ampy_kind_dtype(c->kind)))
            x = q;
        else
            ampy_ewise_load(q, s, c->in_dt, c->kind, buf, k);
        if (c->kind == AMPY_KIND_I64)
            block_i(cls, (const int64_t *)x, k, pos + off, a);
        else
            block_d(cls, (const double *)x, k, pos + off, center, a);
    }
}

/* Fold flat positions [begin, end) of the reduced sub-block at base. */
static void fold_range(const red_ctx *c, const char *base, int64_t begin, int64_t end, int cls,
                       double center, acc_t *a)
{
    if (begin >= end) /* also avoids dividing by a zero-sized dim below */
        return;
    const int nd = c->nr, last = nd - 1;
    int64_t idx[AMPY_MAX_DIMS], rem = begin;
    for (int d = last; d >= 0; d--) {
        idx[d] = rem % c->rshape[d];
        rem /= c->rshape[d];
    }
    const char *p = base;
    for (int d = 0; d < nd; d++)
        p += idx[d] * c->rstride[d];
    const int64_t L = c->rshape[last], s = c->rstride[last];
    int64_t pos = begin;
    while (pos < end && !a->nan) {
        int64_t m = L - idx[last];
        if (m > end - pos)
            m = end - pos;
        fold_row(c, p, s, m, pos, cls, center, a);
        pos += m;
        if (pos >= end)
            break;
        p += (L - idx[last]) * s;
        idx[last] = L;
        for (int d = last; d > 0 && idx[d] == c->rshape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            p += c->rstride[d - 1] - c->rshape[d] * c->rstride[d];
        }
    }
}

/* a <- a then b (b covers later positions). */
static void acc_combine(int cls, int kind, acc_t *a, const acc_t *b)
{
    switch (cls) {
    case AMPY_RC_PROD:
        a->s *= b->s;
        a->is = (int64_t)((uint64_t)a->is * (uint64_t)b->is);
        break;
    case AMPY_RC_MAX:
    case AMPY_RC_MIN: {
        if (a->nan || !b->has)
            return;
        if (b->nan || !a->has) {
            *a = *b;
            return;
        }
        int better = kind == AMPY_KIND_I64
                         ? (cls == AMPY_RC_MAX ? b->ibest > a->ibest : b->ibest < a->ibest)
                         : (cls == AMPY_RC_MAX ? b->best > a->best : b->best < a->best);
        if (better)
            *a = *b;
        return;
    }
    default:
        a->s += b->s;
        a->is = (int64_t)((uint64_t)a->is + (uint64_t)b->is);
        break;
    }
}

#define MAX_SPLIT 64
typedef struct {
    const red_ctx *c;
    const char *base;
    int cls, nchunks;
    double center;
    acc_t part[MAX_SPLIT];
} split_ctx;

static void split_fn(int64_t begin, int64_t end, void *arg)
{
    split_ctx *sc = (split_ctx *)arg;
    const int64_t R = sc->c->R;
    for (int64_t k = begin; k < end; k++) {
        sc->part[k] = ampy_reduce_acc_init(sc->cls);
        fold_range(sc->c, sc->base, R * k / sc->nchunks, R * (k + 1) / sc->nchunks, sc->cls,
                   sc->center, &sc->part[k]);
    }
}

static acc_t run_pass(const red_ctx *c, const char *base, int cls, double center)
{
    acc_t a = ampy_reduce_acc_init(cls);
    if (!c->split) {
        fold_range(c, base, 0, c->R, cls, center, &a);
        return a;
    }
    split_ctx sc;
    sc.c = c;
    sc.base = base;
    sc.cls = cls;
    sc.center = center;
    sc.nchunks = ampy_get_num_threads();
    if (sc.nchunks > MAX_SPLIT)
        sc.nchunks = MAX_SPLIT;
    ampy_parallel_for(sc.nchunks, 1, split_fn, &sc);
    for (int k = 0; k < sc.nchunks; k++)
        acc_combine(cls, c->kind, &a, &sc.part[k]);
    return a;
}

/* Reduce one output: passes, then the final value, stored once. */
static void reduce_one(const red_ctx *c, const char *base, char *out, int64_t *idx)
{
    acc_t a = run_pass(c, base, c->cls[0], 0.0), b = a;
    double center = 0.0, v;
    int64_t iv;
    if (c->cls[1] >= 0) {
        center = ampy_reduce_center(c->op, &a, c->R);
        b = run_pass(c, base, c->cls[1], center);
    }
    int is_int = ampy_reduce_finish(c->op, &a, &b, center, c->R, c->correction,
                                    c->kind == AMPY_KIND_I64, &v, &iv);
    if (is_int)
        ampy_ewise_store(&iv, AMPY_KIND_I64, out, 0, c->out_dt, 1);
    else
        ampy_ewise_store(&v, AMPY_KIND_F64, out, 0, c->out_dt, 1);
    if (idx)
        *idx = a.bidx;
}

/* Sum/mean of many outputs that lie next to each other in the input (e.g.
 * x.sum(0) of a row-major matrix): stream whole rows and accumulate a tile of
 * outputs at once instead of walking one strided column per output. */
static int try_columns(const red_ctx *c, char **ptrs, const int64_t *s, int64_t n)
{
    const int64_t esz = (int64_t)ampy_dtype_size(c->in_dt);
    if ((c->op != AMPY_RED_SUM && c->op != AMPY_RED_MEAN) || c->kind != AMPY_KIND_F64 ||
        c->split || c->nr != 1 || s[0] != esz || c->R < 2 || n < 16)
        return 0;
    _Alignas(64) double acc[AMPY_EWISE_BLOCK], buf[AMPY_EWISE_BLOCK];
    for (int64_t j0 = 0; j0 < n; j0 += AMPY_EWISE_BLOCK) {
        const int64_t m = n - j0 < AMPY_EWISE_BLOCK ? n - j0 : AMPY_EWISE_BLOCK;
        for (int64_t j = 0; j < m; j++)
            acc[j] = 0.0;
        const char *p = ptrs[0] + j0 * esz;
        for (int64_t r = 0; r < c->R; r++, p += c->rstride[0]) {
            ampy_ewise_load(p, esz, c->in_dt, AMPY_KIND_F64, buf, m);
            for (int64_t j = 0; j < m; j++)
                acc[j] += buf[j];
        }
        if (c->op == AMPY_RED_MEAN)
            for (int64_t j = 0; j < m; j++)
                acc[j] /= (double)c->R;
        ampy_ewise_store(acc, AMPY_KIND_F64, ptrs[1] + j0 * s[1], s[1], c->out_dt, m);
    }
    return 1;
}

static void red_inner(char **ptrs, const int64_t *s, int64_t n, void *arg)
{
    const red_ctx *c = (const red_ctx *)arg;
    if (try_columns(c, ptrs, s, n))
        return;
    for (int64_t j = 0; j < n; j++)
        reduce_one(c, ptrs[0] + j * s[0], ptrs[1] + j * s[1],
                   c->has_idx ? (int64_t *)(ptrs[2] + j * s[2]) : NULL);
}

/* The op's pass classes and its accumulation kind. */
static void setup_op(red_ctx *c)
{
    c->cls[0] = ampy_reduce_first_cls(c->op);
    c->cls[1] = ampy_reduce_second_cls(c->op);
    c->kind = ampy_dtype_is_float(c->in_dt) ? AMPY_KIND_F64 : AMPY_KIND_I64;
}

/* Reduced dims in order, size-1 dims dropped, contiguous neighbours merged. */
static void setup_reduced(red_ctx *c, int ndim, const int64_t *shape, const int64_t *strides,
                          uint32_t mask)
{
    int nr = 0;
    c->R = 1;
    for (int d = 0; d < ndim; d++) {
        if (!(mask >> d & 1u))
            continue;
        c->R *= shape[d];
        if (shape[d] == 1)
            continue;
        if (nr > 0 && c->rstride[nr - 1] == strides[d] * shape[d]) {
            c->rshape[nr - 1] *= shape[d];
            c->rstride[nr - 1] = strides[d];
            continue;
        }
        c->rshape[nr] = shape[d];
        c->rstride[nr] = strides[d];
        nr++;
    }
    if (nr == 0) {
        c->rshape[0] = 1;
        c->rstride[0] = 0;
        nr = 1;
    }
    c->nr = nr;
}

ampy_status ampy_reduce(ampy_reduce_op op, int ndim, const int64_t *shape, const void *in,
                        const int64_t *in_strides, ampy_dtype in_dtype, uint32_t reduce_mask,
                        void *out, const int64_t *out_strides, ampy_dtype out_dtype,
                        int64_t *idx_out, const int64_t *idx_strides, double correction)
{
    ampy_status st = ampy_reduce_check_args((int)op, ndim, in_dtype, out_dtype);
    if (st != AMPY_OK)
        return st;
    red_ctx c;
    c.op = op;
    c.in_dt = in_dtype;
    c.out_dt = out_dtype;
    c.correction = correction;
    setup_op(&c);
    setup_reduced(&c, ndim, shape, in_strides, reduce_mask);
    int nk = 0;
    int64_t kshape[AMPY_MAX_DIMS], kstr[3 * AMPY_MAX_DIMS], nout = 1;
    int64_t tmp[3][AMPY_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        if (reduce_mask >> d & 1u)
            continue;
        kshape[nk] = shape[d];
        tmp[0][nk] = in_strides[d];
        tmp[1][nk] = out_strides[d];
        tmp[2][nk] = idx_out ? idx_strides[d] : 0;
        nout *= shape[d];
        nk++;
    }
    if (nout == 0)
        return AMPY_OK;
    st = ampy_reduce_check_nonempty(op, c.R);
    if (st != AMPY_OK)
        return st;
    const int nops = idx_out && (op == AMPY_RED_MAX || op == AMPY_RED_MIN) ? 3 : 2;
    c.has_idx = nops == 3;
    for (int k = 0; k < nops; k++)
        memcpy(kstr + k * nk, tmp[k], sizeof(int64_t) * (size_t)nk);
    char *ptrs[3] = {(char *)in, (char *)out, (char *)idx_out};
    const int64_t work = 1 << 15;
    c.split = nout < ampy_get_num_threads() && c.R >= 4 * work;
    int64_t grain = c.split ? 0 : (c.R >= work ? 1 : work / (c.R > 0 ? c.R : 1));
    return ampy_iter_run(nk, kshape, nops, ptrs, kstr, red_inner, &c, grain);
}
