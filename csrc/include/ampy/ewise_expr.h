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
#define AMPY_EX_HARDSWISH(R, x)                                                           \
    ((x) * ((x) + (R)3 < (R)0 ? (R)0 : ((R)6 < (x) + (R)3 ? (R)6 : (x) + (R)3)) / (R)6)
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

/* ---- the float / double op table of the device kernels --------------------
 * The body of a function returning op's value for operands a, b, c in the
 * compute type R (x = a for unary ops; PF, PF1 the op's float parameters of
 * type R; ALPHA the add/sub multiplier, ALPHA_ONE when it is exactly 1):
 * cuda/ewise.cu's ew_float<R> is this switch, and tests/c/test_ewise_expr_f32.c
 * runs it in float32 on the CPU (with <tgmath.h>, which picks expf, erff, ...
 * as the CUDA overloads do), so the float32 math the GPU runs is checked on
 * every CI run. Needs ampy/ewise.h for the op codes. The CPU's block kernels
 * (csrc/ewise_ops.c) expand the same AMPY_EX_* formulas per op; for float32
 * exp, log, tanh, sigmoid, erf, gelu, gelu_tanh and silu they run vmath.h's
 * kernels instead. */
#define AMPY_EX_FLOAT_SWITCH(R, OP, x, a, b, c, PF, PF1, ALPHA, ALPHA_ONE)                    \
    switch ((OP)) {                                                                           \
    case AMPY_EW_ABS: return fabs(x);                                                         \
    case AMPY_EW_NEG: return -x;                                                              \
    case AMPY_EW_RECIPROCAL: return AMPY_EX_RECIPROCAL(R, x);                                 \
    case AMPY_EW_SQUARE: return AMPY_EX_SQUARE(R, x);                                         \
    case AMPY_EW_SIGN: return AMPY_EX_SIGN(R, x);                                             \
    case AMPY_EW_EXP: return exp(x);                                                          \
    case AMPY_EW_EXPM1: return expm1(x);                                                      \
    case AMPY_EW_EXP2: return exp2(x);                                                        \
    case AMPY_EW_LOG: return log(x);                                                          \
    case AMPY_EW_LOG1P: return log1p(x);                                                      \
    case AMPY_EW_LOG2: return log2(x);                                                        \
    case AMPY_EW_LOG10: return log10(x);                                                      \
    case AMPY_EW_SQRT: return sqrt(x);                                                        \
    case AMPY_EW_RSQRT: return AMPY_EX_RSQRT(R, x);                                           \
    case AMPY_EW_SIN: return sin(x);                                                          \
    case AMPY_EW_COS: return cos(x);                                                          \
    case AMPY_EW_TAN: return tan(x);                                                          \
    case AMPY_EW_TANH: return tanh(x);                                                        \
    case AMPY_EW_ATAN: return atan(x);                                                        \
    case AMPY_EW_SIGMOID: return AMPY_EX_SIGMOID(R, x);                                       \
    case AMPY_EW_RELU: return AMPY_EX_RELU(R, x);                                             \
    case AMPY_EW_GELU: return AMPY_EX_GELU(R, x);                                             \
    case AMPY_EW_GELU_TANH: return AMPY_EX_GELU_TANH(R, x);                                   \
    case AMPY_EW_ERF: return erf(x);                                                          \
    case AMPY_EW_SILU: return AMPY_EX_SILU(R, x);                                             \
    case AMPY_EW_SOFTPLUS: return AMPY_EX_SOFTPLUS(R, x, PF, PF1);                            \
    case AMPY_EW_LEAKY_RELU: return AMPY_EX_LEAKY_RELU(R, x, PF);                             \
    case AMPY_EW_FLOOR: return floor(x);                                                      \
    case AMPY_EW_CEIL: return ceil(x);                                                        \
    case AMPY_EW_ROUND: return rint(x);                                                       \
    case AMPY_EW_TRUNC: return trunc(x);                                                      \
    case AMPY_EW_FRAC: return AMPY_EX_FRAC(R, x);                                             \
    case AMPY_EW_ISNAN: return isnan(x) ? (R)1 : (R)0;                                        \
    case AMPY_EW_ISINF: return isinf(x) ? (R)1 : (R)0;                                        \
    case AMPY_EW_ISFINITE: return isfinite(x) ? (R)1 : (R)0;                                  \
    case AMPY_EW_LOGICAL_NOT: return (R)AMPY_EX_LOGICAL_NOT(R, x);                            \
    case AMPY_EW_ELU: return AMPY_EX_ELU(R, x, PF);                                           \
    case AMPY_EW_MISH: return AMPY_EX_MISH(R, x);                                             \
    case AMPY_EW_HARDSWISH: return AMPY_EX_HARDSWISH(R, x);                                   \
    case AMPY_EW_ASIN: return asin(x);                                                        \
    case AMPY_EW_ACOS: return acos(x);                                                        \
    case AMPY_EW_SINH: return sinh(x);                                                        \
    case AMPY_EW_COSH: return cosh(x);                                                        \
    case AMPY_EW_LOGSIGMOID: return AMPY_EX_LOGSIGMOID(R, x);                                 \
    /* add/sub: alpha == 1 is a plain a +- b; otherwise one fused rounding,                   \
     * fma(+-alpha, b, a), as csrc/ewise_ops.c (an explicit fma is an FMA on                  \
     * both sides, unaffected by --fmad=false). */                                            \
    case AMPY_EW_ADD:                                                                         \
        return (ALPHA_ONE) ? a + b : (R)fma((R)(ALPHA), b, a);                                \
    case AMPY_EW_SUB:                                                                         \
        return (ALPHA_ONE) ? a - b : (R)fma((R)(ALPHA), b, a);                                \
    case AMPY_EW_MUL: return a * b;                                                           \
    case AMPY_EW_DIV: return a / b;                                                           \
    case AMPY_EW_POW: return pow(a, b);                                                       \
    case AMPY_EW_MAXIMUM: return AMPY_EX_MAXIMUM(R, a, b);                                    \
    case AMPY_EW_MINIMUM: return AMPY_EX_MINIMUM(R, a, b);                                    \
    case AMPY_EW_FMAX: return fmax(a, b);                                                     \
    case AMPY_EW_FMIN: return fmin(a, b);                                                     \
    case AMPY_EW_FMOD: return fmod(a, b);                                                     \
    case AMPY_EW_REMAINDER:                                                                   \
        return sizeof(R) == 4 ? (R)ampy_ex_rem_f((float)a, (float)b)                          \
                              : (R)ampy_ex_rem_d(a, b);                                       \
    case AMPY_EW_FLOOR_DIVIDE:                                                                \
        return sizeof(R) == 4 ? (R)ampy_ex_floordiv_f((float)a, (float)b)                     \
                              : (R)ampy_ex_floordiv_d(a, b);                                  \
    case AMPY_EW_ATAN2: return atan2(a, b);                                                   \
    case AMPY_EW_EQ: return (R)(a == b);                                                      \
    case AMPY_EW_NE: return (R)(a != b);                                                      \
    case AMPY_EW_LT: return (R)(a < b);                                                       \
    case AMPY_EW_LE: return (R)(a <= b);                                                      \
    case AMPY_EW_GT: return (R)(a > b);                                                       \
    case AMPY_EW_GE: return (R)(a >= b);                                                      \
    case AMPY_EW_LOGICAL_AND: return (R)AMPY_EX_LOGICAL_AND(R, a, b);                         \
    case AMPY_EW_LOGICAL_OR: return (R)AMPY_EX_LOGICAL_OR(R, a, b);                           \
    case AMPY_EW_LOGICAL_XOR: return (R)AMPY_EX_LOGICAL_XOR(R, a, b);                         \
    case AMPY_EW_WHERE: return AMPY_EX_WHERE(R, a, b, c);                                     \
    case AMPY_EW_LERP: return AMPY_EX_LERP(R, a, b, c);                                       \
    case AMPY_EW_ADDCMUL: return AMPY_EX_ADDCMUL(R, a, b, c, PF);                             \
    case AMPY_EW_ADDCDIV: return AMPY_EX_ADDCDIV(R, a, b, c, PF);                             \
    case AMPY_EW_CLAMP:                                                                       \
        return sizeof(R) == 4 ? (R)ampy_ex_clamp_f((float)a, (float)b, (float)c)              \
                              : (R)ampy_ex_clamp_d(a, b, c);                                  \
    default: return (R)0;                                                                     \
    }

#endif /* AMPY_EWISE_EXPR_H */
