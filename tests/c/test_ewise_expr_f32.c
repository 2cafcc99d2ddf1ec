/* test_ewise_expr_f32.c — the float32 math the GPU runs, checked on the CPU.
 *
 * cuda/ewise.cu computes every floating element-wise op with the switch
 * AMPY_EX_FLOAT_SWITCH of ampy/ewise_expr.h. This test expands that very
 * switch in float32 (with <tgmath.h>, so exp(x) is expf as CUDA's overloads
 * make it; glibc's float libm stands in for libdevice, both within ~2 ulp)
 * and measures each op's error against a long-double reference written here
 * from the op's definition, over
 *   - every float32 of a dense window of 2^20 consecutive values per op (at
 *     the op's hard region: around 0, a cancellation, an overflow edge),
 *   - a stride-4093 sweep through all 2^32 bit patterns (every binade, NaNs,
 *     subnormals),
 *   - specials: +-0, +-inf, NaN, the smallest subnormal, FLT_MIN, FLT_MAX;
 * binary and ternary ops over random operands of every magnitude plus the
 * specials. The error of a result is |got - exact| in units of the float32
 * ulp at the exact value (subnormal ulp below FLT_MIN; an exact value beyond
 * the float range must give the signed inf; NaN must match NaN). Each op has
 * a stated bound (the table below); an op whose formula cannot meet a ulp
 * bound over part of the range says so with an absolute bound there.
 *
 * For float32 exp, log, tanh, sigmoid, erf, gelu, gelu_tanh and silu the CPU
 * does not run these formulas but vmath.h's kernels: they are measured on
 * the same inputs, at the portable level and (where the CPU has it) at the
 * AVX-512 level, against the same reference and their documented bounds.
 *
 * Run by `make ctest` (ASan + UBSan). Prints one line per op (its worst
 * error and where); exit status 0 when every op is within its bound.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tgmath.h>

#include "ampy/cpu.h"
#include "ampy/ewise.h"
#include "ampy/ewise_expr.h"
#include "../../csrc/vmath.h"

#define CTEST_SEED 0x853C49E6748FEA9Bull
#include "ctest.h"

/* ---- the device's float32 formulas ------------------------------------------------ */

typedef struct {
    float pf0, pf1;  /* the op's float parameters (softplus beta/threshold, slopes, ...) */
    float alpha;     /* add/sub multiplier                                             */
    int alpha_one;
} params;

static float device_f32(int op, float a, float b, float c, const params *p)
{
    const float x = a;
    const float PF = p->pf0, PF1 = p->pf1;
    AMPY_EX_FLOAT_SWITCH(float, op, x, a, b, c, PF, PF1, p->alpha, p->alpha_one)
}

/* ---- references, in long double from each op's definition ------------------------- */

typedef long double LD;
static const LD SQRT1_2 = 0.707106781186547524400844362104849039L;
static const LD SQRT_2_PI = 0.797884560802865355879892119868763737L;

