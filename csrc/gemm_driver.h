/* gemm_driver.h — private to gemm_driver.c (the blocked, threaded loop
 * nest over one batch item) and gemm_batch.c (the batch loop and the entry
 * points gemm.c calls): the state of one item's product. */
#ifndef AMPY_GEMM_DRIVER_H
#define AMPY_GEMM_DRIVER_H

#include "gemm_impl.h"


typedef struct gemm_ctx {
    const gemm_impl *im;
    gemm_operand a, b;
    int64_t M, N, K, kp; /* kp: K with every block padded to kunit       */
    float alpha, beta;
    const float *bias;    /* NULL or N float32 */
    char *c;
    ampy_dtype cdt;
    int64_t crs, ccs;
    int64_t jc, nc, ncp;  /* current column block and its padded width */
    char *bp;             /* packed B of the block                      */
    int64_t mc, n_ic, n_js, js_cols;
    int64_t next;         /* next unclaimed panel / task (atomic)       */
    int failed;           /* a task could not get its workspace         */
    struct gemm_prefetch *pf; /* next batch item's operands (or NULL)   */
    int direct_a;         /* A read in place by gemm_direct.c's kernel  */
    int nthreads;
    int64_t bgroup;       /* panels per packing item                    */
    int *bstate;          /* B packed in the tasks: per packing item, B_TODO.. */
} gemm_ctx;

/* gemm_direct.c */
int ampy_gemm_direct_a_ok(const gemm_impl *im, const gemm_operand *a, int64_t K);
void ampy_gemm_direct_a_f32(int64_t K, const float *a, int64_t rs, int64_t cs, int rows,
                            const float *b, float *w, int64_t ldw);
void ampy_gemm_direct_widen_rows(const void *src, ampy_dtype dt, int64_t rs, int64_t rows,
                                 int64_t K, float *dst);

/* One batch item (x filled in but for the packing state), with up to
 * nthreads threads inside it (gemm_driver.c). */
ampy_status ampy_gemm_run_one(gemm_ctx *x, int nthreads);
/* 1 for the vdpbf16ps tables (either A layout of gemm_avx512bf16.c). */
int ampy_gemm_is_bf16dp(const gemm_impl *im);

#endif /* AMPY_GEMM_DRIVER_H */
