/* test_conv_math.c — the helpers of ampy/conv_math.h, which csrc/conv.c and
 * cuda/conv.cu share: the unfold's index (against torch's formula written
 * out), its inverse (against a search over every output row), the
 * overflow-safe product and the geometry check's accept/reject cases. */
#include <stdio.h>
#include <string.h>

#include "ampy/conv_math.h"

#include "ctest.h"

static void test_indices(void)
{
    for (int iter = 0; iter < 20000; iter++) {
        int64_t s = 1 + rnd32() % 4, p = rnd32() % 4, d = 1 + rnd32() % 3, k = rnd32() % 5;
        int64_t n_out = 1 + rnd32() % 9, i = (int64_t)(rnd32() % 24) - 4;
        int64_t want = -1;
        for (int64_t o = 0; o < n_out; o++)
            if (o * s - p + k * d == i) {
                CHECK(want < 0, "two output rows read input %lld", (long long)i);
                want = o;
            }
        int64_t got = ampy_conv_out_index(i, k, s, p, d, n_out);
        CHECK(got == want, "out_index(%lld, k=%lld, s=%lld, p=%lld, d=%lld, n=%lld) = %lld, "
              "want %lld", (long long)i, (long long)k, (long long)s, (long long)p, (long long)d,
              (long long)n_out, (long long)got, (long long)want);
        if (got >= 0)
            CHECK(ampy_conv_in_index(got, k, s, p, d) == i, "in_index is not the inverse");
    }
    CHECK(ampy_conv_in_index(3, 2, 2, 1, 3) == 3 * 2 - 1 + 2 * 3, "in_index formula");
}

static void test_mul(void)
{
    int64_t out = -7;
    CHECK(ampy_conv_mul_ok(3, 5, &out) && out == 15, "3 * 5");
    CHECK(ampy_conv_mul_ok(0, INT64_MAX, &out) && out == 0, "0 * max");
    CHECK(!ampy_conv_mul_ok(INT64_MAX / 2 + 1, 2, &out), "overflow not caught");
    CHECK(!ampy_conv_mul_ok(-1, 2, &out), "negative not caught");
}

static ampy_conv2d_geom good(void)
{
    ampy_conv2d_geom g = {2, 4, 8, 8, 6, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 2};
    return g;
}

static void test_check(void)
{
    ampy_conv2d_geom g = good();
    CHECK(ampy_conv2d_check(&g) == AMPY_OK, "a good geometry is refused: %s", ampy_last_error());
    CHECK(ampy_conv2d_check(NULL) == AMPY_ERR_VALUE, "NULL accepted");
    struct { const char *what; int64_t *field; int64_t value; const char *msg; } bad[] = {
        {"N < 0", &g.N, -1, "negative size"}, {"KH = 0", &g.KH, 0, "kernel size"},
        {"sw = 0", &g.sw, 0, "stride"}, {"dh = 0", &g.dh, 0, "dilation"},
        {"pl < 0", &g.pl, -1, "padding"}, {"groups 3", &g.groups, 3, "groups (3)"},
        {"groups 0", &g.groups, 0, "groups (0)"}, {"huge", &g.H, INT64_MAX / 4, "overflow"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g = good(); /* (the fields point into g) */
        *bad[i].field = bad[i].value;
        CHECK(ampy_conv2d_check(&g) == AMPY_ERR_VALUE, "%s accepted", bad[i].what);
        CHECK(strstr(ampy_last_error(), bad[i].msg) != NULL, "%s: message '%s'", bad[i].what,
              ampy_last_error());
    }
    g = good();
    g.N = 0, g.OH = 0;
    CHECK(ampy_conv2d_check(&g) == AMPY_OK, "empty sizes refused");
}

int main(void)
{
    test_indices();
    test_mul();
    test_check();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