static LD ref_unary(int op, LD x, const params *p)
{
    switch (op) {
    case AMPY_EW_ABS: return fabsl(x);
    case AMPY_EW_NEG: return -x;
    case AMPY_EW_RECIPROCAL: return 1.0L / x;
    case AMPY_EW_SQUARE: return x * x;
    case AMPY_EW_SIGN: return (x > 0) - (x < 0); /* torch: sign(NaN) = 0 */
    case AMPY_EW_EXP: return expl(x);
    case AMPY_EW_EXPM1: return expm1l(x);
    case AMPY_EW_EXP2: return exp2l(x);
    case AMPY_EW_LOG: return logl(x);
    case AMPY_EW_LOG1P: return log1pl(x);
    case AMPY_EW_LOG2: return log2l(x);
    case AMPY_EW_LOG10: return log10l(x);
    case AMPY_EW_SQRT: return sqrtl(x);
    case AMPY_EW_RSQRT: return 1.0L / sqrtl(x);
    case AMPY_EW_SIN: return sinl(x);
    case AMPY_EW_COS: return cosl(x);
    case AMPY_EW_TAN: return tanl(x);
    case AMPY_EW_TANH: return tanhl(x);
    case AMPY_EW_ATAN: return atanl(x);
    case AMPY_EW_SIGMOID: return 1.0L / (1.0L + expl(-x));
    case AMPY_EW_RELU: return x != x ? x : (x < 0 ? 0.0L : x);
    case AMPY_EW_GELU: return 0.5L * x * erfcl(-x * SQRT1_2); /* no cancellation for x < 0 */
    case AMPY_EW_GELU_TANH: {
        /* x/2 (1 + tanh z) = x sigmoid(2z) */
        LD z = SQRT_2_PI * (x + 0.044715L * x * x * x);
        return isinf(x) ? (x > 0 ? x : -0.0L) : x / (1.0L + expl(-2.0L * z));
    }
    case AMPY_EW_ERF: return erfl(x);
    case AMPY_EW_SILU: return isinf(x) ? (x > 0 ? x : -0.0L) : x / (1.0L + expl(-x));
    case AMPY_EW_SOFTPLUS: /* the threshold is decided on the float product, as torch */
        return (float)(x * p->pf0) > p->pf1 ? x : log1pl(expl(x * p->pf0)) / p->pf0;
    case AMPY_EW_LEAKY_RELU: return x > 0 ? x : x * p->pf0;
    case AMPY_EW_FLOOR: return floorl(x);
    case AMPY_EW_CEIL: return ceill(x);
    case AMPY_EW_ROUND: return rintl(x);
    case AMPY_EW_TRUNC: return truncl(x);
    case AMPY_EW_FRAC: return isinf(x) ? NAN : x - truncl(x);
    case AMPY_EW_ISNAN: return isnan(x) != 0;
    case AMPY_EW_ISINF: return isinf(x) != 0;
    case AMPY_EW_ISFINITE: return isfinite(x) != 0;
    case AMPY_EW_LOGICAL_NOT: return x == 0;
    case AMPY_EW_ELU: return x > 0 ? x : expm1l(x) * p->pf0;
    case AMPY_EW_MISH: return isinf(x) && x < 0 ? -0.0L : x * tanhl(log1pl(expl(x)));
    case AMPY_EW_ASIN: return asinl(x);
    case AMPY_EW_ACOS: return acosl(x);
    case AMPY_EW_SINH: return sinhl(x);
    case AMPY_EW_COSH: return coshl(x);
    case AMPY_EW_LOGSIGMOID: return (x < 0 ? x : 0.0L) - log1pl(expl(-fabsl(x)));
    case AMPY_EW_HARDSWISH: {
        /* x * clamp(x + 3, 0, 6) / 6; the float product overflows for |x| > FLT_MAX / 6
         * (as torch's float kernel), and -inf * 0 is NaN */
        if (isinf(x))
            return x > 0 ? x : NAN;
        LD t = x + 3.0L;
        t = t < 0 ? 0 : t > 6 ? 6 : t;
        const LD prod = x * t;
        return isinf((float)prod) ? (LD)(float)prod : prod / 6.0L;
    }
    default: return NAN;
    }
}

