/* gemm_amx.h — private to gemm_amx.c and gemm_amx_macro.c: the AMX bfloat16
 * tile shape and the single-K-block macro-kernel (see gemm_impl.h's
 * gemm_task). Only for x86-64 Linux with GCC/Clang (AMPY_GEMM_AMX).
 */
#ifndef AMPY_GEMM_AMX_H
#define AMPY_GEMM_AMX_H

#include "gemm_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define AMPY_GEMM_AMX 1

/* The target of every AMX bfloat16 function (a pragma: it covers regions). */
#define AMPY_GEMM_AMX_TARGET \
    _Pragma("GCC target(\"amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,prfchw\")")

#define T_MR 32
#define T_NR 32
#define T_KB 32 /* bf16 per tile row */

/* One task of a problem with K <= kc (gemm_task), on AMX tiles: the tile
 * configuration of ampy_gemm_amx_tiles_begin must be loaded. */
void ampy_gemm_amx_macro(const gemm_task *t);
#endif

#endif /* AMPY_GEMM_AMX_H */
