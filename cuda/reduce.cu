/* reduce.cu — reductions on the device: the CUDA twin of ampy_reduce
 * (reduce.h), reached from _C.reduce through the ampy_cuda_api table.
 *
 * Same contract as csrc/reduce.c: floating inputs (float16/bfloat16/float32/
 * float64) accumulate in double, integer and bool inputs in int64 (wrapping);
 * the result is rounded once into the output dtype with the elem.h
 * conversions. max/min propagate NaN (the NaN of lowest index wins, with its
 * index), ties keep the lowest index. var/std take two passes (mean, then
 * squared deviations), logsumexp subtracts the maximum (an infinite maximum
 * is replaced by 0). The order of the double additions differs from the
 * CPU's (a fixed tree per block instead of four running sums), so a sum
 * rounded to float32 or a half matches the CPU except when the two double
 * sums straddle a rounding boundary; results are deterministic run to run.
 *
 * One block per output (grid-stride over outputs); the block's threads
 * stride over the reduced elements with 64-bit N-d index math and combine
 * in shared memory in a fixed order. Single-pass ops over few large
 * outputs split each output over several blocks, and many outputs along a
 * contiguous kept dim (column sums) use one thread per output and chunk;
 * partials are combined in chunk order (see "split reductions" below).
 * (softmax/log_softmax and cumsum/cumprod: softmax.cu.)
 */
#include <math.h>

#include "common.cuh"
#include "ampy/ewise.h"
#include "ampy/reduce.h"

