/* test_cuda_twin_math.c — the shared functions the CUDA twins of the cnn,
 * sort and multinomial kernels are built from (ampy/cnn_math.h,
 * ampy/sort_math.h, ampy/multinomial_math.h) give the CPU kernels' results. Each check runs, on the host, what one CUDA
 * thread computes (the same function calls in the same order, written out
 * here as the loop body of cuda/cnn_pool.cu's gathers and cuda/sort.cu's
 * network) and compares it bit for bit with libampy's CPU kernel:
 *   - the pool covers against a brute-force search of the windows;
 *   - avg_pool2d / adaptive_avg_pool2d backward as per-input gathers against
 *     the CPU's scatters, every dtype;
 *   - max_pool2d / avg_pool2d forward per output against the CPU;
 *   - a bitonic network under ampy_sort_before_f/_i (the padding rule of
 *     sort.cu) against ampy_sort's stable order, NaN and ties included;
 *   - the inverse-CDF search against a linear scan, and the key order.
 * No GPU is involved: this is the part of the CUDA code that can run here. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/cnn.h"
#include "ampy/cnn_math.h"
#include "ampy/multinomial_math.h"
#include "ampy/sort.h"
#include "ampy/sort_math.h"
#include "ctest.h"

static const int DTS[4] = {AMPY_FLOAT32, AMPY_FLOAT16, AMPY_BFLOAT16, AMPY_FLOAT64};

static double rnd_unit(void) { return (double)(rnd32() % 20001) / 10000.0 - 1.0; }

static void fill(void *p, int dt, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ampy_nn_store1(p, dt, i, rnd_unit() * 3.0);
}

static int same_bytes(const void *a, const void *b, int dt, int64_t n)
{
    return memcmp(a, b, (size_t)n * (dt == AMPY_FLOAT64 ? 8 : dt == AMPY_FLOAT32 ? 4 : 2)) == 0;
}

static void test_pool_cover(void)
{
    for (int64_t n = 1; n <= 9; n++)
        for (int64_t k = 1; k <= 4; k++)
            for (int64_t s = 1; s <= 3; s++)
                for (int64_t p = 0; p <= k / 2; p++) {
                    int64_t nout = ampy_cnn_pool_out(n, k, s, p, 1, 0);
                    for (int64_t i = 0; nout > 0 && i < n; i++) {
                        int64_t o0, o1, b0 = -1, b1 = -1;
                        ampy_cnn_pool_cover(i, k, s, p, nout, &o0, &o1);
                        for (int64_t o = 0; o < nout; o++)
                            if (o * s - p <= i && i < o * s - p + k) {
                                if (b0 < 0)
                                    b0 = o;
                                b1 = o + 1;
                            }
                        if (b0 < 0)
                            b0 = b1 = o0;
                        CHECK(o0 == b0 && o1 == b1, "pool cover n%lld k%lld s%lld p%lld i%lld",
                              (long long)n, (long long)k, (long long)s, (long long)p,
                              (long long)i);
                    }
                }
    for (int64_t n = 1; n <= 17; n++)
        for (int64_t m = 1; m <= 17; m++)
            for (int64_t i = 0; i < n; i++) {
                int64_t o0, o1, b0 = -1, b1 = -1;
                ampy_cnn_adaptive_cover(i, n, m, &o0, &o1);
                for (int64_t o = 0; o < m; o++)
                    if (ampy_cnn_adaptive_start(o, m, n) <= i && i < ampy_cnn_adaptive_end(o, m, n)) {
                        if (b0 < 0)
                            b0 = o;
                        b1 = o + 1;
                    }
                CHECK(o0 == b0 && o1 == b1, "adaptive cover n%lld m%lld i%lld", (long long)n,
                      (long long)m, (long long)i);
            }
}

/* cuda/cnn_pool.cu's cnn_avg_pool_bwd_kernel body for input i */
static double avg_gather(int64_t i, int64_t H, int64_t W, int64_t OH, int64_t OW,
                         const ampy_cnn_window *win, int inc, int64_t divisor, const void *dy,
                         int dt)
{
    const int64_t iw = i % W, r = i / W, ih = r % H, ob = (r / H) * OH * OW;
    int64_t oh0, oh1, ow0, ow1;
    ampy_cnn_pool_cover(ih, win->kh, win->sh, win->ph, OH, &oh0, &oh1);
    ampy_cnn_pool_cover(iw, win->kw, win->sw, win->pw, OW, &ow0, &ow1);
    double acc = 0.0;
    for (int64_t oh = oh0; oh < oh1; oh++)
        for (int64_t ow = ow0; ow < ow1; ow++) {
            int64_t h0, h1, w0, w1, div;
            if (!ampy_cnn_avg_window(H, W, oh, ow, win, inc, divisor, &h0, &h1, &w0, &w1, &div) ||
                ih < h0 || ih >= h1 || iw < w0 || iw >= w1)
                continue;
            const double g = ampy_nn_load1(dy, dt, ob + oh * OW + ow);
            const double d = dt == AMPY_FLOAT64 ? g / (double)div
                                                : ampy_cnn_round_to(dt, (float)g / (float)div);
            acc = ampy_cnn_add_to(dt, acc, d);
        }
    return acc;
}

