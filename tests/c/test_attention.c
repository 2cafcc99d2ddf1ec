/* test_attention.c — the fused attention kernel (attention.h) and the rules it
 * shares with CUDA (attention_math.h), on the host.
 *
 * The kernel's float64 forward and backward are compared with a plain
 * long double reference that forms the whole score matrix (the textbook
 * softmax(scale Q K^T + mask) V and its gradient), on random problems with
 * Lq != Lk spanning several blocks, a bool and a float mask, causal, strided
 * (transposed) Q and dropout (whose keep mask the reference redraws with
 * ampy_attn_keep), on 2 threads and on 1 (the backward's two-pass and
 * one-pass schedules). Bad arguments must return their status.
 *
 * Run by `make ctest`. Exit status 0 when every check passes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/attention.h"
#include "ampy/attention_math.h"
#include "ampy/parallel.h"

#include "ctest.h"

static double rndn(void) { return ((double)rnd32() / 4294967296.0) * 4.0 - 2.0; }

typedef struct {
    int64_t Lq, Lk, E, Ev;
    int mask; /* 0 none, 1 bool, 2 float */
    int causal;
    double p;
} cfg;

/* out[Lq*Ev] and, when g is given, dq/dk/dv of sum(out * g), in long double. */
static void reference(const cfg *c, const double *q, const double *k, const double *v,
                      const unsigned char *mb, const double *mf, double scale, uint64_t seed,
                      const double *g, long double *out, long double *dq, long double *dk,
                      long double *dv)
{
    int64_t S = c->Lk;
    long double *P = calloc((size_t)(c->Lq * S), sizeof *P);
    long double *Z = calloc((size_t)(c->Lq * S), sizeof *Z);
    for (int64_t i = 0; i < c->Lq; i++) {
        long double m = -INFINITY, l = 0;
        for (int64_t j = 0; j < S; j++) {
            long double s = 0;
            for (int64_t e = 0; e < c->E; e++)
                s += (long double)q[i * c->E + e] * k[j * c->E + e];
            s *= scale;
            if (c->mask == 2)
                s += mf[i * S + j];
            if ((c->mask == 1 && !mb[i * S + j]) || (c->causal && j > i))
                s = -INFINITY;
            P[i * S + j] = s;
            m = s > m ? s : m;
        }
        for (int64_t j = 0; j < S; j++) {
            P[i * S + j] = m == -INFINITY ? 0 : expl(P[i * S + j] - m);
            l += P[i * S + j];
        }
        for (int64_t j = 0; j < S; j++) {
            P[i * S + j] = l > 0 ? P[i * S + j] / l : 0;
            int keep = c->p == 0 || ampy_attn_keep(seed, 0, (uint64_t)(i * S + j),
                                                   (float)(1.0 - c->p));
            Z[i * S + j] = keep ? 1.0L / (1.0L - c->p) : 0;
        }
        for (int64_t e = 0; e < c->Ev; e++) {
            long double o = 0;
            for (int64_t j = 0; j < S; j++)
                o += P[i * S + j] * Z[i * S + j] * v[j * c->Ev + e];
            out[i * c->Ev + e] = o;
        }
    }
    if (g) {
        memset(dq, 0, sizeof *dq * (size_t)(c->Lq * c->E));
        memset(dk, 0, sizeof *dk * (size_t)(S * c->E));
        memset(dv, 0, sizeof *dv * (size_t)(S * c->Ev));
        for (int64_t i = 0; i < c->Lq; i++) {
            long double D = 0;
            for (int64_t e = 0; e < c->Ev; e++)
                D += g[i * c->Ev + e] * out[i * c->Ev + e];
            for (int64_t j = 0; j < S; j++) {
                long double pd = P[i * S + j] * Z[i * S + j], dp = 0;
                for (int64_t e = 0; e < c->Ev; e++) {
                    dv[j * c->Ev + e] += pd * g[i * c->Ev + e];
                    dp += g[i * c->Ev + e] * v[j * c->Ev + e];
                }
                long double ds = P[i * S + j] * (dp * Z[i * S + j] - D) * scale;
                for (int64_t e = 0; e < c->E; e++) {
                    dq[i * c->E + e] += ds * k[j * c->E + e];
                    dk[j * c->E + e] += ds * q[i * c->E + e];
                }
            }
        }
    }
    free(P), free(Z);
}

