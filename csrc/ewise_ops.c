/* ewise_ops.c — the per-op block kernels of ampy_ewise (see ewise.h).
 *
 * Each kernel is one loop over contiguous arrays of its compute kind
 * (float, double or int64), written once as an expression of `x` (unary),
 * `a, b` (binary) or `a, b, c` (ternary) and the local type `R`; <tgmath.h>
 * picks expf/exp, erff/erf, ... from R so the same text serves float and
 * double. The formulas follow torch's CPU kernels (aten/src/ATen/native/cpu/
 * UnaryOpsKernel.cpp, BinaryOpsKernel.cpp, Activation.cpp) so that results
 * agree: e.g. floor_divide is torch's div_floor_floating, lerp its two-sided
 * formula, and NaN propagates through maximum/minimum/clamp/relu. The
 * formulas themselves live in ampy/ewise_expr.h, shared with cuda/ewise.cu.
 *
 * Integer kernels wrap around on overflow like torch (the arithmetic is done
 * in uint64_t, where wrapping is defined) and report division by zero.
 */
#include <math.h>
#include <stdint.h>
#include <tgmath.h>

#include "ampy/ewise.h"
#include "ampy/ewise_expr.h"
#include "ewise_table.h"
#include "vmath.h"

#define KSIG(name) \
    static int name(void *out, const void *const *in, int64_t n, const ampy_ewise_params *p)

/* ---- kernel generators --------------------------------------------------- */
#define U_K(name, TYPE, EXPR)                                                 \
    KSIG(name)                                                                \
    {                                                                         \
        typedef TYPE R;                                                       \
        R *o = (R *)out;                                                      \
        const R *xa = (const R *)in[0];                                       \
        (void)p;                                                              \
        for (int64_t i = 0; i < n; i++) {                                     \
            R x = xa[i];                                                      \
            o[i] = (R)(EXPR);                                                 \
        }                                                                     \
        return 0;                                                             \
    }
#define B_K(name, TYPE, EXPR)                                                 \
    KSIG(name)                                                                \
    {                                                                         \
        typedef TYPE R;                                                       \
        R *o = (R *)out;                                                      \
        const R *xa = (const R *)in[0], *xb = (const R *)in[1];               \
        (void)p;                                                              \
        for (int64_t i = 0; i < n; i++) {                                     \
            R a = xa[i], b = xb[i];                                           \
            o[i] = (R)(EXPR);                                                 \
        }                                                                     \
        return 0;                                                             \
    }
#define T_K(name, TYPE, EXPR)                                                 \
    KSIG(name)                                                                \
    {                                                                         \
        typedef TYPE R;                                                       \
        R *o = (R *)out;                                                      \
        const R *xa = (const R *)in[0], *xb = (const R *)in[1];               \
        const R *xc = (const R *)in[2];                                       \
        (void)p;                                                              \
        for (int64_t i = 0; i < n; i++) {                                     \
            R a = xa[i], b = xb[i], c = xc[i];                                \
            o[i] = (R)(EXPR);                                                 \
        }                                                                     \
        return 0;                                                             \
    }
/* float + double versions of one expression */
#define U_F(op, EXPR) U_K(op##_f32, float, EXPR) U_K(op##_f64, double, EXPR)
#define B_F(op, EXPR) B_K(op##_f32, float, EXPR) B_K(op##_f64, double, EXPR)
#define T_F(op, EXPR) T_K(op##_f32, float, EXPR) T_K(op##_f64, double, EXPR)
/* all three kinds */
#define U_ALL(op, EXPR) U_F(op, EXPR) U_K(op##_i64, int64_t, EXPR)
#define B_ALL(op, EXPR) B_F(op, EXPR) B_K(op##_i64, int64_t, EXPR)

typedef uint64_t U64;
#define PF ((R)p->f[0])
#define PF1 ((R)p->f[1])

/* ---- unary ---------------------------------------------------------------- */
/* float32 exp, log, tanh, sigmoid, erf, gelu, gelu_tanh, silu: the
 * vectorized kernels of vmath.h (within 2 ulp of the correctly rounded
 * result; AVX-512 or portable by CPU level). float64 stays on libm. */
