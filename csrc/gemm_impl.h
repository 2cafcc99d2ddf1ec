/* gemm_impl.h — private to csrc/gemm*.c: the contract between the blocked
 * GEMM driver (gemm.c) and the ISA-specific packing routines and micro-kernels
 * (gemm.c portable, gemm_x86.c AVX2/AVX-512, gemm_amx.c AMX,
 * gemm_avx512bf16.c AVX512-BF16 vdpbf16ps).
 *
 * The driver follows the BLIS/GotoBLAS loop nest (Van Zee & van de Geijn,
 * "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", 2015):
 * B is packed into column micro-panels of width nr, A into row micro-panels of
 * height mr, both with the element conversion to the kernel's compute type
 * fused into the copy, and an mr x nr micro-kernel keeps its accumulators in
 * registers over a K block. Partial sums go to a float32 block W (one per
 * task), so a half output is rounded exactly once, in the epilogue.
 */
#ifndef AMPY_GEMM_IMPL_H
#define AMPY_GEMM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "ampy/dtype.h"
#include "ampy/status.h"

/* One operand of one batch item: element (i, j) at p + (i*rs + j*cs)*size. */
typedef struct gemm_operand {
    const char *p;
    ampy_dtype dt;
    int64_t rs, cs;
} gemm_operand;

/* Packs rows [i0, i0+rows) x k in [k0, k0+kc) of A into ceil(rows/mr) micro-
 * panels of mr*kcp packed elements each (kcp = kc rounded up to kunit); rows
 * past `rows` and k past kc are zero. */
typedef void (*gemm_pack_a_fn)(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                               int64_t kc, int64_t kcp, void *dst);
/* Packs k in [k0, k0+kc) x columns [j0, j0+cols) of B into ceil(cols/nr)
 * micro-panels of nr*kcp elements; padding is zero. */
typedef void (*gemm_pack_b_fn)(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                               int64_t j0, int64_t cols, void *dst);
/* w[0:mr, 0:nr] (row stride ldw floats) = (accumulate ? w : 0) + a_panel @ b_panel
 * over kcp packed k. */
typedef void (*gemm_kernel_fn)(int64_t kcp, const void *a, const void *b, float *w,
                               int64_t ldw, int accumulate);
/* C block = alpha * W + beta * C + bias (C not read when beta == 0, bias[j]
 * added to column j when bias != NULL), all in float32 in that order, rounded
 * once to C's dtype; C points at the block's first element, strides in
 * elements; bias at the block's first column (float32, contiguous). */
typedef void (*gemm_epilogue_fn)(const float *w, int64_t ldw, int64_t rows, int64_t cols,
                                 float alpha, float beta, const float *bias, void *c,
                                 ampy_dtype cdt, int64_t crs, int64_t ccs);

/* One task of a single-K-block problem (K <= kc), for an implementation's
 * own macro-kernel: C[i0:i0+rows, cols] (c at its first element) from A rows
 * [i0, i0+rows) x all K and the packed B micro-panels at bp (panel q at
 * bp + q * nr * kcp elements, kcp = K rounded up to kunit), finished as the
 * epilogue says. ap: a packing buffer of mc' x kcp elements (mc' = rows
 * rounded up to mr). pf: the next batch item's operands to prefetch a share
 * of before each micro-tile (ampy_gemm_prefetch_step), or NULL; only
 * implementations the driver plans it for receive one. */
/* A prefetch cursor (gemm_prefetch.c): up to GEMM_PF_REGIONS regions of
 * nruns runs of run_bytes, stride bytes apart, walked per_step cache lines
 * per ampy_gemm_prefetch_step (into L2; C's lines for writing). */
#define GEMM_PF_REGIONS 3
typedef struct gemm_pf_region {
    const char *p;
    int64_t nruns, run_bytes, stride; /* bytes */
} gemm_pf_region;
typedef struct gemm_prefetch {
    gemm_pf_region r[GEMM_PF_REGIONS];
    int nr;
    int write[GEMM_PF_REGIONS];
    int cur;                /* cursor: region, run, byte offset */
    int64_t run, off, per_step;
    struct gemm_prefetch *then; /* stepped after this one at every step (or NULL) */
} gemm_prefetch;
void ampy_gemm_prefetch_step(struct gemm_prefetch *pf);
/* Adds the rows x cols matrix at p (strides rs, cs in elements of es bytes)
 * to pf as contiguous runs; returns its byte count, or -1 when it has no
 * unit stride (then it is not added) or is one contiguous block and contig
 * is 0 (left to the hardware prefetchers). */
int64_t ampy_gemm_pf_add(gemm_prefetch *pf, const char *p, int64_t rows, int64_t cols,
                         int64_t rs, int64_t cs, int64_t es, int write, int contig);
typedef struct gemm_task {
    const gemm_operand *a;
    int64_t i0, rows, cols, K, kcp;
    const char *bp;
    void *ap;
    float alpha, beta;
    const float *bias;
    char *c;
    ampy_dtype cdt;
    int64_t crs, ccs;
    struct gemm_prefetch *pf;
    /* a_packed: ap holds the task's A rows already (an earlier call of the
     * same task, B packed in the tasks: one call per packing item); bpf: the
     * next packing item's source, a step of it before each pass of every K
     * chunk of the kernel (gemm_impl.pf_kch), or NULL. */
    int a_packed;
    struct gemm_prefetch *bpf;
} gemm_task;
typedef void (*gemm_macro_fn)(const gemm_task *t);

