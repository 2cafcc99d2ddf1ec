/* ampy/cpu.h — CPU feature detection and the SIMD level used by dispatch.
 *
 * Kernels with SIMD variants pick one at run time from ampy_cpu_level().
 * The portable C path is always compiled; setting AMPY_FORCE_PORTABLE=1 in
 * the environment (read once, at first use) or calling
 * ampy_cpu_set_level(AMPY_CPU_PORTABLE) forces it, so tests cover both.
 * The levels are ordered: each includes the ones below it, and kernels test
 * `level >= AMPY_CPU_AVX512` for their AVX-512 code. Only the GEMM tells the
 * two top levels apart: at AMPY_CPU_AMX bfloat16 (and float16) products run
 * on AMX tiles, at AMPY_CPU_AVX512_BF16 bfloat16 runs on vdpbf16ps, and at
 * AMPY_CPU_AVX512 on float32 FMAs; forcing a level below the CPU's best
 * (ampy_cpu_level_set) reaches each on one machine.
 */
#ifndef AMPY_CPU_H
#define AMPY_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ampy_cpu_level {
    AMPY_CPU_PORTABLE = 0, /* plain C                                  */
    AMPY_CPU_AVX2 = 1,     /* AVX2 + FMA + F16C                         */
    AMPY_CPU_AVX512 = 2,   /* AVX-512 F/BW/VL/DQ (+ the AVX2 set)       */
    AMPY_CPU_AVX512_BF16 = 3, /* + AVX512-BF16 (vdpbf16ps): bf16 GEMM on it */
    AMPY_CPU_AMX = 4,      /* + AMX-BF16 tiles (bf16 / f16 GEMM on AMX)  */
} ampy_cpu_level;

/* Feature bits, as detected (not affected by the forced level). */
#define AMPY_CPU_HAS_AVX2 (1u << 0)      /* avx2, fma, f16c            */
#define AMPY_CPU_HAS_AVX512 (1u << 1)    /* avx512 f, bw, vl, dq        */
#define AMPY_CPU_HAS_AVX512BF16 (1u << 2)
#define AMPY_CPU_HAS_AVX512FP16 (1u << 3)
#define AMPY_CPU_HAS_AMX_BF16 (1u << 4)  /* amx-tile + amx-bf16         */

unsigned ampy_cpu_features(void);
/* The level kernels should use now: min(best supported, forced level). */
ampy_cpu_level ampy_cpu_level_get(void);
/* Force a level (clamped to what the CPU supports); -1 restores the default. */
void ampy_cpu_level_set(int level);
const char *ampy_cpu_level_name(int level);

#ifdef __cplusplus
}
#endif
#endif /* AMPY_CPU_H */
