/* test_elem.c — checks the per-element conversions of elem.h as bits.
 *
 * The reference here is a different algorithm from elem.h's integer code:
 * the input is taken as an exact double, divided by the quantum (the value of
 * one unit in the last place of the target format at that magnitude, a power
 * of two, so the division is exact), rounded with rint() under the default
 * round-to-nearest-even mode, and re-encoded from the rounded value with
 * frexp(). A rounded magnitude reaching 2^(emax+1) is inf.
 *
 * Covered: all 65,536 fp16 and bf16 patterns to f32 and back; f32 -> half on
 * every rounding boundary (each half value, the midpoints between neighbours,
 * and their f32 neighbours) and 2^21 random bit patterns; f64 -> half, with
 * inputs just off a midpoint where rounding through f32 would round twice;
 * isfinite on bits; ampy_f64_to_i64 edge cases. Exits 1 on any failure. */
#include <fenv.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ampy/elem.h"

static long failures;
static long checks;

#define CHECK_BITS(what, in, got, want)                                                    \
    do {                                                                                   \
        checks++;                                                                          \
        if ((got) != (want) && failures++ < 20)                                            \
            fprintf(stderr, "FAIL %s: input 0x%016llx got 0x%llx want 0x%llx\n", (what),   \
                    (unsigned long long)(in), (unsigned long long)(got),                   \
                    (unsigned long long)(want));                                           \
    } while (0)

/* ---- the reference ------------------------------------------------------ */
typedef struct {
    int mant_bits;   /* stored fraction bits: 10 (fp16), 7 (bf16)          */
    int emin;        /* exponent of the smallest normal: -14, -126         */
    int emax;        /* exponent of the largest finite binade: 15, 127     */
    int exp_shift;   /* where the exponent field starts: 10, 7             */
    int bias;        /* 15, 127                                            */
} half_fmt;

static const half_fmt FP16 = {10, -14, 15, 10, 15};
static const half_fmt BF16 = {7, -126, 127, 7, 127};

/* Encode a value that is exactly representable in the format (or >= the
 * overflow bound, which gives inf). */
static uint16_t encode(const half_fmt *f, double v)
{
    uint16_t sign = signbit(v) ? 0x8000u : 0;
    double a = fabs(v);
    uint16_t inf = (uint16_t)(((1u << (15 - f->exp_shift)) - 1u) << f->exp_shift);
    if (a >= ldexp(1.0, f->emax + 1))
        return sign | inf;
    if (a < ldexp(1.0, f->emin)) /* subnormal or zero: count quanta */
        return sign | (uint16_t)(a / ldexp(1.0, f->emin - f->mant_bits));
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    e -= 1;                  /* a = (2m) * 2^e, 2m in [1, 2) */
    uint16_t frac = (uint16_t)((2.0 * m - 1.0) * ldexp(1.0, f->mant_bits));
    return sign | (uint16_t)((e + f->bias) << f->exp_shift) | frac;
}

/* Round a finite double to the format, once, to nearest-even. */
static uint16_t ref_round(const half_fmt *f, double x)
{
    double a = fabs(x);
    if (a >= ldexp(1.0, f->emax + 1))
        return encode(f, x);
    int e = f->emin;
    if (a >= ldexp(1.0, f->emin)) {
        frexp(a, &e);
        e -= 1;
    }
    double q = ldexp(1.0, e - f->mant_bits); /* the quantum at this magnitude */
    double r = rint(a / q) * q;              /* exact scaling, one rounding  */
    return encode(f, copysign(r, x));
}

static double f32_val(uint32_t u) { return (double)ampy_bits_f32(u); }

/* NaN rules the issue fixes: fp16 keeps the sign and the top payload bits
 * (NumPy); an all-zero kept payload becomes 1 so the result stays a NaN.
 * bf16: every NaN is 0x7FC0 (torch). */
static uint16_t ref_f32_to_f16(uint32_t u)
{
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        uint16_t p = (uint16_t)((u & 0x007FFFFFu) >> 13);
        return (uint16_t)(((u >> 16) & 0x8000u) | 0x7C00u | (p ? p : 1u));
    }
    return ref_round(&FP16, f32_val(u));
}
static uint16_t ref_f32_to_bf16(uint32_t u)
{
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    return ref_round(&BF16, f32_val(u));
}

