/* reduce_softmax.c — softmax / log_softmax and cumulative scans along a dim
 * (see reduce.h).
 *
 * Both walk "lines": ampy_iter_run iterates over every dim but `dim`, and
 * each call handles whole lines of shape[dim] elements with their own byte
 * strides. Softmax takes three passes over a line, converting blocks with
 * ampy_ewise_load: the maximum (NaN propagates), the sum of exp(x - max)
 * in double, then exp(x - max) / sum (or (x - max) - log(sum)) rounded once
 * into the output dtype. Subtracting the maximum keeps exp from overflowing.
 * Float32-computed lines (float32/float16/bfloat16) take the vmath.h row
 * helpers, or on AVX-512 CPUs the intrinsics lines of softmax_x86.c: the
 * same exponentials, the double sum in a fixed 16-lane order, a correctly
 * rounded division, half conversions in registers.
 */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/ewise.h"
#include "ampy/iter.h"
#include "ampy/reduce.h"
#include "reduce_lines.h"
#include "vmath.h"


/* One softmax line in type R (float or double; tgmath picks exp/expf). */
#define SOFTMAX_LINE(NAME, R)                                                     \
    static void NAME(const line_ctx *c, const char *in, char *out)                \
    {                                                                             \
        _Alignas(64) R buf[AMPY_EWISE_BLOCK];                                     \
        const int64_t L = c->len, B = AMPY_EWISE_BLOCK;                           \
        R m = -INFINITY;                                                          \
        for (int64_t off = 0; off < L; off += B) {                                \
            int64_t k = L - off < B ? L - off : B;                                \
            ampy_ewise_load(in + off * c->sin, c->sin, c->in_dt, c->kind, buf, k); \
            for (int64_t i = 0; i < k; i++)                                       \
                m = (buf[i] > m || buf[i] != buf[i]) ? buf[i] : m;                \
        }                                                                         \
        double sum = 0.0;                                                         \
        for (int64_t off = 0; off < L; off += B) {                                \
            int64_t k = L - off < B ? L - off : B;                                \
            ampy_ewise_load(in + off * c->sin, c->sin, c->in_dt, c->kind, buf, k); \
            for (int64_t i = 0; i < k; i++)                                       \
                sum += (double)exp(buf[i] - m);                                   \
        }                                                                         \
        const R rs = (R)sum, ls = (R)log(sum);                                    \
        for (int64_t off = 0; off < L; off += B) {                                \
            int64_t k = L - off < B ? L - off : B;                                \
            ampy_ewise_load(in + off * c->sin, c->sin, c->in_dt, c->kind, buf, k); \
            if (c->log)                                                           \
                for (int64_t i = 0; i < k; i++) buf[i] = (buf[i] - m) - ls;       \
            else                                                                  \
                for (int64_t i = 0; i < k; i++) buf[i] = exp(buf[i] - m) / rs;    \
            ampy_ewise_store(buf, c->kind, out + off * c->sout, c->sout, c->out_dt, k); \
        }                                                                         \
    }
SOFTMAX_LINE(softmax_line_d, double)

/* A float32-computed line (float32/float16/bfloat16 data): the same three
 * passes with the vectorized row helpers of vmath.h. A contiguous float32
 * input is read in place; a contiguous float32 output receives e^(x-max) in
 * the sum pass and is divided in place, so the exponentials are computed
 * once. Lines of other dtypes or strides up to SM_LINE elements are
 * converted once into a float line buffer and handled there. */
