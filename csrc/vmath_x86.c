/* vmath_x86.c — the AVX-512 build of vmath_impl.inc (see vmath.h).
 *
 * Compiled without -march flags: every function carries the target
 * attribute below and vmath.c hands this table out only when
 * ampy_cpu_level_get() reports AVX-512 (F, BW, VL, DQ). fmaf() under the
 * FMA target is one vfmadd instruction, and GCC vectorizes the branch-free
 * loops of vmath_impl.inc 16 lanes wide. no-trapping-math (not a fast-math
 * value change: results are bit-identical) lets GCC evaluate both arms of a
 * select, which is what vectorizing them means; nothing in ampy reads the
 * floating-point exception flags.
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ampy/cpu.h"
#include "simd.h"
#include "vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define VM_SFX avx512
#define VM_ATTR                                                                       \
    __attribute__((target(AMPY_ISA_AVX512 ",prefer-vector-width=512"),                \
                   optimize("no-trapping-math")))
#define VM_MADD(a, b, c) fmaf((a), (b), (c))
#define VM_DMADD(a, b, c) fma((a), (b), (c))

/* Row maximum with NaN flag. GCC does not vectorize a float max reduction
 * without finite-math/no-signed-zeros assumptions, so it is written out:
 * vmaxps lanes plus an unordered-compare mask, a masked load for the tail. */
#define VM_CUSTOM_ROWMAX 1
VM_ATTR static float rowmax_avx512(const float *x, int64_t n)
{
    __m512 acc = _mm512_set1_ps(x[0]);
    __mmask16 nan = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        acc = _mm512_max_ps(acc, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = _mm512_mask_loadu_ps(acc, k, x + i);
        acc = _mm512_max_ps(acc, v);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    }
    const float m = _mm512_reduce_max_ps(acc);
    return nan ? __builtin_nanf("") : m;
}

/* the exact gelu forward and backward by table (vmath_gelu_avx512.inc) */
#define VM_GELU_AVX512 1
#include "vmath_impl.inc"

const ampy_vm_table *ampy_vm_avx512(void) { return &vm_table_avx512; }
#else
const ampy_vm_table *ampy_vm_avx512(void) { return NULL; }
#endif