static LD ref_binary(int op, LD a, LD b, const params *p)
{
    switch (op) {
    case AMPY_EW_ADD: return p->alpha_one ? a + b : a + (LD)p->alpha * b;
    case AMPY_EW_SUB: /* with alpha != 1 the binding passes -alpha */
        return p->alpha_one ? a - b : a + (LD)p->alpha * b;
    case AMPY_EW_MUL: return a * b;
    case AMPY_EW_DIV: return a / b;
    case AMPY_EW_POW: return powl(a, b);
    case AMPY_EW_MAXIMUM: return (a != a || b != b) ? NAN : (a > b ? a : b);
    case AMPY_EW_MINIMUM: return (a != a || b != b) ? NAN : (a < b ? a : b);
    case AMPY_EW_FMAX: return fmaxl(a, b);
    case AMPY_EW_FMIN: return fminl(a, b);
    case AMPY_EW_FMOD: return fmodl(a, b);
    case AMPY_EW_REMAINDER: { /* a - b floor(a / b), the sign of b */
        LD m = fmodl(a, b);
        return (m != 0 && (m < 0) != (b < 0)) ? m + b : m;
    }
    case AMPY_EW_FLOOR_DIVIDE: /* Python's a // b: floor of the exact quotient */
        if (b == 0 || isinf(a) || a != a || b != b)
            return b == 0 ? a / b : NAN;
        if (isinf(b)) /* the quotient is +-0 from one side */
            return a == 0 || (a < 0) == (b < 0) ? a / b : -1.0L;
        return floorl(a / b);
    case AMPY_EW_ATAN2: return atan2l(a, b);
    case AMPY_EW_EQ: return a == b;
    case AMPY_EW_NE: return a != b;
    case AMPY_EW_LT: return a < b;
    case AMPY_EW_LE: return a <= b;
    case AMPY_EW_GT: return a > b;
    case AMPY_EW_GE: return a >= b;
    case AMPY_EW_LOGICAL_AND: return a != 0 && b != 0;
    case AMPY_EW_LOGICAL_OR: return a != 0 || b != 0;
    case AMPY_EW_LOGICAL_XOR: return (a != 0) != (b != 0);
    default: return NAN;
    }
}

static LD ref_ternary(int op, LD a, LD b, LD c, const params *p)
{
    switch (op) {
    case AMPY_EW_WHERE: return a != 0 ? b : c;
    case AMPY_EW_LERP: return a + c * (b - a);
    case AMPY_EW_ADDCMUL: return a + (LD)p->pf0 * b * c;
    case AMPY_EW_ADDCDIV: return a + (LD)p->pf0 * b / c;
    case AMPY_EW_CLAMP: { /* min(max(a, lo), hi); NaN bounds give NaN */
        if (b != b || c != c)
            return NAN;
        LD r = a < b ? b : a;
        return c < r ? c : r;
    }
    default: return NAN;
    }
}

/* ---- error in float32 ulps ------------------------------------------------------------ */

/* float32 bits in an order where consecutive values are consecutive
 * integers (+0 and -0 both 0) */
static int64_t ordered(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u >> 31) ? -(int64_t)(u & 0x7FFFFFFFu) : (int64_t)u;
}

/* How many float32 steps got is from the correctly rounded exact value
 * want + tail (the convention of tests/test_vecmath.py; tail, below want's
 * last bit, only breaks an exact tie of want between two floats); 0 for NaN
 * vs NaN, a huge number for NaN vs a number. */
static double ulp_err2(float got, LD want, LD tail)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got) ? 0.0 : 1e30;
    float w = (float)want; /* rounds once: long double -> float */
    float lo = w, hi = w;
    if ((LD)w < want)
        hi = nextafterf(w, INFINITY);
    else if ((LD)w > want)
        lo = nextafterf(w, -INFINITY);
    if (tail != 0 && lo != hi && want - (LD)lo == (LD)hi - want) /* an exact tie */
        w = tail > 0 ? hi : lo;
    return (double)llabs((long long)(ordered(got) - ordered(w)));
}

static double ulp_err(float got, LD want) { return ulp_err2(got, want, 0.0L); }

/* ---- the per-op table ------------------------------------------------------------------- */

typedef struct {
    int op;
    const char *name;
    double bound;     /* ulps from the correctly rounded result, for x >= ulp_lo         */
    float win_lo;     /* the dense window starts here (WINDOW floats upward)             */
    float ulp_lo;     /* below it (a cancellation or an overflowing exp in the formula):  */
    double abs_bound; /*   |got - exact| <= abs_bound instead                              */
    int inf_nan;      /* +-inf may give NaN (as torch's float64 kernels: x * 0)          */
    params p;
    int vm;           /* vmath op (AMPY_VM_*) or -1                                      */
    double vm_bound;  /* vmath's documented bound (vmath_impl.inc), whole range          */
} unary_case;

#define P0 {0, 0, 1, 1}
#define NO_ABS -INFINITY, 0, 0

