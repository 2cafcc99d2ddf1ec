/* ewise.c — the element-wise driver, dtype conversion at load/store, and
 * torch's type promotion (see ewise.h).
 *
 * ampy_ewise() hands ampy_iter_run() an inner loop that works in blocks of
 * AMPY_EWISE_BLOCK elements: each operand is either used in place (already
 * in the compute kind and contiguous) or converted into a stack buffer by
 * ampy_ewise_load(); the op's block kernel (ewise_ops.c) runs; the result is
 * rounded once into the output dtype by ampy_ewise_store(). Contiguous
 * float16/bfloat16 <-> float32 conversions use the SIMD cast kernels of
 * cast_x86.c, which give the same bits as elem.h.
 *
 * Promotion follows c10/core/ScalarType.h (promoteTypes) and
 * aten/src/ATen/native/TypeProperties.cpp (ResultTypeState): operands fall
 * in three categories (tensors with dims, 0-dim tensors, Python numbers);
 * a lower category only matters when it is of a higher kind.
 */
#include <string.h>

#include "ampy/cast.h"
#include "ampy/cpu.h"
#include "ampy/elem.h"
#include "ampy/ewise.h"
#include "ampy/iter.h"
#include "ewise_table.h"
#include "vmath.h"

/* ---- op metadata: the rows of ewise_ops.c -------------------------------- */
const char *ampy_ewise_op_name(int op)
{
    const ampy_ewise_row *r = ampy_ewise_row_get(op);
    return r ? r->name : NULL;
}
int ampy_ewise_op_arity(int op)
{
    const ampy_ewise_row *r = ampy_ewise_row_get(op);
    return r ? r->arity : 0;
}
unsigned ampy_ewise_op_flags(int op)
{
    const ampy_ewise_row *r = ampy_ewise_row_get(op);
    return r ? r->flags : 0;
}

/* ---- load: any dtype -> a contiguous block of one kind ------------------- */
/* One case of a load switch: V(p) reads the element at p as type CT. */
#define LOAD_CASE(DT, SZ, CT, V)                                              \
    case DT:                                                                  \
        if (stride == SZ) {                                                   \
            for (int64_t i = 0; i < n; i++) d[i] = (CT)V(src + i * SZ);       \
        } else if (stride == 0) {                                             \
            const CT v = (CT)V(src);                                          \
            for (int64_t i = 0; i < n; i++) d[i] = v;                         \
        } else {                                                              \
            for (int64_t i = 0; i < n; i++) d[i] = (CT)V(src + i * stride);   \
        }                                                                     \
        break;
#define RD_F32(p) (*(const float *)(p))
#define RD_F16(p) ampy_f16_to_f32(*(const uint16_t *)(p))
#define RD_BF16(p) ampy_bf16_to_f32(*(const uint16_t *)(p))
#define RD_F64(p) (*(const double *)(p))
#define RD_I64(p) (*(const int64_t *)(p))
#define RD_I32(p) (*(const int32_t *)(p))
#define RD_U8(p) (*(const uint8_t *)(p))
#define RD_B(p) (*(const uint8_t *)(p) != 0)
#define RD_F2I(p) ampy_f64_to_i64(RD_F64(p))
#define RD_F322I(p) ampy_f64_to_i64((double)RD_F32(p))
#define RD_F162I(p) ampy_f64_to_i64((double)RD_F16(p))
#define RD_BF162I(p) ampy_f64_to_i64((double)RD_BF16(p))

#define LOAD_SWITCH(CT, F2I_F32, F2I_F16, F2I_BF16, F2I_F64)                  \
    switch (dtype) {                                                          \
        LOAD_CASE(AMPY_FLOAT32, 4, CT, F2I_F32)                               \
        LOAD_CASE(AMPY_FLOAT16, 2, CT, F2I_F16)                               \
        LOAD_CASE(AMPY_BFLOAT16, 2, CT, F2I_BF16)                             \
        LOAD_CASE(AMPY_FLOAT64, 8, CT, F2I_F64)                               \
        LOAD_CASE(AMPY_INT64, 8, CT, RD_I64)                                  \
        LOAD_CASE(AMPY_INT32, 4, CT, RD_I32)                                  \
        LOAD_CASE(AMPY_UINT8, 1, CT, RD_U8)                                   \
        LOAD_CASE(AMPY_BOOL, 1, CT, RD_B)                                     \
    default: break;                                                           \
    }

