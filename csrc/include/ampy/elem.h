/* ampy/elem.h — per-element math shared by the CPU kernels (csrc/) and the
 * CUDA kernels (cuda/).
 *
 * Everything here is a small inline function of a few scalars, compiled as
 * `static inline` by a C compiler and `__host__ __device__` by nvcc, so the
 * CPU test suite checks the very code the GPU runs.
 *
 * Half formats (bit layouts, most significant bit first):
 *
 *   float32  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
 *   float16  s eeeee mmmmmmmmmm                   bias 15, max 65504
 *   bfloat16 s eeeeeeee mmmmmmm                   bias 127 (top half of f32)
 *
 * All conversions to a half format round once, to nearest with ties to even,
 * overflow to +-inf, keep subnormals (no flush to zero) and keep NaN a NaN.
 * They use integer operations only, so they give the same bits on every
 * machine whatever its floating-point mode. References: NumPy's
 * npymath/halffloat (float16 semantics, including NaN payload handling) and
 * c10::BFloat16 round_to_nearest_even (bfloat16: every NaN becomes 0x7FC0).
 */
#ifndef AMPY_ELEM_H
#define AMPY_ELEM_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define AMPY_ELEM static __host__ __device__ __forceinline__
#else
#define AMPY_ELEM static inline
#endif

/* ---- bit reinterpretation (memcpy is the portable, UB-free way; compilers
 * turn it into a register move) ---------------------------------------- */

AMPY_ELEM uint32_t ampy_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
AMPY_ELEM float ampy_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
AMPY_ELEM uint64_t ampy_f64_bits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
AMPY_ELEM double ampy_bits_f64(uint64_t u) { double d; memcpy(&d, &u, 8); return d; }

/* Round the integer q (the kept bits) by the dropped bits `rem`, of which
 * `half` is the weight of the first dropped bit: round to nearest, ties to
 * the even q. Shared by every narrowing conversion below. */
AMPY_ELEM uint64_t ampy_round_rne(uint64_t q, uint64_t rem, uint64_t half)
{
    return q + (rem > half || (rem == half && (q & 1u)));
}

/* ---- float32 -> float16 --------------------------------------------------
 * |x| >= 65520 (halfway between 65504 and 2^16) rounds to inf.
 * |x| < 2^-14 becomes a half subnormal: the 24-bit significand (with the
 * implicit bit) is shifted right into units of 2^-24; |x| <= 2^-25 (half of
 * the smallest subnormal, a tie with zero) rounds to a signed zero.
 * NaN keeps its sign and the top 10 payload bits (forced non-zero so it stays
 * a NaN), as NumPy does. */
AMPY_ELEM uint16_t ampy_f32_to_f16_bits(uint32_t f)
{
    uint32_t sign = (f >> 16) & 0x8000u;
    uint32_t a = f & 0x7FFFFFFFu;
    if (a >= 0x7F800000u) {
        if (a == 0x7F800000u)
            return (uint16_t)(sign | 0x7C00u);
        uint32_t r = 0x7C00u | ((a & 0x007FFFFFu) >> 13);
        return (uint16_t)(sign | (r == 0x7C00u ? 0x7C01u : r));
    }
    if (a >= 0x477FF000u) /* 65520.0f */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x38800000u) { /* 2^-14: half subnormal range */
        if (a <= 0x33000000u) /* 2^-25 */
            return (uint16_t)sign;
        uint32_t e = a >> 23;                          /* 102 .. 112 */
        uint32_t m = (a & 0x007FFFFFu) | 0x00800000u;  /* 24 bits    */
        uint32_t shift = 126u - e;                     /* 14 .. 24   */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1u << shift) - 1u), 1u << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q); /* q == 0x400 is the smallest normal */
    }
    /* normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits; a
     * carry out of the mantissa correctly bumps the exponent. */
    uint32_t r = a - 0x38000000u;
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 13, r & 0x1FFFu, 0x1000u));
}

/* ---- float64 -> float16, rounded once (not through float32) ------------ */
AMPY_ELEM uint16_t ampy_f64_to_f16_bits(uint64_t d)
{
    uint32_t sign = (uint32_t)(d >> 48) & 0x8000u;
    uint64_t a = d & 0x7FFFFFFFFFFFFFFFull;
    if (a >= 0x7FF0000000000000ull) {
        if (a == 0x7FF0000000000000ull)
            return (uint16_t)(sign | 0x7C00u);
        uint32_t r = 0x7C00u | (uint32_t)((a & 0x000FFFFFFFFFFFFFull) >> 42);
        return (uint16_t)(sign | (r == 0x7C00u ? 0x7C01u : r));
    }
    if (a >= 0x40EFFE0000000000ull) /* 65520.0 */
        return (uint16_t)(sign | 0x7C00u);
    if (a < 0x3F10000000000000ull) { /* 2^-14 */
        if (a <= 0x3E60000000000000ull) /* 2^-25 */
            return (uint16_t)sign;
        uint32_t e = (uint32_t)(a >> 52);                                 /* 998 .. 1008 */
        uint64_t m = (a & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull; /* 53 bits     */
        uint32_t shift = 1051u - e;                                       /* 43 .. 53    */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1ull << shift) - 1u), 1ull << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q);
    }
    uint64_t r = a - (1008ull << 52); /* rebias 1023 -> 15 */
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 42, r & ((1ull << 42) - 1u), 1ull << 41));
}

