/* test_gemm_matmul.c — torch.matmul's batch broadcasting in libampy
 * (gemm_matmul.h): the plan's shapes and broadcast strides, its errors, the
 * batch flattening, and ampy_gemm_matmul against ampy_gemm_reference item by
 * item (small integers: every float32 sum is exact, so results are equal).
 *
 * Build (from the repository root): make ctest, or
 *   gcc -O2 -std=c11 -Icsrc/include csrc/[a-z]*.c tests/c/test_gemm_matmul.c -lpthread -lm
 * Exit status 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ampy/gemm_matmul.h"

static int failures = 0;

static void expect(int cond, const char *what)
{
    if (!cond) {
        failures++;
        fprintf(stderr, "FAIL: %s (%s)\n", what, ampy_last_error());
    }
}

static void contiguous(int nd, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

static ampy_gemm_operand operand(void *data, int nd, const int64_t *shape, const int64_t *st)
{
    ampy_gemm_operand o = {data, AMPY_FLOAT32, nd, shape, st};
    return o;
}

static void test_plan(void)
{
    int64_t as[4] = {2, 1, 3, 4}, bs[3] = {5, 4, 6}, ast[4], bst[3];
    contiguous(4, as, ast);
    contiguous(3, bs, bst);
    float dummy = 0;
    ampy_gemm_operand a = operand(&dummy, 4, as, ast), b = operand(&dummy, 3, bs, bst);
    ampy_gemm_plan p;
    expect(ampy_gemm_matmul_plan(&a, &b, &p) == AMPY_OK, "plan ok");
    expect(p.nd == 2 && p.M == 3 && p.N == 6 && p.K == 4, "plan sizes");
    expect(p.shape[0] == 2 && p.shape[1] == 5 && p.shape[2] == 3 && p.shape[3] == 6,
           "result shape (2, 5, 3, 6)");
    expect(p.a_bs[0] == ast[0] && p.a_bs[1] == 0, "a: size-1 dim broadcasts (stride 0)");
    expect(p.b_bs[0] == 0 && p.b_bs[1] == bst[0], "b: missing dim broadcasts (stride 0)");

    int64_t ks[3] = {5, 5, 6};
    ampy_gemm_operand bad = operand(&dummy, 3, ks, bst);
    expect(ampy_gemm_matmul_plan(&a, &bad, &p) == AMPY_ERR_VALUE, "K mismatch");
    int64_t bb[3] = {3, 4, 6};
    int64_t aa[3] = {2, 3, 4};
    ampy_gemm_operand a3 = operand(&dummy, 3, aa, ast + 1), b3 = operand(&dummy, 3, bb, bst);
    expect(ampy_gemm_matmul_plan(&a3, &b3, &p) == AMPY_ERR_VALUE, "batch 2 vs 3");
    expect(strstr(ampy_last_error(), "do not broadcast") != NULL, "broadcast message");
    ampy_gemm_operand one = operand(&dummy, 1, bs, bst);
    expect(ampy_gemm_matmul_plan(&one, &b, &p) == AMPY_ERR_VALUE, "1-d operand");
    ampy_gemm_operand h = b;
    h.dtype = AMPY_FLOAT16;
    expect(ampy_gemm_matmul_plan(&a, &h, &p) == AMPY_ERR_DTYPE, "dtypes differ");
}

static void test_batch_flattening(void)
{
    /* contiguous (2, 3) batch of all three operands: one dim of 6; size-1 dims dropped */
    int64_t s[5] = {2, 1, 3, 4, 5}, st[5], cs[5] = {2, 1, 3, 4, 5}, cst[5];
    contiguous(5, s, st);
    float dummy = 0;
    ampy_gemm_operand a = operand(&dummy, 5, s, st);
    int64_t bsh[5] = {2, 1, 3, 5, 4}, bst[5];
    contiguous(5, bsh, bst);
    ampy_gemm_operand b = operand(&dummy, 5, bsh, bst);
    ampy_gemm_plan p;
    expect(ampy_gemm_matmul_plan(&a, &b, &p) == AMPY_OK, "flatten plan");
    cs[3] = 4, cs[4] = 4;
    contiguous(5, cs, cst);
    int n;
    int64_t sh[AMPY_GEMM_MAX_BATCH_DIMS], x[AMPY_GEMM_MAX_BATCH_DIMS],
        y[AMPY_GEMM_MAX_BATCH_DIMS], z[AMPY_GEMM_MAX_BATCH_DIMS];
    expect(ampy_gemm_matmul_batch(&p, cst, &n, sh, x, y, z) == AMPY_OK, "flatten ok");
    expect(n == 1 && sh[0] == 6 && x[0] == 20 && y[0] == 20 && z[0] == 16, "one dim of 6");
}

static float small(unsigned *r)
{
    *r = *r * 1103515245u + 12345u;
    return (float)((int)((*r >> 16) % 7) - 3);
}

static void test_matmul_vs_reference(void)
{
    /* a (3, 1, 4, 5) transposed in its last two dims, b (2, 5, 6): c (3, 2, 4, 6) */
    enum { B0 = 3, B1 = 2, M = 4, K = 5, N = 6 };
    static float abuf[B0 * K * M], bbuf[B1 * K * N], c[B0 * B1 * M * N], want[M * N];
    unsigned r = 1;
    for (int i = 0; i < B0 * K * M; i++)
        abuf[i] = small(&r);
    for (int i = 0; i < B1 * K * N; i++)
        bbuf[i] = small(&r);
    int64_t ash[4] = {B0, 1, M, K}, ast[4] = {K * M, 0, 1, M}; /* a[b][m][k] at b*K*M + k*M + m */
    int64_t bsh[3] = {B1, K, N}, bst[3];
    contiguous(3, bsh, bst);
    ampy_gemm_operand a = operand(abuf, 4, ash, ast), b = operand(bbuf, 3, bsh, bst);
    ampy_gemm_plan p;
    expect(ampy_gemm_matmul_plan(&a, &b, &p) == AMPY_OK, "matmul plan");
    int64_t cst[4];
    contiguous(4, p.shape, cst);
    ampy_gemm_operand co = operand(c, 4, p.shape, cst);
    expect(ampy_gemm_matmul(&p, 1.0f, &a, &b, 0.0f, &co) == AMPY_OK, "matmul runs");
    for (int i = 0; i < B0; i++)
        for (int j = 0; j < B1; j++) {
            expect(ampy_gemm_reference(1, M, N, K, 1.0f, abuf + i * K * M, AMPY_FLOAT32, 0, 1, M,
                                       bbuf + j * K * N, AMPY_FLOAT32, 0, N, 1, 0.0f, want,
                                       AMPY_FLOAT32, 0, N, 1) == AMPY_OK,
                   "reference runs");
            expect(memcmp(want, c + (i * B1 + j) * M * N, sizeof want) == 0,
                   "broadcast item equals the reference");
        }
}

int main(void)
{
    test_plan();
    test_batch_flattening();
    test_matmul_vs_reference();
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_gemm_matmul: all checks passed\n");
    return 0;
}