void ampy_ewise_load(const char *src, int64_t stride, ampy_dtype dtype, int kind, void *dst,
                     int64_t n)
{
    if (kind == AMPY_KIND_F32) {
        if (stride == 2 && (dtype == AMPY_FLOAT16 || dtype == AMPY_BFLOAT16)) {
            ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), dtype, AMPY_FLOAT32);
            if (k) {
                k(src, dst, n);
                return;
            }
        }
        float *d = (float *)dst;
        LOAD_SWITCH(float, RD_F32, RD_F16, RD_BF16, RD_F64)
    } else if (kind == AMPY_KIND_F64) {
        double *d = (double *)dst;
        LOAD_SWITCH(double, RD_F32, RD_F16, RD_BF16, RD_F64)
    } else {
        int64_t *d = (int64_t *)dst;
        LOAD_SWITCH(int64_t, RD_F322I, RD_F162I, RD_BF162I, RD_F2I)
    }
}

/* ---- store: a contiguous block of one kind -> any dtype, rounding once --- */
#define STORE_CASE(DT, SZ, W)                                                 \
    case DT:                                                                  \
        if (stride == SZ) {                                                   \
            for (int64_t i = 0; i < n; i++) W(dst + i * SZ, s[i]);            \
        } else {                                                              \
            for (int64_t i = 0; i < n; i++) W(dst + i * stride, s[i]);        \
        }                                                                     \
        break;
#define WR_F32(p, v) (*(float *)(p) = (float)(v))
#define WR_F64(p, v) (*(double *)(p) = (double)(v))
#define WR_F16F(p, v) (*(uint16_t *)(p) = ampy_f32_to_f16(v))
#define WR_BF16F(p, v) (*(uint16_t *)(p) = ampy_f32_to_bf16(v))
#define WR_F16D(p, v) (*(uint16_t *)(p) = ampy_f64_to_f16((double)(v)))
#define WR_BF16D(p, v) (*(uint16_t *)(p) = ampy_f64_to_bf16((double)(v)))
#define WR_I64F(p, v) (*(int64_t *)(p) = ampy_f64_to_i64((double)(v)))
#define WR_I32F(p, v) (*(int32_t *)(p) = (int32_t)(uint32_t)ampy_f64_to_i64((double)(v)))
#define WR_U8F(p, v) (*(uint8_t *)(p) = (uint8_t)ampy_f64_to_i64((double)(v)))
#define WR_I64(p, v) (*(int64_t *)(p) = (int64_t)(v))
#define WR_I32(p, v) (*(int32_t *)(p) = (int32_t)(uint32_t)(uint64_t)(v))
#define WR_U8(p, v) (*(uint8_t *)(p) = (uint8_t)(uint64_t)(v))
#define WR_B(p, v) (*(uint8_t *)(p) = (v) != 0)

#define STORE_SWITCH(F16, BF16, I64, I32, U8)                                 \
    switch (dtype) {                                                          \
        STORE_CASE(AMPY_FLOAT32, 4, WR_F32)                                   \
        STORE_CASE(AMPY_FLOAT16, 2, F16)                                      \
        STORE_CASE(AMPY_BFLOAT16, 2, BF16)                                    \
        STORE_CASE(AMPY_FLOAT64, 8, WR_F64)                                   \
        STORE_CASE(AMPY_INT64, 8, I64)                                        \
        STORE_CASE(AMPY_INT32, 4, I32)                                        \
        STORE_CASE(AMPY_UINT8, 1, U8)                                         \
        STORE_CASE(AMPY_BOOL, 1, WR_B)                                        \
    default: break;                                                           \
    }

void ampy_ewise_store(const void *src, int kind, char *dst, int64_t stride, ampy_dtype dtype,
                      int64_t n)
{
    if (kind == AMPY_KIND_F32) {
        if (stride == 2 && (dtype == AMPY_FLOAT16 || dtype == AMPY_BFLOAT16)) {
            ampy_cast_kernel k = ampy_cast_simd_kernel(ampy_cpu_level_get(), AMPY_FLOAT32, dtype);
            if (k) {
                k(src, dst, n);
                return;
            }
        }
        const float *s = (const float *)src;
        STORE_SWITCH(WR_F16F, WR_BF16F, WR_I64F, WR_I32F, WR_U8F)
    } else if (kind == AMPY_KIND_F64) {
        const double *s = (const double *)src;
        STORE_SWITCH(WR_F16D, WR_BF16D, WR_I64F, WR_I32F, WR_U8F)
    } else {
        const int64_t *s = (const int64_t *)src;
        STORE_SWITCH(WR_F16D, WR_BF16D, WR_I64, WR_I32, WR_U8)
    }
}