namespace {

#define RED_THREADS 256

enum { C_SUM, C_PROD, C_SUMSQ, C_DEV2, C_SUMEXP, C_MAX, C_MIN, C_NZ };

struct Acc {
    double s;
    int64_t is;
    double best;
    int64_t ibest;
    int64_t bidx;
    int has, nan;
};

struct RedArgs {
    int op, cls, is_int;
    int in_dt, out_dt;
    int64_t isz;
    int nk, nr;                     /* kept dims, reduced dims */
    int64_t kshape[AMPY_MAX_DIMS];  /* kept dims: shape, element strides of in/out/idx */
    int64_t kin[AMPY_MAX_DIMS], kout[AMPY_MAX_DIMS], kidx[AMPY_MAX_DIMS];
    int64_t rshape[AMPY_MAX_DIMS], rin[AMPY_MAX_DIMS];
    int64_t M, R;
    double correction;
    const char *in;
    char *out;
    int64_t *idx;
};

__device__ __forceinline__ Acc acc_init(int cls)
{
    Acc a;
    a.s = cls == C_PROD ? 1.0 : 0.0;
    a.is = cls == C_PROD ? 1 : 0;
    a.best = 0.0;
    a.ibest = 0;
    a.bidx = 0;
    a.has = a.nan = 0;
    return a;
}

/* Fold element r (flat index over the reduced dims) into a. */
__device__ __forceinline__ void acc_add(const RedArgs &A, int cls, Acc &a, const char *base,
                                        int64_t r, double center)
{
    int64_t off = 0, lin = r;
    for (int d = A.nr - 1; d >= 0; d--) {
        const int64_t n = A.rshape[d];
        const int64_t q = lin / n;
        off += (lin - q * n) * A.rin[d];
        lin = q;
    }
    if (A.is_int) {
        const int64_t v = ampy_ld_i(base, A.in_dt, off);
        switch (cls) {
        case C_SUM: a.is = (int64_t)((uint64_t)a.is + (uint64_t)v); break;
        case C_PROD: a.is = (int64_t)((uint64_t)a.is * (uint64_t)v); break;
        case C_MAX:
            if (!a.has || v > a.ibest) a.ibest = v, a.bidx = r, a.has = 1;
            break;
        case C_MIN:
            if (!a.has || v < a.ibest) a.ibest = v, a.bidx = r, a.has = 1;
            break;
        case C_NZ: a.is += v != 0; break;
        default: break;
        }
        return;
    }
    const double v = ampy_ld_d(base, A.in_dt, off);
    switch (cls) {
    case C_SUM: a.s += v; break;
    case C_SUMSQ: a.s += v * v; break;
    case C_DEV2: a.s += (v - center) * (v - center); break;
    case C_SUMEXP: a.s += exp(v - center); break;
    case C_PROD: a.s *= v; break;
    case C_MAX:
    case C_MIN:
        if (a.nan)
            break; /* the first NaN of this thread stays */
        if (v != v) {
            a.nan = a.has = 1, a.best = v, a.bidx = r;
        } else if (!a.has || (cls == C_MAX ? v > a.best : v < a.best)) {
            a.best = v, a.bidx = r, a.has = 1;
        }
        break;
    case C_NZ: a.is += v != 0.0; break;
    default: break;
    }
}

/* Combine b into a (a holds lower flat indices for max/min ties only via
 * the explicit index comparison, so the order of arguments does not matter
 * for the result). */
__device__ __forceinline__ void acc_combine(const RedArgs &A, int cls, Acc &a, const Acc &b)
{
    switch (cls) {
    case C_SUM:
    case C_SUMSQ:
    case C_DEV2:
    case C_SUMEXP: a.s += b.s; a.is = (int64_t)((uint64_t)a.is + (uint64_t)b.is); break;
    case C_PROD: a.s *= b.s; a.is = (int64_t)((uint64_t)a.is * (uint64_t)b.is); break;
    case C_NZ: a.is += b.is; break;
    case C_MAX:
    case C_MIN: {
        if (!b.has)
            break;
        if (!a.has) {
            a = b;
            break;
        }
        bool take;
        if (A.is_int) {
            take = cls == C_MAX ? (b.ibest > a.ibest || (b.ibest == a.ibest && b.bidx < a.bidx))
                                : (b.ibest < a.ibest || (b.ibest == a.ibest && b.bidx < a.bidx));
        } else if (a.nan || b.nan) {
            take = b.nan && (!a.nan || b.bidx < a.bidx);
        } else {
            take = cls == C_MAX ? (b.best > a.best || (b.best == a.best && b.bidx < a.bidx))
                                : (b.best < a.best || (b.best == a.best && b.bidx < a.bidx));
        }
        if (take)
            a = b;
        break;
    }
    default: break;
    }
}

/* One pass of class cls over the reduced elements of the output at `base`;
 * every thread of the block returns the combined result. */
__device__ Acc block_pass(const RedArgs &A, int cls, const char *base, double center, Acc *sh)
{
    Acc a = acc_init(cls);
    for (int64_t r = threadIdx.x; r < A.R; r += blockDim.x)
        acc_add(A, cls, a, base, r, center);
    sh[threadIdx.x] = a;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) {
            Acc x = sh[threadIdx.x];
            acc_combine(A, cls, x, sh[threadIdx.x + w]);
            sh[threadIdx.x] = x;
        }
        __syncthreads();
    }
    Acc r = sh[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(RED_THREADS) reduce_kernel(RedArgs A)
{
    __shared__ Acc sh[RED_THREADS];
    for (int64_t m = blockIdx.x; m < A.M; m += gridDim.x) {
        int64_t oin = 0, oout = 0, oidx = 0, lin = m;
        for (int d = A.nk - 1; d >= 0; d--) {
            const int64_t n = A.kshape[d];
            const int64_t q = lin / n, k = lin - q * n;
            lin = q;
            oin += k * A.kin[d];
            oout += k * A.kout[d];
            oidx += k * A.kidx[d];
        }
        const char *base = A.in + oin * A.isz;
        Acc a = block_pass(A, A.cls, base, 0.0, sh);
        const double R = (double)A.R;
        double v = 0.0;
        int64_t iv = 0;
        int is_int = A.is_int;
        switch (A.op) {
        case AMPY_RED_SUM:
        case AMPY_RED_PROD: v = a.s, iv = a.is; break;
        case AMPY_RED_MEAN: v = a.s / R; break;
        case AMPY_RED_MAX:
        case AMPY_RED_MIN: v = a.best, iv = a.ibest; break;
        case AMPY_RED_ARGMAX:
        case AMPY_RED_ARGMIN: iv = a.bidx, is_int = 1; break;
        case AMPY_RED_VAR:
        case AMPY_RED_STD: {
            Acc b = block_pass(A, C_DEV2, base, a.s / R, sh);
            const double den = R - A.correction > 0.0 ? R - A.correction : 0.0;
            v = b.s / den;
            if (A.op == AMPY_RED_STD)
                v = sqrt(v);
            break;
        }
        case AMPY_RED_NORM2: v = sqrt(a.s); break;
        case AMPY_RED_LOGSUMEXP: {
            const double mx = (!a.has || isinf(a.best)) ? 0.0 : a.best;
            Acc b = block_pass(A, C_SUMEXP, base, mx, sh);
            v = mx + log(b.s);
            break;
        }
        case AMPY_RED_ALL: iv = a.is == A.R, is_int = 1; break;
        case AMPY_RED_ANY: iv = a.is > 0, is_int = 1; break;
        default: break;
        }
        if (threadIdx.x == 0) {
            if (is_int)
                ampy_st_i(A.out, A.out_dt, oout, iv);
            else
                ampy_st_d(A.out, A.out_dt, oout, v);
            if (A.idx)
                A.idx[oidx] = a.bidx;
        }
    }
}

/* ---- split reductions (single-pass ops: every op but var, std, logsumexp) ----
 * Many elements per output and few outputs: G blocks per output each reduce
 * a contiguous chunk of the reduced index range into a partial. Many outputs
 * whose innermost kept dim is contiguous (x.sum(0) of a row-major matrix):
 * one THREAD per (output, chunk), consecutive threads on consecutive
 * outputs, so every load of a warp is coalesced. Either way a final kernel
 * combines the G partials of each output in chunk order (deterministic). */
__device__ __forceinline__ void out_offsets(const RedArgs &A, int64_t m, int64_t *oin,
                                            int64_t *oout, int64_t *oidx)
{
    int64_t i0 = 0, o0 = 0, x0 = 0, lin = m;
    for (int d = A.nk - 1; d >= 0; d--) {
        const int64_t n = A.kshape[d];
        const int64_t q = lin / n, k = lin - q * n;
        lin = q;
        i0 += k * A.kin[d];
        o0 += k * A.kout[d];
        x0 += k * A.kidx[d];
    }
    *oin = i0, *oout = o0, *oidx = x0;
}

__global__ void __launch_bounds__(RED_THREADS)
reduce_partial_blocks(RedArgs A, int64_t G, int64_t chunk, Acc *part)
{
    __shared__ Acc sh[RED_THREADS];
    for (int64_t b = blockIdx.x; b < A.M * G; b += gridDim.x) {
        const int64_t m = b / G, g = b - m * G;
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        const char *base = A.in + oin * A.isz;
        const int64_t r0 = g * chunk, r1 = r0 + chunk < A.R ? r0 + chunk : A.R;
        Acc a = acc_init(A.cls);
        for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
            acc_add(A, A.cls, a, base, r, 0.0);
        sh[threadIdx.x] = a;
        __syncthreads();
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w) {
                Acc x = sh[threadIdx.x];
                acc_combine(A, A.cls, x, sh[threadIdx.x + w]);
                sh[threadIdx.x] = x;
            }
            __syncthreads();
        }
        if (threadIdx.x == 0)
            part[m * G + g] = sh[0];
        __syncthreads();
    }
}