/* ---- float16 -> float32 (exact) -----------------------------------------
 * A subnormal half m * 2^-24 (m != 0) is normalised by shifting m left until
 * its bit 10 is set; the loop runs at most 10 times and never sees m == 0
 * (no __builtin_clz(0)). NaN payloads are kept, as NumPy does. */
AMPY_ELEM uint32_t ampy_f16_to_f32_bits(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1Fu;
    uint32_t m = (uint32_t)h & 0x3FFu;
    if (e == 0x1Fu)
        return sign | 0x7F800000u | (m << 13);
    if (e == 0) {
        if (m == 0)
            return sign;
        uint32_t shift = 0;
        while (!(m & 0x400u)) {
            m <<= 1;
            shift++;
        }
        return sign | ((113u - shift) << 23) | ((m & 0x3FFu) << 13);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

/* ---- float32 -> bfloat16: add 0x7FFF plus the lowest kept bit, then drop
 * the low 16 bits (ties go to the even result); every NaN becomes 0x7FC0 as
 * in c10::BFloat16. */
AMPY_ELEM uint16_t ampy_f32_to_bf16_bits(uint32_t f)
{
    if ((f & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0u;
    return (uint16_t)((f + 0x7FFFu + ((f >> 16) & 1u)) >> 16);
}

/* ---- float64 -> bfloat16, rounded once ---------------------------------
 * Largest finite bf16 is (2 - 2^-7) * 2^127; from (2 - 2^-8) * 2^127 up the
 * value rounds to inf. Below 2^-126 bf16 is subnormal in units of 2^-133;
 * |x| <= 2^-134 rounds to a signed zero. */
AMPY_ELEM uint16_t ampy_f64_to_bf16_bits(uint64_t d)
{
    uint32_t sign = (uint32_t)(d >> 48) & 0x8000u;
    uint64_t a = d & 0x7FFFFFFFFFFFFFFFull;
    if (a > 0x7FF0000000000000ull)
        return 0x7FC0u;
    if (a >= 0x47EFF00000000000ull)
        return (uint16_t)(sign | 0x7F80u);
    if (a < 0x3810000000000000ull) { /* 2^-126 */
        if (a <= 0x3790000000000000ull) /* 2^-134 */
            return (uint16_t)sign;
        uint32_t e = (uint32_t)(a >> 52);                                 /* 889 .. 896 */
        uint64_t m = (a & 0x000FFFFFFFFFFFFFull) | 0x0010000000000000ull;
        uint32_t shift = 942u - e;                                        /* 46 .. 53   */
        uint64_t q = ampy_round_rne(m >> shift, m & ((1ull << shift) - 1u), 1ull << (shift - 1u));
        return (uint16_t)(sign | (uint32_t)q);
    }
    uint64_t r = a - (896ull << 52); /* rebias 1023 -> 127 */
    return (uint16_t)(sign | (uint32_t)ampy_round_rne(r >> 45, r & ((1ull << 45) - 1u), 1ull << 44));
}

AMPY_ELEM uint32_t ampy_bf16_to_f32_bits(uint16_t h) { return (uint32_t)h << 16; }

/* ---- value-level wrappers ------------------------------------------------ */
AMPY_ELEM float ampy_f16_to_f32(uint16_t h) { return ampy_bits_f32(ampy_f16_to_f32_bits(h)); }
AMPY_ELEM float ampy_bf16_to_f32(uint16_t h) { return ampy_bits_f32(ampy_bf16_to_f32_bits(h)); }
AMPY_ELEM uint16_t ampy_f32_to_f16(float f) { return ampy_f32_to_f16_bits(ampy_f32_bits(f)); }
AMPY_ELEM uint16_t ampy_f32_to_bf16(float f) { return ampy_f32_to_bf16_bits(ampy_f32_bits(f)); }
AMPY_ELEM uint16_t ampy_f64_to_f16(double d) { return ampy_f64_to_f16_bits(ampy_f64_bits(d)); }
AMPY_ELEM uint16_t ampy_f64_to_bf16(double d) { return ampy_f64_to_bf16_bits(ampy_f64_bits(d)); }

/* ---- finiteness on bits (independent of fast-math flags and FP modes) -- */
AMPY_ELEM int ampy_f32_isfinite(float f) { return (ampy_f32_bits(f) & 0x7F800000u) != 0x7F800000u; }
AMPY_ELEM int ampy_f64_isfinite(double d)
{
    return (ampy_f64_bits(d) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull;
}
AMPY_ELEM int ampy_f16_isfinite_bits(uint16_t h) { return (h & 0x7C00u) != 0x7C00u; }
AMPY_ELEM int ampy_bf16_isfinite_bits(uint16_t h) { return (h & 0x7F80u) != 0x7F80u; }

/* ---- float -> integer without undefined behaviour ------------------------
 * C leaves out-of-range and NaN conversions undefined; these give the x86
 * "integer indefinite" value (INT64_MIN) for them, which is what torch's CPU
 * build produces on this architecture. Finite in-range values truncate. */
AMPY_ELEM int64_t ampy_f64_to_i64(double v)
{
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return INT64_MIN;
    return (int64_t)v;
}

/* ==== optimizer and loss-scale math (see optim.h / scaler.h) ==============
 * The per-element SGD/Adam update and the loss-scale update rule. */

/* Which formulas, and why in this order: the fp32 update of one element,
 * written as torch.optim's single-tensor (foreach=False) code computes it on
 * the CPU, op by op, each op rounded to float32:
 *   grad.add(param, alpha=wd)          -> fmaf(p, wd, g)   (ATen's vectorized
 *                                          add is vec::fmadd(other, alpha, self))
 *   exp_avg.lerp_(grad, w)             -> ATen lerp: |w| < 0.5 ? fma(w, g - m, m)
 *                                                            : fma(w - 1, g - m, g)
 *   exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2) -> v*b2, then v + ((1-b2)*g)*g
 *   denom = sqrt(v) / sqrt(bc2) + eps   (tensor / python float is a true division)
 *   param.addcdiv_(m, denom, value=-step_size) -> p + ((-step_size) * m) / denom
 * Every scalar that torch computes in Python double (1 - beta1, lr / bc1, ...)
 * arrives here already computed in double and rounded once to float, as
 * ATen's Scalar.to<float>() does. Plain C contracts nothing (-std=c11 means
 * -ffp-contract=off), so each `*`/`+` below rounds exactly once, and the SIMD
 * kernels in csrc/optim_x86.c use the same op sequence: both give the same
 * bits for every non-NaN input. */

#ifdef __CUDACC__
#define AMPY_FMAF(a, b, c) fmaf((a), (b), (c))
#define AMPY_SQRTF(x) sqrtf(x)
#else
#define AMPY_FMAF(a, b, c) __builtin_fmaf((a), (b), (c))
#define AMPY_SQRTF(x) __builtin_sqrtf(x)
#endif

/* max that returns a NaN operand, like torch.maximum (amsgrad). */
AMPY_ELEM float ampy_maxf_nan(float a, float b)
{
    return (a > b || a != a) ? a : b;
}

/* Per-step constants of Adam/AdamW (one tensor, one step), all float32. */
typedef struct ampy_adam_scalars {
    float inv_scale;      /* gradient multiplier (1 = none)                 */
    float neg;            /* -1 when maximize, else +1                      */
    float wd;             /* L2 weight decay (0 when decoupled or none)     */
    float decay_mul;      /* decoupled: 1 - lr*wd; else 1                   */
    int decoupled;        /* apply decay_mul to the weight                  */
    float w1;             /* 1 - beta1 (lerp weight)                        */
    float w1m1;           /* w1 - 1, rounded in float like ATen's vector    */
    int w1_small;         /* |w1| < 0.5: which lerp formula                 */
    float beta2, w2;      /* beta2, 1 - beta2                               */
    float bc2_sqrt;       /* sqrt(1 - beta2^step)                           */
    float eps;
    float neg_step_size;  /* -lr / (1 - beta1^step)                         */
    int amsgrad;
    int write_grad;       /* the loop stores g * inv_scale back into grad   */
} ampy_adam_scalars;

/* One Adam/AdamW element. g: the gradient already in float32 (not yet
 * unscaled); *p: fp32 (master) weight; *m, *v, *vmax: moments (vmax only
 * with amsgrad). All in,out except g. */
AMPY_ELEM void ampy_adam_elem(float g, float *p, float *m, float *v, float *vmax,
                              const ampy_adam_scalars *s)
{
    float w = *p;
    g = g * s->inv_scale;
    g = g * s->neg;
    if (s->decoupled)
        w = w * s->decay_mul;
    else if (s->wd != 0.0f)
        g = AMPY_FMAF(w, s->wd, g);
    float d = g - *m;
    float mm = s->w1_small ? AMPY_FMAF(s->w1, d, *m) : AMPY_FMAF(s->w1m1, d, g);
    float vv = *v * s->beta2;
    vv = AMPY_FMAF(s->w2 * g, g, vv); /* addcmul_: fma(c*y, z, x) */
    float vd = vv;
    if (s->amsgrad) {
        vd = ampy_maxf_nan(*vmax, vv);
        *vmax = vd;
    }
    float denom = AMPY_SQRTF(vd) / s->bc2_sqrt + s->eps;
    *p = w + (s->neg_step_size * mm) / denom;
    *m = mm;
    *v = vv;
}

/* Per-step constants of SGD, float32. */
typedef struct ampy_sgd_scalars {
    float inv_scale, neg, wd;
    int has_momentum;     /* momentum != 0 (in double): keep a buffer       */
    float momentum;
    float one_m_damp;     /* 1 - dampening                                  */
    int nesterov;
    float neg_lr;         /* -lr                                            */
    int write_grad;       /* as in ampy_adam_scalars                        */
} ampy_sgd_scalars;

/* One SGD element; `first` = the momentum buffer is uninitialised and
 * becomes the (decayed) gradient, as torch's `buf = grad.clone()`. */
AMPY_ELEM void ampy_sgd_elem(float g, float *p, float *buf, int first, const ampy_sgd_scalars *s)
{
    float w = *p;
    g = g * s->inv_scale;
    g = g * s->neg;
    if (s->wd != 0.0f)
        g = AMPY_FMAF(w, s->wd, g);
    if (s->has_momentum) {
        float b = first ? g : AMPY_FMAF(g, s->one_m_damp, *buf * s->momentum);
        *buf = b;
        g = s->nesterov ? AMPY_FMAF(b, s->momentum, g) : b;
    }
    *p = AMPY_FMAF(g, s->neg_lr, w);
}

/* ---- loss-scale update --------------------------------------------------
 * torch._amp_update_scale_ (aten AmpGradScalerKernels.cpp), bit for bit:
 * products in double, stored as float; growth only when the tracker reaches
 * growth_interval exactly (`==`); a growth that would give inf is refused
 * but the tracker still resets; any non-zero found_inf (NaN included) is an
 * overflow. Extras, neutral at their defaults:
 *   hysteresis > 1 (apex update_scale_hysteresis / DeepSpeed
 *   consecutive_hysteresis): an overflow first spends one unit of
 *   *hysteresis_tracker and backs off only when it reaches 0, so the scale
 *   shrinks after `hysteresis` consecutive overflows; every clean step refills
 *   the tracker to `hysteresis`. Tolerated overflows still zero the growth
 *   tracker (the step is skipped either way). hysteresis_tracker may be NULL
 *   when hysteresis <= 1.
 *   has_min / has_max: clamp a backed-off scale from below and a grown scale
 *   from above (apex: min_loss_scale, max_loss_scale). */
typedef struct ampy_scale_rule {
    double growth_factor, backoff_factor;
    int64_t growth_interval;
    int32_t hysteresis; /* <= 1: torch behaviour */
    int has_min, has_max;
    double min_scale, max_scale;
} ampy_scale_rule;

AMPY_ELEM void ampy_update_scale_elem(float *scale, int32_t *growth_tracker,
                                      int32_t *hysteresis_tracker, float found_inf,
                                      const ampy_scale_rule *r)
{
    int hyst = r->hysteresis > 1 && hysteresis_tracker != 0;
    if (found_inf != 0.0f) {
        if (hyst) {
            int32_t h = *hysteresis_tracker > 0 ? *hysteresis_tracker - 1 : 0;
            *hysteresis_tracker = h;
            if (h > 0) {
                *growth_tracker = 0;
                return;
            }
        }
        double s = (double)*scale * r->backoff_factor;
        if (r->has_min && s < r->min_scale)
            s = r->min_scale;
        *scale = (float)s;
        *growth_tracker = 0;
        return;
    }
    int64_t successful = (int64_t)*growth_tracker + 1; /* no int32 overflow */
    if (successful == r->growth_interval) {
        double g = (double)*scale * r->growth_factor;
        if (r->has_max && g > r->max_scale)
            g = r->max_scale;
        float ns = (float)g;
        if (ampy_f32_isfinite(ns))
            *scale = ns;
        *growth_tracker = 0;
    } else {
        /* saturates (never wraps) when growth_interval exceeds the int32 tracker */
        *growth_tracker = successful > INT32_MAX ? INT32_MAX : (int32_t)successful;
    }
    if (hyst)
        *hysteresis_tracker = r->hysteresis;
}

#endif /* AMPY_ELEM_H */
