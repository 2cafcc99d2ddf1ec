/* multinomial.c — categorical sampling from weight rows (multinomial.h). */
#include <math.h>
#include <stdlib.h>

#include "ampy/multinomial.h"
#include "ampy/multinomial_math.h"
#include "ampy/parallel.h"

typedef struct {
    double key;
    int64_t i;
} keyed;

static int by_key_desc(const void *a, const void *b)
{
    const keyed *x = (const keyed *)a, *y = (const keyed *)b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static ampy_status check_rows(int64_t rows, int64_t ncat, const double *p)
{
    for (int64_t r = 0; r < rows; r++) {
        double total = 0.0;
        for (int64_t c = 0; c < ncat; c++) {
            const double v = p[r * ncat + c];
            if (!(v >= 0.0) || isinf(v))
                return ampy_error(AMPY_ERR_RUNTIME, "probability tensor contains either `inf`, "
                                  "`nan` or element < 0");
            total += v;
        }
        if (!(total > 0.0))
            return ampy_error(AMPY_ERR_RUNTIME,
                              "invalid multinomial distribution (sum of probabilities <= 0)");
    }
    return AMPY_OK;
}

typedef struct {
    int64_t ncat, ns;
    int replacement;
    const double *p, *u;
    int64_t *out;
    int failed;
} mn_ctx;

/* cdf in scratch; sample = first c with cdf[c] > u * total (binary search) */
static void with_replacement(const mn_ctx *c, int64_t r, double *cdf)
{
    const double *p = c->p + r * c->ncat;
    double acc = 0.0;
    int64_t last = 0;
    for (int64_t j = 0; j < c->ncat; j++) {
        acc += p[j];
        cdf[j] = acc;
        if (p[j] > 0.0)
            last = j;
    }
    for (int64_t s = 0; s < c->ns; s++)
        c->out[r * c->ns + s] = ampy_mn_search(cdf, c->ncat, last, c->u[r * c->ns + s]);
}

static void without_replacement(const mn_ctx *c, int64_t r, keyed *k)
{
    const double *p = c->p + r * c->ncat, *u = c->u + r * c->ncat;
    for (int64_t j = 0; j < c->ncat; j++) {
        k[j].key = ampy_mn_key(p[j], u[j]);
        k[j].i = j;
    }
    qsort(k, (size_t)c->ncat, sizeof(keyed), by_key_desc);
    for (int64_t s = 0; s < c->ns; s++)
        c->out[r * c->ns + s] = k[s].i;
}

static void mn_rows(int64_t begin, int64_t end, void *arg)
{
    mn_ctx *c = (mn_ctx *)arg;
    void *scratch = malloc((size_t)c->ncat * (c->replacement ? sizeof(double) : sizeof(keyed)));
    if (!scratch) {
        c->failed = 1;
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        if (c->replacement)
            with_replacement(c, r, (double *)scratch);
        else
            without_replacement(c, r, (keyed *)scratch);
    }
    free(scratch);
}

ampy_status ampy_multinomial(int64_t rows, int64_t ncat, const double *p, int64_t ns,
                             int replacement, const double *u, int64_t *out)
{
    if (rows < 0 || ncat <= 0 || ns <= 0 || (!replacement && ns > ncat))
        return ampy_error(AMPY_ERR_VALUE, "multinomial: bad sizes (rows %lld, categories %lld, "
                          "samples %lld)", (long long)rows, (long long)ncat, (long long)ns);
    ampy_status st = check_rows(rows, ncat, p);
    if (st != AMPY_OK)
        return st;
    mn_ctx c = {ncat, ns, replacement != 0, p, u, out, 0};
    const int64_t work = ncat + ns;
    ampy_parallel_for(rows, work >= 4096 ? 1 : 4096 / work + 1, mn_rows, &c);
    if (c.failed)
        return ampy_error(AMPY_ERR_NOMEM, "multinomial: out of memory");
    return AMPY_OK;
}
