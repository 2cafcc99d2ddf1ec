/* bench_gemm_shapes_c.c — the forward (X @ W.T), dX (dY @ W) and dW
 * (dY.T @ X, A read transposed) GEMMs of bench_train.py's transformer block
 * (batch 32 x seq 128 rows, d 256, MLP 1024) in bfloat16 or float32
 * ("f32" as third argument), timed through ampy_gemm alone (no Python, no
 * torch) at 1 thread:
 * the minimum over runs of the calling thread's CPU time, which on a shared
 * machine is steadier than wall time. Prints ms and ns per 16x16x32 AMX tile
 * product (TDPBF16PS) of each shape.
 *
 *   gcc -O3 -std=c11 -D_GNU_SOURCE -fno-math-errno -fno-strict-aliasing -Icsrc/include \
 *       csrc/gemm*.c csrc/status.c csrc/parallel.c csrc/cpu.c \
 *       benchmarks/bench_gemm_shapes_c.c -lpthread -lm -o /tmp/bench_gemm_shapes_c && \
 *       /tmp/bench_gemm_shapes_c [runs] [shape index|-1] [bf16|f32]
 *
 * The flags are setup.py's: at -O2 GCC does not unroll the vdpbf16ps
 * micro-kernel's k loop and the bf16 products run ~2.5x slower.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ampy/gemm.h"
#include "ampy/parallel.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const struct {
    const char *name;
    int64_t M, N, K;
    int b_transposed; /* forward: B = W.T of a row-major (N x K) W */
    int a_transposed; /* dW: A = dY.T of a row-major (K x M) dY */
} shapes[] = {
    {"qkv fwd", 4096, 768, 256, 1, 0},  {"qkv dX", 4096, 256, 768, 0, 0},
    {"proj fwd", 4096, 256, 256, 1, 0}, {"proj dX", 4096, 256, 256, 0, 0},
    {"fc1 fwd", 4096, 1024, 256, 1, 0}, {"fc1 dX", 4096, 256, 1024, 0, 0},
    {"fc2 fwd", 4096, 256, 1024, 1, 0}, {"fc2 dX", 4096, 1024, 256, 0, 0},
    {"qkv dW", 768, 256, 4096, 0, 1},   {"proj dW", 256, 256, 4096, 0, 1},
    {"fc1 dW", 1024, 256, 4096, 0, 1},  {"fc2 dW", 256, 1024, 4096, 0, 1},
};

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 20, only = argc > 2 ? atoi(argv[2]) : -1;
    int f32 = argc > 3 && strcmp(argv[3], "f32") == 0;
    ampy_dtype dt = f32 ? AMPY_FLOAT32 : AMPY_BFLOAT16;
    size_t es = f32 ? 4 : 2;
    double total = 0;
    ampy_set_num_threads(1);
    srand(1);
    for (int s = 0; s < (int)(sizeof shapes / sizeof *shapes); s++) {
        if (only >= 0 && s != only)
            continue;
        int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        /* 64-byte aligned like ampy's tensors: unaligned C rows split lines */
        void *A = aligned_alloc(64, (size_t)(M * K) * es);
        void *B = aligned_alloc(64, (size_t)(K * N) * es);
        void *C = aligned_alloc(64, (size_t)(M * N) * es);
        if (!A || !B || !C)
            return 1;
        for (int pass = 0; pass < 2; pass++) { /* values in +-[1, 2) */
            int64_t n = pass ? K * N : M * K;
            void *d = pass ? B : A;
            for (int64_t i = 0; i < n; i++) {
                uint16_t h = (uint16_t)(0x3F80 + (rand() & 0x7F) + ((rand() & 1) << 15));
                if (f32) {
                    uint32_t u = (uint32_t)h << 16;
                    memcpy((float *)d + i, &u, 4);
                } else {
                    ((uint16_t *)d)[i] = h;
                }
            }
        }
        memset(C, 0, (size_t)(M * N) * es);
        int64_t brs = shapes[s].b_transposed ? 1 : N, bcs = shapes[s].b_transposed ? K : 1;
        int64_t ars = shapes[s].a_transposed ? 1 : K, acs = shapes[s].a_transposed ? M : 1;
        double best = 1e30;
        for (int r = 0; r < runs; r++) {
            double t0 = now();
            if (ampy_gemm(1, M, N, K, 1.0f, A, dt, 0, ars, acs, B, dt, 0, brs, bcs, 0.0f, C, dt,
                          0, N, 1) != AMPY_OK)
                return 1;
            double t = now() - t0;
            best = t < best ? t : best;
        }
        double tiles = (double)M / 16 * (double)N / 16 * (double)K / 32;
        printf("%-9s %7.3f ms  %5.2f ns/tile product\n", shapes[s].name, best * 1e3,
               best * 1e9 / tiles);
        total += best;
        free(A), free(B), free(C);
    }
    printf("total %.3f ms\n", total * 1e3);
    return 0;
}
