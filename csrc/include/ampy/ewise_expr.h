/* ampy/ewise_expr.h — the per-element formulas of the element-wise ops,
 * shared by the CPU block kernels (csrc/ewise_ops.c, plain C with
 * <tgmath.h>) and the CUDA kernels (cuda/ewise.cu, where the C++ overloads
 * of exp/erf/... pick the float or double version the same way).
 *
 * Each AMPY_EX_* macro is an expression of its operands (x for unary ops;
 * a, b or a, b, c otherwise) and the compute type R (float, double or
 * int64_t). Both sides expand the same text, with the same constants; the
 * CUDA build uses --fmad=false so that `a * b + c` is not contracted into
 * an FMA that the CPU (no contraction) does not do. Where a result can still
 * differ between CPU and GPU it is because the libm call differs (glibc vs
 * CUDA's libdevice: exp, log, tanh, erf, pow, sin, ...; all within a few
 * ulp); + - * / sqrt, comparisons, min/max, floor/ceil/trunc/rint, fmod and
 * the integer ops give identical bits.
 *
 * The helper functions are AMPY_ELEM (elem.h): static inline in C,
 * __host__ __device__ under nvcc.
 */
#ifndef AMPY_EWISE_EXPR_H
#define AMPY_EWISE_EXPR_H

#include <math.h>
#include <stdint.h>

#include "ampy/elem.h"

/* ---- unary (float / double) -------------------------------------------- */
#define AMPY_EX_RECIPROCAL(R, x) ((R)1 / (x))
#define AMPY_EX_SQUARE(R, x) ((x) * (x))
#define AMPY_EX_SIGN(R, x) ((R)((R)0 < (x)) - (R)((x) < (R)0))
#define AMPY_EX_RSQRT(R, x) ((R)1 / sqrt(x))
#define AMPY_EX_SIGMOID(R, x) ((R)1 / ((R)1 + exp(-(x))))
#define AMPY_EX_LOGSIGMOID(R, x) (((x) < (R)0 ? (x) : (R)0) - log1p(exp(-fabs(x))))
/* relu keeps NaN (torch: clamp_min(x, 0)) */
#define AMPY_EX_RELU(R, x) ((x) < (R)0 ? (R)0 : (x))
#define AMPY_EX_GELU(R, x) ((x) * (R)0.5 * ((R)1 + erf((x) * (R)0.70710678118654752440)))
#define AMPY_EX_GELU_TANH(R, x)                                                          \
    ((R)0.5 * (x) * ((R)1 + tanh((R)0.79788456080286535588 * ((x) + (R)0.044715 * (x) * (x) * (x)))))
#define AMPY_EX_SILU(R, x) ((x) / ((R)1 + exp(-(x))))
/* p0 = beta, p1 = threshold */
#define AMPY_EX_SOFTPLUS(R, x, p0, p1) ((x) * (p0) > (p1) ? (x) : log1p(exp((x) * (p0))) / (p0))
#define AMPY_EX_LEAKY_RELU(R, x, p0) ((x) > (R)0 ? (x) : (x) * (p0))
#define AMPY_EX_ELU(R, x, p0) ((x) > (R)0 ? (x) : expm1(x) * (p0))
#define AMPY_EX_MISH(R, x) ((x) * tanh(log1p(exp(x))))
/* torch's hardswish: x * min(max(x + 3, 0), 6) / 6, NaN kept by both clamps */
#define AMPY_EX_RELU6_(R, t) ((t) < (R)0 ? (R)0 : ((R)6 < (t) ? (R)6 : (t)))
#define AMPY_EX_HARDSWISH(R, x) ((x) * AMPY_EX_RELU6_(R, (x) + (R)3) / (R)6)
#define AMPY_EX_FRAC(R, x) ((x) - trunc(x))
#define AMPY_EX_LOGICAL_NOT(R, x) ((x) == (R)0)

