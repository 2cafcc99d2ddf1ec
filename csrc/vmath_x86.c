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
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define VM_SFX avx512
#define VM_ATTR                                                                       \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,"      \
                          "prefer-vector-width=512"), optimize("no-trapping-math")))
#define VM_MADD(a, b, c) fmaf((a), (b), (c))
#include "vmath_impl.inc"

const ampy_vm_table *ampy_vm_avx512(void) { return &vm_table_avx512; }
#else
const ampy_vm_table *ampy_vm_avx512(void) { return NULL; }
#endif