static void check_f32_input(uint32_t u)
{
    CHECK_BITS("f32->f16", u, ampy_f32_to_f16_bits(u), ref_f32_to_f16(u));
    CHECK_BITS("f32->bf16", u, ampy_f32_to_bf16_bits(u), ref_f32_to_bf16(u));
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t splitmix64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- 1. all half patterns to f32 and back -------------------------------- */
static void test_half_round_trip(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t hb = (uint16_t)h;
        /* fp16 -> f32 vs the decoded value: (-1)^s * 2^(e-15) * 1.m or subnormal */
        uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
        uint32_t f = ampy_f16_to_f32_bits(hb);
        float fv = ampy_bits_f32(f);
        if (e == 0x1F) {
            if (m == 0) {
                CHECK_BITS("f16->f32 inf", h, f, (h & 0x8000u) ? 0xFF800000u : 0x7F800000u);
            } else {
                /* NaN stays NaN, sign and payload kept (NumPy) */
                CHECK_BITS("f16->f32 nan", h, f, ((h & 0x8000u) << 16) | 0x7F800000u | (m << 13));
                CHECK_BITS("f16 nan round trip", h, ampy_f32_to_f16_bits(f), hb);
            }
        } else {
            double want = ldexp(e ? (double)(m | 0x400) : (double)m, (e ? (int)e : 1) - 25);
            if (h & 0x8000u)
                want = -want;
            uint64_t wb = ampy_f64_bits(want), gb = ampy_f64_bits((double)fv);
            CHECK_BITS("f16->f32 value", h, gb, wb);
            CHECK_BITS("f16 round trip", h, ampy_f32_to_f16_bits(f), hb);
            CHECK_BITS("f16 via f64", h, ampy_f64_to_f16_bits(ampy_f64_bits(want)), hb);
        }
        /* bf16 -> f32 is the top half of the f32 pattern */
        uint32_t g = ampy_bf16_to_f32_bits(hb);
        CHECK_BITS("bf16->f32", h, g, h << 16);
        int bnan = (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu);
        CHECK_BITS("bf16 round trip", h, ampy_f32_to_bf16_bits(g), bnan ? 0x7FC0u : hb);
        if (!bnan)
            CHECK_BITS("bf16 via f64", h,
                       ampy_f64_to_bf16_bits(ampy_f64_bits((double)ampy_bits_f32(g))), hb);
        /* isfinite on bits vs libm on the decoded value */
        CHECK_BITS("f16 isfinite", h, ampy_f16_isfinite_bits(hb), isfinite(fv) ? 1 : 0);
        CHECK_BITS("bf16 isfinite", h, ampy_bf16_isfinite_bits(hb),
                   isfinite(ampy_bits_f32(g)) ? 1 : 0);
    }
}

/* ---- 2. f32 -> half on every rounding boundary ---------------------------
 * For each finite half h (fp16 and bf16) take its f32 value v and the
 * midpoint to the next half up (exact in f32), and test v, mid and their
 * f32 neighbours +-1, +-2 ulps, on both signs. */
static void test_boundaries(void)
{
    for (uint32_t h = 0; h < 0x7C00; h++) {
        uint32_t lo = ampy_f16_to_f32_bits((uint16_t)h);
        uint32_t hi = ampy_f16_to_f32_bits((uint16_t)(h + 1)); /* 0x7C00 -> inf */
        double mid = (f32_val(lo) + (h + 1 == 0x7C00 ? 65536.0 : f32_val(hi))) / 2;
        uint32_t mb = ampy_f32_bits((float)mid);
        if ((double)ampy_bits_f32(mb) != mid && failures++ < 20)
            fprintf(stderr, "FAIL: fp16 midpoint of 0x%04x not exact in f32\n", h);
        for (int d = -2; d <= 2; d++)
            for (uint32_t s = 0; s <= 1; s++) {
                check_f32_input(((uint32_t)((int64_t)lo + d) & 0x7FFFFFFFu) | (s << 31));
                check_f32_input(((uint32_t)((int64_t)mb + d) & 0x7FFFFFFFu) | (s << 31));
            }
    }
    /* bf16: the boundaries are the low 16 bits of f32 patterns */
    static const uint32_t lows[] = {0x0000, 0x0001, 0x0002, 0x7FFE, 0x7FFF,
                                    0x8000, 0x8001, 0x8002, 0xFFFE, 0xFFFF};
    for (uint32_t h = 0; h < 65536; h++)
        for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
            check_f32_input((h << 16) | lows[k]);
    /* specials */
    static const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                        0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                        0x7FBFFFFFu, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7F802000u,
                                        0x7F801FFFu, 0x00000001u, 0x007FFFFFu, 0x00800000u,
                                        0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x477FE000u,
                                        0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x33800000u,
                                        0x7F7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u, 0xFF7F8000u};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++)
        check_f32_input(specials[k]);
}