/* cnn_adaptive_bwd_kernel's body for input i */
static double adaptive_gather(int64_t i, int64_t H, int64_t W, int64_t OH, int64_t OW,
                              const void *dy, int dt)
{
    const int64_t iw = i % W, r = i / W, ih = r % H, ob = (r / H) * OH * OW;
    int64_t oh0, oh1, ow0, ow1;
    ampy_cnn_adaptive_cover(ih, H, OH, &oh0, &oh1);
    ampy_cnn_adaptive_cover(iw, W, OW, &ow0, &ow1);
    double acc = 0.0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        const double kh =
            (double)(ampy_cnn_adaptive_end(oh, OH, H) - ampy_cnn_adaptive_start(oh, OH, H));
        for (int64_t ow = ow0; ow < ow1; ow++) {
            const double kw =
                (double)(ampy_cnn_adaptive_end(ow, OW, W) - ampy_cnn_adaptive_start(ow, OW, W));
            const double g = ampy_nn_load1(dy, dt, ob + oh * OW + ow);
            const double d =
                dt == AMPY_FLOAT64
                    ? g / kh / kw
                    : ampy_cnn_round_to(dt, ampy_cnn_round_to(dt, (float)g / (float)kh) /
                                                (float)kw);
            acc = ampy_cnn_add_to(dt, acc, d);
        }
    }
    return acc;
}

static void test_pool_gathers(void)
{
    static double dy[512], dx_cpu[512], dx_gpu[512], x[512], y[512];
    static int64_t idx[512];
    const ampy_cnn_window wins[] = {{3, 3, 2, 2, 1, 1, 1, 1}, {2, 3, 1, 2, 0, 1, 1, 1},
                                    {3, 2, 3, 1, 1, 0, 1, 1}, {4, 4, 2, 3, 2, 1, 1, 1}};
    const int64_t P = 2, H = 7, W = 9;
    for (int d = 0; d < 4; d++)
        for (int wi = 0; wi < 4; wi++)
            for (int mode = 0; mode < 3; mode++) {
                const int dt = DTS[d];
                const ampy_cnn_window *w = &wins[wi];
                const int inc = mode == 1;
                const int64_t div = mode == 2 ? 5 : 0;
                const int64_t OH = ampy_cnn_pool_out(H, w->kh, w->sh, w->ph, 1, mode == 1);
                const int64_t OW = ampy_cnn_pool_out(W, w->kw, w->sw, w->pw, 1, mode == 1);
                fill(dy, dt, P * OH * OW);
                fill(x, dt, P * H * W);
                CHECK(ampy_cnn_avg_pool2d_bwd(P, H, W, OH, OW, w, inc, div, dy, dt, dx_cpu) ==
                          AMPY_OK, "avg bwd");
                for (int64_t i = 0; i < P * H * W; i++)
                    ampy_nn_store1(dx_gpu, dt, i, avg_gather(i, H, W, OH, OW, w, inc, div, dy, dt));
                CHECK(same_bytes(dx_cpu, dx_gpu, dt, P * H * W), "avg gather dt %d win %d mode %d",
                      dt, wi, mode);
                /* the forwards' per-output bodies */
                CHECK(ampy_cnn_max_pool2d_fwd(P, H, W, OH, OW, w, x, dt, y, idx) == AMPY_OK, "max");
                int ok = 1;
                for (int64_t o = 0; o < P * OH * OW; o++) {
                    const int64_t ow = o % OW, r = o / OW, oh = r % OH, p = r / OH;
                    double m;
                    int64_t b = ampy_cnn_max_window(x, dt, p * H * W, H, W, oh, ow, w, &m);
                    ok = ok && b == idx[o] && m == ampy_nn_load1(y, dt, o);
                }
                CHECK(ok, "max window dt %d win %d", dt, wi);
            }
    for (int d = 0; d < 4; d++)
        for (int64_t OH = 1; OH <= 9; OH += 2)
            for (int64_t OW = 1; OW <= 10; OW += 3) {
                const int dt = DTS[d];
                fill(dy, dt, P * OH * OW);
                CHECK(ampy_cnn_adaptive_avg_pool2d_bwd(P, H, W, OH, OW, dy, dt, dx_cpu) == AMPY_OK,
                      "adaptive bwd");
                for (int64_t i = 0; i < P * H * W; i++)
                    ampy_nn_store1(dx_gpu, dt, i, adaptive_gather(i, H, W, OH, OW, dy, dt));
                CHECK(same_bytes(dx_cpu, dx_gpu, dt, P * H * W), "adaptive gather dt %d %lldx%lld",
                      dt, (long long)OH, (long long)OW);
            }
}

