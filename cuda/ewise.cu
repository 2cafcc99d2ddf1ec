/* ewise.cu — element-wise ops on the device: the CUDA twin of ampy_ewise
 * (ewise.h), reached from _C.ewise through the ampy_cuda_api table.
 *
 * Same contract as the CPU: every operand is loaded from its dtype into the
 * compute kind (float for float32/float16/bfloat16, double for float64,
 * int64 for integers and bool), the op runs in that kind, the result is
 * rounded once into the output dtype. The loads/stores follow csrc/ewise.c's
 * LOAD_/STORE_ macros conversion for conversion, and the formulas are those
 * of ampy/ewise_expr.h, the header csrc/ewise_ops.c expands too. Built with
 * --fmad=false: arithmetic ops (+ - * /, sqrt, comparisons, min/max, where,
 * clamp, floor/ceil/rint/trunc, fmod, remainder, floor_divide, the integer
 * ops, casts) give the CPU's bits; ops that call libm (exp, log, tanh, erf,
 * sigmoid, gelu, silu, pow, sin, ...) use CUDA's libdevice versions, which
 * are within a few ulp of glibc's but not always identical.
 *
 * One kernel per compute kind; the op is a kernel argument (uniform branch).
 * Operands are walked with 64-bit N-d index math (broadcast = stride 0);
 * when every tensor operand is contiguous the walk is skipped. Python
 * numbers arrive as host values and are passed by value.
 *
 * Integer division by zero (fmod, remainder, floor_divide on integers) is a
 * deferred device-side check (common.cuh): the element gives 0 and the
 * CPU's "ZeroDivisionError" is raised at the next synchronisation (at the op
 * in sync-checks mode). torch's CUDA kernels do not check at all.
 */
#include <math.h>

#include "common.cuh"
#include "ampy/ewise.h"
#include "ampy/ewise_expr.h"