/* ---- the driver ------------------------------------------------------------ */
typedef struct {
    ampy_ewise_kernel kernel;
    const ampy_ewise_params *params;
    int arity, kind;
    int64_t ksize;             /* bytes per element of the kind */
    ampy_dtype in_dt[3], out_dt;
    volatile int div_by_zero;  /* set by any thread; read after the join */
    int fast, fast_op, bf16ok; /* the AVX-512 one-pass float path (ewx_run) */
    int relu;                  /* relu in registers (ewx_relu), same dtype in and out */
    float alpha;
    /* half in, same half out: a kernel converting in registers (vmath.h) */
    void (*half)(const uint16_t *x, uint16_t *y, int64_t n, int bf16);
} ew_ctx;

#if defined(__x86_64__) && defined(__GNUC__)
/* ---- AVX-512 float add/sub/mul/div in one pass ------------------------------
 * For float32/float16/bfloat16 operands that are contiguous or broadcast
 * scalars (stride 0) and a contiguous output of those dtypes: each 16
 * elements are widened in registers (exact), combined by the same float
 * operation as ewise_ops.c's kernel (a OP b, or fmaf(alpha, b, a) for
 * add/sub with alpha != 1) and rounded once to the output dtype with elem.h's
 * bits (bfloat16: vcvtneps2bf16 where AVX512-BF16 is present and the block
 * holds no NaN or denormal, else the integer rounding with NaN -> 0x7FC0;
 * float16: vcvtps2ph, whose NaN equals elem.h's for the quiet NaNs that
 * arithmetic produces). No float buffers and no separate conversion passes. */
#include <immintrin.h>
#include "simd_half.h"
#include "simd.h"

typedef struct {
    const char *p;
    int dt; /* AMPY_FLOAT32 / FLOAT16 / BFLOAT16, or -1: the broadcast value v */
    float v;
} ewx_in;

/* 16 elements of operand a (its dtype dt, a constant where ewx_dispatch
 * specializes) widened to float */
AMPY_TARGET_AVX512
static inline __m512 ewx_ld(const ewx_in *a, int dt, int64_t i, __mmask16 k)
{
    switch (dt) {
    case AMPY_FLOAT32: return _mm512_maskz_loadu_ps(k, (const float *)a->p + i);
    case AMPY_BFLOAT16:
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, (const uint16_t *)a->p + i)), 16));
    case AMPY_FLOAT16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, (const uint16_t *)a->p + i));
    default: return _mm512_set1_ps(a->v);
    }
}

AMPY_TARGET_AVX512
static inline void ewx_st(char *p, int dt, int bf16ok, int64_t i, __mmask16 k, __m512 v)
{
    if (dt == AMPY_FLOAT32) {
        _mm512_mask_storeu_ps((float *)p + i, k, v);
        return;
    }
    const __m256i h = ampy_x86_f32_to_half16(v, dt == AMPY_BFLOAT16, bf16ok);
    _mm256_mask_storeu_epi16((uint16_t *)p + i, k, h);
}

/* op: 0 a + b, 1 a - b, 2 a * b, 3 a / b, 4 fmaf(al, b, a) */
AMPY_TARGET_AVX512 static inline __m512 ewx_op(int op, __m512 a, __m512 b, __m512 al)
{
    switch (op) {
    case 0: return _mm512_add_ps(a, b);
    case 1: return _mm512_sub_ps(a, b);
    case 2: return _mm512_mul_ps(a, b);
    case 3: return _mm512_div_ps(a, b);
    default: return _mm512_fmadd_ps(al, b, a);
    }
}