/* cuda/sort.cu's network: entries (key, pos) padded to L, positions >= n last */
static int net_before(double ak, int64_t ai, double bk, int64_t bi, int64_t n, int desc)
{
    if (ai >= n || bi >= n)
        return ai < bi;
    return ampy_sort_before_f(ak, ai, bk, bi, desc);
}

static void bitonic(double *key, int64_t *pos, int64_t L, int64_t n, int desc)
{
    for (int64_t k = 2; k <= L; k <<= 1)
        for (int64_t j = k >> 1; j > 0; j >>= 1)
            for (int64_t i = 0; i < L; i++) {
                const int64_t l = i ^ j;
                if (l <= i)
                    continue;
                const int up = (i & k) == 0;
                if (up ? net_before(key[l], pos[l], key[i], pos[i], n, desc)
                       : net_before(key[i], pos[i], key[l], pos[l], n, desc)) {
                    double tk = key[i];
                    key[i] = key[l], key[l] = tk;
                    int64_t tp = pos[i];
                    pos[i] = pos[l], pos[l] = tp;
                }
            }
}

static void test_sort_network(void)
{
    static double in[300], key[512], vals[300];
    static int64_t pos[512], idx[300];
    for (int64_t n = 1; n <= 300; n += 37)
        for (int desc = 0; desc < 2; desc++)
            for (int kind = 0; kind < 3; kind++) {
                for (int64_t i = 0; i < n; i++) {
                    uint32_t r = rnd32();
                    in[i] = kind == 0 ? rnd_unit() : (double)(r % 4);
                    if (kind == 2 && r % 5 == 0)
                        in[i] = r % 2 ? NAN : -0.0;
                }
                int64_t L = 1;
                while (L < n)
                    L <<= 1;
                for (int64_t i = 0; i < L; i++)
                    key[i] = i < n ? in[i] : 0.0, pos[i] = i;
                bitonic(key, pos, L, n, desc);
                CHECK(ampy_sort(AMPY_FLOAT64, 1, n, in, desc, vals, idx) == AMPY_OK, "sort");
                int ok = 1;
                for (int64_t i = 0; i < n; i++)
                    ok = ok && pos[i] == idx[i];
                CHECK(ok, "bitonic order n %lld desc %d kind %d", (long long)n, desc, kind);
            }
    CHECK(ampy_sort_before_i(3, 5, 3, 7, 1) && !ampy_sort_before_i(2, 0, 3, 1, 1) &&
              ampy_sort_before_i(2, 9, 3, 1, 0),
          "integer order");
}

