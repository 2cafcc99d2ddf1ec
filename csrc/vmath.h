/* vmath.h — vectorized float32 transcendental kernels (internal to libampy).
 *
 * One implementation (vmath_impl.inc) compiled twice: portable C
 * (vmath.c) and under an AVX-512 + FMA target attribute (vmath_x86.c).
 * ampy_vm() returns the table for the current ampy_cpu_level_get(), so
 * AMPY_FORCE_PORTABLE=1 / _C._set_cpu_level("portable") select the portable
 * build (AVX2-only CPUs use it too). Accuracy: within 1-3 ulp of the
 * correctly rounded float32 result over the whole float range (per op in
 * vmath_impl.inc; the AVX-512 gelu in vmath_gelu_avx512.inc). The two
 * builds need not agree bit for bit (FMA or not, and gelu's tables), but
 * each result depends only on its own input. float64 stays on libm.
 */
#ifndef AMPY_VMATH_H
#define AMPY_VMATH_H

#include <stdint.h>

enum {
    AMPY_VM_EXP = 0,
    AMPY_VM_LOG,
    AMPY_VM_TANH,
    AMPY_VM_SIGMOID,
    AMPY_VM_ERF,
    AMPY_VM_GELU,
    AMPY_VM_GELU_TANH,
    AMPY_VM_SILU,
    AMPY_VM_NUM_OPS
};

/* y[i] = f(x[i]) for i < n; y may equal x (in place) but must not overlap
 * it otherwise. */
typedef void (*ampy_vm_fn)(const float *x, float *y, int64_t n);

typedef struct ampy_vm_table {
    ampy_vm_fn op[AMPY_VM_NUM_OPS];
    /* max of x[0..n), n >= 1; NaN when any element is NaN */
    float (*rowmax)(const float *x, int64_t n);
    /* sum_i e^(x[i]-m) accumulated in double; stores e^(x[i]-m) in y[i]
     * when y is not NULL (y may equal x) */
    double (*expsum)(const float *x, int64_t n, float m, float *y);
    /* y[i] = e^(x[i]-m) / s (y may equal x) */
    void (*expdiv)(const float *x, int64_t n, float m, float s, float *y);
    /* y[i] = y[i] / s */
    void (*divs)(float *y, int64_t n, float s);
    /* y[i] = (x[i] - m) - ls (y may equal x) */
    void (*subsub)(const float *x, int64_t n, float m, float ls, float *y);
    /* y[i] = g[i] (Phi(x[i]) + x[i] phi(x[i])): the exact gelu's backward
     * (y may equal x or g) */
    void (*gelu_bwd)(const float *x, const float *g, float *y, int64_t n);
    /* gelu forward, erf and gelu backward on float16 (bf16 = 0) or bfloat16
     * (bf16 = 1) storage, computed in float32 and rounded once (the same bits
     * as converting to float32, op[AMPY_VM_GELU] / op[AMPY_VM_ERF] / gelu_bwd,
     * converting back);
     * NULL where the level has none (portable). y may equal x or g. */
    void (*gelu_half)(const uint16_t *x, uint16_t *y, int64_t n, int bf16);
    void (*erf_half)(const uint16_t *x, uint16_t *y, int64_t n, int bf16);
    void (*gelu_bwd_half)(const uint16_t *x, const uint16_t *g, uint16_t *y, int64_t n,
                          int bf16);
} ampy_vm_table;

/* The table for the current CPU level (never NULL). */
const ampy_vm_table *ampy_vm(void);
/* The AVX-512 table, or NULL when not compiled in (vmath_x86.c). */
const ampy_vm_table *ampy_vm_avx512(void);

#endif /* AMPY_VMATH_H */