__global__ void reduce_partial_columns(RedArgs A, int64_t G, int64_t chunk, Acc *part)
{
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < A.M * G;
         t += (int64_t)blockDim.x * gridDim.x) {
        const int64_t g = t / A.M, m = t - g * A.M;
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        const char *base = A.in + oin * A.isz;
        const int64_t r0 = g * chunk, r1 = r0 + chunk < A.R ? r0 + chunk : A.R;
        Acc a = acc_init(A.cls);
        for (int64_t r = r0; r < r1; r++)
            acc_add(A, A.cls, a, base, r, 0.0);
        part[m * G + g] = a;
    }
}

__global__ void reduce_final(RedArgs A, int64_t G, const Acc *part)
{
    AMPY_GRID_STRIDE(m, A.M)
    {
        Acc a = part[m * G];
        for (int64_t g = 1; g < G; g++)
            acc_combine(A, A.cls, a, part[m * G + g]);
        int64_t oin, oout, oidx;
        out_offsets(A, m, &oin, &oout, &oidx);
        double v = 0.0;
        int64_t iv = 0;
        int is_int = A.is_int;
        switch (A.op) {
        case AMPY_RED_SUM:
        case AMPY_RED_PROD: v = a.s, iv = a.is; break;
        case AMPY_RED_MEAN: v = a.s / (double)A.R; break;
        case AMPY_RED_MAX:
        case AMPY_RED_MIN: v = a.best, iv = a.ibest; break;
        case AMPY_RED_ARGMAX:
        case AMPY_RED_ARGMIN: iv = a.bidx, is_int = 1; break;
        case AMPY_RED_NORM2: v = sqrt(a.s); break;
        case AMPY_RED_ALL: iv = a.is == A.R, is_int = 1; break;
        case AMPY_RED_ANY: iv = a.is > 0, is_int = 1; break;
        default: break;
        }
        if (is_int)
            ampy_st_i(A.out, A.out_dt, oout, iv);
        else
            ampy_st_d(A.out, A.out_dt, oout, v);
        if (A.idx)
            A.idx[oidx] = a.bidx;
    }
}