/* ---- binary ---------------------------------------------------------------- */
#define AMPY_EX_MAXIMUM(R, a, b) ((isnan(a) || isnan(b)) ? (R)NAN : ((a) > (b) ? (a) : (b)))
#define AMPY_EX_MINIMUM(R, a, b) ((isnan(a) || isnan(b)) ? (R)NAN : ((a) < (b) ? (a) : (b)))
#define AMPY_EX_LOGICAL_AND(R, a, b) (((a) != (R)0) && ((b) != (R)0))
#define AMPY_EX_LOGICAL_OR(R, a, b) (((a) != (R)0) || ((b) != (R)0))
#define AMPY_EX_LOGICAL_XOR(R, a, b) (((a) != (R)0) != ((b) != (R)0))

/* ---- ternary ---------------------------------------------------------------- */
#define AMPY_EX_WHERE(R, a, b, c) ((a) != (R)0 ? (b) : (c))
/* torch's two-sided lerp */
#define AMPY_EX_LERP(R, a, b, c) \
    (fabs(c) < (R)0.5 ? (a) + (c) * ((b) - (a)) : (b) - ((b) - (a)) * ((R)1 - (c)))
#define AMPY_EX_ADDCMUL(R, a, b, c, v) ((a) + (v) * (b) * (c))
#define AMPY_EX_ADDCDIV(R, a, b, c, v) ((a) + (v) * (b) / (c))

/* Python-style remainder: the result takes the sign of b. */
AMPY_ELEM float ampy_ex_rem_f(float a, float b)
{
    float m = fmodf(a, b);
    return (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) ? m + b : m;
}
AMPY_ELEM double ampy_ex_rem_d(double a, double b)
{
    double m = fmod(a, b);
    return (m != 0.0 && ((b < 0.0) != (m < 0.0))) ? m + b : m;
}

/* torch's div_floor_floating (aten/src/ATen/native/BinaryOps.h) */
#define AMPY_EX_FLOORDIV_BODY(R, a, b, FMOD, FLOOR, COPYSIGN)          \
    {                                                                   \
        if (b == (R)0)                                                  \
            return a / b;                                               \
        R mod = FMOD(a, b), div = (a - mod) / b;                        \
        if (mod != (R)0 && (b < (R)0) != (mod < (R)0))                  \
            div -= (R)1;                                                \
        if (div == (R)0)                                                \
            return COPYSIGN((R)0, a / b);                               \
        R fl = FLOOR(div);                                              \
        return div - fl > (R)0.5 ? fl + (R)1 : fl;                      \
    }
AMPY_ELEM float ampy_ex_floordiv_f(float a, float b)
    AMPY_EX_FLOORDIV_BODY(float, a, b, fmodf, floorf, copysignf)
AMPY_ELEM double ampy_ex_floordiv_d(double a, double b)
    AMPY_EX_FLOORDIV_BODY(double, a, b, fmod, floor, copysign)

/* clamp: NaN bounds give NaN; NaN in x propagates (comparisons are false). */
AMPY_ELEM float ampy_ex_clamp_f(float x, float lo, float hi)
{
    if (lo != lo || hi != hi)
        return ampy_bits_f32(0x7FC00000u);
    float r = x < lo ? lo : x;
    return hi < r ? hi : r;
}
AMPY_ELEM double ampy_ex_clamp_d(double x, double lo, double hi)
{
    if (lo != lo || hi != hi)
        return ampy_bits_f64(0x7FF8000000000000ull);
    double r = x < lo ? lo : x;
    return hi < r ? hi : r;
}
AMPY_ELEM int64_t ampy_ex_clamp_i(int64_t x, int64_t lo, int64_t hi)
{
    int64_t r = x < lo ? lo : x;
    return hi < r ? hi : r;
}

/* Integer power by squaring (wrapping); negative exponents give 1/a^|b|
 * truncated. */
AMPY_ELEM int64_t ampy_ex_ipow(int64_t a, int64_t b)
{
    if (b < 0)
        return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    while (b) {
        if (b & 1)
            r *= base;
        base *= base;
        b >>= 1;
    }
    return (int64_t)r;
}

#endif /* AMPY_EWISE_EXPR_H */