#define VM_K(name, ID)                                                        \
    KSIG(name##_f32)                                                          \
    {                                                                         \
        (void)p;                                                              \
        ampy_vm()->op[ID]((const float *)in[0], (float *)out, n);             \
        return 0;                                                             \
    }
U_F(abs, fabs(x))
U_K(abs_i64, int64_t, x < 0 ? (int64_t)(0 - (U64)x) : x)
U_F(neg, -x)
U_K(neg_i64, int64_t, (int64_t)(0 - (U64)x))
U_F(reciprocal, AMPY_EX_RECIPROCAL(R, x))
U_F(square, AMPY_EX_SQUARE(R, x))
U_K(square_i64, int64_t, (int64_t)((U64)x * (U64)x))
U_ALL(sign, AMPY_EX_SIGN(R, x))
VM_K(exp, AMPY_VM_EXP)
U_K(exp_f64, double, exp(x))
U_F(expm1, expm1(x))
U_F(exp2, exp2(x))
VM_K(log, AMPY_VM_LOG)
U_K(log_f64, double, log(x))
U_F(log1p, log1p(x))
U_F(log2, log2(x))
U_F(log10, log10(x))
U_F(sqrt, sqrt(x))
U_F(rsqrt, AMPY_EX_RSQRT(R, x))
U_F(sin, sin(x))
U_F(cos, cos(x))
U_F(tan, tan(x))
VM_K(tanh, AMPY_VM_TANH)
U_K(tanh_f64, double, tanh(x))
U_F(atan, atan(x))
U_F(asin, asin(x))
U_F(acos, acos(x))
U_F(sinh, sinh(x))
U_F(cosh, cosh(x))
VM_K(sigmoid, AMPY_VM_SIGMOID)
U_K(sigmoid_f64, double, AMPY_EX_SIGMOID(R, x))
U_F(logsigmoid, AMPY_EX_LOGSIGMOID(R, x))
/* relu keeps NaN (torch: clamp_min(x, 0)) */
U_ALL(relu, AMPY_EX_RELU(R, x))
VM_K(gelu, AMPY_VM_GELU)
U_K(gelu_f64, double, AMPY_EX_GELU(R, x))
VM_K(gelu_tanh, AMPY_VM_GELU_TANH)
U_K(gelu_tanh_f64, double, AMPY_EX_GELU_TANH(R, x))
VM_K(erf, AMPY_VM_ERF)
U_K(erf_f64, double, erf(x))
VM_K(silu, AMPY_VM_SILU)
U_K(silu_f64, double, AMPY_EX_SILU(R, x))
U_F(softplus, AMPY_EX_SOFTPLUS(R, x, PF, PF1))
U_F(leaky_relu, AMPY_EX_LEAKY_RELU(R, x, PF))
U_F(elu, AMPY_EX_ELU(R, x, PF))
U_F(mish, AMPY_EX_MISH(R, x))
U_F(hardswish, AMPY_EX_HARDSWISH(R, x))
U_F(floor, floor(x))
U_F(ceil, ceil(x))
U_F(round, rint(x))
U_F(trunc, trunc(x))
U_F(frac, AMPY_EX_FRAC(R, x))
U_K(ident_i64, int64_t, x)
U_K(zero_i64, int64_t, x * 0)
U_K(one_i64, int64_t, x * 0 + 1)
U_F(isnan, isnan(x) ? 1 : 0)
U_F(isinf, isinf(x) ? 1 : 0)
U_F(isfinite, isfinite(x) ? 1 : 0)
U_ALL(logical_not, AMPY_EX_LOGICAL_NOT(R, x))
U_K(bitwise_not_i64, int64_t, ~x)

/* ---- binary --------------------------------------------------------------- */
/* add/sub with alpha: torch's vectorised kernel is fmadd(b, alpha, a), one
 * rounding; with alpha == 1 that is plain a + b. */
#define ADDSUB(op, OPER)                                                             \
    KSIG(op##_f32)                                                                   \
    {                                                                                \
        float *o = (float *)out;                                                     \
        const float *a = (const float *)in[0], *b = (const float *)in[1];            \
        const float al = (float)(0.0 OPER p->f[0]);                                  \
        if (p->f[0] == 1.0)                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] OPER b[i];                   \
        else                                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = fmaf(al, b[i], a[i]);             \
        return 0;                                                                    \
    }                                                                                \
    KSIG(op##_f64)                                                                   \
    {                                                                                \
        double *o = (double *)out;                                                   \
        const double *a = (const double *)in[0], *b = (const double *)in[1];         \
        const double al = 0.0 OPER p->f[0];                                          \
        if (p->f[0] == 1.0)                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] OPER b[i];                   \
        else                                                                         \
            for (int64_t i = 0; i < n; i++) o[i] = fma(al, b[i], a[i]);              \
        return 0;                                                                    \
    }                                                                                \
    KSIG(op##_i64)                                                                   \
    {                                                                                \
        int64_t *o = (int64_t *)out;                                                 \
        const int64_t *a = (const int64_t *)in[0], *b = (const int64_t *)in[1];      \
        const U64 al = (U64)0 OPER (U64)p->i[0];                                     \
        for (int64_t i = 0; i < n; i++) o[i] = (int64_t)((U64)a[i] + al * (U64)b[i]); \
        return 0;                                                                    \
    }
ADDSUB(add, +)
ADDSUB(sub, -)

B_F(mul, a * b)
B_K(mul_i64, int64_t, (int64_t)((U64)a * (U64)b))
B_F(div, a / b)
B_F(pow, pow(a, b))
B_F(maximum, AMPY_EX_MAXIMUM(R, a, b))
B_F(minimum, AMPY_EX_MINIMUM(R, a, b))
B_F(fmax, fmax(a, b))
B_F(fmin, fmin(a, b))
B_K(max_i64, int64_t, a > b ? a : b)
B_K(min_i64, int64_t, a < b ? a : b)
B_F(fmod, fmod(a, b))
B_F(atan2, atan2(a, b))
B_ALL(eq, a == b)
B_ALL(ne, a != b)
B_ALL(lt, a < b)
B_ALL(le, a <= b)
B_ALL(gt, a > b)
B_ALL(ge, a >= b)
B_ALL(logical_and, AMPY_EX_LOGICAL_AND(R, a, b))
B_ALL(logical_or, AMPY_EX_LOGICAL_OR(R, a, b))
B_ALL(logical_xor, AMPY_EX_LOGICAL_XOR(R, a, b))
B_K(bitwise_and_i64, int64_t, a & b)
B_K(bitwise_or_i64, int64_t, a | b)
B_K(bitwise_xor_i64, int64_t, a ^ b)

B_K(remainder_f32, float, ampy_ex_rem_f(a, b))
B_K(remainder_f64, double, ampy_ex_rem_d(a, b))

B_K(floor_divide_f32, float, ampy_ex_floordiv_f(a, b))
B_K(floor_divide_f64, double, ampy_ex_floordiv_d(a, b))

/* Integer division family: b == 0 is an error (torch: "ZeroDivisionError"),
 * INT64_MIN / -1 wraps instead of trapping. */
#define IDIV_K(name, EXPR)                                                       \
    KSIG(name)                                                                   \
    {                                                                            \
        int64_t *o = (int64_t *)out;                                             \
        const int64_t *xa = (const int64_t *)in[0], *xb = (const int64_t *)in[1]; \
        (void)p;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                        \
            int64_t a = xa[i], b = xb[i];                                        \
            if (b == 0)                                                          \
                return 1;                                                        \
            if (b == -1) {                                                       \
                o[i] = IDIV_NEG1_##name;                                         \
                continue;                                                        \
            }                                                                    \
            int64_t q = a / b, r = a % b;                                        \
            (void)q, (void)r;                                                    \
            o[i] = (EXPR);                                                       \
        }                                                                        \
        return 0;                                                                \
    }
#define IDIV_NEG1_fmod_i64 0
#define IDIV_NEG1_remainder_i64 0
#define IDIV_NEG1_floor_divide_i64 (int64_t)(0 - (U64)a)
IDIV_K(fmod_i64, r)
IDIV_K(remainder_i64, (r != 0 && ((r < 0) != (b < 0))) ? r + b : r)
IDIV_K(floor_divide_i64, (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q)

B_K(pow_i64, int64_t, ampy_ex_ipow(a, b))

/* ---- ternary -------------------------------------------------------------- */
T_F(where, AMPY_EX_WHERE(R, a, b, c))
T_K(where_i64, int64_t, a != 0 ? b : c)
T_F(lerp, AMPY_EX_LERP(R, a, b, c))
T_F(addcmul, AMPY_EX_ADDCMUL(R, a, b, c, PF))
T_K(addcmul_i64, int64_t, (int64_t)((U64)a + (U64)p->i[0] * (U64)b * (U64)c))
T_F(addcdiv, AMPY_EX_ADDCDIV(R, a, b, c, PF))
T_K(clamp_f32, float, ampy_ex_clamp_f(a, b, c))
T_K(clamp_f64, double, ampy_ex_clamp_d(a, b, c))
T_K(clamp_i64, int64_t, ampy_ex_clamp_i(a, b, c))

/* ---- the table: one row per op of ewise.h's list -------------------------- */
/* integer kernels shared by several ops */
#define floor_i64 ident_i64
#define ceil_i64 ident_i64
#define round_i64 ident_i64
#define trunc_i64 ident_i64
#define frac_i64 zero_i64
#define isnan_i64 zero_i64
#define isinf_i64 zero_i64
#define isfinite_i64 one_i64
#define maximum_i64 max_i64
#define minimum_i64 min_i64
#define fmax_i64 max_i64
#define fmin_i64 min_i64
#define KF_FDI(n) n##_f32
#define KD_FDI(n) n##_f64
#define KI_FDI(n) n##_i64
#define KF_FD(n) n##_f32
#define KD_FD(n) n##_f64
#define KI_FD(n) NULL
#define KF_I(n) NULL
#define KD_I(n) NULL
#define KI_I(n) n##_i64
#define ROW(E, name, arity, cost, flag, kinds)                                 \
    {#name, arity, cost, AMPY_EWF_##flag, {KF_##kinds(name), KD_##kinds(name), KI_##kinds(name)}},

static const ampy_ewise_row rows[AMPY_EW_NUM_OPS] = {AMPY_EWISE_OPS(ROW)};

const ampy_ewise_row *ampy_ewise_row_get(int op)
{
    return (op >= 0 && op < AMPY_EW_NUM_OPS && rows[op].name) ? &rows[op] : NULL;
}

ampy_ewise_kernel ampy_ewise_kernel_get(int op, int kind)
{
    const ampy_ewise_row *r = ampy_ewise_row_get(op);
    return (r && kind >= 0 && kind <= 2) ? r->kernel[kind] : NULL;
}