static void softmax_line_f(const line_ctx *c, const char *in, char *out)
{
    _Alignas(64) float buf[AMPY_EWISE_BLOCK];
    const ampy_vm_table *vm = ampy_vm();
    const int64_t L = c->len, B = AMPY_EWISE_BLOCK;
    const int din = c->in_dt == AMPY_FLOAT32 && c->sin == 4;
    const int dout = c->out_dt == AMPY_FLOAT32 && c->sout == 4;
    if (!(din && dout) && L <= SM_LINE) {
        /* converted or strided data, short line: one conversion in, the
         * exponentials computed once in a float line buffer, one rounding out */
        _Alignas(64) float line[SM_LINE];
        const float *x = din ? (const float *)in : line;
        if (!din)
            ampy_ewise_load(in, c->sin, c->in_dt, AMPY_KIND_F32, line, L);
        const float m = vm->rowmax(x, L);
        if (c->log) {
            const double sum = vm->expsum(x, L, m, NULL);
            vm->subsub(x, L, m, (float)log(sum), line);
        } else {
            const double sum = vm->expsum(x, L, m, line);
            vm->divs(line, L, (float)sum);
        }
        ampy_ewise_store(line, AMPY_KIND_F32, out, c->sout, c->out_dt, L);
        return;
    }
#define SM_BLOCK(off, k) \
    (din ? (const float *)in + (off) \
         : (ampy_ewise_load(in + (off) * c->sin, c->sin, c->in_dt, AMPY_KIND_F32, buf, k), buf))
    float m = -INFINITY;
    for (int64_t off = 0; off < L; off += B) {
        const int64_t k = L - off < B ? L - off : B;
        const float bm = vm->rowmax(SM_BLOCK(off, k), k);
        m = (bm > m || bm != bm) ? bm : m; /* NaN sticks */
    }
    double sum = 0.0;
    const int keep = dout && !c->log;
    for (int64_t off = 0; off < L; off += B) {
        const int64_t k = L - off < B ? L - off : B;
        sum += vm->expsum(SM_BLOCK(off, k), k, m, keep ? (float *)out + off : NULL);
    }
    const float rs = (float)sum, ls = (float)log(sum);
    if (keep) {
        vm->divs((float *)out, L, rs);
        return;
    }
    for (int64_t off = 0; off < L; off += B) {
        const int64_t k = L - off < B ? L - off : B;
        const float *x = SM_BLOCK(off, k);
        float *y = dout ? (float *)out + off : buf;
        if (c->log)
            vm->subsub(x, k, m, ls, y);
        else
            vm->expdiv(x, k, m, rs, y);
        if (!dout)
            ampy_ewise_store(y, AMPY_KIND_F32, out + off * c->sout, c->sout, c->out_dt, k);
    }
#undef SM_BLOCK
}