/* csrc/reduce.c's names (that file is not linked into ampy._C_cuda) */
const char *const kName[AMPY_RED_NUM_OPS] = {"sum", "mean", "prod", "max", "min", "argmax",
                                             "argmin", "var", "std", "norm", "logsumexp",
                                             "all", "any"};

const int kClass[AMPY_RED_NUM_OPS] = {C_SUM, C_SUM, C_PROD, C_MAX,   C_MIN, C_MAX, C_MIN,
                                      C_SUM, C_SUM, C_SUMSQ, C_MAX, C_NZ,  C_NZ};
unsigned grid_for(int64_t M) { return (unsigned)(M < 65535 * 8 ? (M < 1 ? 1 : M) : 65535 * 8); }

} // namespace

extern "C" ampy_status ampy_reduce_cuda(int device, int op, int ndim, const int64_t *shape,
                                        const void *in, const int64_t *in_strides,
                                        ampy_dtype in_dtype, uint32_t reduce_mask, void *out,
                                        const int64_t *out_strides, ampy_dtype out_dtype,
                                        int64_t *idx_out, const int64_t *idx_strides,
                                        double correction)
{
    if (op < 0 || op >= AMPY_RED_NUM_OPS || ndim < 0 || ndim > AMPY_MAX_DIMS ||
        !ampy_dtype_valid(in_dtype) || !ampy_dtype_valid(out_dtype))
        return ampy_error(AMPY_ERR_VALUE, "reduce (cuda): bad op %d, ndim %d or dtype", op, ndim);
    const int is_int = !ampy_dtype_is_float(in_dtype);
    if (is_int && (op == AMPY_RED_MEAN || op == AMPY_RED_VAR || op == AMPY_RED_STD ||
                   op == AMPY_RED_NORM2 || op == AMPY_RED_LOGSUMEXP))
        return ampy_error(AMPY_ERR_DTYPE, "%s: expected a floating point input, got %s",
                          kName[op], ampy_dtype_name(in_dtype));
    RedArgs A;
    memset(&A, 0, sizeof A);
    A.op = op;
    A.cls = kClass[op];
    A.is_int = is_int;
    A.in_dt = in_dtype;
    A.out_dt = out_dtype;
    A.isz = (int64_t)ampy_dtype_size(in_dtype);
    A.correction = correction;
    A.in = (const char *)in;
    A.out = (char *)out;
    A.idx = (op == AMPY_RED_MAX || op == AMPY_RED_MIN) ? idx_out : NULL;
    const int64_t isz = (int64_t)ampy_dtype_size(in_dtype);
    const int64_t osz = (int64_t)ampy_dtype_size(out_dtype);
    A.M = 1;
    A.R = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ampy_error(AMPY_ERR_VALUE, "reduce (cuda): negative dimension");
        if (reduce_mask >> d & 1u) {
            A.R *= shape[d];
            if (shape[d] != 1) {
                A.rshape[A.nr] = shape[d];
                A.rin[A.nr] = in_strides[d] / isz;
                A.nr++;
            }
        } else {
            A.M *= shape[d];
            if (shape[d] != 1) {
                A.kshape[A.nk] = shape[d];
                A.kin[A.nk] = in_strides[d] / isz;
                A.kout[A.nk] = out_strides[d] / osz;
                A.kidx[A.nk] = A.idx ? idx_strides[d] / 8 : 0;
                A.nk++;
            }
        }
    }
    if (A.M == 0)
        return AMPY_OK;
    if (A.R == 0 && (A.cls == C_MAX || A.cls == C_MIN) && op != AMPY_RED_LOGSUMEXP)
        return ampy_error(AMPY_ERR_INDEX, "%s: expected a non-empty reduction (the reduced dims "
                          "have zero elements and %s has no identity)", kName[op], kName[op]);
    AMPY_CUDA_ENTER(device, st);
    const bool single = op != AMPY_RED_VAR && op != AMPY_RED_STD && op != AMPY_RED_LOGSUMEXP;
    const bool columns = single && A.nk > 0 && A.kin[A.nk - 1] == 1 && A.M >= 32 && A.R >= 2;
    int64_t G = 1;
    if (columns) /* about 64K threads, at least 8 elements each */
        G = (65536 + A.M - 1) / A.M, G = G > A.R / 8 ? A.R / 8 : G;
    else if (single && A.M < 512 && A.R >= 32768) /* ~2048 blocks, >= 8K elements each */
        G = 2048 / A.M, G = G > A.R / 8192 ? A.R / 8192 : G;
    if (G < 1)
        G = 1;
    if (!columns && G == 1) {
        reduce_kernel<<<grid_for(A.M), RED_THREADS, 0, st>>>(A);
        AMPY_CUDA_LAUNCHED("reduce_kernel");
        return AMPY_OK;
    }
    const int64_t chunk = (A.R + G - 1) / G;
    void *part = NULL;
    const size_t pbytes = (size_t)(A.M * G) * sizeof(Acc);
    ampy_status s = ampy_cuda_alloc(device, pbytes, &part);
    if (s != AMPY_OK)
        return s;
    if (columns)
        reduce_partial_columns<<<ampy_cuda_blocks(A.M * G, 128), 128, 0, st>>>(A, G, chunk,
                                                                               (Acc *)part);
    else
        reduce_partial_blocks<<<grid_for(A.M * G), RED_THREADS, 0, st>>>(A, G, chunk, (Acc *)part);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) {
        reduce_final<<<ampy_cuda_blocks(A.M, 128), 128, 0, st>>>(A, G, (const Acc *)part);
        e = cudaGetLastError();
    }
    ampy_cuda_free(part, pbytes, device); /* stream-ordered: reused only after these run */
    if (e != cudaSuccess)
        return ampy_cuda_fail(e, "launch of reduce_partial/reduce_final");
    return AMPY_OK;
}