/* ---- 3. random f32 bit patterns ------------------------------------------ */
static void test_random_f32(long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t r = splitmix64();
        check_f32_input((uint32_t)r);
        /* also random values with exponents in the fp16 range, 2^-27 .. 2^17 */
        uint32_t u = (uint32_t)(r >> 32);
        check_f32_input((u & 0x807FFFFFu) | ((100u + (u >> 23) % 45u) << 23));
    }
}

/* ---- 4. f64 -> half, rounded once ----------------------------------------- */
static void check_f64_input(uint64_t b)
{
    double x = ampy_bits_f64(b);
    if (isnan(x)) {
        uint16_t g16 = ampy_f64_to_f16_bits(b), gb = ampy_f64_to_bf16_bits(b);
        checks += 2;
        if (((g16 & 0x7C00u) != 0x7C00u || !(g16 & 0x3FFu) || (g16 >> 15) != (b >> 63)) &&
            failures++ < 20)
            fprintf(stderr, "FAIL f64->f16 NaN 0x%016llx -> 0x%04x\n", (unsigned long long)b, g16);
        if (gb != 0x7FC0u && failures++ < 20)
            fprintf(stderr, "FAIL f64->bf16 NaN 0x%016llx -> 0x%04x\n", (unsigned long long)b, gb);
        return;
    }
    CHECK_BITS("f64->f16", b, ampy_f64_to_f16_bits(b), ref_round(&FP16, x));
    CHECK_BITS("f64->bf16", b, ampy_f64_to_bf16_bits(b), ref_round(&BF16, x));
}

static void test_f64(long n)
{
    long double_round_cases = 0;
    /* For each finite half value, the midpoint to the next one nudged by a
     * tiny relative amount both ways: f32 would snap the nudged value back
     * onto the midpoint and then tie-to-even, rounding the wrong way for
     * half of them. */
    for (int fmt = 0; fmt < 2; fmt++) {
        for (uint32_t h = 0; h < (fmt ? 0x7F80u : 0x7C00u); h++) {
            double lo = fmt ? f32_val(h << 16) : f32_val(ampy_f16_to_f32_bits((uint16_t)h));
            double hi = fmt ? (h + 1 == 0x7F80u ? ldexp(1.0, 128) : f32_val((h + 1) << 16))
                            : (h + 1 == 0x7C00u ? 65536.0
                                                : f32_val(ampy_f16_to_f32_bits((uint16_t)(h + 1))));
            double mid = (lo + hi) / 2;
            double eps = (hi - lo) * 0x1p-30; /* far below an f32 ulp of mid */
            double cases[] = {mid, mid + eps, mid - eps, lo, nextafter(lo, 0.0),
                              nextafter(mid, 0.0), nextafter(mid, 1e300)};
            for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
                for (int s = 0; s < 2; s++) {
                    double x = s ? -cases[k] : cases[k];
                    check_f64_input(ampy_f64_bits(x));
                    uint16_t once = fmt ? ampy_f64_to_bf16(x) : ampy_f64_to_f16(x);
                    uint16_t twice = fmt ? ampy_f32_to_bf16((float)x) : ampy_f32_to_f16((float)x);
                    double_round_cases += once != twice;
                }
            }
        }
    }
    /* the nudged midpoints must include cases where rounding twice differs */
    checks++;
    if (double_round_cases < 1000 && failures++ < 20)
        fprintf(stderr, "FAIL: only %ld double-rounding cases exercised\n", double_round_cases);
    static const double sp[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e300, -1e300,
                                1e-300, 65504.0, 65519.99999999, 65520.0, 0x1p-25, 0x1.0000001p-25,
                                0x1p-134, 0x1.0000001p-134, 0x1.ffp127, 0x1.fep127, 5e-324};
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++)
        check_f64_input(ampy_f64_bits(sp[k]));
    uint64_t nan_payload = 0x7FF0000000000001ull; /* payload only in the low bits */
    check_f64_input(nan_payload);
    check_f64_input(nan_payload | (1ull << 63));
    for (long i = 0; i < n; i++) {
        uint64_t r = splitmix64();
        check_f64_input(r);
        /* exponents near the half ranges: 2^-140 .. 2^130 */
        uint64_t e = 1023 - 140 + (r >> 55) % 271;
        check_f64_input((r & 0x800FFFFFFFFFFFFFull) | (e << 52));
    }
    printf("  f64->half: %ld inputs where rounding through f32 would differ\n",
           double_round_cases);
}

