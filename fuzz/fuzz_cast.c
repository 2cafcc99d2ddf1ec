/* fuzz_cast.c — libFuzzer target for libampy's cast kernels (cast.h).
 *
 * The input bytes choose everything:
 *   [0] src dtype (mod 8)      [1] dst dtype (mod 8)
 *   [2] CPU level (mod 3: portable, AVX2, AVX-512 — clamped by the machine)
 *   [3] mode: low 2 bits = ndim (0..3) for the strided entry point, or the
 *       contiguous entry points (ampy_cast_f32_to_f16, ...) when bit 2 is
 *       set; bit 3: destination dims laid out in reverse order (transposed);
 *       bit 4: in place (dst = src memory, same strides) when the element
 *       sizes match and the source has no broadcast dim
 *   then per dim: [size (mod 40, or mod 700 for ndim 1)] [src stride, int8]
 *   the rest: source element bytes (repeated to fill the source span).
 * Every output element is compared, as bits, with a scalar conversion written
 * here from elem.h's per-element functions; elements of dst not addressed by
 * the view must stay untouched. Buffers are allocated to the exact byte span
 * the view addresses so ASan catches any read or write outside it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/dtype.h"
#include "ampy/elem.h"
#include "ampy/iter.h"

/* The value of one source element in its "kind": float for f32/f16/bf16,
 * double for f64, int64 for the integer types. */
typedef struct {
    int kind; /* 0 float, 1 double, 2 int */
    float f;
    double d;
    int64_t i;
} val_t;

static val_t load(int dt, const unsigned char *p)
{
    val_t v = {0, 0.0f, 0.0, 0};
    switch (dt) {
    case AMPY_FLOAT32: memcpy(&v.f, p, 4); break;
    case AMPY_FLOAT16: { uint16_t h; memcpy(&h, p, 2); v.f = ampy_f16_to_f32(h); break; }
    case AMPY_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); v.f = ampy_bf16_to_f32(h); break; }
    case AMPY_FLOAT64: v.kind = 1; memcpy(&v.d, p, 8); break;
    case AMPY_INT64: v.kind = 2; memcpy(&v.i, p, 8); break;
    case AMPY_INT32: { int32_t x; memcpy(&x, p, 4); v.kind = 2; v.i = x; break; }
    case AMPY_UINT8: v.kind = 2; v.i = p[0]; break;
    case AMPY_BOOL: v.kind = 2; v.i = p[0] != 0; break;
    }
    return v;
}

/* Expected destination bytes for source element p (out: ampy_dtype_size(ddt)
 * bytes): a same-dtype cast copies bits (cast.h), anything else converts. */
static void store(int dt, val_t v, unsigned char *out);
static void expect(int sdt, const unsigned char *p, int ddt, unsigned char *out)
{
    if (sdt == ddt)
        memcpy(out, p, ampy_dtype_size(sdt));
    else
        store(ddt, load(sdt, p), out);
}

/* Expected destination bytes for one value (out: ampy_dtype_size(dt) bytes). */
static void store(int dt, val_t v, unsigned char *out)
{
    double d = v.kind == 0 ? (double)v.f : v.kind == 1 ? v.d : (double)v.i;
    switch (dt) {
    case AMPY_FLOAT32: {
        float f = v.kind == 0 ? v.f : v.kind == 1 ? (float)v.d : (float)v.i;
        memcpy(out, &f, 4);
        break;
    }
    case AMPY_FLOAT16: {
        uint16_t h = v.kind == 0 ? ampy_f32_to_f16(v.f) : ampy_f64_to_f16(d);
        memcpy(out, &h, 2);
        break;
    }
    case AMPY_BFLOAT16: {
        uint16_t h = v.kind == 0 ? ampy_f32_to_bf16(v.f) : ampy_f64_to_bf16(d);
        memcpy(out, &h, 2);
        break;
    }
    case AMPY_FLOAT64: memcpy(out, &d, 8); break;
    case AMPY_INT64: {
        int64_t x = v.kind == 2 ? v.i : ampy_f64_to_i64(d);
        memcpy(out, &x, 8);
        break;
    }
    case AMPY_INT32: {
        int64_t x = v.kind == 2 ? v.i : ampy_f64_to_i64(d);
        int32_t y = (int32_t)(uint32_t)(uint64_t)x;
        memcpy(out, &y, 4);
        break;
    }
    case AMPY_UINT8: {
        int64_t x = v.kind == 2 ? v.i : ampy_f64_to_i64(d);
        out[0] = (unsigned char)(uint64_t)x;
        break;
    }
    case AMPY_BOOL:
        out[0] = v.kind == 0 ? v.f != 0.0f : v.kind == 1 ? v.d != 0.0 : v.i != 0;
        break;
    }
}