AMPY_TARGET_AVX512
static inline __attribute__((always_inline)) void
ewx_run(int op, const ewx_in *a, int da, const ewx_in *b, int db, char *o, int odt, int bf16ok,
        float alpha, int64_t n)
{
    const __m512 al = _mm512_set1_ps(alpha);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __mmask16 k = (__mmask16)0xFFFF;
        ewx_st(o, odt, bf16ok, i, k, ewx_op(op, ewx_ld(a, da, i, k), ewx_ld(b, db, i, k), al));
    }
    if (i < n) {
        const __mmask16 k = (__mmask16)((1u << (n - i)) - 1u);
        ewx_st(o, odt, bf16ok, i, k, ewx_op(op, ewx_ld(a, da, i, k), ewx_ld(b, db, i, k), al));
    }
}

/* 0 float32, 1 bfloat16, 2 a broadcast value: the operand dtypes that
 * ewx_dispatch compiles a loop for; 3 the others */
static inline int ewx_code(int dt)
{
    return dt == AMPY_FLOAT32 ? 0 : dt == AMPY_BFLOAT16 ? 1 : dt < 0 ? 2 : 3;
}
#define EWX_DT(c) ((c) == 0 ? AMPY_FLOAT32 : (c) == 1 ? AMPY_BFLOAT16 : -1)

/* ewx_run with the op and output dtype as constants, and the operand dtypes
 * too for float32/bfloat16 operands and outputs (no per-vector dtype
 * switches: the short strided runs of a permuted tensor are 2-3x faster) */
AMPY_TARGET_AVX512
static void ewx_dispatch(int op, const ewx_in *a, const ewx_in *b, char *o, int odt,
                               int bf16ok, float alpha, int64_t n)
{
    const int ca = ewx_code(a->dt), cb = ewx_code(b->dt);
    if (ca < 3 && cb < 3 && (odt == AMPY_FLOAT32 || odt == AMPY_BFLOAT16) && op < 4) {
#define EWX_C(OP, BO, CA, CB)                                                                 case ((OP) * 2 + (BO)) * 9 + (CA) * 3 + (CB):                                                ewx_run(OP, a, EWX_DT(CA), b, EWX_DT(CB), o, (BO) ? AMPY_BFLOAT16 : AMPY_FLOAT32,                 bf16ok, alpha, n);                                                               return;
#define EWX_B(OP, BO, CA) EWX_C(OP, BO, CA, 0) EWX_C(OP, BO, CA, 1) EWX_C(OP, BO, CA, 2)
#define EWX_A(OP, BO) EWX_B(OP, BO, 0) EWX_B(OP, BO, 1) EWX_B(OP, BO, 2)
        switch ((op * 2 + (odt == AMPY_BFLOAT16)) * 9 + ca * 3 + cb) {
            EWX_A(0, 0) EWX_A(0, 1) EWX_A(1, 0) EWX_A(1, 1)
            EWX_A(2, 0) EWX_A(2, 1) EWX_A(3, 0) EWX_A(3, 1)
        default: break;
        }
#undef EWX_A
#undef EWX_B
#undef EWX_C
    }
#define EWX_O(OP)                                                                            case OP:                                                                                     if (odt == AMPY_FLOAT32)                                                                     ewx_run(OP, a, a->dt, b, b->dt, o, AMPY_FLOAT32, bf16ok, alpha, n);                  else if (odt == AMPY_BFLOAT16)                                                               ewx_run(OP, a, a->dt, b, b->dt, o, AMPY_BFLOAT16, bf16ok, alpha, n);                 else                                                                                         ewx_run(OP, a, a->dt, b, b->dt, o, AMPY_FLOAT16, bf16ok, alpha, n);                  break;
    switch (op) {
        EWX_O(0)
        EWX_O(1)
        EWX_O(2)
        EWX_O(3)
        EWX_O(4)
    default: break;
    }
#undef EWX_O
}

/* relu of a contiguous float32/float16/bfloat16 block into the same dtype,
 * widened and rounded in registers as ewx_run: x < 0 ? 0 : x (ewise_ops.c's
 * formula: -0 and NaN stay), so the bits are the generic path's. */
AMPY_TARGET_AVX512
static inline __attribute__((always_inline)) void ewx_relu_run(const char *x, char *o, int dt,
                                                               int bf16ok, int64_t n)
{
    const ewx_in a = {x, dt, 0.0f};
    const __m512 z = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 v = ewx_ld(&a, dt, i, k);
        ewx_st(o, dt, bf16ok, i, k, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, z, _CMP_LT_OQ), z));
    }
}

