/* cpu.c — CPUID-based feature detection (see cpu.h). */
#include <stdlib.h>
#include <string.h>

#include "ampy/cpu.h"

static unsigned features;
static int detected;
static int best_level;
static int forced = -1;

static void detect(void)
{
    unsigned f = 0;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        f |= AMPY_CPU_HAS_AVX2; /* every AVX2 CPU also has F16C */
    if ((f & AMPY_CPU_HAS_AVX2) && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        f |= AMPY_CPU_HAS_AVX512;
#if defined(__GNUC__) && __GNUC__ >= 12
    if ((f & AMPY_CPU_HAS_AVX512) && __builtin_cpu_supports("avx512bf16"))
        f |= AMPY_CPU_HAS_AVX512BF16;
    if ((f & AMPY_CPU_HAS_AVX512) && __builtin_cpu_supports("avx512fp16"))
        f |= AMPY_CPU_HAS_AVX512FP16;
    if (__builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16"))
        f |= AMPY_CPU_HAS_AMX_BF16;
#endif
#endif
    features = f;
    best_level = ((f & AMPY_CPU_HAS_AVX512BF16) && (f & AMPY_CPU_HAS_AMX_BF16)) ? AMPY_CPU_AMX
                 : (f & AMPY_CPU_HAS_AVX512BF16) ? AMPY_CPU_AVX512_BF16
                 : (f & AMPY_CPU_HAS_AVX512) ? AMPY_CPU_AVX512
                 : (f & AMPY_CPU_HAS_AVX2) ? AMPY_CPU_AVX2
                                           : AMPY_CPU_PORTABLE;
    const char *env = getenv("AMPY_FORCE_PORTABLE");
    if (env && env[0] && strcmp(env, "0") != 0)
        forced = AMPY_CPU_PORTABLE;
    detected = 1;
}

unsigned ampy_cpu_features(void)
{
    if (!detected)
        detect();
    return features;
}

ampy_cpu_level ampy_cpu_level_get(void)
{
    if (!detected)
        detect();
    int lvl = best_level;
    if (forced >= 0 && forced < lvl)
        lvl = forced;
    return (ampy_cpu_level)lvl;
}

void ampy_cpu_level_set(int level)
{
    if (!detected)
        detect();
    forced = level < 0 ? -1 : level;
}

const char *ampy_cpu_level_name(int level)
{
    switch (level) {
    case AMPY_CPU_PORTABLE: return "portable";
    case AMPY_CPU_AVX2: return "avx2";
    case AMPY_CPU_AVX512: return "avx512";
    case AMPY_CPU_AVX512_BF16: return "avx512bf16";
    case AMPY_CPU_AMX: return "amx";
    default: return "unknown";
    }
}