static const unary_case UNARY[] = {
    {AMPY_EW_ABS, "abs", 0, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_NEG, "neg", 0, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_RECIPROCAL, "reciprocal", 0, 1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_SQUARE, "square", 0, 1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_SIGN, "sign", 0, -1e-3f, NO_ABS, P0, -1, 0},
    {AMPY_EW_EXP, "exp", 1, -1.0f, NO_ABS, P0, AMPY_VM_EXP, 1},
    {AMPY_EW_EXPM1, "expm1", 1, -1e-3f, NO_ABS, P0, -1, 0},
    {AMPY_EW_EXP2, "exp2", 1, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_LOG, "log", 1, 0.99f, NO_ABS, P0, AMPY_VM_LOG, 1},
    {AMPY_EW_LOG1P, "log1p", 1, -1e-3f, NO_ABS, P0, -1, 0},
    {AMPY_EW_LOG2, "log2", 1, 0.99f, NO_ABS, P0, -1, 0},
    {AMPY_EW_LOG10, "log10", 2, 0.99f, NO_ABS, P0, -1, 0},
    {AMPY_EW_SQRT, "sqrt", 0, 1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_RSQRT, "rsqrt", 1, 1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_SIN, "sin", 1, 3.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_COS, "cos", 1, 1.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_TAN, "tan", 1, 1.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_TANH, "tanh", 2, -1e-2f, NO_ABS, P0, AMPY_VM_TANH, 1},
    {AMPY_EW_ATAN, "atan", 1, 0.9f, NO_ABS, P0, -1, 0},
    /* below -88.7 exp(-x) overflows: 1 / inf = 0 for a subnormal sigmoid */
    {AMPY_EW_SIGMOID, "sigmoid", 2, -2.0f, -88.0f, 0x1p-126, 0, P0, AMPY_VM_SIGMOID, 2},
    {AMPY_EW_RELU, "relu", 0, -1e-3f, NO_ABS, P0, -1, 0},
    /* x < 0: 1 + erf / 1 + tanh cancels (torch's kernels use the same formula) */
    {AMPY_EW_GELU, "gelu", 3, -3.0f, 0.0f, 0x1p-23, 1, P0, AMPY_VM_GELU, 3},
    {AMPY_EW_GELU_TANH, "gelu_tanh", 3, -3.0f, 0.0f, 0x1p-23, 1, P0, AMPY_VM_GELU_TANH, 3},
    {AMPY_EW_ERF, "erf", 1, -1e-2f, NO_ABS, P0, AMPY_VM_ERF, 1},
    {AMPY_EW_SILU, "silu", 3, -2.0f, -88.0f, 0x1p-119, 1, P0, AMPY_VM_SILU, 3},
    {AMPY_EW_SOFTPLUS, "softplus", 2, -1.0f, NO_ABS, {1, 20, 1, 1}, -1, 0},
    {AMPY_EW_LEAKY_RELU, "leaky_relu", 0, -1.0f, NO_ABS, {0.01f, 0, 1, 1}, -1, 0},
    {AMPY_EW_FLOOR, "floor", 0, -2.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_CEIL, "ceil", 0, -2.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ROUND, "round", 0, -2.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_TRUNC, "trunc", 0, -2.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_FRAC, "frac", 0, -2.5f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ISNAN, "isnan", 0, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ISINF, "isinf", 0, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ISFINITE, "isfinite", 0, -1.0f, NO_ABS, P0, -1, 0},
    {AMPY_EW_LOGICAL_NOT, "logical_not", 0, -1e-3f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ELU, "elu", 1, -1e-3f, NO_ABS, {1, 0, 1, 1}, -1, 0},
    /* below -87.3 exp(x) is subnormal: few significant bits */
    {AMPY_EW_MISH, "mish", 3, -2.0f, -87.0f, 0x1p-140, 1, P0, -1, 0},
    {AMPY_EW_ASIN, "asin", 1, 0.4f, NO_ABS, P0, -1, 0},
    {AMPY_EW_ACOS, "acos", 1, 0.4f, NO_ABS, P0, -1, 0},
    {AMPY_EW_SINH, "sinh", 2, -1e-2f, NO_ABS, P0, -1, 0},
    {AMPY_EW_COSH, "cosh", 2, -1e-2f, NO_ABS, P0, -1, 0},
    {AMPY_EW_LOGSIGMOID, "logsigmoid", 2, -2.0f, NO_ABS, P0, -1, 0},
    /* two roundings (x + 3, then x * t) before the division by 6 */
    {AMPY_EW_HARDSWISH, "hardswish", 2, -4.0f, -INFINITY, 0, 1, P0, -1, 0},
};