AMPY_TARGET_AVX512
static void ewx_relu(const char *x, char *o, int dt, int bf16ok, int64_t n)
{
    if (dt == AMPY_FLOAT32)
        ewx_relu_run(x, o, AMPY_FLOAT32, bf16ok, n);
    else if (dt == AMPY_BFLOAT16)
        ewx_relu_run(x, o, AMPY_BFLOAT16, bf16ok, n);
    else
        ewx_relu_run(x, o, AMPY_FLOAT16, bf16ok, n);
}
#define HAVE_EWX 1
#endif

/* Elements per block of ew_inner: 4 buffers of EW_BLOCK * 8 bytes stay in L1
 * (32 KB), and the per-block costs (conversion calls) are paid once per 1024
 * elements. Results do not depend on it: every op is per element. */
#define EW_BLOCK (4 * AMPY_EWISE_BLOCK)

static void ew_blocks(char **ptrs, const int64_t *s, int64_t n, ew_ctx *c);

/* The fast paths first, in a function with a small stack frame: the 32 KiB
 * of block buffers (ew_blocks) cost a stack probe per page on every call,
 * which doubled the time of the 64-element runs of a permuted operand. */
static void ew_inner(char **ptrs, const int64_t *s, int64_t n, void *arg)
{
    ew_ctx *c = (ew_ctx *)arg;
#ifdef HAVE_EWX
    if (c->relu && s[0] == s[1] && s[1] == (int64_t)ampy_dtype_size(c->out_dt)) {
        ewx_relu(ptrs[0], ptrs[1], c->out_dt, c->bf16ok, n);
        return;
    }
    if (c->fast) {
        ewx_in a[2];
        int ok = s[2] == (int64_t)ampy_dtype_size(c->out_dt);
        for (int k = 0; k < 2 && ok; k++) {
            a[k].p = ptrs[k];
            a[k].dt = c->in_dt[k];
            a[k].v = 0.0f;
            if (s[k] == 0) { /* broadcast: the value as the generic path loads it */
                ampy_ewise_load(ptrs[k], 0, c->in_dt[k], AMPY_KIND_F32, &a[k].v, 1);
                a[k].dt = -1;
            } else if (s[k] != 4 * (c->in_dt[k] == AMPY_FLOAT32) +
                                  2 * (c->in_dt[k] == AMPY_FLOAT16 ||
                                       c->in_dt[k] == AMPY_BFLOAT16)) {
                ok = 0; /* strided, or a dtype only a broadcast may have */
            }
        }
        if (ok) {
            ewx_dispatch(c->fast_op, &a[0], &a[1], ptrs[2], c->out_dt, c->bf16ok, c->alpha, n);
            return;
        }
    }
#endif
    if (c->half && s[0] == 2 && s[1] == 2) {
        c->half((const uint16_t *)ptrs[0], (uint16_t *)ptrs[1], n, c->out_dt == AMPY_BFLOAT16);
        return;
    }
    ew_blocks(ptrs, s, n, c);
}

/* the generic path: operands converted into block buffers, the op's block
 * kernel, the result rounded once into the output */
static __attribute__((noinline)) void ew_blocks(char **ptrs, const int64_t *s, int64_t n,
                                                ew_ctx *c)
{
    const ampy_dtype kdt = ampy_kind_dtype(c->kind);
    _Alignas(64) char buf[4][EW_BLOCK * 8];
    const int na = c->arity;
    for (int64_t off = 0; off < n; off += EW_BLOCK) {
        const int64_t m = n - off < EW_BLOCK ? n - off : EW_BLOCK;
        const void *in[3] = {NULL, NULL, NULL};
        for (int k = 0; k < na; k++) {
            const char *p = ptrs[k] + off * s[k];
            if (c->in_dt[k] == kdt && s[k] == c->ksize) {
                in[k] = p;
            } else {
                ampy_ewise_load(p, s[k], c->in_dt[k], c->kind, buf[k], m);
                in[k] = buf[k];
            }
        }
        char *op = ptrs[na] + off * s[na];
        const int direct = c->out_dt == kdt && s[na] == c->ksize;
        void *o = direct ? (void *)op : (void *)buf[3];
        if (c->kernel(o, in, m, c->params))
            c->div_by_zero = 1;
        if (!direct)
            ampy_ewise_store(o, c->kind, op, s[na], c->out_dt, m);
    }
}