/* ---- 5. isfinite on f32 / f64 bits vs libm -------------------------------- */
static void test_isfinite(long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t r = splitmix64();
        float f = ampy_bits_f32((uint32_t)r);
        CHECK_BITS("f32 isfinite", (uint32_t)r, ampy_f32_isfinite(f), isfinite(f) ? 1 : 0);
        double d = ampy_bits_f64(r);
        CHECK_BITS("f64 isfinite", r, ampy_f64_isfinite(d), isfinite(d) ? 1 : 0);
    }
    static const double sp[] = {INFINITY, -INFINITY, NAN, 0.0, 1e308, 5e-324};
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++) {
        CHECK_BITS("f64 isfinite sp", k, ampy_f64_isfinite(sp[k]), isfinite(sp[k]) ? 1 : 0);
        CHECK_BITS("f32 isfinite sp", k, ampy_f32_isfinite((float)sp[k]),
                   isfinite((float)sp[k]) ? 1 : 0);
    }
}

/* ---- 6. f64 -> int64 ------------------------------------------------------ */
static void test_f64_to_i64(void)
{
    const int64_t MIN = INT64_MIN;
    struct { double in; int64_t want; } cases[] = {
        {0.0, 0}, {-0.0, 0}, {0.5, 0}, {-0.5, 0}, {0.999999, 0}, {-0.999999, 0},
        {1.9999, 1}, {-1.9999, -1}, {1e18, 1000000000000000000ll},
        {-1e18, -1000000000000000000ll},
        {9223372036854774784.0, 9223372036854774784ll}, /* largest double < 2^63 */
        {-9223372036854775808.0, MIN},                 /* -2^63 is exact        */
        {9223372036854775808.0, MIN},                  /* 2^63 overflows        */
        {-9223372036854777856.0, MIN},                 /* next double below -2^63 */
        {1e300, MIN}, {-1e300, MIN}, {INFINITY, MIN}, {-INFINITY, MIN}, {NAN, MIN}, {-NAN, MIN},
        {5e-324, 0}, {4294967296.5, 4294967296ll}, {-2147483648.75, -2147483648ll},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        CHECK_BITS("f64->i64", ampy_f64_bits(cases[k].in), (uint64_t)ampy_f64_to_i64(cases[k].in),
                   (uint64_t)cases[k].want);
    /* random in-range values vs truncation done with trunc() + exact compare */
    for (int i = 0; i < 100000; i++) {
        uint64_t r = splitmix64();
        double x = ldexp((double)(r >> 11), (int)(r % 73) - 60) * ((r & 1) ? -1 : 1);
        if (!(fabs(x) < 0x1p63))
            continue;
        double t = trunc(x);
        int64_t got = ampy_f64_to_i64(x);
        checks++;
        if ((double)got != t && failures++ < 20)
            fprintf(stderr, "FAIL f64->i64 %.17g -> %lld\n", x, (long long)got);
    }
}

int main(void)
{
    if (fegetround() != FE_TONEAREST) {
        fprintf(stderr, "test_elem: the reference needs round-to-nearest mode\n");
        return 1;
    }
    test_half_round_trip();
    test_boundaries();
    test_random_f32(1L << 20); /* 2 x 2^20 f32 patterns */
    test_f64(1L << 19);
    test_isfinite(1L << 18);
    test_f64_to_i64();
    printf("test_elem: %ld checks, %ld failures\n", checks, failures);
    return failures ? 1 : 0;
}