/* ---- inputs -------------------------------------------------------------------------------- */

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static const uint32_t SPECIALS[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                    0x7FC00000u, 0xFFC00001u, 0x00000001u, 0x80000001u,
                                    0x00800000u, 0x80800000u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                    0x3F800000u, 0xBF800000u};
#define NSPECIAL (sizeof SPECIALS / sizeof SPECIALS[0])
#define WINDOW (1u << 19)
#define STRIDE 8191u
#define NSWEEP (WINDOW + (uint32_t)(0x100000000ull / STRIDE) + 1 + NSPECIAL)

/* The inputs of one unary op: the window from win_lo upward in value, the
 * sweep, the specials. Returns the count. */
static size_t unary_inputs(float win_lo, float *x)
{
    size_t n = 0;
    float v = win_lo;
    for (uint32_t i = 0; i < WINDOW; i++, v = nextafterf(v, INFINITY))
        x[n++] = v;
    for (uint64_t u = 0; u < 0x100000000ull; u += STRIDE)
        x[n++] = bits_f((uint32_t)u);
    for (size_t i = 0; i < NSPECIAL; i++)
        x[n++] = bits_f(SPECIALS[i]);
    return n;
}

/* ---- running the unary table ----------------------------------------------------------------- */

typedef struct {
    double worst;
    float at;
} worst_t;

static void note(worst_t *w, double e, float x)
{
    if (e > w->worst)
        w->worst = e, w->at = x;
}

static void run_unary(const unary_case *c, float *x, float *y, size_t n)
{
    worst_t dev = {0, 0}, dev_abs = {0, 0};
    for (size_t i = 0; i < n; i++) {
        float got = device_f32(c->op, x[i], 0.0f, 0.0f, &c->p);
        LD want = ref_unary(c->op, (LD)x[i], &c->p);
        if (c->inf_nan && isinf(x[i]) && isnan(got))
            continue;
        if (x[i] < c->ulp_lo && isfinite(x[i]))
            note(&dev_abs, (double)fabsl((LD)got - want), x[i]);
        else
            note(&dev, ulp_err(got, want), x[i]);
    }
    int ok = dev.worst <= c->bound && dev_abs.worst <= c->abs_bound;
    printf("%-12s device formula: %8.3g ulp at %-14.9g (bound %g)", c->name, dev.worst,
           (double)dev.at, c->bound);
    if (c->ulp_lo > -INFINITY)
        printf("; below %g: %.3g absolute at %.9g (bound %g)", (double)c->ulp_lo, dev_abs.worst,
               (double)dev_abs.at, c->abs_bound);
    printf("%s\n", ok ? "" : "  FAIL");
    checks++, failures += !ok;
    if (c->vm < 0)
        return;
    const ampy_vm_table *levels[2] = {NULL, ampy_vm_avx512()};
    const char *names[2] = {"portable", "avx512"};
    ampy_cpu_level_set(AMPY_CPU_PORTABLE);
    levels[0] = ampy_vm();
    ampy_cpu_level_set(-1);
    if (!(ampy_cpu_features() & AMPY_CPU_HAS_AVX512))
        levels[1] = NULL;
    for (int l = 0; l < 2; l++) {
        if (!levels[l])
            continue;
        levels[l]->op[c->vm](x, y, (int64_t)n);
        worst_t vm = {0, 0}, vs = {0, 0};
        for (size_t i = 0; i < n; i++) {
            if (c->inf_nan && isinf(x[i]) && isnan(y[i]))
                continue;
            note(&vm, ulp_err(y[i], ref_unary(c->op, (LD)x[i], &c->p)), x[i]);
            note(&vs, ulp_err(device_f32(c->op, x[i], 0.0f, 0.0f, &c->p), (LD)y[i]), x[i]);
        }
        int vok = vm.worst <= c->vm_bound;
        printf("%-12s vmath %-8s: %8.3g ulp at %-14.9g (bound %g); device vs vmath %.3g ulp at %.9g%s\n",
               c->name, names[l], vm.worst, (double)vm.at, c->vm_bound, vs.worst, (double)vs.at,
               vok ? "" : "  FAIL");
        checks++, failures += !vok;
    }
}