/* the AVX-512 paths ew_inner may take: relu, and the four float32 binary ops */
static void ew_pick_fast(ew_ctx *cp, ampy_ewise_op op, int na, const ampy_ewise_operand *in,
                         const ampy_ewise_operand *out)
{
    ew_ctx c = *cp;
    c.fast = 0;
    c.relu = 0;
    c.bf16ok = 0;
#ifdef HAVE_EWX
    if (op == AMPY_EW_RELU && c.kind == AMPY_KIND_F32 && in[0].dtype == out->dtype &&
        (out->dtype == AMPY_FLOAT32 || out->dtype == AMPY_FLOAT16 ||
         out->dtype == AMPY_BFLOAT16) &&
        ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
        c.relu = 1;
        c.bf16ok = ampy_cpu_level_get() >= AMPY_CPU_AVX512_BF16;
    }
    if (c.kind == AMPY_KIND_F32 && na == 2 &&
        (op == AMPY_EW_ADD || op == AMPY_EW_SUB || op == AMPY_EW_MUL || op == AMPY_EW_DIV) &&
        ampy_cpu_level_get() >= AMPY_CPU_AVX512) {
        int ok = 1;
        for (int k = 0; k <= na; k++) {
            const ampy_dtype d = k < na ? in[k].dtype : out->dtype;
            /* a broadcast operand may have any dtype (loaded once, ew_inner) */
            ok &= k < na || d == AMPY_FLOAT32 || d == AMPY_FLOAT16 || d == AMPY_BFLOAT16;
        }
        if (ok) {
            c.fast = 1;
            c.bf16ok = ampy_cpu_level_get() >= AMPY_CPU_AVX512_BF16;
            c.fast_op = op == AMPY_EW_ADD ? 0 : op == AMPY_EW_SUB ? 1 : op == AMPY_EW_MUL ? 2 : 3;
            if ((op == AMPY_EW_ADD || op == AMPY_EW_SUB) && c.params->f[0] != 1.0) {
                c.fast_op = 4; /* fmaf(al, b, a), al = (float)(0 +- alpha) as ewise_ops.c */
                c.alpha = op == AMPY_EW_ADD ? (float)(0.0 + c.params->f[0])
                                            : (float)(0.0 - c.params->f[0]);
            } else {
                c.alpha = 1.0f;
            }
        }
    }
#else
    (void)op, (void)na, (void)in, (void)out;
#endif
    *cp = c;
}

ampy_status ampy_ewise(ampy_ewise_op op, int ndim, const int64_t *shape,
                       const ampy_ewise_operand *in, const ampy_ewise_operand *out,
                       ampy_dtype compute, const ampy_ewise_params *params)
{
    if (!ampy_ewise_row_get((int)op))
        return ampy_error(AMPY_ERR_VALUE, "ewise: invalid op code %d", (int)op);
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "%s: bad ndim %d", ampy_ewise_row_get(op)->name, ndim);
    const int na = ampy_ewise_row_get(op)->arity;
    if (!ampy_dtype_valid(compute) || !ampy_dtype_valid(out->dtype))
        return ampy_error(AMPY_ERR_VALUE, "%s: invalid dtype code", ampy_ewise_row_get(op)->name);
    for (int k = 0; k < na; k++)
        if (!ampy_dtype_valid(in[k].dtype))
            return ampy_error(AMPY_ERR_VALUE, "%s: invalid dtype code", ampy_ewise_row_get(op)->name);
    if (op == AMPY_EW_BITWISE_NOT && compute == AMPY_BOOL)
        op = AMPY_EW_LOGICAL_NOT; /* ~True is False, not -2 */
    static const ampy_ewise_params zero_params;
    ew_ctx c;
    c.kind = ampy_kind_of(compute);
    c.kernel = ampy_ewise_kernel_get(op, c.kind);
    if (!c.kernel)
        return ampy_error(AMPY_ERR_DTYPE, "%s: not implemented for dtype %s", ampy_ewise_row_get(op)->name,
                          ampy_dtype_name(compute));
    c.params = params ? params : &zero_params;
    c.arity = na;
    c.ksize = (int64_t)ampy_dtype_size(ampy_kind_dtype(c.kind));
    c.out_dt = out->dtype;
    c.div_by_zero = 0;
    ew_pick_fast(&c, op, na, in, out);
    c.half = NULL;
    if (na == 1 && c.kind == AMPY_KIND_F32 && in[0].dtype == out->dtype &&
        (out->dtype == AMPY_FLOAT16 || out->dtype == AMPY_BFLOAT16))
        c.half = op == AMPY_EW_GELU ? ampy_vm()->gelu_half
                 : op == AMPY_EW_ERF ? ampy_vm()->erf_half : NULL;
    char *ptrs[4];
    int64_t strides[4 * AMPY_MAX_DIMS];
    for (int k = 0; k <= na; k++) {
        const ampy_ewise_operand *o = k < na ? &in[k] : out;
        if (k < na)
            c.in_dt[k] = o->dtype;
        ptrs[k] = (char *)o->data;
        for (int d = 0; d < ndim; d++)
            strides[k * ndim + d] = o->strides[d];
    }
    const int64_t grain = ampy_ewise_row_get(op)->cost > 1 ? 4096 : 32768;
    int elsize[4];
    for (int k = 0; k <= na; k++)
        elsize[k] = (int)ampy_dtype_size(k < na ? in[k].dtype : out->dtype);
    ampy_status st =
        ampy_iter_run_ew(ndim, shape, na + 1, ptrs, strides, ew_inner, &c, grain, elsize);
    if (st == AMPY_OK && c.div_by_zero)
        return ampy_error(AMPY_ERR_RUNTIME, "ZeroDivisionError");
    return st;
}