static double maxerr(const double *got, const long double *ref, int64_t n)
{
    double e = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)(got[i] - ref[i]));
        e = d > e || isnan(d) ? d : e;
    }
    return e;
}

static void run(const cfg *c)
{
    int64_t nq = c->Lq * c->E, nk = c->Lk * c->E, nv = c->Lk * c->Ev, no = c->Lq * c->Ev;
    double *q = malloc(sizeof(double) * (size_t)nq), *qt = malloc(sizeof(double) * (size_t)nq);
    double *k = malloc(sizeof(double) * (size_t)nk), *v = malloc(sizeof(double) * (size_t)nv);
    double *g = malloc(sizeof(double) * (size_t)no), *out = malloc(sizeof(double) * (size_t)no);
    double *mf = malloc(sizeof(double) * (size_t)(c->Lq * c->Lk)), *lse = malloc(8 * (size_t)c->Lq);
    unsigned char *mb = malloc((size_t)(c->Lq * c->Lk));
    double *dq = malloc(sizeof(double) * (size_t)nq), *dk = malloc(sizeof(double) * (size_t)nk);
    double *dv = malloc(sizeof(double) * (size_t)nv);
    long double *ro = malloc(sizeof(long double) * (size_t)no);
    long double *rq = malloc(sizeof(long double) * (size_t)nq);
    long double *rk = malloc(sizeof(long double) * (size_t)nk);
    long double *rv = malloc(sizeof(long double) * (size_t)nv);
    for (int64_t i = 0; i < nq; i++)
        q[i] = rndn();
    for (int64_t i = 0; i < c->Lq; i++) /* Q stored transposed: (E, Lq) */
        for (int64_t e = 0; e < c->E; e++)
            qt[e * c->Lq + i] = q[i * c->E + e];
    for (int64_t i = 0; i < nk; i++)
        k[i] = rndn();
    for (int64_t i = 0; i < nv; i++)
        v[i] = rndn();
    for (int64_t i = 0; i < no; i++)
        g[i] = rndn();
    for (int64_t i = 0; i < c->Lq * c->Lk; i++) {
        mb[i] = (rnd32() & 7) != 0;
        mf[i] = (rnd32() & 7) ? rndn() : -INFINITY;
    }
    double scale = 1.0 / sqrt((double)c->E);
    ampy_attn_problem p;
    memset(&p, 0, sizeof p);
    p.Lq = c->Lq, p.Lk = c->Lk, p.E = c->E, p.Ev = c->Ev, p.dtype = AMPY_FLOAT64;
    p.q = (ampy_attn_operand){qt, {0}, 1, c->Lq};
    p.k = (ampy_attn_operand){k, {0}, c->E, 1};
    p.v = (ampy_attn_operand){v, {0}, c->Ev, 1};
    if (c->mask)
        p.mask = (ampy_attn_operand){c->mask == 1 ? (void *)mb : (void *)mf, {0}, c->Lk, 1};
    p.mask_dtype = c->mask == 1 ? AMPY_BOOL : AMPY_FLOAT64;
    p.causal = c->causal, p.scale = scale, p.dropout_p = c->p, p.seed = 1234;
    CHECK(ampy_attention_fwd(&p, out, lse) == AMPY_OK, "fwd status");
    CHECK(ampy_attention_bwd(&p, out, g, lse, dq, dk, dv) == AMPY_OK, "bwd status");
    reference(c, q, k, v, mb, mf, scale, 1234, g, ro, rq, rk, rv);
    double tol = 1e-12;
    CHECK(maxerr(out, ro, no) < tol, "out %lld/%lld mask %d causal %d p %g: err %g",
          (long long)c->Lq, (long long)c->Lk, c->mask, c->causal, c->p, maxerr(out, ro, no));
    CHECK(maxerr(dq, rq, nq) < tol, "dq err %g", maxerr(dq, rq, nq));
    CHECK(maxerr(dk, rk, nk) < tol, "dk err %g", maxerr(dk, rk, nk));
    CHECK(maxerr(dv, rv, nv) < tol, "dv err %g", maxerr(dv, rv, nv));
    free(q), free(qt), free(k), free(v), free(g), free(out), free(mf), free(lse), free(mb);
    free(dq), free(dk), free(dv), free(ro), free(rq), free(rk), free(rv);
}