typedef struct gemm_impl {
    const char *name;
    int mr, nr, kunit;  /* micro-tile, K packing granularity                */
    int mc, kc;         /* cache blocking: rows of A per block, K per block  */
    size_t pelem;       /* bytes per packed element                          */
    gemm_pack_a_fn pack_a;
    gemm_pack_b_fn pack_b;
    gemm_kernel_fn kernel;
    gemm_epilogue_fn epilogue;
    void (*thread_begin)(void); /* per-thread setup before kernels (or NULL) */
    void (*thread_end)(void);   /* and teardown after them (or NULL)          */
    gemm_macro_fn macro;        /* single-K-block task (or NULL: the driver's) */
    int pf_steps;               /* prefetch steps per micro-tile of macro (0: 1) */
    int pack_b_in_task;         /* B packed by the tasks on first use (1), not
                                   in a pass of its own before them (0) */
    /* kernel, plus a prefetch step of pf before each pass (pf_steps per
     * micro-tile) of every pf_kch k; used while B is packed in the tasks. */
    void (*kernel_pf)(int64_t kcp, const void *a, const void *b, float *w, int64_t ldw,
                      int accumulate, struct gemm_prefetch *pf);
    int pf_kch;
    /* the table to run for this A (a variant with its own A packing layout,
     * pack_a / kernel / macro), or NULL: this one for every A */
    const struct gemm_impl *(*for_a)(const gemm_operand *a);
} gemm_impl;

/* Portable pieces (gemm.c), also the fallbacks the SIMD files call for
 * layouts they do not specialise. */
void ampy_gemm_pack_a_f32(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                          int64_t kc, int64_t kcp, int mr, float *dst);
void ampy_gemm_pack_b_f32(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                          int64_t j0, int64_t cols, int nr, float *dst);
void ampy_gemm_epilogue_portable(const float *w, int64_t ldw, int64_t rows, int64_t cols,
                                 float alpha, float beta, const float *bias, void *c,
                                 ampy_dtype cdt, int64_t crs, int64_t ccs);
/* The AVX-512 epilogue (gemm_x86.c), shared with the AMX path. */
void ampy_gemm_epilogue_avx512(const float *w, int64_t ldw, int64_t rows, int64_t cols,
                               float alpha, float beta, const float *bias, void *c,
                               ampy_dtype cdt, int64_t crs, int64_t ccs);


/* The implementation tables. NULL when not compiled for this platform; the
 * *_usable() probes check CPUID (and, for AMX, the OS permission). */
extern const gemm_impl ampy_gemm_impl_portable;
const gemm_impl *ampy_gemm_impl_avx2(ampy_dtype dt);
const gemm_impl *ampy_gemm_impl_avx512(ampy_dtype dt);
const gemm_impl *ampy_gemm_impl_amx(ampy_dtype dt);
/* bfloat16 on AVX512-BF16 vdpbf16ps (gemm_avx512bf16.c); NULL for other dtypes. */
const gemm_impl *ampy_gemm_impl_avx512bf16(ampy_dtype dt);
int ampy_gemm_avx512bf16_usable(void);
/* The AMX packers (gemm_amx.c): bfloat16 in pairs along K ("VNNI" layout),
 * 32-row A / 32-column B micro-panels, kcp a multiple of 32; they use only
 * AVX-512 BW instructions, so the vdpbf16ps path packs with them too. */
void ampy_gemm_amx_pack_a(const gemm_operand *a, int64_t i0, int64_t rows, int64_t k0,
                          int64_t kc, int64_t kcp, void *dst);
void ampy_gemm_amx_pack_b(const gemm_operand *b, int64_t k0, int64_t kc, int64_t kcp,
                          int64_t j0, int64_t cols, void *dst);
/* float16 on AMX-BF16 (gemm_amx_f16.c): each input split into two bfloat16. */
const gemm_impl *ampy_gemm_impl_amx_f16(void);
/* AMX tile configuration per thread (palette 1, 8 tiles of 16 x 64 B) and its
 * release; defined in gemm_amx.c, shared by both AMX implementations. */
void ampy_gemm_amx_tiles_begin(void);
void ampy_gemm_amx_tiles_end(void);
/* float64 (gemm_f64.c): its own blocked loop, double throughout. nd batch
 * dims as ampy_gemm_batched (validated, every size >= 1 and M, N > 0); bias
 * NULL or N contiguous doubles; c_dtype float64 or float32; simd: 1 for the
 * AVX-512 FMA micro-kernel (the caller checked the CPU), 0 for portable C. */
ampy_status ampy_gemm_f64_run(int nd, const int64_t *shape, int64_t M, int64_t N, int64_t K,
                              double alpha, const gemm_operand *a, const int64_t *a_bs,
                              const gemm_operand *b, const int64_t *b_bs, double beta,
                              const double *bias, char *c, ampy_dtype cdt, const int64_t *c_bs,
                              int64_t crs, int64_t ccs, int simd);
int ampy_gemm_avx2_usable(void);
int ampy_gemm_avx512_usable(void);
int ampy_gemm_amx_usable(void);

#endif /* AMPY_GEMM_IMPL_H */
