/* ampy/cpu.h — CPU feature detection and the SIMD level used by dispatch.
 *
 * Kernels with SIMD variants pick one at run time from ampy_cpu_level().
 * The portable C path is always compiled; setting AMPY_FORCE_PORTABLE=1 in
 * the environment (read once, at first use) or calling
 * ampy_cpu_set_level(AMPY_CPU_PORTABLE) forces it, so tests cover both.
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
