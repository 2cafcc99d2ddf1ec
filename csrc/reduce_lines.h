/* reduce_lines.h — private to reduce_softmax.c and softmax_x86.c: the
 * description of one line (the elements along `dim`) that the softmax and
 * scan line loops share, and the AVX-512 softmax lines of softmax_x86.c.
 */
#ifndef AMPY_REDUCE_LINES_H
#define AMPY_REDUCE_LINES_H

#include <stdint.h>

#include "ampy/dtype.h"
#include "simd.h"

typedef struct {
    int64_t len, sin, sout; /* line length (elements), byte strides along it */
    ampy_dtype in_dt, out_dt;
    int kind, log, op;
    int simd;                /* AVX-512 float32 lines (softmax) */
    int bf16ok;              /* AVX512-BF16 present (vcvtneps2bf16) */
    void *to_f32, *from_f32; /* SIMD cast kernels for contiguous half lines */
} line_ctx;

/* The longest line a float line buffer holds: floats, 16 KiB of stack. */
#define SM_LINE 4096

#ifdef AMPY_X86_SIMD
/* n softmax lines (c->simd set: float32-computed, AVX-512 CPU), line j's
 * input at ptrs[0] + j * s[0] and output at ptrs[1] + j * s[1] (bytes), as
 * ampy_iter_run hands them over. */
void ampy_softmax_lines_avx512(const line_ctx *c, char **ptrs, const int64_t *s, int64_t n);
#endif

#endif /* AMPY_REDUCE_LINES_H */
