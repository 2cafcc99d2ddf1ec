/* test_cnn_math.c — the window, index and interpolation formulas of
 * ampy/cnn_math.h that every cnn kernel shares, against their definitions:
 * pooling output sizes against the floor-mode count of whole windows,
 * adaptive windows against floor/ceil of exact rationals, padding maps
 * against hand-written index lists, the interpolation neighbours and
 * lambdas against their invariants. */
#include <math.h>
#include <stdint.h>

#include "ampy/cnn_math.h"
#include "ctest.h"

static void test_pool_out(void)
{
    for (int64_t n = 1; n <= 12; n++)
        for (int64_t k = 1; k <= 4; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t p = 0; p <= k / 2; p++)
                    for (int64_t d = 1; d <= 2; d++) {
                        int64_t span = d * (k - 1) + 1;
                        if (span > n + 2 * p)
                            continue;
                        int64_t floor_ref = (n + 2 * p - span) / s + 1;
                        CHECK(ampy_cnn_pool_out(n, k, s, p, d, 0) == floor_ref,
                              "floor n=%lld k=%lld s=%lld p=%lld d=%lld", (long long)n,
                              (long long)k, (long long)s, (long long)p, (long long)d);
                        int64_t c = ampy_cnn_pool_out(n, k, s, p, d, 1);
                        CHECK(c == floor_ref || c == floor_ref + 1, "ceil range");
                        CHECK((c - 1) * s < n + p, "ceil: the last window starts inside");
                    }
    CHECK(ampy_cnn_pool_out(5, 7, 1, 0, 1, 0) == -1, "window larger than the input");
    CHECK(ampy_cnn_pool_out(6, 3, 2, 1, 1, 1) == 4, "torch: 6, k3 s2 p1 ceil -> 4");
    CHECK(ampy_cnn_pool_out(5, 2, 2, 0, 1, 1) == 3, "torch: 5, k2 s2 ceil -> 3");
}

static void test_adaptive(void)
{
    for (int64_t n = 1; n <= 20; n++)
        for (int64_t m = 1; m <= 20; m++)
            for (int64_t o = 0; o < m; o++) {
                int64_t a = ampy_cnn_adaptive_start(o, m, n), b = ampy_cnn_adaptive_end(o, m, n);
                CHECK(a == (o * n) / m, "start = floor(o n / m)");
                CHECK(b == ((o + 1) * n + m - 1) / m, "end = ceil((o + 1) n / m)");
                CHECK(a < b && b <= n, "non-empty, inside");
            }
}

static void test_pad_src(void)
{
    /* n = 4, lo = 3: outputs 0..9 */
    const int64_t reflect[] = {3, 2, 1, 0, 1, 2, 3, 2, 1, 0};
    const int64_t replicate[] = {0, 0, 0, 0, 1, 2, 3, 3, 3, 3};
    const int64_t circular[] = {1, 2, 3, 0, 1, 2, 3, 0, 1, 2};
    const int64_t constant[] = {-1, -1, -1, 0, 1, 2, 3, -1, -1, -1};
    for (int64_t o = 0; o < 10; o++) {
        CHECK(ampy_cnn_pad_src(o, 4, 3, 1) == reflect[o], "reflect %lld", (long long)o);
        CHECK(ampy_cnn_pad_src(o, 4, 3, 2) == replicate[o], "replicate %lld", (long long)o);
        CHECK(ampy_cnn_pad_src(o, 4, 3, 3) == circular[o], "circular %lld", (long long)o);
        CHECK(ampy_cnn_pad_src(o, 4, 3, 0) == constant[o], "constant %lld", (long long)o);
    }
    CHECK(ampy_cnn_pad_src(0, 4, -2, 0) == 2, "a negative pad crops");
    for (int i = 0; i < 10000; i++) { /* every mode stays inside the input */
        int64_t n = 1 + rnd32() % 9, lo = (int64_t)(rnd32() % 17) - 8;
        int64_t o = rnd32() % 30, mode = 1 + rnd32() % 3;
        if (mode == 1 && (lo >= n || -lo >= n || o - lo >= 2 * n - 1 || o - lo <= -n))
            continue;
        int64_t s = ampy_cnn_pad_src(o, n, lo, (int)mode);
        CHECK(0 <= s && s < n, "mode %lld n %lld lo %lld o %lld", (long long)mode,
              (long long)n, (long long)lo, (long long)o);
    }
}

static void test_interp(void)
{
    CHECK(ampy_cnn_nearest_src(5, 7, 7, 0.0) == 5, "identity");
    CHECK(ampy_cnn_nearest_src(5, 7, 14, 0.0) == 2, "halving shortcut");
    CHECK(ampy_cnn_nearest_src(9, 4, 10, 0.0) == 3, "floor(9 * 0.4) = 3");
    CHECK(ampy_cnn_nearest_src(4, 5, 3, 0.6) == 4, "clamped to n - 1");
    for (int f64 = 0; f64 <= 1; f64++)
        for (int align = 0; align <= 1; align++)
            for (int64_t n = 1; n <= 9; n++)
                for (int64_t m = 1; m <= 17; m++) {
                    double r = ampy_cnn_interp_ratio(n, m, align, 0.0, f64);
                    for (int64_t o = 0; o < m; o++) {
                        int64_t i0, i1;
                        double l0, l1;
                        ampy_cnn_linear_src(o, n, m, r, align, f64, &i0, &i1, &l0, &l1);
                        CHECK(0 <= i0 && i0 <= i1 && i1 <= i0 + 1 && i1 < n, "neighbours");
                        CHECK(l0 >= 0 && l1 >= 0 && l0 <= 1 && l1 <= 1, "lambdas in [0, 1]");
                        CHECK(fabs(l0 + l1 - 1.0) <= 1e-7, "lambdas sum to 1");
                        if (align && m > 1 && n != m && o == m - 1)
                            CHECK(i0 == n - 1 || (i1 == n - 1 && l1 == 1.0),
                                  "align_corners: the last output is the last input");
                    }
                }
    CHECK(ampy_cnn_interp_ratio(4, 8, 0, 2.0, 0) == 0.5, "1 / scale_factor");
    CHECK(ampy_cnn_interp_ratio(4, 8, 1, 2.0, 1) == 3.0 / 7.0, "align: (n-1)/(m-1)");
}

int main(void)
{
    test_pool_out();
    test_adaptive();
    test_pad_src();
    test_interp();
    printf("test_cnn_math: %d checks, %d failures\n", checks, failures);
    return failures != 0;
}