namespace {

struct EwArgs {
    int op, nin, nd, contig;
    int alpha_one;
    int64_t n;
    int64_t shape[AMPY_MAX_DIMS];
    int64_t str[4][AMPY_MAX_DIMS]; /* element strides; [3] is the output */
    char *ptr[4];
    int dt[4];
    int scalar[3];
    uint64_t sval[3]; /* raw host value of a scalar operand (its dtype's bytes) */
    double pf0, pf1, alpha;
    int64_t pi0, ialpha;
    ampy_cuda_errslot err; /* integer division by zero (deferred check, common.cuh) */
};

/* ---- loads into a kind (csrc/ewise.c LOAD_SWITCH) ------------------------ */
__device__ __forceinline__ float ld_kind_f(const char *p, int dt, int64_t i)
{
    return ampy_ld_f(p, dt, i);
}

__device__ __forceinline__ double ld_kind_d(const char *p, int dt, int64_t i)
{
    return ampy_ld_d(p, dt, i);
}

__device__ __forceinline__ int64_t ld_kind_i(const char *p, int dt, int64_t i)
{
    return ampy_ld_i(p, dt, i);
}

template <typename R> __device__ __forceinline__ R ld_kind(const char *p, int dt, int64_t i);
template <> __device__ __forceinline__ float ld_kind<float>(const char *p, int dt, int64_t i)
{
    return ld_kind_f(p, dt, i);
}
template <> __device__ __forceinline__ double ld_kind<double>(const char *p, int dt, int64_t i)
{
    return ld_kind_d(p, dt, i);
}
template <> __device__ __forceinline__ int64_t ld_kind<int64_t>(const char *p, int dt, int64_t i)
{
    return ld_kind_i(p, dt, i);
}

/* ---- stores from a kind (csrc/ewise.c STORE_SWITCH), rounding once ------- */
__device__ __forceinline__ void st_kind(char *p, int dt, int64_t i, float v) { ampy_st_f(p, dt, i, v); }

__device__ __forceinline__ void st_kind(char *p, int dt, int64_t i, double v) { ampy_st_d(p, dt, i, v); }

__device__ __forceinline__ void st_kind(char *p, int dt, int64_t i, int64_t v) { ampy_st_i(p, dt, i, v); }

/* ---- the ops in float / double (csrc/ewise_ops.c's table) ----------------- */
template <typename R>
__device__ __forceinline__ R ew_float(const EwArgs &A, R a, R b, R c)
{
    const R x = a;
    const R PF = (R)A.pf0, PF1 = (R)A.pf1;
    AMPY_EX_FLOAT_SWITCH(R, A.op, x, a, b, c, PF, PF1, A.alpha, A.alpha_one)
}

typedef uint64_t U64;

__device__ __forceinline__ int64_t ew_int(const EwArgs &A, int64_t a, int64_t b, int64_t c)
{
    const int64_t x = a;
    switch (A.op) {
    case AMPY_EW_ABS: return x < 0 ? (int64_t)(0 - (U64)x) : x;
    case AMPY_EW_NEG: return (int64_t)(0 - (U64)x);
    case AMPY_EW_SQUARE: return (int64_t)((U64)x * (U64)x);
    case AMPY_EW_SIGN: return AMPY_EX_SIGN(int64_t, x);
    case AMPY_EW_RELU: return AMPY_EX_RELU(int64_t, x);
    case AMPY_EW_FLOOR:
    case AMPY_EW_CEIL:
    case AMPY_EW_ROUND:
    case AMPY_EW_TRUNC: return x;
    case AMPY_EW_FRAC:
    case AMPY_EW_ISNAN:
    case AMPY_EW_ISINF: return 0;
    case AMPY_EW_ISFINITE: return 1;
    case AMPY_EW_LOGICAL_NOT: return AMPY_EX_LOGICAL_NOT(int64_t, x);
    case AMPY_EW_BITWISE_NOT: return ~x;
    case AMPY_EW_ADD:
    case AMPY_EW_SUB: return (int64_t)((U64)a + (U64)A.ialpha * (U64)b);
    case AMPY_EW_MUL: return (int64_t)((U64)a * (U64)b);
    case AMPY_EW_POW: return ampy_ex_ipow(a, b);
    case AMPY_EW_MAXIMUM:
    case AMPY_EW_FMAX: return a > b ? a : b;
    case AMPY_EW_MINIMUM:
    case AMPY_EW_FMIN: return a < b ? a : b;
    case AMPY_EW_FMOD:
    case AMPY_EW_REMAINDER:
    case AMPY_EW_FLOOR_DIVIDE: {
        if (b == 0) {
            ampy_dev_fail(A.err, AMPY_DEVERR_ZERODIV, 0, 0, 0);
            return 0;
        }
        if (b == -1)
            return A.op == AMPY_EW_FLOOR_DIVIDE ? (int64_t)(0 - (U64)a) : 0;
        int64_t q = a / b, r = a % b;
        if (A.op == AMPY_EW_FMOD)
            return r;
        if (A.op == AMPY_EW_REMAINDER)
            return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
        return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
    }
    case AMPY_EW_EQ: return a == b;
    case AMPY_EW_NE: return a != b;
    case AMPY_EW_LT: return a < b;
    case AMPY_EW_LE: return a <= b;
    case AMPY_EW_GT: return a > b;
    case AMPY_EW_GE: return a >= b;
    case AMPY_EW_LOGICAL_AND: return AMPY_EX_LOGICAL_AND(int64_t, a, b);
    case AMPY_EW_LOGICAL_OR: return AMPY_EX_LOGICAL_OR(int64_t, a, b);
    case AMPY_EW_LOGICAL_XOR: return AMPY_EX_LOGICAL_XOR(int64_t, a, b);
    case AMPY_EW_BITWISE_AND: return a & b;
    case AMPY_EW_BITWISE_OR: return a | b;
    case AMPY_EW_BITWISE_XOR: return a ^ b;
    case AMPY_EW_WHERE: return a != 0 ? b : c;
    case AMPY_EW_ADDCMUL: return (int64_t)((U64)a + (U64)A.pi0 * (U64)b * (U64)c);
    case AMPY_EW_CLAMP: return ampy_ex_clamp_i(a, b, c);
    default: return 0;
    }
}

template <typename R> __device__ __forceinline__ R ew_apply(const EwArgs &A, R a, R b, R c)
{
    return ew_float<R>(A, a, b, c);
}
template <> __device__ __forceinline__ int64_t ew_apply<int64_t>(const EwArgs &A, int64_t a,
                                                                 int64_t b, int64_t c)
{
    return ew_int(A, a, b, c);
}

template <typename R> __global__ void ewise_kernel(EwArgs A)
{
    R sv[3];
#pragma unroll
    for (int k = 0; k < 3; k++)
        sv[k] = (k < A.nin && A.scalar[k]) ? ld_kind<R>((const char *)&A.sval[k], A.dt[k], 0) : (R)0;
    AMPY_GRID_STRIDE(i, A.n)
    {
        int64_t off[4];
        if (A.contig) {
            off[0] = off[1] = off[2] = off[3] = i;
        } else if (A.n <= 0xFFFFFFFFll) { /* 32-bit index division: several times cheaper */
            off[0] = off[1] = off[2] = off[3] = 0;
            uint32_t lin = (uint32_t)i;
            for (int d = A.nd - 1; d >= 0; d--) {
                const uint32_t n = (uint32_t)A.shape[d];
                const uint32_t q = lin / n, r = lin - q * n;
                lin = q;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    off[k] += (int64_t)r * A.str[k][d];
            }
        } else {
            off[0] = off[1] = off[2] = off[3] = 0;
            int64_t lin = i;
            for (int d = A.nd - 1; d >= 0; d--) {
                const int64_t n = A.shape[d];
                const int64_t q = lin / n, r = lin - q * n;
                lin = q;
#pragma unroll
                for (int k = 0; k < 4; k++)
                    off[k] += r * A.str[k][d];
            }
        }
        R v[3];
#pragma unroll
        for (int k = 0; k < 3; k++)
            v[k] = k >= A.nin ? (R)0 : A.scalar[k] ? sv[k] : ld_kind<R>(A.ptr[k], A.dt[k], off[k]);
        st_kind(A.ptr[3], A.dt[3], off[3], ew_apply<R>(A, v[0], v[1], v[2]));
    }
}

/* arity and compute kinds of each op, from ewise.h's list (the CPU kernel
 * table csrc/ewise_ops.c is expanded from the same list) */
#define EW_ARITY_(E, name, arity, cost, flag, kinds) arity,
const unsigned char kArity[AMPY_EW_NUM_OPS] = {AMPY_EWISE_OPS(EW_ARITY_)};
#undef EW_ARITY_
#define EW_KINDS_FDI 7u /* bit k: compute kind k (AMPY_KIND_F32, F64, I64) */
#define EW_KINDS_FD 3u
#define EW_KINDS_I 4u
#define EW_KINDS_(E, name, arity, cost, flag, kinds) EW_KINDS_##kinds,
const unsigned char kKinds[AMPY_EW_NUM_OPS] = {AMPY_EWISE_OPS(EW_KINDS_)};
#undef EW_KINDS_

int arity_of(int op) { return kArity[op]; }

/* Is the op defined for the kind? */
bool defined_for(int op, int kind) { return (kKinds[op] >> kind) & 1u; }

} // namespace

