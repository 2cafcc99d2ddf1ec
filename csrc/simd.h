/* simd.h — the x86 instruction sets libampy's SIMD kernels are compiled for.
 *
 * Every SIMD body lives in the same translation units as its portable
 * fallback, compiled for its ISA through a function attribute, and is only
 * called after CPUID (cpu.h) says the CPU has that ISA. These are the one
 * spelling of each ISA:
 *
 *   AMPY_TARGET_AVX2         AVX2 + FMA + F16C          (AMPY_CPU_AVX2)
 *   AMPY_TARGET_AVX512       + AVX-512 F/BW/VL/DQ       (AMPY_CPU_AVX512)
 *   AMPY_TARGET_AVX512_BF16  + AVX512-BF16              (AMPY_CPU_HAS_AVX512BF16)
 *
 * and AMPY_ISA_* the same lists as strings, for attributes that add options
 * (prefer-vector-width=512, "amx-tile"). All are defined only where
 * AMPY_X86_SIMD is (x86-64 with GCC or Clang). The GEMM kernels compile whole
 * regions under `#pragma GCC target("...")` instead (gemm_x86.c, gemm_amx*.c,
 * gemm_avx512bf16.c, gemm_direct.c): GCC does not expand macros inside that
 * pragma, so those spell the same feature lists out.
 */
#ifndef AMPY_SIMD_H
#define AMPY_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#define AMPY_X86_SIMD 1

#define AMPY_ISA_AVX2 "avx2,fma,f16c"
#define AMPY_ISA_AVX512 AMPY_ISA_AVX2 ",avx512f,avx512bw,avx512vl,avx512dq"
#define AMPY_ISA_AVX512_BF16 AMPY_ISA_AVX512 ",avx512bf16"

#define AMPY_TARGET_AVX2 __attribute__((target(AMPY_ISA_AVX2)))
#define AMPY_TARGET_AVX512 __attribute__((target(AMPY_ISA_AVX512)))
#define AMPY_TARGET_AVX512_BF16 __attribute__((target(AMPY_ISA_AVX512_BF16)))
#endif

#endif /* AMPY_SIMD_H */
