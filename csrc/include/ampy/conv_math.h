/* ampy/conv_math.h — the convolution geometry shared by csrc/conv.c and
 * cuda/conv.cu: the check of an ampy_conv2d_geom (conv.h) and the index
 * arithmetic of the unfold, so both devices accept the same arguments and
 * read the same input element for each (output position, kernel tap).
 * Unit-tested by tests/c/test_conv_math.c. */
#ifndef AMPY_CONV_MATH_H
#define AMPY_CONV_MATH_H

#include <stdint.h>

#include "ampy/conv.h"
#include "ampy/elem.h"
#include "ampy/status.h"

/* The input row (column) that output row o reads at kernel tap k; outside
 * [0, H) it reads the zero padding. */
AMPY_ELEM int64_t ampy_conv_in_index(int64_t o, int64_t k, int64_t stride, int64_t pad_before,
                                     int64_t dilation)
{
    return o * stride - pad_before + k * dilation;
}

/* The output row whose window reads input row i at kernel tap k (the
 * inverse of ampy_conv_in_index), or -1 when none does: the gather form of
 * col2im. n_out is the output size. */
AMPY_ELEM int64_t ampy_conv_out_index(int64_t i, int64_t k, int64_t stride, int64_t pad_before,
                                      int64_t dilation, int64_t n_out)
{
    int64_t t = i + pad_before - k * dilation;
    if (t < 0 || t % stride)
        return -1;
    return t / stride < n_out ? t / stride : -1;
}

/* a * b without int64 overflow (both >= 0): 1 and *out, or 0. */
AMPY_ELEM int ampy_conv_mul_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0 || (a != 0 && b > INT64_MAX / a))
        return 0;
    *out = a * b;
    return 1;
}

/* The conv.h contract of ampy_conv2d_check (host only: it records the
 * message with ampy_error). */
static inline ampy_status ampy_conv2d_check(const ampy_conv2d_geom *g)
{
    if (!g)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: geometry is NULL");
    if (g->N < 0 || g->C < 0 || g->H < 0 || g->W < 0 || g->O < 0 || g->OH < 0 || g->OW < 0)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: negative size");
    if (g->KH < 1 || g->KW < 1)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: kernel size must be >= 1");
    if (g->sh < 1 || g->sw < 1)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: stride must be >= 1");
    if (g->dh < 1 || g->dw < 1)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: dilation must be >= 1");
    if (g->pt < 0 || g->pl < 0)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: padding must be >= 0");
    if (g->groups < 1 || g->C % g->groups || g->O % g->groups)
        return ampy_error(AMPY_ERR_VALUE, "conv2d: groups (%lld) must divide in_channels "
                          "(%lld) and out_channels (%lld)", (long long)g->groups,
                          (long long)g->C, (long long)g->O);
    int64_t t;
    if (!ampy_conv_mul_ok(g->N, g->C, &t) || !ampy_conv_mul_ok(t, g->H, &t) ||
        !ampy_conv_mul_ok(t, g->W, &t) || !ampy_conv_mul_ok(g->N, g->O, &t) ||
        !ampy_conv_mul_ok(t, g->OH, &t) || !ampy_conv_mul_ok(t, g->OW, &t) ||
        !ampy_conv_mul_ok(g->C, g->KH, &t) || !ampy_conv_mul_ok(t, g->KW, &t) ||
        !ampy_conv_mul_ok(t, g->OH, &t) || !ampy_conv_mul_ok(t, g->OW, &t) ||
        !ampy_conv_mul_ok(t, 8, &t))
        return ampy_error(AMPY_ERR_VALUE, "conv2d: sizes overflow int64");
    return AMPY_OK;
}

#endif /* AMPY_CONV_MATH_H */