static void show(const char *label, const unsigned char *p, size_t n)
{
    fprintf(stderr, "  %s:", label);
    for (size_t i = n; i-- > 0;)
        fprintf(stderr, "%02x", p[i]);
    fprintf(stderr, "\n");
}

static void fail(const char *what, int sdt, int ddt, int64_t k)
{
    fprintf(stderr, "fuzz_cast: %s (%s -> %s, element %lld, cpu level %s)\n", what,
            ampy_dtype_name(sdt), ampy_dtype_name(ddt), (long long)k,
            ampy_cpu_level_name(ampy_cpu_level_get()));
    abort();
}

typedef ampy_status (*contig_fn)(const void *, void *, int64_t);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    const int sdt = data[0] % AMPY_NUM_DTYPES, ddt = data[1] % AMPY_NUM_DTYPES;
    ampy_cpu_level_set(data[2] % 3);
    const int mode = data[3];
    const int contig = (mode & 4) != 0;
    int ndim = contig ? 1 : mode & 3;
    const int reverse = (mode & 8) != 0;
    size_t pos = 4;

    if (contig) { /* only the four AMP pairs have contiguous entry points */
        static const int pairs[4][2] = {{AMPY_FLOAT32, AMPY_FLOAT16}, {AMPY_FLOAT32, AMPY_BFLOAT16},
                                        {AMPY_FLOAT16, AMPY_FLOAT32}, {AMPY_BFLOAT16, AMPY_FLOAT32}};
        const int k = data[0] % 4;
        const int s2 = pairs[k][0], d2 = pairs[k][1];
        if (pos + 2 > size)
            return 0;
        int64_t n = (int64_t)(((unsigned)data[pos] << 8 | data[pos + 1]) % 2048);
        pos += 2;
        const size_t ss = ampy_dtype_size(s2), ds = ampy_dtype_size(d2);
        unsigned char *src = malloc(n * ss + 1), *dst = malloc(n * ds + 1);
        const size_t rest = size - pos;
        for (size_t b = 0; b < (size_t)n * ss; b++)
            src[b] = rest ? data[pos + b % rest] : (unsigned char)(b * 131u);
        ampy_status st;
        switch (k) {
        case 0: st = ampy_cast_f32_to_f16((const float *)src, (uint16_t *)dst, n); break;
        case 1: st = ampy_cast_f32_to_bf16((const float *)src, (uint16_t *)dst, n); break;
        case 2: st = ampy_cast_f16_to_f32((const uint16_t *)src, (float *)dst, n); break;
        default: st = ampy_cast_bf16_to_f32((const uint16_t *)src, (float *)dst, n); break;
        }
        if (st != AMPY_OK)
            fail("contiguous cast returned an error", s2, d2, -1);
        for (int64_t i = 0; i < n; i++) {
            unsigned char want[8];
            expect(s2, src + i * ss, d2, want);
            if (memcmp(want, dst + i * ds, ds) != 0) {
                show("source", src + i * ss, ss);
                show("expected", want, ds);
                show("got", dst + i * ds, ds);
                fail("contiguous cast: wrong bits", s2, d2, i);
            }
        }
        /* a negative count is refused without touching memory */
        if (ampy_cast_f32_to_f16((const float *)src, (uint16_t *)dst, -1 - n) == AMPY_OK)
            fail("negative n accepted", s2, d2, -1);
        free(src);
        free(dst);
        return 0;
    }

    int64_t shape[AMPY_MAX_DIMS], sstr[AMPY_MAX_DIMS], dstr[AMPY_MAX_DIMS];
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (pos + 2 > size)
            return 0;
        shape[d] = data[pos] % (ndim == 1 ? 700 : 40);
        if (ndim == 1 && data[pos] >= 128) /* long runs reach the SIMD bodies and tails */
            shape[d] = (int64_t)data[pos] * 3 + data[pos + 1] % 7;
        sstr[d] = (int8_t)data[pos + 1];
        if (sstr[d] > 64 || sstr[d] < -64)
            sstr[d] = sstr[d] % 5; /* keep small strides (incl. 0 and negative) common */
        numel *= shape[d];
        pos += 2;
    }
    const size_t ss = ampy_dtype_size(sdt), ds = ampy_dtype_size(ddt);

    /* dst strides: contiguous row-major, or with the dims laid out reversed */
    int64_t acc = 1;
    for (int k = 0; k < ndim; k++) {
        int d = reverse ? k : ndim - 1 - k;
        dstr[d] = acc;
        acc *= shape[d] ? shape[d] : 1;
    }
    /* source span in elements: [lo, hi] */
    int64_t lo = 0, hi = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            continue;
        int64_t e = (shape[d] - 1) * sstr[d];
        if (e < 0)
            lo += e;
        else
            hi += e;
    }
    const int64_t span = numel ? hi - lo + 1 : 0;
    const int inplace = (mode & 16) && ss == ds && numel > 0;
    int has_bcast = 0;
    for (int d = 0; d < ndim; d++)
        if (sstr[d] == 0 && shape[d] > 1)
            has_bcast = 1;

    unsigned char *sbuf = malloc(span * ss + 1);
    const size_t rest = size - pos;
    for (size_t b = 0; b < (size_t)span * ss; b++)
        sbuf[b] = rest ? data[pos + b % rest] : (unsigned char)(b * 37u + 11u);
    if (sdt == AMPY_BOOL) /* ampy bools are 0 or 1 */
        for (int64_t b = 0; b < span; b++)
            sbuf[b] &= 1;
    unsigned char *orig = malloc(span * ss + 1);
    memcpy(orig, sbuf, span * ss);
    const unsigned char *sbase = sbuf - lo * (int64_t)ss;
    const unsigned char *obase = orig - lo * (int64_t)ss;

    int self_overlap = has_bcast;
    if (inplace && !has_bcast) { /* in place needs every element addressed once */
        unsigned char *seen = calloc(span + 1, 1);
        int64_t idx[AMPY_MAX_DIMS] = {0};
        for (int64_t k = 0; k < numel && !self_overlap; k++) {
            int64_t off = -lo;
            for (int d = 0; d < ndim; d++)
                off += idx[d] * sstr[d];
            self_overlap |= seen[off]++ != 0;
            for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--)
                idx[d] = 0;
        }
        free(seen);
    }
    if (inplace && !self_overlap) {
        /* identical memory and strides: each element is read before written */
        ampy_status st = ampy_cast(ndim, shape, sbase, sstr, sdt, (void *)sbase, sstr, ddt);
        if (st != AMPY_OK)
            fail("in-place cast returned an error", sdt, ddt, -1);
        int64_t idx[AMPY_MAX_DIMS] = {0};
        for (int64_t k = 0; k < numel; k++) {
            int64_t off = 0;
            for (int d = 0; d < ndim; d++)
                off += idx[d] * sstr[d];
            unsigned char want[8];
            expect(sdt, obase + off * (int64_t)ss, ddt, want);
            if (memcmp(want, sbase + off * (int64_t)ss, ds) != 0) {
                show("source", obase + off * (int64_t)ss, ss);
                show("expected", want, ds);
                show("got", sbase + off * (int64_t)ss, ds);
                fail("in-place cast: wrong bits", sdt, ddt, k);
            }
            for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--)
                idx[d] = 0;
        }
        free(sbuf);
        free(orig);
        return 0;
    }

    unsigned char *dbuf = malloc(numel * ds + 1);
    memset(dbuf, 0xA5, numel * ds);
    ampy_status st = ampy_cast(ndim, shape, sbase, sstr, sdt, dbuf, dstr, ddt);
    if (st != AMPY_OK)
        fail("cast returned an error", sdt, ddt, -1);
    if (memcmp(sbuf, orig, span * ss) != 0)
        fail("the source was modified", sdt, ddt, -1);
    int64_t idx[AMPY_MAX_DIMS] = {0};
    for (int64_t k = 0; k < numel; k++) {
        int64_t so = 0, dof = 0;
        for (int d = 0; d < ndim; d++) {
            so += idx[d] * sstr[d];
            dof += idx[d] * dstr[d];
        }
        unsigned char want[8];
        expect(sdt, sbase + so * (int64_t)ss, ddt, want);
        if (memcmp(want, dbuf + dof * (int64_t)ds, ds) != 0) {
            show("source", sbase + so * (int64_t)ss, ss);
            show("expected", want, ds);
            show("got", dbuf + dof * (int64_t)ds, ds);
            fail("strided cast: wrong bits", sdt, ddt, k);
        }
        for (int d = ndim - 1; d >= 0 && ++idx[d] == shape[d]; d--)
            idx[d] = 0;
    }
    /* invalid arguments are refused */
    if (ampy_cast(ndim, shape, sbase, sstr, (ampy_dtype)(AMPY_NUM_DTYPES + (mode >> 5)), dbuf,
                  dstr, ddt) == AMPY_OK)
        fail("invalid dtype accepted", sdt, ddt, -1);
    if (ampy_cast(AMPY_MAX_DIMS + 1, shape, sbase, sstr, sdt, dbuf, dstr, ddt) == AMPY_OK ||
        ampy_cast(-1, shape, sbase, sstr, sdt, dbuf, dstr, ddt) == AMPY_OK)
        fail("bad ndim accepted", sdt, ddt, -1);
    free(sbuf);
    free(orig);
    free(dbuf);
    return 0;
}