static void test_shared_rules(void)
{
    CHECK(ampy_attn_causal_keep(1, 3, 3) && !ampy_attn_causal_keep(1, 3, 4), "causal");
    CHECK(ampy_attn_causal_keep(0, 0, 9), "not causal");
    CHECK(ampy_attn_drop_scale(0.25) == 1.0 / 0.75 && ampy_attn_drop_scale(1.0) == 0.0,
          "drop scale");
    CHECK(isinf(ampy_attn_lse(-INFINITY, 0.0)) && ampy_attn_lse(1.0, 1.0) == 1.0, "lse");
    CHECK(ampy_attn_row_inv(0.0) == 0.0 && ampy_attn_row_inv(4.0) == 0.25, "row inv");
    int kept = 0, n = 200000;
    for (int i = 0; i < n; i++)
        kept += ampy_attn_keep(99, 5, (uint64_t)i, 0.7f);
    /* binomial(n, 0.7): sd = sqrt(n * 0.21) ~ 205; 5 sd */
    CHECK(fabs(kept - 0.7 * n) < 5 * 205, "keep rate %d of %d", kept, n);
}

static void test_bad_arguments(void)
{
    double x[4] = {0};
    ampy_attn_problem p;
    memset(&p, 0, sizeof p);
    p.Lq = p.Lk = p.E = p.Ev = 1, p.dtype = AMPY_INT64;
    p.q.data = p.k.data = p.v.data = x;
    CHECK(ampy_attention_fwd(&p, x, x) == AMPY_ERR_DTYPE, "int64 inputs");
    p.dtype = AMPY_FLOAT64, p.nd = AMPY_ATTN_MAX_BATCH + 1;
    CHECK(ampy_attention_fwd(&p, x, x) == AMPY_ERR_SHAPE, "too many batch dims");
    p.nd = 0, p.Lk = -1;
    CHECK(ampy_attention_fwd(&p, x, x) == AMPY_ERR_SHAPE, "negative size");
    p.Lk = 1, p.dropout_p = 1.5;
    CHECK(ampy_attention_fwd(&p, x, x) == AMPY_ERR_VALUE, "dropout_p");
    p.dropout_p = 0, p.mask.data = x, p.mask_dtype = AMPY_INT64;
    CHECK(ampy_attention_bwd(&p, x, x, x, x, x, x) == AMPY_ERR_DTYPE, "mask dtype");
    CHECK(ampy_attention_check(NULL) == AMPY_ERR_VALUE, "NULL problem");
}

int main(void)
{
    const cfg cases[] = {
        {70, 150, 8, 5, 0, 0, 0.0}, {70, 150, 8, 5, 1, 0, 0.0}, {70, 150, 8, 5, 2, 0, 0.0},
        {150, 70, 8, 5, 0, 1, 0.0}, {65, 260, 4, 3, 0, 1, 0.0}, {40, 130, 6, 6, 0, 0, 0.3},
        {1, 1, 1, 1, 0, 0, 0.0},
    };
    /* 2 threads and one item: the backward's two passes; 1 thread: its single pass */
    for (int threads = 2; threads >= 1; threads--) {
        ampy_set_num_threads(threads);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            run(&cases[i]);
    }
    test_shared_rules();
    test_bad_arguments();
    printf("test_attention: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