static void softmax_inner(char **ptrs, const int64_t *s, int64_t n, void *arg)
{
    const line_ctx *c = (const line_ctx *)arg;
#ifdef AMPY_X86_SIMD
    if (c->simd) {
        ampy_softmax_lines_avx512(c, ptrs, s, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) {
        if (c->kind == AMPY_KIND_F32)
            softmax_line_f(c, ptrs[0] + j * s[0], ptrs[1] + j * s[1]);
        else
            softmax_line_d(c, ptrs[0] + j * s[0], ptrs[1] + j * s[1]);
    }
}

static void scan_line(const line_ctx *c, const char *in, char *out)
{
    _Alignas(64) char buf[AMPY_EWISE_BLOCK * 8];
    const int64_t L = c->len, B = AMPY_EWISE_BLOCK;
    const int prod = c->op == AMPY_SCAN_CUMPROD;
    double acc = prod ? 1.0 : 0.0;
    uint64_t iacc = prod ? 1u : 0u;
    for (int64_t off = 0; off < L; off += B) {
        int64_t k = L - off < B ? L - off : B;
        ampy_ewise_load(in + off * c->sin, c->sin, c->in_dt, c->kind, buf, k);
        if (c->kind == AMPY_KIND_I64) {
            int64_t *x = (int64_t *)buf;
            for (int64_t i = 0; i < k; i++) {
                iacc = prod ? iacc * (uint64_t)x[i] : iacc + (uint64_t)x[i];
                x[i] = (int64_t)iacc;
            }
        } else {
            double *x = (double *)buf;
            for (int64_t i = 0; i < k; i++) {
                acc = prod ? acc * x[i] : acc + x[i];
                x[i] = acc;
            }
        }
        ampy_ewise_store(buf, c->kind, out + off * c->sout, c->sout, c->out_dt, k);
    }
}

static void scan_inner(char **ptrs, const int64_t *s, int64_t n, void *arg)
{
    for (int64_t j = 0; j < n; j++)
        scan_line((const line_ctx *)arg, ptrs[0] + j * s[0], ptrs[1] + j * s[1]);
}

/* Iterate over every dim but `dim`, calling fn on whole lines. */
static ampy_status run_lines(const char *what, int ndim, const int64_t *shape, const void *in,
                             const int64_t *in_strides, int dim, void *out,
                             const int64_t *out_strides, line_ctx *c, ampy_inner_fn fn)
{
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad ndim %d", what, ndim);
    if (dim < 0 || dim >= (ndim > 0 ? ndim : 1))
        return ampy_error(AMPY_ERR_VALUE, "%s: dim %d out of range for %d dims", what, dim, ndim);
    c->len = ndim > 0 ? shape[dim] : 1;
    c->sin = ndim > 0 ? in_strides[dim] : 0;
    c->sout = ndim > 0 ? out_strides[dim] : 0;
    int nk = 0;
    int64_t kshape[AMPY_MAX_DIMS], kstr[2 * AMPY_MAX_DIMS], os[AMPY_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        if (d == dim)
            continue;
        kshape[nk] = shape[d];
        kstr[nk] = in_strides[d];
        os[nk] = out_strides[d];
        nk++;
    }
    memcpy(kstr + nk, os, sizeof(int64_t) * (size_t)nk);
    if (c->len == 0)
        return AMPY_OK;
    char *ptrs[2] = {(char *)in, (char *)out};
    const int64_t grain = c->len >= 8192 ? 1 : 8192 / c->len;
    return ampy_iter_run(nk, kshape, 2, ptrs, kstr, fn, c, grain);
}

ampy_status ampy_softmax(int ndim, const int64_t *shape, const void *in,
                         const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                         const int64_t *out_strides, ampy_dtype out_dtype, int log)
{
    const char *what = log ? "log_softmax" : "softmax";
    if (!ampy_dtype_is_float(in_dtype) || !ampy_dtype_is_float(out_dtype))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected floating dtypes, got %s -> %s", what,
                          ampy_dtype_name(in_dtype), ampy_dtype_name(out_dtype));
    line_ctx c;
    memset(&c, 0, sizeof c);
    c.in_dt = in_dtype;
    c.out_dt = out_dtype;
    c.kind = in_dtype == AMPY_FLOAT64 ? AMPY_KIND_F64 : AMPY_KIND_F32;
    c.log = log;
#ifdef AMPY_X86_SIMD
    if (c.kind == AMPY_KIND_F32 && ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
        c.simd = 1;
        c.bf16ok = ampy_cpu_level_get() >= AMPY_CPU_AVX512_BF16;
        if (in_dtype != AMPY_FLOAT32)
            c.to_f32 = (void *)ampy_cast_simd_kernel(ampy_cpu_level_get(), in_dtype, AMPY_FLOAT32);
        if (out_dtype != AMPY_FLOAT32)
            c.from_f32 = (void *)ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32, out_dtype);
    }
#endif
    return run_lines(what, ndim, shape, in, in_strides, dim, out, out_strides, &c, softmax_inner);
}

ampy_status ampy_scan(int op, int ndim, const int64_t *shape, const void *in,
                      const int64_t *in_strides, ampy_dtype in_dtype, int dim, void *out,
                      const int64_t *out_strides, ampy_dtype out_dtype)
{
    if (op != AMPY_SCAN_CUMSUM && op != AMPY_SCAN_CUMPROD)
        return ampy_error(AMPY_ERR_VALUE, "scan: invalid op %d", op);
    if (!ampy_dtype_valid(in_dtype) || !ampy_dtype_valid(out_dtype))
        return ampy_error(AMPY_ERR_VALUE, "scan: invalid dtype code");
    line_ctx c;
    memset(&c, 0, sizeof c);
    c.in_dt = in_dtype;
    c.out_dt = out_dtype;
    c.op = op;
    c.kind = (ampy_dtype_is_float(in_dtype) || ampy_dtype_is_float(out_dtype)) ? AMPY_KIND_F64
                                                                               : AMPY_KIND_I64;
    return run_lines(op ? "cumprod" : "cumsum", ndim, shape, in, in_strides, dim, out,
                     out_strides, &c, scan_inner);
}