extern "C" ampy_status ampy_ewise_cuda(int device, int op, int ndim, const int64_t *shape,
                                       const ampy_ewise_operand *in,
                                       const ampy_ewise_operand *out, ampy_dtype compute,
                                       const ampy_ewise_params *params, unsigned host_scalars)
{
    if (op < 0 || op >= AMPY_EW_NUM_OPS)
        return ampy_error(AMPY_ERR_VALUE, "ewise (cuda): bad op %d", op);
    if (ndim < 0 || ndim > AMPY_MAX_DIMS)
        return ampy_error(AMPY_ERR_VALUE, "ewise (cuda): bad ndim %d", ndim);
    const int kind = ampy_kind_of(compute);
    if (!defined_for(op, kind))
        return ampy_error(AMPY_ERR_DTYPE, "ewise (cuda): op %d is not defined for %s", op,
                          ampy_dtype_name(compute));
    EwArgs A;
    memset(&A, 0, sizeof A);
    A.op = op;
    A.nin = arity_of(op);
    A.pf0 = params ? params->f[0] : 0.0;
    A.pf1 = params ? params->f[1] : 0.0;
    A.pi0 = params ? params->i[0] : 0;
    A.alpha_one = A.pf0 == 1.0;
    A.alpha = op == AMPY_EW_SUB ? 0.0 - A.pf0 : 0.0 + A.pf0;
    A.ialpha = (int64_t)(op == AMPY_EW_SUB ? (U64)0 - (U64)A.pi0 : (U64)A.pi0);
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ampy_error(AMPY_ERR_VALUE, "ewise (cuda): negative dimension");
        n *= shape[d];
    }
    if (n == 0)
        return AMPY_OK;
    /* operands: element strides, dims of size 1 dropped */
    const ampy_ewise_operand *ops[4] = {A.nin > 0 ? &in[0] : NULL, A.nin > 1 ? &in[1] : NULL,
                                        A.nin > 2 ? &in[2] : NULL, out};
    for (int k = 0; k < 4; k++) {
        if (!ops[k])
            continue;
        if (!ampy_dtype_valid(ops[k]->dtype))
            return ampy_error(AMPY_ERR_VALUE, "ewise (cuda): bad dtype code %d",
                              (int)ops[k]->dtype);
        A.dt[k] = ops[k]->dtype;
        if (k < 3 && (host_scalars >> k & 1u)) {
            A.scalar[k] = 1;
            memcpy(&A.sval[k], ops[k]->data, ampy_dtype_size(ops[k]->dtype));
            continue;
        }
        A.ptr[k] = (char *)ops[k]->data;
    }
    int contig = 1;
    A.nd = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 1)
            continue;
        A.shape[A.nd] = shape[d];
        for (int k = 0; k < 4; k++) {
            if (!ops[k] || (k < 3 && A.scalar[k])) {
                A.str[k][A.nd] = 0;
                continue;
            }
            const int64_t isz = (int64_t)ampy_dtype_size(ops[k]->dtype);
            A.str[k][A.nd] = ops[k]->strides[d] / isz;
        }
        A.nd++;
    }
    for (int k = 0; k < 4 && contig; k++) {
        if (!ops[k] || (k < 3 && A.scalar[k]))
            continue;
        int64_t expect = 1;
        for (int d = A.nd - 1; d >= 0; d--) {
            if (A.str[k][d] != expect) {
                contig = 0;
                break;
            }
            expect *= A.shape[d];
        }
    }
    A.contig = contig;
    A.n = n;
    AMPY_CUDA_ENTER(device, st);
    const bool idiv = kind == AMPY_KIND_I64 && (op == AMPY_EW_FMOD || op == AMPY_EW_REMAINDER ||
                                                op == AMPY_EW_FLOOR_DIVIDE);
    if (idiv) {
        ampy_status s = ampy_cuda_errslot_get(device, &A.err);
        if (s != AMPY_OK)
            return s;
    }
    const unsigned grid = ampy_cuda_blocks(n, AMPY_CUDA_THREADS);
    if (kind == AMPY_KIND_F32)
        ewise_kernel<float><<<grid, AMPY_CUDA_THREADS, 0, st>>>(A);
    else if (kind == AMPY_KIND_F64)
        ewise_kernel<double><<<grid, AMPY_CUDA_THREADS, 0, st>>>(A);
    else
        ewise_kernel<int64_t><<<grid, AMPY_CUDA_THREADS, 0, st>>>(A);
    AMPY_CUDA_LAUNCHED("ewise_kernel");
    if (idiv) /* a zero divisor is raised at the next sync (or here in sync-checks mode) */
        return ampy_cuda_checked(device, st);
    return AMPY_OK;
}