/* ---- binary and ternary ops -------------------------------------------------------------------- */

/* a float of any magnitude in [2^-30, 2^30) of either sign; with `specials`
 * one in 64 is a special value instead */
static float rnd_operand(int specials)
{
    uint32_t r = rnd32();
    if (specials && (r & 63) == 0)
        return bits_f(SPECIALS[(r >> 6) % NSPECIAL]);
    float m = 1.0f + (float)(rnd32() >> 8) * 0x1p-24f;
    float v = ldexpf(m, (int)(rnd32() % 60) - 30);
    return (r >> 31) ? -v : v;
}

typedef struct {
    int op;
    const char *name;
    int nin;
    double bound; /* ulps from the correctly rounded result; for the multi-rounding
                   * ternary ops, ulps of the largest term (a, b, c (b - a) and
                   * (1 - c)(b - a) for lerp; a and the product for addcmul/addcdiv): a cancellation
                   * of the terms is not the formula's error to bound            */
    params p;
} multi_case;

static const multi_case MULTI[] = {
    {AMPY_EW_ADD, "add", 2, 0, {0, 0, 1, 1}},
    {AMPY_EW_ADD, "add alpha", 2, 0, {0, 0, 0.3f, 0}},
    {AMPY_EW_SUB, "sub", 2, 0, {0, 0, 1, 1}},
    {AMPY_EW_SUB, "sub alpha", 2, 0, {0, 0, -2.5f, 0}},
    {AMPY_EW_MUL, "mul", 2, 0, P0},
    {AMPY_EW_DIV, "div", 2, 0, P0},
    {AMPY_EW_POW, "pow", 2, 1, P0},
    {AMPY_EW_MAXIMUM, "maximum", 2, 0, P0},
    {AMPY_EW_MINIMUM, "minimum", 2, 0, P0},
    {AMPY_EW_FMAX, "fmax", 2, 0, P0},
    {AMPY_EW_FMIN, "fmin", 2, 0, P0},
    {AMPY_EW_FMOD, "fmod", 2, 0, P0},
    {AMPY_EW_REMAINDER, "remainder", 2, 0, P0},
    /* torch's div_floor_floating rounds a - fmod(a, b) and the division */
    {AMPY_EW_FLOOR_DIVIDE, "floor_divide", 2, 3, P0},
    {AMPY_EW_ATAN2, "atan2", 2, 1, P0},
    {AMPY_EW_EQ, "eq", 2, 0, P0},
    {AMPY_EW_NE, "ne", 2, 0, P0},
    {AMPY_EW_LT, "lt", 2, 0, P0},
    {AMPY_EW_LE, "le", 2, 0, P0},
    {AMPY_EW_GT, "gt", 2, 0, P0},
    {AMPY_EW_GE, "ge", 2, 0, P0},
    {AMPY_EW_LOGICAL_AND, "logical_and", 2, 0, P0},
    {AMPY_EW_LOGICAL_OR, "logical_or", 2, 0, P0},
    {AMPY_EW_LOGICAL_XOR, "logical_xor", 2, 0, P0},
    {AMPY_EW_WHERE, "where", 3, 0, P0},
    {AMPY_EW_LERP, "lerp", 3, 2, P0},
    {AMPY_EW_ADDCMUL, "addcmul", 3, 2, {0.5f, 0, 1, 1}},
    {AMPY_EW_ADDCDIV, "addcdiv", 3, 2, {-0.75f, 0, 1, 1}},
    {AMPY_EW_CLAMP, "clamp", 3, 0, P0},
};