/* ---- promotion ------------------------------------------------------------- */
/* bool < uint8 < int32 < int64 < float16 ~ bfloat16 < float32 < float64 */
static int rank(ampy_dtype d)
{
    static const signed char r[AMPY_NUM_DTYPES] = {12, 10, 11, 13, 4, 3, 1, 0};
    return r[d];
}

ampy_dtype ampy_promote_types(ampy_dtype a, ampy_dtype b)
{
    if (a == b)
        return a;
    if ((a == AMPY_FLOAT16 && b == AMPY_BFLOAT16) || (a == AMPY_BFLOAT16 && b == AMPY_FLOAT16))
        return AMPY_FLOAT32;
    return rank(a) > rank(b) ? a : b;
}

int ampy_can_cast(ampy_dtype from, ampy_dtype to)
{
    if (ampy_dtype_is_float(from) && !ampy_dtype_is_float(to))
        return 0;
    if (from != AMPY_BOOL && to == AMPY_BOOL)
        return 0;
    return 1;
}

const char *ampy_dtype_torch_name(ampy_dtype d)
{
    static const char *const names[AMPY_NUM_DTYPES] = {"Float", "Half", "BFloat16", "Double",
                                                       "Long",  "Int",  "Byte",     "Bool"};
    return ampy_dtype_valid(d) ? names[d] : "Invalid";
}

#define UNDEF (-1)
static int promote_u(int a, int b)
{
    if (a == UNDEF)
        return b;
    if (b == UNDEF)
        return a;
    return (int)ampy_promote_types((ampy_dtype)a, (ampy_dtype)b);
}

/* c10 combine_categories(higher, lower) */
static int combine(int higher, int lower)
{
    if (higher != UNDEF && ampy_dtype_is_float(higher))
        return higher;
    if (higher == AMPY_BOOL || (lower != UNDEF && ampy_dtype_is_float(lower)))
        return promote_u(higher, lower);
    return higher != UNDEF ? higher : lower;
}

ampy_dtype ampy_result_type(int n, const ampy_dtype *dtypes, const int *kinds,
                            ampy_dtype default_float)
{
    int dim = UNDEF, zero = UNDEF, wrapped = UNDEF;
    for (int k = 0; k < n; k++) {
        int d = dtypes[k];
        if (kinds[k] == AMPY_OPERAND_WRAPPED) {
            if (ampy_dtype_is_float(d))
                d = default_float;
            wrapped = promote_u(wrapped, d);
        } else if (kinds[k] == AMPY_OPERAND_ZERODIM) {
            zero = promote_u(zero, d);
        } else {
            dim = promote_u(dim, d);
        }
    }
    int r = combine(dim, combine(zero, wrapped));
    return r == UNDEF ? default_float : (ampy_dtype)r;
}