static void test_norm_terms(void)
{
    double unb, a, b, c2, c3;
    double inv = ampy_cnn_bn_train_invstd(8.0, 4.0, 0.0, 1, &unb);
    CHECK(inv == 1.0 / sqrt(2.0) && unb == 8.0 / 3.0, "train invstd f64");
    inv = ampy_cnn_bn_train_invstd(8.0, 4.0, 1e-5, 0, &unb);
    CHECK(inv == (double)(float)(1.0 / sqrt((double)(8.0f / 4.0f) + 1e-5)) &&
              unb == (double)(8.0f / 3.0f),
          "train invstd f32");
    CHECK(ampy_cnn_bn_train_invstd(0.0, 4.0, 0.0, 0, &unb) == 0.0, "zero variance, zero eps");
    CHECK(ampy_cnn_bn_eval_invstd(3.0, 1.0, 1) == 0.5, "eval invstd");
    float rm[1] = {1.0f}, rv[1] = {2.0f};
    ampy_cnn_bn_update_running(rm, rv, AMPY_FLOAT32, 0, 0.1, 3.0, 4.0, 0);
    CHECK(rm[0] == 0.1f * 3.0f + (1.0f - 0.1f) * 1.0f &&
              rv[0] == fmaf(0.1f, 4.0f, (1.0f - 0.1f) * 2.0f),
          "running update f32");
    ampy_cnn_norm_affine(0.5, 3.0, 2.0, 1.0, 1, &a, &b);
    CHECK(a == 1.5 && b == -2.0, "affine");
    ampy_cnn_gn_bwd_coef(2.0, 1.0, 0.5, 2.0, 4, &c2, &c3);
    CHECK(c2 == (1.0 * 0.5 - 2.0) * 8.0 / 4.0 && c3 == -c2 * 0.5 - 1.0 * 2.0 / 4.0, "gn coef");
    CHECK(ampy_cnn_bilinear_d(1, 2, 3, 4, 0.5, 0.5, 0.25, 0.75) == 0.5 * 1.75 + 0.5 * 3.75,
          "bilinear");
    CHECK(ampy_cnn_add_to(AMPY_BFLOAT16, 256.0, 1.0) == 256.0 &&
              ampy_cnn_add_to(AMPY_FLOAT32, 256.0, 1.0) == 257.0,
          "add_to rounds to the dtype");
}

/* ampy_mn_search against a linear scan; ampy_mn_key's ordering */
static void test_multinomial_terms(void)
{
    double p[40], cdf[40];
    for (int trial = 0; trial < 200; trial++) {
        const int64_t n = 1 + rnd32() % 40;
        double acc = 0.0;
        int64_t last = 0;
        for (int64_t j = 0; j < n; j++) {
            p[j] = rnd32() % 3 == 0 ? 0.0 : (double)(rnd32() % 1000) / 7.0;
            if (j == 0 && trial % 2)
                p[j] = 1.0;
            acc += p[j];
            cdf[j] = acc;
            if (p[j] > 0.0)
                last = j;
        }
        if (!(acc > 0.0))
            continue;
        for (int s = 0; s < 20; s++) {
            const double u = (double)(rnd32() % 100000) / 100000.0;
            int64_t want = 0;
            while (want < n - 1 && !(cdf[want] > u * acc))
                want++;
            want = want > last ? last : want;
            const int64_t got = ampy_mn_search(cdf, n, last, u);
            CHECK(got == want && p[got] > 0.0, "search n %lld u %g", (long long)n, u);
        }
    }
    CHECK(ampy_mn_key(2.0, 0.0) == INFINITY, "u = 0 gives an infinite key");
    CHECK(ampy_mn_key(2.0, 0.5) > ampy_mn_key(1.0, 0.5), "heavier weight, larger key");
    CHECK(ampy_mn_key(0.0, 0.999) < 0.0 && ampy_mn_key(1e-300, 0.999) > 0.0,
          "zero weights below every positive one");
}

int main(void)
{
    test_multinomial_terms();
    test_pool_cover();
    test_pool_gathers();
    test_sort_network();
    test_norm_terms();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
}