/* The error of one binary/ternary result. */
static double multi_err(const multi_case *c, float a, float b, float cc, float got)
{
    const params *p = &c->p;
    if (c->op == AMPY_EW_ADD || c->op == AMPY_EW_SUB) {
        /* the exact a + alpha*b as a sum and its tail (TwoSum: alpha*b is exact) */
        LD t = p->alpha_one ? (c->op == AMPY_EW_ADD ? (LD)b : -(LD)b) : (LD)p->alpha * b;
        if (!isfinite(a) || !isfinite(t))
            return ulp_err(got, (LD)a + t);
        LD sum = (LD)a + t, bv = sum - a;
        return ulp_err2(got, sum, ((LD)a - (sum - bv)) + (t - bv));
    }
    if (c->op != AMPY_EW_LERP && c->op != AMPY_EW_ADDCMUL && c->op != AMPY_EW_ADDCDIV)
        return ulp_err(got, c->nin == 2 ? ref_binary(c->op, a, b, p)
                                        : ref_ternary(c->op, a, b, cc, p));
    LD want = ref_ternary(c->op, a, b, cc, p), big = fabsl(want);
    LD terms[4] = {a, c->op == AMPY_EW_LERP ? (LD)b
                          : c->op == AMPY_EW_ADDCMUL ? (LD)p->pf0 * b * cc : (LD)p->pf0 * b / cc,
                   c->op == AMPY_EW_LERP ? (LD)cc * ((LD)b - a) : 0.0L,
                   c->op == AMPY_EW_LERP ? (1.0L - cc) * ((LD)b - a) : 0.0L};
    for (int k = 0; k < 4; k++)
        big = fabsl(terms[k]) > big ? fabsl(terms[k]) : big;
    if (!(big >= (LD)FLT_MIN && big <= (LD)FLT_MAX))
        return 0.0; /* a term outside the float range: not this formula's domain */
    return (double)(fabsl((LD)got - want) / ldexpl(1.0L, ilogbl(big) - 23));
}

static void run_multi(const multi_case *c, int n)
{
    int finite_only = c->op == AMPY_EW_LERP || c->op == AMPY_EW_ADDCMUL || c->op == AMPY_EW_ADDCDIV;
    worst_t w = {0, 0};
    float wa = 0, wb = 0, wc = 0;
    for (int i = 0; i < n; i++) {
        float a = rnd_operand(!finite_only), b = rnd_operand(!finite_only),
              cc = rnd_operand(!finite_only);
        if (c->op == AMPY_EW_LERP) /* weights of every size in [-2, 2], mostly in [0, 1] */
            cc = (i & 3) ? (float)(rnd32() >> 8) * 0x1p-24f : ldexpf(rnd_operand(0), -29);
        if (c->op == AMPY_EW_FLOOR_DIVIDE || c->op == AMPY_EW_REMAINDER || c->op == AMPY_EW_FMOD)
            b = (i & 1) ? b : ldexpf(b, -(int)(rnd32() % 24)); /* quotients of every size */
        double e = multi_err(c, a, b, cc, device_f32(c->op, a, b, cc, &c->p));
        if (e > w.worst)
            w.worst = e, wa = a, wb = b, wc = cc;
    }
    int ok = w.worst <= c->bound;
    printf("%-12s device formula: %8.3g ulp at (%.9g, %.9g, %.9g) (bound %g)%s\n", c->name, w.worst,
           (double)wa, (double)wb, (double)wc, c->bound, ok ? "" : "  FAIL");
    checks++, failures += !ok;
}

int main(void)
{
    float *x = malloc(sizeof(float) * NSWEEP), *y = malloc(sizeof(float) * NSWEEP);
    if (!x || !y)
        return 2;
    for (size_t k = 0; k < sizeof UNARY / sizeof UNARY[0]; k++) {
        size_t n = unary_inputs(UNARY[k].win_lo, x);
        run_unary(&UNARY[k], x, y, n);
    }
    for (size_t k = 0; k < sizeof MULTI / sizeof MULTI[0]; k++)
        run_multi(&MULTI[k], 300000);
    free(x);
    free(y);
    printf("test_ewise_expr_f32: %d bounds checked, %d exceeded\n", checks, failures);
    return failures ? 1 : 0;
}
